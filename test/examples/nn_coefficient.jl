# Runs examples/nn_coefficient.jl (ADCME's README: a neural-network coefficient b(u) from full
# field data) and checks the fitted b(u) against (1 + u²)/(1 + 2u²).
#   julia --project=julia/Oxiflow test/examples/nn_coefficient.jl
using Test
include(joinpath(@__DIR__, "..", "..", "examples", "nn_coefficient.jl"))

@testset "NN coefficient from full field data (ADCME's README)" begin
    @test size(b) == (99,)                           # fc of a vector gives a vector
    @test length(get_collection(TRAINABLE_VARIABLES)) == 6   # three layers' weights and biases
    @test run(sess, loss) < 1e-5
    @test b_err < 1e-2                               # 2.7e-4 is reached
end
