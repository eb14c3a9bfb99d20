# ADCME's README "function inverse problem, full field data": the coefficient b(u) of
# -b(u) u'' + u = f on [0, 1] is a neural network, `fc(u, [20, 20, 1])` (two tanh layers of
# 20, variables made under the scope "default"), fitted by BFGS! so that the residual of the
# finite-difference equation vanishes on the given field u = sin(πx). The true coefficient
# is (1 + u²)/(1 + 2u²). Written as the README has it (`using Oxiflow` for `using ADCME`,
# the plot left out).
#
#   julia --project=julia/Oxiflow examples/nn_coefficient.jl
#
# test/examples/nn_coefficient.jl checks the fitted b(u) against the true one.
using LinearAlgebra
using Oxiflow
using Random

Random.seed!(2)                              # the network's Glorot-uniform start (get_variable)
n = 101
h = 1/(n-1)
x = LinRange(0,1,n)|>collect

u = sin.(π*x)
f = @. (1+u^2)/(1+2u^2) * π^2 * u + u
# `fc` is short for fully connected neural network.
# Here we create a neural network with 2 hidden layers, and 20 neuron per layer.
# The default activation function is tanh.
b = squeeze(fc(u[2:end-1], [20,20,1]))

residual = -b.*(u[3:end]+u[1:end-2]-2u[2:end-1])/h^2 + u[2:end-1] - f[2:end-1]
loss = sum(residual^2)

sess = Session(); init(sess)
BFGS!(sess, loss)

b_true = @. (1 + u[2:end-1]^2) / (1 + 2u[2:end-1]^2)
b_err = maximum(abs.(run(sess, b) .- b_true) ./ b_true)
println("loss ", run(sess, loss), "; max relative error of b(u) on the data: ", b_err)
