# ADCME's fully connected networks (nn.jl): `fc`/`ae` with a weight vector against a Julia
# forward pass written from ADCME's definition (θ read row by row per layer), gradients and
# the second derivative in x against central finite differences of that Julia pass, the
# scope form's variable names and reuse against TF's `fully_connected` naming, and the
# initializers' statistics.
using Random, Statistics

# ADCME's `ae(x, dims, θ)` in plain Julia: layer (m, n) is x * W + b with W the next m*n
# entries of θ laid out row by row, then n biases; `act` on all but the last layer.
function jl_fc(X, widths, θ; act=tanh)
    net, off = X, 0
    for i in 1:length(widths)-1
        m, n = widths[i], widths[i+1]
        W = permutedims(reshape(θ[off+1:off+m*n], n, m))
        net = net * W .+ permutedims(θ[off+m*n+1:off+m*n+n])
        i < length(widths) - 1 && (net = act.(net))
        off += m * n + n
    end
    return net
end

@testset "fc with a weight vector: values against Julia" begin
    Random.seed!(11)
    X = rand(7, 3) .- 0.5
    for (name, act) in (("tanh", tanh), ("relu", x -> max(x, 0.0)), ("sigmoid", x -> 1 / (1 + exp(-x))),
                        ("softplus", x -> log1p(exp(x))), ("swish", x -> x / (1 + exp(-x))), ("sin", sin))
        reset_default_graph()
        θ = ae_init([3, 5, 4, 2]) .+ 0.1 .* randn(ae_num([3, 5, 4, 2]))   # nonzero biases too
        y = fc(X, [5, 4, 2], θ; activation=name)
        @test size(y) == (7, 2)
        @test run(Session(), y) ≈ jl_fc(X, [3, 5, 4, 2], θ; act=act) rtol = 1e-12
    end
    reset_default_graph()
    θ = randn(ae_num([3, 6, 1]))
    # no activation, a Julia function, Float32 end to end
    @test run(Session(), fc(X, [6, 1], θ; activation=nothing)) ≈ jl_fc(X, [3, 6, 1], θ; act=identity) rtol = 1e-12
    @test run(Session(), ae(constant(X), [6, 1], constant(θ); activation=sin)) ≈ jl_fc(X, [3, 6, 1], θ; act=sin) rtol = 1e-12
    y32 = fc(Float32.(X), [6, 1], Variable(Float32.(θ)))
    @test eltype(y32) == Float32
    s = Session(); init(s)
    v32 = run(s, y32)
    @test v32 isa Matrix{Float32}
    @test v32 ≈ jl_fc(Float32.(X), [3, 6, 1], Float32.(θ)) rtol = 1e-5
    # a vector x is one column, and a one-column output comes back as a vector
    xv = X[:, 1]
    θ1 = randn(ae_num([1, 4, 1]))
    yv = fc(xv, [4, 1], θ1)
    @test size(yv) == (7,)
    @test run(Session(), yv) ≈ vec(jl_fc(reshape(xv, 7, 1), [1, 4, 1], θ1)) rtol = 1e-12
    @test size(fc(xv, [4, 2], randn(ae_num([1, 4, 2])))) == (7, 2)
    @test size(fc(X, [4, 1], randn(ae_num([3, 4, 1])))) == (7, 1)   # a matrix input keeps its column
end

# u_xx of the Julia network in its scalar input, by the chain rule (exact, so that the
# finite differences of a loss built on it in θ need one level of differencing only)
function jl_fc_uxx(X, widths, θ)
    v, d1, d2 = X, ones(size(X)), zeros(size(X))  # value, first and second derivative
    off = 0
    for i in 1:length(widths)-1
        m, n = widths[i], widths[i+1]
        W = permutedims(reshape(θ[off+1:off+m*n], n, m))
        v, d1, d2 = v * W .+ permutedims(θ[off+m*n+1:off+m*n+n]), d1 * W, d2 * W
        if i < length(widths) - 1
            t = tanh.(v)
            s = 1 .- t .^ 2                           # tanh'
            v, d1, d2 = t, s .* d1, s .* d2 .- 2 .* t .* s .* d1 .^ 2
        end
        off += m * n + n
    end
    return d2
end

@testset "fc: gradients and u_xx of a PINN loss against finite differences" begin
    reset_default_graph()
    Random.seed!(12)
    widths = [1, 6, 6, 1]
    X = reshape(collect(range(0.05, 0.95; length=9)), 9, 1)
    θ0 = ae_init(widths) .+ 0.05 .* randn(ae_num(widths))
    θ = Variable(θ0)
    x = constant(X)
    u = fc(x, widths[2:end], θ)
    uxx = gradients(sum(gradients(sum(u), x)), x)
    s = Session(); init(s)
    h = 1e-4
    uxx_fd = (jl_fc(X .+ h, widths, θ0) .- 2 .* jl_fc(X, widths, θ0) .+ jl_fc(X .- h, widths, θ0)) ./ h^2
    @test jl_fc_uxx(X, widths, θ0) ≈ uxx_fd rtol = 1e-5 atol = 1e-6   # the chain rule, checked
    @test run(s, uxx) ≈ jl_fc_uxx(X, widths, θ0) rtol = 1e-10 atol = 1e-12
    # the loss's gradient in θ goes through the third derivative of tanh
    F = sin.(π .* X)
    g = gradients(sum((uxx + F)^2), θ)
    fd_loss(t) = sum((jl_fc_uxx(X, widths, t) .+ F) .^ 2)
    @test run(s, g) ≈ fd_grad(fd_loss, θ0; h=1e-6) rtol = 1e-6 atol = 1e-8
