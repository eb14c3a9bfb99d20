# Runs examples/resnet_digits.jl (ADCME's front-page ResNet, on the repository's 8×8 digits)
# and checks that Adam fitted the training batches and that the held-out accuracy is that of
# a working classifier (10 classes: chance is 10 %; the page's MNIST run reaches about 97 %).
#   julia --project=julia/Oxiflow test/examples/resnet_digits.jl
using Test
include(joinpath(@__DIR__, "..", "..", "examples", "resnet_digits.jl"))

@testset "ResNet on digits (ADCME's front page)" begin
    @test length(get_collection(TRAINABLE_VARIABLES)) == 2 * (2 + 2 * 10)   # 22 Dense layers
    @test mean(losses[1:100]) > 1.0                  # starts near log(10) = 2.3
    @test mean(losses[end-99:end]) < 0.05
    @test length(accuracy) == 10 && mean(accuracy) >= 0.8
    # the whole held-out set in inference mode, fed as the page feeds it
    logits = run(sess, resnet(test_x), Oxiflow.options.training.training => false)
    @test mean([c[2] - 1 for c in argmax(logits, dims=2)] .== test_y) >= 0.8
end
