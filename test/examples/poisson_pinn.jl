# Runs examples/poisson_pinn.jl (a PINN for -u'' = π² sin(πx), u(0) = u(1) = 0) and checks
# the trained network against the exact solution sin(πx).
#   julia --project=julia/Oxiflow test/examples/poisson_pinn.jl
using Test
include(joinpath(@__DIR__, "..", "..", "examples", "poisson_pinn.jl"))

@testset "PINN for the 1-D Poisson equation" begin
    @test loss0 > 1                                  # the untrained network is far off
    @test run(sess, loss) < 1e-5
    @test err < 1e-4                                 # max |u - sin(πx)| over the points
    # between the training points too
    xs = collect(range(0.005, 0.995; length=37))
    @test maximum(abs.(vec(run(sess, fc(constant(reshape(xs, 37, 1)), [20, 20, 20, 1], θ))) .- sin.(π .* xs))) < 1e-4
end
