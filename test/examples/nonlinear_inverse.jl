# Runs examples/nonlinear_inverse.jl (ADCME's functional inverse problem through
# NonlinearConstrainedProblem) and checks that the Newton solution matches the observed
# u = x(1 - x), that it solves the discrete equation with the fitted X(u) (residual
# evaluated from the program's own residual function), and the adjoint gradient of the loss
# against a finite difference of the whole solve along its direction.
#   julia --project=julia/Oxiflow test/examples/nonlinear_inverse.jl
using Test, LinearAlgebra
include(joinpath(@__DIR__, "..", "..", "examples", "nonlinear_inverse.jl"))

@testset "functional inverse problem (ADCME's NonlinearConstrainedProblem page)" begin
    @test run(sess, loss) < 1e-6
    @test u_err < 2e-3
    R, _ = residual_and_jacobian(θ, constant(sol))
    @test norm(run(sess, R)) < 1e-6 * norm(φ)               # the Newton solution solves it
    # the gradient away from the fit (at the fit it is about 4e-7, below what a finite
    # difference resolves): θ moved by 0.05 sin(k)
    θv = run(sess, θ)
    θp = θv .+ 0.05 .* sin.(1:length(θv))
    lossat(t) = (run(sess, assign(θ, t)); run(sess, loss))
    lossat(θp)
    G = run(sess, grad)
    d = G / norm(G)
    ε = 1e-5
    fd = (lossat(θp + ε * d) - lossat(θp - ε * d)) / 2ε
    run(sess, assign(θ, θv))
    @test norm(G) > 1e-4
    @test fd ≈ norm(G) rtol = 1e-3
end
