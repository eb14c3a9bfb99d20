# Runs examples/poisson_fem.jl (a 2-D Poisson problem on 10,000 unknowns assembled as a
# SparseTensor, its coefficient field recovered by BFGS! through the sparse solve) and checks
# it. Oracles: the same finite elements assembled with SparseArrays and solved by Julia's
# `\`, and finite differences of that Julia solve for the loss gradient.
#   julia --project=julia/Oxiflow test/examples/poisson_fem.jl
using Test
include(joinpath(@__DIR__, "..", "..", "examples", "poisson_fem.jl"))

"""Central differences of `f` at `x`, entry by entry."""
fd_gradient_jl(f, x; h=1e-6) = [(f(x .+ h .* (1:length(x) .== j)) - f(x .- h .* (1:length(x) .== j))) / 2h for j in 1:length(x)]

@testset "2-D Poisson FEM inverse problem" begin
    @test nu == 10_000
    # assembly and solve equal the SparseArrays ones for several fields
    for θv in (zeros(9), θ_true, [0.5, -0.3, 0.1, 0.2, 0.0, -0.4, 0.3, 0.1, 0.2])
        @test maximum(abs.(run(sess, fem_solve(constant(θv))) - fem_solve_julia(θv))) < 1e-10
    end
    # the gradient through the sparse solve against finite differences of the Julia solve
    jl_loss(θv) = 1e4 * sum((fem_solve_julia(θv) - u_obs) .^ 2)
    θ0 = [0.1, 0.0, -0.1, 0.2, 0.1, 0.0, -0.2, 0.1, 0.3]
    gθ = gradients(loss, θ)
    run(sess, assign(θ, θ0))
    @test run(sess, gθ) ≈ fd_gradient_jl(jl_loss, θ0) rtol = 1e-5
    # what BFGS! recovered (noise-free data: the true field)
    @test maximum(abs.(θ_est - θ_true)) < 1e-4
end
