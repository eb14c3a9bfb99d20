# ADCME's docs, "Bayesian Neural Networks" (bnn.md), its variational part: three
# `VariationalLayer`s whose weights are drawn as `W = Wμ + softplus(Wρ) .* z` each run, a
# Gaussian-mixture prior on the weights, and the loss of Bayes by backprop (Blundell et al.
# 2015): the weights' `logpdf` under the posterior minus the prior, plus the data's negative
# log likelihood under `Normal(y_pred, σ)`, trained by Adam. Written as the page has it
# (`using Oxiflow` for `using ADCME`, `Oxiflow.Normal` for `ADCME.Normal`; the plots and the
# progress meter left out; seeds set so that a run repeats).
#
#   julia --project=julia/Oxiflow examples/variational_bnn.jl
#
# test/examples/variational_bnn.jl checks the loss against the same formula in plain Julia
# and the fit.
using Oxiflow
using Statistics
using Random

Random.seed!(2)                 # the data and the initial weights
set_random_seed(2)              # the weight draws

function f(x, σ)
    ε = randn(size(x)...) * σ
    return 10 * sin.(2π*x) + ε
end

batch_size = 32
noise = 1.0

X = reshape(LinRange(-0.5, 0.5, batch_size)|>Array, :, 1)
y = f(X, noise)
y_true = f(X, 0.0)

mutable struct VariationalLayer
    units
    activation
    prior_σ1
    prior_σ2
    prior_π1
    prior_π2
    Wμ
    bμ
    Wρ
    bρ
    init_σ
end

function VariationalLayer(units; activation=relu, prior_σ1=1.5, prior_σ2=0.1,
        prior_π1=0.5)
    init_σ = sqrt(
        prior_π1 * prior_σ1^2 + (1-prior_π1)*prior_σ2^2
    )
    VariationalLayer(units, activation, prior_σ1, prior_σ2, prior_π1, 1-prior_π1,
                        missing, missing, missing, missing, init_σ)
end

function kl_loss(vl, w, μ, σ)
    dist = Oxiflow.Normal(μ,σ)
    return sum(logpdf(dist, w)-logprior(vl, w))
end

function logprior(vl, w)
    dist1 = Oxiflow.Normal(constant(0.0), vl.prior_σ1)
    dist2 = Oxiflow.Normal(constant(0.0), vl.prior_σ2)
    log(vl.prior_π1*exp(logpdf(dist1, w)) + vl.prior_π2*exp(logpdf(dist2, w)))
end

function (vl::VariationalLayer)(x)
    x = constant(x)
    if ismissing(vl.bμ)
        vl.Wμ = get_variable(vl.init_σ*randn(size(x,2), vl.units))
        vl.Wρ = get_variable(zeros(size(x,2), vl.units))
        vl.bμ = get_variable(vl.init_σ*randn(1, vl.units))
        vl.bρ = get_variable(zeros(1, vl.units))
    end
    Wσ = softplus(vl.Wρ)
    W = vl.Wμ + Wσ.*normal(size(vl.Wμ)...)
    bσ = softplus(vl.bρ)
    b = vl.bμ + bσ.*normal(size(vl.bμ)...)
    loss = kl_loss(vl, W, vl.Wμ, Wσ) + kl_loss(vl, b, vl.bμ, bσ)
    out = vl.activation(x * W + b)
    return out, loss
end

function neg_log_likelihood(y_obs, y_pred, σ)
    y_obs = constant(y_obs)
    dist = Oxiflow.Normal(y_pred, σ)
    sum(-logpdf(dist, y_obs))
end

ipt = placeholder(X)
layers = [VariationalLayer(20, activation=relu), VariationalLayer(20, activation=relu), VariationalLayer(1, activation=x->x)]
x, loss1 = layers[1](ipt)
x, loss2 = layers[2](x)
x, loss3 = layers[3](x)

loss_lf = neg_log_likelihood(y, x, noise)
loss = loss1 + loss2 + loss3 + loss_lf

opt = AdamOptimizer(0.08).minimize(loss)
sess = Session(); init(sess)
for i = 1:5000
    run(sess, opt)
end

X_test = reshape(LinRange(-1.5,1.5,32)|>Array, :, 1)
y_pred_list = []
for i = 1:1000
    y_pred = run(sess, x, ipt=>X_test)
    push!(y_pred_list, y_pred)
end

y_preds = hcat(y_pred_list...)

y_mean = mean(y_preds, dims=2)[:]
y_std = std(y_preds, dims=2)[:]
println("prediction on [-0.5, 0.5]: rms error of the mean ",
        sqrt(mean((y_mean[abs.(X_test[:]) .<= 0.5] .- 10 .* sin.(2π .* X_test[abs.(X_test[:]) .<= 0.5])) .^ 2)),
        ", mean band width ", mean(y_std))
