# TF1's initializer objects, ADCME's xavier_init and seed!: the values' ranges and moments
# against the distributions' (TF's fans), reproducibility under seeds, get_variable and
# variable_scope taking them.

using Random

@testset "TF1's initializer objects" begin
    reset_default_graph()
    Random.seed!(20261129)   # the moments below are 5 or more standard errors wide; fixed draws
    @test constant_initializer(2.5)((2, 3)) == fill(2.5, 2, 3)
    @test constant_initializer([1 2; 3 4])((2, 2), Float32) == Float32[1 2; 3 4]
    @test_throws OxiflowError constant_initializer([1, 2])((3,))
    big = (200, 300)
    # fans of a matrix [in, out] and of a convolution kernel [kh, kw, in, out] (TF's _compute_fans)
    V = glorot_uniform_initializer()(big)
    limit = sqrt(6 / (200 + 300))
    @test maximum(abs.(V)) <= limit && maximum(abs.(V)) > 0.99limit
    @test isapprox(sum(V .^ 2) / length(V), limit^2 / 3; rtol=0.05)
    K = variance_scaling_initializer(2.0; mode="fan_in", distribution="uniform")((3, 3, 16, 32))
    @test maximum(abs.(K)) <= sqrt(3 * 2.0 / (3 * 3 * 16))
    T = truncated_normal_initializer(1.0, 0.5)(big)
    @test all(abs.(T .- 1.0) .<= 1.0) && isapprox(sum(T) / length(T), 1.0; atol=0.01)
    G = glorot_normal_initializer()(big; dtype=Float32)
    @test eltype(G) == Float32 && isapprox(sum(G .^ 2) / length(G), 2 / 500; rtol=0.05)
    R = random_normal_initializer(3.0, 2.0)(big)
    @test isapprox(sum(R) / length(R), 3.0; atol=0.05) && isapprox(sqrt(sum((R .- 3) .^ 2) / length(R)), 2.0; rtol=0.02)
    U = random_uniform_initializer(-1.0, 4.0)(big)
    @test minimum(U) >= -1.0 && maximum(U) <= 4.0 && isapprox(sum(U) / length(U), 1.5; atol=0.04)
    S = uniform_unit_scaling_initializer(1.5)((50, 40))
    @test maximum(abs.(S)) <= 1.5 * sqrt(3 / 50)
    @test_throws OxiflowError random_normal_initializer()((2,), Int32)
    @test_throws OxiflowError variance_scaling_initializer(1.0; mode="fan")
    # reproducible under a graph seed or an op seed, as TF's ops are
    @test random_normal_initializer(; seed=3)((4,)) == random_normal_initializer(; seed=3)((4,))
    seed!(7); a = glorot_uniform_initializer()((3, 3))
    seed!(7); b = glorot_uniform_initializer()((3, 3))
    @test a == b
    reset_default_graph()
    # get_variable and variable_scope take them
    v = get_variable("w"; initializer=constant_initializer(0.5), shape=[2, 3])
    w = variable_scope("layer"; initializer=constant_initializer(-1.0)) do
        get_variable("k"; shape=[4])
    end
    s = Session(); init(s)
    @test run(s, v) == fill(0.5, 2, 3)
    @test run(s, w) == fill(-1.0, 4)
    @test w.name == "layer/k:0"
    e = try get_variable("z"; initializer=glorot_uniform_initializer()); nothing catch err; err end
    @test e isa OxiflowError && occursin("VarianceScalingInitializer needs a shape for the new variable z", e.msg)
    X = xavier_init((100, 50))
    @test size(X) == (100, 50) && isapprox(sqrt(sum(X .^ 2) / length(X)), sqrt(2 / 100); rtol=0.05)
end
