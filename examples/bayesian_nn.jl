# ADCME's docs, "Bayesian Neural Networks" (bnn.md): a network `fc(x, [20, 20, 20, 1], w)`
# fitted by BFGS! to sin(2πx) on 100 points of [0.3, 0.7], then a Bayesian network around
# the fitted weights w1: weights w = μ + σ z with σ = log(1 + exp(ρ)) and z ~ N(0, 1), μ and
# ρ trained by Adam on a 10-sample estimate of the loss (the data misfit, the Gaussian
# log-density of w and a pull towards w1). Each run of `inference(x1)` draws new weights, so
# 1000 runs give 1000 predictions on [0, 1]: the uncertainty band. Written as the page has
# it (`using Oxiflow` for `using ADCME`; the plots and the per-step `@info` left out; the
# page's last part calls `inference`, not `inference_naive`, and so does this program).
#
#   julia --project=julia/Oxiflow examples/bayesian_nn.jl
#
# test/examples/bayesian_nn.jl checks the fit, the loss against a Julia forward pass and the
# band.
using Oxiflow
using Random

Random.seed!(3)                 # the data points and fc_init's draw
set_random_seed(3)              # the draws of tf.random_normal

x0 = rand(100)
x0 = @. x0*0.4 + 0.3
x1 = collect(LinRange(0, 1, 100))
y0 = sin.(2π*x0)
w = Variable(fc_init([1, 20, 20, 20, 1]))
y = squeeze(fc(x0, [20, 20, 20, 1], w))
loss = sum((y - y0)^2)

sess = Session(); init(sess)
BFGS!(sess, loss)
y1 = run(sess, y)
x_dnn = run(sess,  squeeze(fc(x1, [20, 20, 20, 1], w)))
w1 = run(sess, w)
bfgs_loss = run(sess, loss)

##############################

μ = Variable(w1)
ρ = Variable(zeros(length(μ)))
σ = log(1+exp(ρ))

function likelihood(z)
    w = μ + σ * z
    y = squeeze(fc(x0, [20, 20, 20, 1], w))
    sum((y - y0)^2) - sum((w-μ)^2/(2σ^2)) + sum((w-w1)^2)
end

function inference(x)
    z = tf.random_normal((length(σ),), dtype=tf.float64)
    w = μ + σ * z
    y = squeeze(fc(x, [20, 20, 20, 1], w))|>squeeze
end

W = tf.random_normal((10, length(w)), dtype=tf.float64)
L = constant(0.0)
for i = 1:10
    global L += likelihood(W[i])
end

y2 = inference(x1)

opt = AdamOptimizer(0.01).minimize(L)
init(sess)
losses = []
for i = 1:2000
    _, l = run(sess, [opt, L])
    push!(losses, l)
end

Y = zeros(100, 1000)
for i = 1:1000
    Y[:,i] = run(sess, y2)
end

##############################
# Naive Uncertainty Quantification
function inference_naive(x)
    z = tf.random_normal((length(w1),), dtype=tf.float64)
    w = w1 + log(2)*z
    y = squeeze(fc(x, [20, 20, 20, 1], w))|>squeeze
end
y3 = inference(x1)

Y3 = zeros(100, 1000)
for i = 1:1000
    Y3[:,i] = run(sess, y3)
end

println("BFGS loss ", bfgs_loss, "; Bayesian loss L under Adam ", losses[1], " -> ", losses[end])
