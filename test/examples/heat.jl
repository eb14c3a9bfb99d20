# Runs examples/heat_inverse.jl (a 1-D heat equation stepped by while_loop, its diffusivity
# recovered by BFGS!) and checks it. Oracles: the same explicit scheme in plain Julia, and
# finite differences of the Julia solve for the loss gradient.
#   julia --project=julia/Oxiflow test/examples/heat.jl
using Test
include(joinpath(@__DIR__, "..", "..", "examples", "heat_inverse.jl"))

@testset "heat equation inverse problem" begin
    # the forward solve through while_loop equals the plain-Julia scheme
    for kv in (0.5, 1.0, κ_true)
        @test maximum(abs.(run(sess, heat_solve(constant(kv))) - heat_solve_julia(kv))) < 1e-6
    end
    # the gradient of the loss through the loop, against finite differences of Julia's loss
    jl_loss(kv) = sum((heat_solve_julia(kv)[:, obs] - U_obs) .^ 2)
    κ0 = 0.8
    gκ = gradients(loss, κ)
    run(sess, assign(κ, κ0))
    @test run(sess, gκ) ≈ (jl_loss(κ0 + 1e-6) - jl_loss(κ0 - 1e-6)) / 2e-6 rtol = 1e-5
    # what BFGS! recovered (noise-free data: the true κ)
    @test abs(κ_est - κ_true) < 1e-6
    @test run(sess, loss) > 0     # (κ was moved to κ0 above)
end
