# ADCME's Keras-style layers (keras.jl): `Dense`, `dropout`, `BatchNormalization`,
# `Resnet1D` and `Oxiflow.options.training.training`, against Julia forward passes written
# from Keras' and ADCME's definitions, finite differences for a gradient, and the statistics
# of the dropout mask.
using Random, Statistics

kerr(f) = try; f(); nothing; catch e; e; end

@testset "Dense: values, Keras names, variables made once, errors" begin
    reset_default_graph()
    Random.seed!(21)
    X = randn(6, 4)
    d = Dense(3, "tanh")
    d2 = Dense(2)
    y = d(X)
    y2 = d2(y)
    @test size(y) == (6, 3) && size(y2) == (6, 2)
    @test d.name == "dense" && d2.name == "dense_1"
    vs = get_collection(TRAINABLE_VARIABLES)
    @test [v.name for v in vs] == ["dense/kernel:0", "dense/bias:0", "dense_1/kernel:0", "dense_1/bias:0"]
    y3 = d(constant(2X))                                    # a second call: the same variables
    @test length(get_collection(TRAINABLE_VARIABLES)) == 4
    s = Session(); init(s)
    W, b, W2, b2 = run(s, vs)
    @test size(W) == (4, 3) && b == zeros(3)
    @test all(abs.(W) .<= sqrt(6 / 7))                      # Glorot uniform's bound
    @test run(s, y) ≈ tanh.(X * W .+ b') rtol = 1e-12
    @test run(s, y2) ≈ tanh.(X * W .+ b') * W2 .+ b2' rtol = 1e-12
    @test run(s, y3) ≈ tanh.(2X * W .+ b') rtol = 1e-12
    e = kerr(() -> d(randn(6, 5)))
    @test e isa OxiflowError && occursin("layer dense", e.msg) && occursin("value 4", e.msg)
    e = kerr(() -> d(Float32.(X)))
    @test e isa OxiflowError && occursin("Float32", e.msg)
    e = kerr(() -> Dense(3)(randn(4)))
    @test e isa OxiflowError && occursin("expected a matrix", e.msg)
    e = kerr(() -> Dense(3)(constant([1 2; 3 4])))
    @test e isa OxiflowError && occursin("Int64", e.msg)
    reset_default_graph()
    e = kerr(() -> d(X))
    @test e isa OxiflowError && occursin("earlier graph", e.msg)
    # Glorot uniform's spread: U(-a, a) has standard deviation a / sqrt(3)
    dd = Dense(300); dd(randn(2, 200))
    s2 = Session(); init(s2)
    W = run(s2, dd.kernel)
    @test abs(std(W) - sqrt(6 / 500) / sqrt(3)) < 0.01 * sqrt(6 / 500)
end

@testset "dropout: mask statistics, scaling, the training switch, gradient" begin
    reset_default_graph()
    X = rand(200, 500) .+ 1.0                               # no zeros: a zero marks a dropped entry
    y = dropout(X, 0.3, true)
    s = Session()
    Y = run(s, y)
    kept = Y .!= 0
    @test abs(mean(kept) - 0.7) < 0.01                      # 100k draws
    @test Y[kept] ≈ X[kept] ./ 0.7 rtol = 1e-12
    @test run(s, y) != Y                                    # a new mask per run
    @test run(s, dropout(X, 0.3, false)) == X && run(s, dropout(X, 0.0, true)) == X
    flag = placeholder(true)
    z = dropout(constant(X), 0.5, flag)
    @test run(s, z, flag => false) == X
    @test abs(mean(run(s, z) .!= 0) - 0.5) < 0.01
    # the default switch: options.training.training, a placeholder(false) per graph
    @test run(s, dropout(X, 0.5)) == X
    @test Oxiflow.options.training.training === Oxiflow.options.training.training
    # the gradient is the mask, scaled
    x = Variable(X)
    yd = dropout(x, 0.25, true)
    g = gradients(sum(yd .* yd), x)
    init(s)
    Yd, G = run(s, [yd, g])
    @test G ≈ 2 .* Yd ./ 0.75 rtol = 1e-12
    @test kerr(() -> dropout(X, 1.0, true)) isa OxiflowError
    @test kerr(() -> dropout(constant([1, 2]), 0.5, true)) isa OxiflowError
    e = kerr(() -> dropout(placeholder(Float64; shape=[nothing, 3]), 0.5, true))
    @test e isa OxiflowError && occursin("unknown shape", e.msg)
end

@testset "options.training.training: set, fed, per graph" begin
    reset_default_graph()
    Oxiflow.options.training.training = placeholder(true)
    X = rand(50, 40) .+ 1.0
    y = dropout(X, 0.5)
    s = Session()
    @test mean(run(s, y) .== 0) > 0.3                       # training by default now
    @test run(s, y, Oxiflow.options.training.training => false) == X
    reset_default_graph()
    e = kerr(() -> dropout(X, 0.5))
    @test e isa OxiflowError && occursin("earlier graph", e.msg)
    Oxiflow.options.training.training = nothing             # back to a placeholder(false) per graph
    @test run(Session(), dropout(X, 0.5)) == X
    @test kerr(() -> (Oxiflow.options.training.training = constant(1.0))) isa OxiflowError
end

@testset "BatchNormalization: values, shared variables" begin
    reset_default_graph()
    Random.seed!(22)
    X = randn(32, 5) .* (1:5)' .+ 3
    bnl = BatchNormalization()
    y = bnl(X, true)
    y2 = bnl(2X, true)
    @test length(get_collection(TRAINABLE_VARIABLES)) == 2      # gamma and beta, once
    s = Session(); init(s)
    μ, σ2 = mean(X, dims=1), var(X, dims=1, corrected=false)
    @test run(s, y) ≈ (X .- μ) ./ sqrt.(σ2 .+ 1e-3) rtol = 1e-10
    @test run(s, bnl(X, false)) ≈ X ./ sqrt(1 + 1e-3) rtol = 1e-12   # moving statistics 0 and 1
    @test run(s, y2) ≈ (2X .- 2μ) ./ sqrt.(4σ2 .+ 1e-3) rtol = 1e-10
end

# Resnet1D in plain Julia from its layers' values (ADCME's block: act, L1, act, dropout, L2, +x)
function jl_resnet(X, P; act=x -> max(x, 0.0))
    lin(x, k) = x * P[2k-1] .+ P[2k]'
    h = lin(X, 1)
    nb = (length(P) ÷ 2 - 2) ÷ 2
    for j in 1:nb
        h = lin(act.(lin(act.(h), 2j)), 2j + 1) + h
    end
    return lin(h, length(P) ÷ 2)
end

@testset "Resnet1D: forward pass against Julia, gradient against finite differences" begin
    reset_default_graph()
    Random.seed!(23)
    X = randn(7, 5)
    res = Resnet1D(3, 6; num_blocks=2)
    y = res(X)
    @test size(y) == (7, 3)
    vs = get_collection(TRAINABLE_VARIABLES)
    @test length(vs) == 2 * (2 + 2 * 2)
    s = Session(); init(s)
    P = run(s, vs)
    @test run(s, y) ≈ jl_resnet(X, P) rtol = 1e-12
    @test run(s, res(2X)) ≈ jl_resnet(2X, P) rtol = 1e-12          # the same variables again
    xt = Variable(X)
    loss = sum(res(xt)^2)
    g = gradients(loss, xt)
    init(s)
    P = run(s, vs)
    @test run(s, g) ≈ fd_grad(Z -> sum(jl_resnet(Z, P) .^ 2), X) rtol = 1e-6
    th = Resnet1D(3, 4; num_blocks=1, activation="tanh")
    Pth = (yth = th(X); init(s); run(s, [th.initial_layer.kernel, th.initial_layer.bias,
            th.blocks[1].linear_layers[1].kernel, th.blocks[1].linear_layers[1].bias,
            th.blocks[1].linear_layers[2].kernel, th.blocks[1].linear_layers[2].bias,
            th.final_layer.kernel, th.final_layer.bias]))
    @test run(s, yth) ≈ jl_resnet(X, Pth; act=tanh) rtol = 1e-12   # the blocks use `activation`
    named = Resnet1D(2; name="net")
    @test Resnet1D(2; name="net") === named && Resnet1D(2) !== named
end