end


@testset "fc with a scope, dense: TF's fully_connected names and reuse" begin
    reset_default_graph()
    Random.seed!(13)
    X = rand(5, 2)
    z1 = fc(X, [4, 3], "nn")
    z2 = fc(X, [4, 3], "nn")                        # the same variables again
    names = [v.name for v in get_collection(TRAINABLE_VARIABLES)]
    @test names == ["nn/fully_connected/weights:0", "nn/fully_connected/biases:0",
                    "nn/fully_connected_1/weights:0", "nn/fully_connected_1/biases:0"]
    other = fc(X, [3], "other")
    s = Session(); init(s)
    @test run(s, z1) == run(s, z2)
    W1, b1, W2, b2 = run(s, get_collection(TRAINABLE_VARIABLES)[1:4])
    @test size(W1) == (2, 4) && b1 == zeros(4) && size(W2) == (4, 3)
    lim = sqrt(6 / (2 + 4))                          # Glorot uniform, TF's default
    @test all(abs.(W1) .<= lim) && any(W1 .< 0) && any(W1 .> 0)
    @test run(s, z1) ≈ tanh.(X * W1 .+ b1') * W2 .+ b2' rtol = 1e-12
    @test size(other) == (5, 3)
    # dense outside any scope: new variables each time, TF's default names
    d1 = dense(X, 4)
    d2 = dense(X, 4; activation="relu")
    @test [v.name for v in get_collection(TRAINABLE_VARIABLES)][end-3:end] ==
          ["fully_connected/weights:0", "fully_connected/biases:0", "fully_connected_1/weights:0", "fully_connected_1/biases:0"]
    init(s)
    Wa, ba, Wb, bb = run(s, get_collection(TRAINABLE_VARIABLES)[end-3:end])
    @test run(s, d1) ≈ X * Wa .+ ba' rtol = 1e-12
    @test run(s, d2) ≈ max.(X * Wb .+ bb', 0) rtol = 1e-12
    # a user scope of the default name counts: the next layer takes the following name
    variable_scope("fully_connected_2") do
        get_variable("w"; initializer=1.0)
    end
    dense(X, 1)
    @test get_collection(TRAINABLE_VARIABLES)[end].name == "fully_connected_3/biases:0"
end

@testset "ae_num, ae_init: sizes and statistics" begin
    @test ae_num([3, 5, 4, 2]) == 3 * 5 + 5 + 5 * 4 + 4 + 4 * 2 + 2
    @test fc_num([1, 20, 20, 20, 1]) == 901
    Random.seed!(14)
    dims = [400, 300, 2]
    for (method, sd) in (("xavier", sqrt(1 / 400)), ("xavier_normal", sqrt(2 / 700)), ("he", sqrt(2 / 400)))
        θ = ae_init(dims; method=method)
        @test length(θ) == ae_num(dims) && eltype(θ) == Float64
        W = θ[1:400*300]
        @test abs(std(W) / sd - 1) < 0.02 && abs(mean(W)) < 0.01 * sd * 10
        @test all(θ[400*300+1:400*300+300] .== 0)  # biases
    end
    θ = fc_init(dims; method="xavier_uniform", T=Float32)
    a = sqrt(6 / 700)
    @test eltype(θ) == Float32 && all(abs.(θ[1:400*300]) .<= a)
    @test abs(mean(θ[1:400*300])) < 0.01 * a && abs(std(θ[1:400*300]) / (a / sqrt(3)) - 1) < 0.02
end

@testset "fc, dense: errors name the cause and leave the graph usable" begin
    reset_default_graph()
    X = rand(4, 3)
    θ = randn(ae_num([3, 5, 1]))
    err(f) = try f(); nothing catch e; e end
    e = err(() -> fc(X, [6, 1], θ))
    @test e isa OxiflowError && occursin("Required 31 but given 26", e.msg)
    e = err(() -> fc(X, [5, 1], Float32.(θ) |> constant))
    @test e isa OxiflowError && occursin("same dtype", e.msg)
    e = err(() -> fc(X, [5, 1], θ; activation="nope"))
    @test e isa OxiflowError && occursin("nope is not supported", e.msg) && occursin("tanh", e.msg)
    e = err(() -> fc(rand(2, 2, 2), [1], randn(3)))
    @test e isa OxiflowError && occursin("vector or a matrix", e.msg)
    p = placeholder(Float64; shape=[nothing, nothing])
    e = err(() -> dense(p, 3))
    @test e isa OxiflowError && occursin("number of columns", e.msg)
    e = err(() -> dense([1 2; 3 4], 2))
    @test e isa OxiflowError && occursin("Float32 or Float64, got Int64", e.msg)
    @test err(() -> ae_init([3, 5]; method="glorot")) isa OxiflowError
    @test err(() -> ae_num([3])) isa OxiflowError
    y = fc(X, [5, 1], θ)                            # the graph still builds and runs
    @test run(Session(), y) ≈ jl_fc(X, [3, 5, 1], θ) rtol = 1e-12
    # a θ of unknown length is checked when the graph runs: too long is an error too, not
    # a network that reads the first 26 entries
    θp = placeholder(Float64; shape=[nothing])
    yp = fc(X, [5, 1], θp)
    s = Session()
    for n in (10, 27)
        e = err(() -> run(s, yp, θp => randn(n)))
        @test e isa OxiflowError && occursin("fc_weights_of_length_26", e.msg) && occursin("$n elements", e.msg)
    end
    @test run(s, yp, θp => θ) ≈ jl_fc(X, [3, 5, 1], θ) rtol = 1e-12
end

@testset "ADCME's activations: swish, hard_swish, hard_sigmoid, concat_relu, concat_elu" begin
    reset_default_graph()
    X = [-2.0 -0.3 0.0 0.4 1.5]
    x = constant(X)
    s = Session()
    σ(v) = 1 / (1 + exp(-v))
    @test run(s, swish(x)) ≈ X .* σ.(X)
    @test run(s, hard_swish(x)) ≈ X .* σ.(100 .* X)
    @test run(s, hard_sigmoid(x)) == min.(max.(X .+ 0.5, 0), 1)
    @test run(s, concat_relu(x)) == max.([X -X], 0)
    @test run(s, concat_elu(x)) ≈ map(v -> v > 0 ? v : expm1(v), [X -X])
    @test size(concat_hard_swish(x)) == (1, 10)
end

@testset "fcx: the network and its per-sample Jacobian against finite differences" begin
    reset_default_graph()
    Random.seed!(12)
    X = rand(5, 2) .- 0.5
    dims = [2, 6, 4, 3]
    θv = ae_init(dims) .+ 0.1 .* randn(ae_num(dims))
    θ = Variable(θv)
    y, dy = fcx(X, dims[2:end], θ)
    @test size(y) == (5, 3) && size(dy) == (5, 3, 2)
    s = Session(); init(s)
    Y, DY = run(s, [y, dy])
    @test Y ≈ jl_fc(X, dims, θv) rtol = 1e-12
    for i in 1:5
        Ji = fd_jacobian(z -> vec(jl_fc(reshape(z, 1, 2), dims, θv)), X[i, :])   # 3 × 2
        @test DY[i, :, :] ≈ Ji rtol = 1e-6
    end
    # dy is differentiable: the gradient of sum(dy) in θ against finite differences
    gθ = run(s, gradients(sum(dy), θ))
    total(t) = sum(sum(fd_jacobian(z -> vec(jl_fc(reshape(z, 1, 2), dims, t)), X[i, :]; h=1e-4)) for i in 1:5)
    v = sin.(1:length(θv))
    @test dot(gθ, v) ≈ (total(θv + 1e-4v) - total(θv - 1e-4v)) / 2e-4 rtol = 1e-3
    e = try; fcx(rand(3), [2], θ); nothing; catch err; err; end
    @test e isa OxiflowError && occursin("fcx", e.msg)
end

@testset "ae_to_code: a saved network as Julia code, against the graph and plain Julia" begin
    reset_default_graph()
    X = [0.1 -0.4 0.7; 0.5 0.2 -0.3; -0.9 0.8 0.05; 0.3 0.3 0.3]
    x1 = reshape([0.2, -0.5, 0.9], 3, 1)
    y = ae(constant(X), [5, 4, 2], "coded"; activation="tanh")
    y1 = ae(constant(x1), [3, 1], "tiny"; activation="sigmoid")   # 1×1 arrays read back as numbers
    sess = Session(); run(sess, global_variables_initializer())
    file = joinpath(mktempdir(), "net.mat")
    save(sess, file)
    code = ae_to_code(file, "coded")
    Core.eval(Main, Meta.parse(code))
    Core.eval(Main, Meta.parse(fc_to_code(file, "tiny"; activation="sigmoid")))
    @test Base.invokelatest(Main.nncoded, X) ≈ run(sess, y) rtol = 1e-14
    @test run(sess, Base.invokelatest(Main.nncoded, constant(X))) ≈ run(sess, y) rtol = 1e-14
    # the same network written out in Julia from the saved weights
    d = Oxiflow.matread(file)
    w(i, k) = d["codedbackslashfully_connected$(i == 0 ? "" : "_$i")backslash$(k)colon0"]
    h = X
    for i in 0:2
        h = h * w(i, "weights") .+ vec(w(i, "biases"))'
        i < 2 && (h = tanh.(h))
    end
    @test run(sess, y) ≈ h rtol = 1e-14
    @test Base.invokelatest(Main.nntiny, x1) ≈ run(sess, y1) rtol = 1e-14
    @test_throws OxiflowError ae_to_code(file, "nosuchscope")
end
