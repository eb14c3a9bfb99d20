# Runs examples/poisson_inverse.jl (ADCME's README inverse problem) and checks that BFGS!
# recovers the true coefficient b = 1 to 1e-6.
#   julia --project=julia/Oxiflow test/examples/poisson.jl
using Test
include(joinpath(@__DIR__, "..", "..", "examples", "poisson_inverse.jl"))
@testset "poisson inverse problem" begin
    @test abs(b_est - 1.0) < 1e-6
    # the recovered b reproduces the observation u(0.5) = 1
    @test run(sess, ue) ≈ 1.0 atol = 1e-6
end
