# Runs examples/bayesian_nn.jl (ADCME's "Bayesian Neural Networks" page) and checks it:
# the BFGS fit against sin(2πx), the Bayesian loss L of one run against the same formula
# evaluated in plain Julia on the weights drawn in that run, TF's standard normal draws, and
# the prediction band against one drawn in Julia from the trained μ and σ.
#   julia --project=julia/Oxiflow test/examples/bayesian_nn.jl
using Test, Statistics
include(joinpath(@__DIR__, "..", "..", "examples", "bayesian_nn.jl"))

# ADCME's fc(x, dims, θ) for a vector x in plain Julia: θ holds each layer's weights row by
# row, then its biases; tanh on all but the last layer.
function jl_fc(x::Vector, widths, θ)
    net, off = reshape(x, :, 1), 0
    for i in 1:length(widths)-1
        m, n = widths[i], widths[i+1]
        net = net * permutedims(reshape(θ[off+1:off+m*n], n, m)) .+ permutedims(θ[off+m*n+1:off+m*n+n])
        i < length(widths) - 1 && (net = tanh.(net))
        off += m * n + n
    end
    return vec(net)
end

@testset "Bayesian neural network (ADCME's docs)" begin
    dims = [1, 20, 20, 20, 1]
    @test bfgs_loss < 1e-4
    @test maximum(abs.(y1 .- y0)) < 1e-3
    inside = 0.3 .<= x1 .<= 0.7
    @test maximum(abs.(x_dnn[inside] .- sin.(2π .* x1[inside]))) < 0.02
    @test jl_fc(x1, dims, w1) ≈ x_dnn rtol = 1e-10

    # L of one run, recomputed in Julia from the draws W and the variables of that run
    Lv, Wv, μv, ρv = run(sess, [L, W, μ, ρ])
    σv = log.(1 .+ exp.(ρv))
    Lj = sum(1:10) do i
        wi = μv .+ σv .* Wv[i, :]
        sum((jl_fc(x0, dims, wi) .- y0) .^ 2) - sum((wi .- μv) .^ 2 ./ (2 .* σv .^ 2)) + sum((wi .- w1) .^ 2)
    end
    @test Lv ≈ Lj rtol = 1e-10
    @test size(Wv) == (10, length(w1))
    @test abs(mean(Wv)) < 0.05 && abs(std(Wv) - 1) < 0.05        # 10 × 921 standard normal draws
    @test run(sess, W) != Wv                                        # new draws each run
    @test losses[end] < losses[1] - 1000                            # Adam lowered L

    # the band: every run draws new weights; its mean and spread match 1000 predictions
    # drawn in Julia from N(μ, σ²) weights (sampling error of a mean: spread / sqrt(1000))
    @test all(isfinite, Y) && all(std(Y, dims=2) .> 0)
    Yj = reduce(hcat, [jl_fc(x1, dims, μv .+ σv .* randn(length(μv))) for _ in 1:1000])
    spread, spread_j = vec(std(Y, dims=2)), vec(std(Yj, dims=2))
    @test median(abs.(spread .- spread_j) ./ spread_j) < 0.1
    @test all(abs.(vec(mean(Y, dims=2)) .- vec(mean(Yj, dims=2))) .< 6 .* spread_j ./ sqrt(1000))
    @test Y3 != Y
end
