# Runs examples/poisson_inverse.jl (ADCME's README inverse problem) and checks what BFGS!
# recovers.
#   julia --project=julia/Oxiflow test/examples/poisson.jl
#
# The README observes u[div(n+1,2)] = u[51], which with x = LinRange(0,1,n)[2:end-1] is the
# node x = 0.51, not 0.5. The finite-difference solution of -b u'' + u = f is exact for the
# quadratic u = 4x(1-x) at b = 1 (so u(0.51) = 0.9996 there), hence the discrete problem's
# answer is b* = 0.999558..., found here by Julia's own solves (the oracle). Observing the
# true midpoint u[50] recovers b = 1 to 1e-6, which the second part checks.
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
    bstar = oracle_b(div(n + 1, 2))
    @test abs(bstar - 1.0) < 1e-3                   # near the continuous b = 1, not equal
    @test abs(b_est - bstar) < 1e-6
    @test run(sess, ue) ≈ 1.0 atol = 1e-6
    # observing the midpoint x = 0.5 (node 50) recovers b = 1
    b2 = Variable(10.0)
    u2 = (b2 * A + I) \ f
    loss2 = (u2[50] - 1.0)^2
    init(sess)
    BFGS!(sess, loss2; vars=[b2])
    @test abs(run(sess, b2) - 1.0) < 1e-6
end
