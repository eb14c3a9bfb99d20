# Runs examples/variational_bnn.jl (the variational part of ADCME's "Bayesian Neural
# Networks" page) and checks it: the data misfit of one run against the Gaussian negative
# log likelihood in plain Julia on that run's predictions, the page's `kl_loss` (posterior
# log density minus the mixture prior's) against the same formula in Julia, and the fit.
#   julia --project=julia/Oxiflow test/examples/variational_bnn.jl
using Test
include(joinpath(@__DIR__, "..", "..", "examples", "variational_bnn.jl"))

@testset "variational Bayesian network (ADCME's docs)" begin
    # one run: its predictions and its misfit
    pred, lf = run(sess, [x, loss_lf])
    @test lf ≈ sum(0.5 .* (y .- pred) .^ 2 .+ 0.5 * log(2π)) rtol = 1e-12
    # kl_loss on given weights: Σ log N(w; μ, σ) - log(π1 N(w; 0, σ1) + π2 N(w; 0, σ2))
    vl = layers[1]
    w0 = [0.3 -1.2; 0.05 2.0]; μ0 = [0.1 -1.0; 0.0 1.5]; σ0 = [0.5 0.2; 0.1 1.0]
    lognormal(w, m, s) = -0.5 * ((w - m) / s)^2 - log(s) - 0.5 * log(2π)
    want = sum(lognormal.(w0, μ0, σ0) .- log.(0.5 .* exp.(lognormal.(w0, 0.0, 1.5)) .+ 0.5 .* exp.(lognormal.(w0, 0.0, 0.1))))
    @test run(sess, kl_loss(vl, constant(w0), constant(μ0), constant(σ0))) ≈ want rtol = 1e-12
    # the fit: the mean prediction follows 10 sin(2πx) where there is data, and the band is
    # wider outside the data than inside
    inside = abs.(X_test[:]) .<= 0.5
    @test sqrt(mean((y_mean[inside] .- 10 .* sin.(2π .* X_test[inside])) .^ 2)) < 2.0
    @test mean(y_std[.!inside]) > mean(y_std[inside])
    @test all(y_std .> 0)
end
