# Runs examples/poisson_inverse.jl (ADCME's README inverse problem) and checks what BFGS!
# recovers.
#   julia --project=julia/Oxiflow test/examples/poisson.jl
#
# The example observes the node at x = 0.5 (u[50]); ADCME's README writes u[div(n+1,2)] =
# u[51], the node x = 0.51. The finite-difference solution of -b u'' + u = f is exact for the
# quadratic u = 4x(1-x) at b = 1, so observing x = 0.5 recovers b = 1, and observing x = 0.51
# gives b* = 0.999558... (u(0.51) = 0.9996 at b = 1). Julia's own solves are the oracle.
using Test
include(joinpath(@__DIR__, "..", "..", "examples", "poisson_inverse.jl"))

# u at node k for coefficient b, by Julia's dense solve; the root of u_k(b) = 1 by Newton
# (du/db = -(bA + I) \ (A u)).
function oracle_b(k; b=1.0)
    for _ in 1:50
        Bm = b * A + I; uu = Bm \ f
        du = -(Bm \ (A * uu))
        step = (uu[k] - 1.0) / du[k]
        b -= step
        abs(step) < 1e-15 && break
    end
    return b
end

@testset "poisson inverse problem" begin
    @test abs(oracle_b(k) - 1.0) < 1e-12             # the discrete problem's answer is b = 1
    @test abs(b_est - 1.0) < 1e-6                    # what BFGS! recovered
    @test run(sess, ue) ≈ 1.0 atol = 1e-6
    # the README's literal index (x = 0.51) has its own, different answer
    bstar = oracle_b(div(n + 1, 2))
    @test 1e-4 < abs(bstar - 1.0) < 1e-3
    b2 = Variable(10.0)
    u2 = (b2 * A + I) \ f
    loss2 = (u2[div(n + 1, 2)] - 1.0)^2
    init(sess)
    BFGS!(sess, loss2; vars=[b2])
    @test abs(run(sess, b2) - bstar) < 1e-6
end
