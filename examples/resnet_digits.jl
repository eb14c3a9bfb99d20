# ADCME's front page, "Machine Learning": a ResNet (`Resnet1D(10, num_blocks=10)`) trained
# by Adam on digit images fed batch by batch, then its accuracy measured with the training
# switch fed `false`. The page uses MNIST (28×28, through MLDatasets, which is not available
# here); this program runs the same code on the repository's 8×8 digits (data/digits.rst):
# 64 pixels scaled to [0, 1] in place of 784, the first 1500 images for training and the
# other 297 for testing. Otherwise as the page has it (`using Oxiflow` for `using ADCME`,
# `Oxiflow.options` for `ADCME.options`, the per-step `@info` left out).
#
#   julia --project=julia/Oxiflow examples/resnet_digits.jl
#
# Prints the accuracy of the ten test batches; test/examples/resnet_digits.jl checks them.
using Oxiflow
using DelimitedFiles
using Random
using Statistics

include(joinpath(@__DIR__, "data_dir.jl"))
Random.seed!(5)                                  # Glorot draws, batches
set_random_seed(5)

# load data
D = readdlm(IOBuffer(read(`gzip -dc $(joinpath(data_dir("digits.csv.gz"), "digits.csv.gz"))`)), ',', Int)
train_x, train_y = D[1:1500, 1:64] ./ 16, D[1:1500, 65]
test_x, test_y = D[1501:end, 1:64] ./ 16, D[1501:end, 65]

# construct loss function
Oxiflow.options.training.training = placeholder(true)
x = placeholder(rand(64, 64))
l = placeholder(rand(Int64, 64))
resnet = Resnet1D(10, num_blocks=10)
y = resnet(x)
loss = mean(sparse_softmax_cross_entropy_with_logits(labels=l, logits=y))

# train the neural network
opt = AdamOptimizer().minimize(loss)
sess = Session(); init(sess)
losses = Float64[]
for i = 1:10000
    idx = rand(1:1500, 64)
    _, loss_ = run(sess, [opt, loss], feed_dict=Dict(l=>train_y[idx], x=>train_x[idx,:]))
    push!(losses, loss_)
end

# test
accuracy = Float64[]
for i = 1:10
    idx = rand(1:size(test_x, 1), 100)
    y0 = resnet(test_x[idx,:])
    y0 = run(sess, y0, Oxiflow.options.training.training=>false)
    pred = [x[2]-1 for x in argmax(y0, dims=2)]
    push!(accuracy, sum(pred .== test_y[idx])/100)
    @info "Accuracy = ", accuracy[end]
end
