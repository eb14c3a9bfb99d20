# ADCME's nnuq and MCMCSimple. Oracles: the Woodbury form of the linear-Gaussian posterior
# covariance, and that posterior's closed-form mean and covariance for the chain's samples.
using Random, Statistics

@testset "nnuq: the linearized posterior covariance (Woodbury identity)" begin
    H = [1.0 0.5; -0.3 2.0; 0.7 0.1]
    R = [0.5 0.1 0.0; 0.1 0.4 0.05; 0.0 0.05 0.3]; Q = [2.0 0.3; 0.3 1.0]
    V = nnuq(H, inv(R), inv(Q))
    @test V ≈ Q - Q * H' * ((H * Q * H' + R) \ (H * Q)) rtol = 1e-12
    @test V == V'
    Q2, R2 = 2.0 * Matrix(1.0I, 2, 2), 0.25 * Matrix(1.0I, 3, 3)     # invQ = 0.5, invR = 4: numbers for multiples of I
    @test nnuq(H, 4.0, 0.5) ≈ Q2 - Q2 * H' * ((H * Q2 * H' + R2) \ (H * Q2)) rtol = 1e-12
    @test_throws DimensionMismatch nnuq(H, inv(R), [1.0 0.0 0.0; 0.0 1.0 0.0; 0.0 0.0 1.0])
end

@testset "MCMCSimple: the chain samples the linear-Gaussian posterior" begin
    A = [1.0 0.5; 0.2 1.0; -0.4 0.8]; θtrue = [0.7, -0.3]; σ = 0.2
    obs = A * θtrue .+ [0.05, -0.1, 0.02]
    θ0, lb, ub = [0.0, 0.0], -10.0, 10.0
    τ = (ub - lb) / 6
    P = A' * A / σ^2 + I / τ^2                       # posterior precision
    m = P \ (A' * obs / σ^2 + θ0 / τ^2)
    Random.seed!(7)
    ms = MCMCSimple(obs, θ -> A * θ, σ, θ0, lb, ub, 0.15)
    sim = simulate(ms, 60_000)
    @test size(sim) == (60_000, 2) && sim[1, :] == θ0 && all(lb .<= sim .<= ub)
    S = sim[10_001:end, :]
    @test vec(mean(S; dims=1)) ≈ m atol = 0.02
    @test cov(S) ≈ inv(P) rtol = 0.15
    @test 0.1 < ms.AC[end] < 0.9 && isnan(ms.AC[1]) && length(ms.L) == 60_000
    @test ms.L[end] ≈ ms.logf(sim[end, :])
    # a forward model that runs a session, as ADCME's examples do
    reset_default_graph()
    p = placeholder(Float64; shape=[2])
    y = constant(A) * p
    s = Session()
    mt = MCMCSimple(obs, θ -> run(s, y, p => θ), σ, θ0, lb, ub)
    @test size(simulate(mt, 50)) == (50, 2)
    @test_throws OxiflowError MCMCSimple(obs, θ -> A * θ, σ, [20.0, 0.0], lb, ub)
    @test_throws OxiflowError MCMCSimple(obs, θ -> A * θ, -1.0, θ0, lb, ub)
    @test_throws ErrorException diagnose(ms)          # PyPlot is not loaded
end
