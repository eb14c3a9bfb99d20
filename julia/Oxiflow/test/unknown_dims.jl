# Unknown dimensions (TF1 partial shapes, ADCME's `placeholder(Float64, shape=[nothing, 10])`):
# one graph and one session run batches of several sizes. Oracles: the same formulas in
# plain Julia, central finite differences of those (fd.jl) for gradients, a gradient-descent
# and an Adam step computed by hand. Each computation runs on the CPU and on the emulated GPU
# (runtests.jl calls use_emulated_gpus(1)).

using Statistics

const UD_BATCHES = (1, 5, 17)

# A CPU-only session and one with the emulated GPU.
ud_sessions() = (Session(emulated_gpus=0), Session())

# The error `f()` raises (`nothing` when it raises none).
ud_error(f) = try; f(); nothing; catch err; err; end

# Whether `f()` raises an OxiflowError whose message contains every string of `words`.
function ud_raises(f, words...)
    e = ud_error(f)
    e isa OxiflowError || return false
    return all(w -> occursin(w, e.msg), words)
end

# The MLP of the tests in plain Julia: rows of X are examples.
ud_sigmoid(z) = 1 / (1 + exp(-z))
function ud_mlp_loss(X, Y, W1, b1, W2, b2)
    H = tanh.(X * W1 .+ b1')
    Z = ud_sigmoid.(H * W2 .+ b2')
    return sum((Z - Y) .^ 2) + 0.1 * sum(max.(H, 0.0) .^ 2) / size(X, 1)
end

# TF's row-major reshape of a Julia array to `dims` (row-major order of `dims`).
ud_rowmajor(A, dims...) = permutedims(reshape(vec(permutedims(A, ndims(A):-1:1)), reverse(dims)...), length(dims):-1:1)

@testset "unknown dimensions" begin

@testset "size and shape API of partial tensors" begin
    reset_default_graph()
    x = placeholder(Float64; shape=[nothing, 10])
    @test size(x) == (nothing, 10)
    @test size(x, 1) === nothing && size(x, 2) == 10 && size(x, 3) == 1
    @test x.shape == (nothing, 10)
    @test ndims(x) == 2 && eltype(x) == Float64 && x.dtype == Float64
    @test occursin("nothing", sprint(show, x))
    # -1 (TF's spelling) and a tuple give the same placeholder shape
    @test size(placeholder(Float32; shape=(-1, 3))) == (nothing, 3)
    @test size(placeholder(Float64; shape=[nothing, nothing, 2])) == (nothing, nothing, 2)
    @test size(placeholder(Float64; shape=[nothing])) == (nothing,)
    # the element count is unknown: a clear OxiflowError, not a MethodError
    e = ud_error(() -> length(x))
    @test e isa OxiflowError && occursin("length", e.msg) && occursin("unknown", e.msg) && occursin(x.name, e.msg)
    # shapes that are not shapes
    @test ud_raises(() -> placeholder(Float64; shape=nothing), "placeholder", "unknown rank")
    @test ud_raises(() -> placeholder(Float64; shape=[-2, 3]), "placeholder", "-2")
    @test ud_raises(() -> placeholder(Float64; shape=[1.5]), "placeholder", "1.5")
    # static shapes of results: unknown dimensions propagate, reductions over them drop them
    W = constant(rand(10, 4))
    @test size(tanh(x * W)) == (nothing, 4)
    @test size(x .+ rand(10)) == (nothing, 10)
    @test size(sum(x; dims=1)) == (10,) && size(sum(x; dims=2)) == (nothing,) && size(sum(x)) == ()
    @test size(x') == (10, nothing)
    @test size(reshape(x, (-1, 5))) == (nothing, 5)
    @test size(x[:, 3]) == (nothing,) && size(x[2, :]) == (10,)
    @test size(softmax(x)) == (nothing, 10) && size(relu(x)) == (nothing, 10)
    # a fully known tensor is unchanged: Ints only, length works
    c = constant(rand(2, 3))
    @test size(c) === (2, 3) && length(c) == 6
end

@testset "set_shape checks and refines partial shapes" begin
    reset_default_graph()
    x = placeholder(Float64; shape=[nothing, 10])
    # compatible shapes that add nothing return the tensor itself; incompatible ones raise
    @test set_shape(x, [nothing, 10]) === x && set_shape(x, (-1, 10)) === x && set_shape(x, nothing, 10) === x
    @test ud_raises(() -> set_shape(x, [nothing, 9]), "incompatible")
    @test ud_raises(() -> set_shape(x, [nothing, 10, 1]), "incompatible")
    # a refinement is a new tensor (EnsureShape) with the known size, checked when run
    x5 = set_shape(x, [5, 10])
    @test x5 !== x && x5.op.type == "EnsureShape" && size(x5) == (5, 10) && size(x) == (nothing, 10)
    @test length(x5) == 50
    # the batch is now known when ops are built: a 4-row constant no longer broadcasts
    @test size(x + constant(rand(4, 10))) == (4, 10)
    @test ud_raises(() -> x5 + constant(rand(4, 10)), "[5,10]", "[4,10]")
    g = gradients(sum(x5 .^ 2), x)
    y = placeholder(Float64; shape=[nothing, nothing, 2])
    y3 = set_shape(y, (nothing, 3, 2))
    @test size(y3) == (nothing, 3, 2)
    for s in ud_sessions()
        X = randn(5, 10)
        @test run(s, x5, x => X) == X
        @test run(s, g, x => X) ≈ 2X
        e = ud_error(() -> run(s, x5, x => randn(4, 10)))
        @test e isa OxiflowError && occursin("EnsureShape", e.msg) && occursin("[4,10]", e.msg)
        Y = randn(4, 3, 2)
        @test run(s, y3, y => Y) == Y
        @test ud_raises(() -> run(s, y3, y => randn(4, 2, 2)), "EnsureShape")
        @test run(s, x5, x => X) == X                                  # the session goes on
    end
end

@testset "an MLP loss and its gradients at batch sizes 1, 5, 17" begin
    reset_default_graph()
    W1v = randn(3, 4); b1v = randn(4); W2v = randn(4, 2); b2v = randn(2)
    x = placeholder(Float64; shape=[nothing, 3])
    y_obs = placeholder(Float64; shape=[nothing, 2])
    W1 = Variable(W1v); b1 = Variable(b1v); W2 = Variable(W2v); b2 = Variable(b2v)
    h = tanh(x * W1 .+ b1)
    z = sigmoid(h * W2 .+ b2)
    loss = sum((z - y_obs)^2) + 0.1 * sum(relu(h) .^ 2) / cast(Float64, sum(ones_like(x[:, 1])))
    @test size(h) == (nothing, 4) && size(z) == (nothing, 2) && size(loss) == ()
    gs = gradients(loss, [W1, b1, W2, b2, x])
    @test [size(g) for g in gs[1:4]] == [(3, 4), (4,), (4, 2), (2,)]
    @test size(gs[5]) == (nothing, 3)
    for s in ud_sessions()
        init(s)
        for n in UD_BATCHES
            X = randn(n, 3); Y = rand(n, 2)
            l, gW1, gb1, gW2, gb2, gx = run(s, [loss, gs...], Dict(x => X, y_obs => Y))
            @test l ≈ ud_mlp_loss(X, Y, W1v, b1v, W2v, b2v) rtol = 1e-12
            @test size(gx) == (n, 3)
            @test gW1 ≈ fd_grad(A -> ud_mlp_loss(X, Y, A, b1v, W2v, b2v), W1v) rtol = 1e-6 atol = 1e-8
            @test gb1 ≈ fd_grad(a -> ud_mlp_loss(X, Y, W1v, a, W2v, b2v), b1v) rtol = 1e-6 atol = 1e-8
            @test gW2 ≈ fd_grad(A -> ud_mlp_loss(X, Y, W1v, b1v, A, b2v), W2v) rtol = 1e-6 atol = 1e-8
            @test gb2 ≈ fd_grad(a -> ud_mlp_loss(X, Y, W1v, b1v, W2v, a), b2v) rtol = 1e-6 atol = 1e-8
            @test gx ≈ fd_grad(A -> ud_mlp_loss(A, Y, W1v, b1v, W2v, b2v), X) rtol = 1e-6 atol = 1e-8
            # the pair form of feeds and the forward pass alone
            @test run(s, z, x => X) ≈ ud_sigmoid.(tanh.(X * W1v .+ b1v') * W2v .+ b2v') rtol = 1e-12
        end
    end
end

@testset "training steps equal hand-computed updates, one session, batches of 1, 5, 17" begin
    reset_default_graph()
    W0 = randn(3, 2); b0 = randn(2)
    x = placeholder(Float64; shape=[nothing, 3])
    y = placeholder(Float64; shape=[nothing, 2])
    W = Variable(W0); b = Variable(b0)
    loss = mean((x * W .+ b - y)^2)
    lr = 0.1
    sgd = GradientDescentOptimizer(lr).minimize(loss)
    # d loss/dW and d loss/db of mean((XW + b - Y)^2) over n×2 entries
    function hand_grad(X, Y, Wc, bc)
        R = X * Wc .+ bc' - Y
        k = length(R)
        return 2 / k * X' * R, 2 / k * vec(sum(R; dims=1))
    end
    for s in ud_sessions()
        init(s)
        Wc, bc = copy(W0), copy(b0)
        for n in UD_BATCHES
            X = randn(n, 3); Y = randn(n, 2)
            gW, gb = hand_grad(X, Y, Wc, bc)
            run(s, sgd, Dict(x => X, y => Y))
            Wc -= lr * gW; bc -= lr * gb
            @test run(s, W) ≈ Wc rtol = 1e-12
            @test run(s, b) ≈ bc rtol = 1e-12
        end
    end
    # Adam (TF's update rule, beta1 0.9, beta2 0.999, epsilon 1e-8), one step per batch size
    adam = AdamOptimizer(0.01).minimize(loss)
    s = Session(); init(s)
    Wc, bc = copy(W0), copy(b0)
    mW, vW, mb, vb = zero(W0), zero(W0), zero(b0), zero(b0)
    for (t, n) in enumerate(UD_BATCHES)
        X = randn(n, 3); Y = randn(n, 2)
        gW, gb = hand_grad(X, Y, Wc, bc)
        lr_t = 0.01 * sqrt(1 - 0.999^t) / (1 - 0.9^t)
        mW = 0.9 * mW + 0.1 * gW; vW = 0.999 * vW + 0.001 * gW .^ 2
        mb = 0.9 * mb + 0.1 * gb; vb = 0.999 * vb + 0.001 * gb .^ 2
        Wc -= lr_t * mW ./ (sqrt.(vW) .+ 1e-8); bc -= lr_t * mb ./ (sqrt.(vb) .+ 1e-8)
        run(s, adam, Dict(x => X, y => Y))
        @test run(s, W) ≈ Wc rtol = 1e-10
        @test run(s, b) ≈ bc rtol = 1e-10
    end
end

@testset "reshape with -1 or :, vec, and reductions with dims" begin
    reset_default_graph()
    x = placeholder(Float64; shape=[nothing, 4])
    r1 = reshape(x, (-1, 2))            # row-major, as tf.reshape
    r2 = reshape(x, [:, 1])
    r3 = reshape(x, :, 2)               # column-major, as Julia
    r4 = reshape(x, (2, -1))
    @test size(r1) == (nothing, 2) && size(r2) == (nothing, 1) && size(r3) == (nothing, 2) && size(r4) == (2, nothing)
    v = vec(x); rv = rvec(x); cv = cvec(x)
    @test size(v) == (nothing,) && size(rv) == (1, nothing) && size(cv) == (nothing, 1)
    sums = (sum(x; dims=1), sum(x; dims=2), sum(x; dims=(1, 2)), sum(x))
    means = (mean(x; dims=1), mean(x; dims=2), mean(x; dims=-1), mean(x))
    extrema_ = (maximum(x; dims=1), maximum(x; dims=2), minimum(x; dims=1), maximum(x), prod(x; dims=1))
    sd = std(x; dims=1)
    c = rand(4)
    wmean = sum(mean(x; dims=1) .* c) + sum(r1 .^ 2)
    gx = gradients(wmean, x)
    for s in ud_sessions(), n in (1, 3, 6)
        X = randn(n, 4)
        @test run(s, r1, x => X) == ud_rowmajor(X, 2n, 2)
        @test run(s, r2, x => X) == ud_rowmajor(X, 4n, 1)
        @test run(s, r3, x => X) == reshape(X, :, 2)
        @test run(s, r4, x => X) == ud_rowmajor(X, 2, 2n)
        @test run(s, v, x => X) == vec(X) && run(s, rv, x => X) == reshape(X, 1, :) && run(s, cv, x => X) == reshape(X, :, 1)
        S = run(s, collect(sums), x => X)
        @test S[1] ≈ vec(sum(X; dims=1)) && S[2] ≈ vec(sum(X; dims=2)) && S[3] ≈ sum(X) && S[4] ≈ sum(X)
        M = run(s, collect(means), x => X)
        @test M[1] ≈ vec(mean(X; dims=1)) && M[2] ≈ vec(mean(X; dims=2)) && M[3] ≈ vec(mean(X; dims=2)) && M[4] ≈ mean(X)
        E = run(s, collect(extrema_), x => X)
        @test E[1] == vec(maximum(X; dims=1)) && E[2] == vec(maximum(X; dims=2)) && E[3] == vec(minimum(X; dims=1)) && E[4] == maximum(X)
        @test E[5] ≈ vec(prod(X; dims=1))
        @test run(s, sd, x => X) ≈ vec(std(X; dims=1, corrected=false)) atol = 1e-12
        @test run(s, gx, x => X) ≈ fd_grad(A -> sum(vec(mean(A; dims=1)) .* c) + sum(A .^ 2), X) rtol = 1e-6 atol = 1e-8
    end
    # an element count that does not fit is a run-time error naming Reshape
    s = Session()
    bad = reshape(x, (-1, 3))
    e = ud_error(() -> run(s, bad, x => randn(2, 4)))
    @test e isa OxiflowError && occursin("Reshape", e.msg)
    @test run(s, bad, x => ones(3, 4)) == ones(4, 3)
    # without -1 or `:` the element count is checked when the graph runs (TF)
    fixed = reshape(x, (5, 4))
    @test size(fixed) == (5, 4)
    @test ud_raises(() -> run(s, fixed, x => ones(2, 4)), "Reshape", "[2,4]", "[5,4]")
    @test run(s, fixed, x => reshape(collect(1.0:20.0), 5, 4)) == reshape(collect(1.0:20.0), 5, 4)
end

@testset "elementwise ops, indexing, transpose, squeeze and joins on a batch" begin
    reset_default_graph()
    x = placeholder(Float64; shape=[nothing, 3])
    bv = [0.5, -1.0, 2.0]
    outs = [x .+ bv, x .* x, x / 2, 2 .- x, x .^ 2, tanh.(x), tanh(x), exp(x), relu(x), sigmoid(x),
            softmax(x), leaky_relu(x, 0.1), abs(x), max(x, 0.2), clip(x, -0.5, 0.5),
            if_else(x > 0.0, x, -x), x', x[:, 2], x[1, :], x[1:2, 2:3], x[:, 3:-1:1],
            squeeze(reshape(x, (-1, 1, 3)); dims=2), [x x], [x; x], diff(x; dims=1),
            diff(x; dims=2), ones_like(x), cast(x, Float32), argmax(x; dims=2), x[:, [3, 1, 3]]]
    sm(X) = exp.(X) ./ sum(exp.(X); dims=2)
    want_of(X) = Any[X .+ bv', X .* X, X / 2, 2 .- X, X .^ 2, tanh.(X), tanh.(X), exp.(X), max.(X, 0),
                   ud_sigmoid.(X), sm(X), ifelse.(X .> 0, X, 0.1X), abs.(X), max.(X, 0.2), clamp.(X, -0.5, 0.5),
                   abs.(X), permutedims(X), X[:, 2], X[1, :], X[1:min(2, end), 2:3], X[:, 3:-1:1],
                   X, [X X], [X; X], diff(X; dims=1), diff(X; dims=2), ones(size(X)),
                   Float32.(X), [argmax(X[i, :]) for i in 1:size(X, 1)], X[:, [3, 1, 3]]]
    for s in ud_sessions(), n in UD_BATCHES
        X = randn(n, 3)
        got = run(s, outs, x => X)
        want = want_of(X)
        for k in eachindex(want)
            @test size(got[k]) == size(want[k])
            @test got[k] ≈ want[k] rtol = 1e-12
        end
    end
    # a range past the fed size is cut to it, as TF's slices; an Int past it fails at run time
    s = Session()
    @test run(s, x[1:4, 1], x => [1.0 2 3; 4 5 6]) == [1.0, 4.0]
    e = ud_error(() -> run(s, x[3, :], x => [1.0 2 3; 4 5 6]))
    @test e isa OxiflowError && occursin("StridedSlice", e.msg) && occursin("out of bounds", e.msg)
    @test run(s, x[3, :], x => [1.0 2 3; 4 5 6; 7 8 9]) == [7.0, 8.0, 9.0]
    # integer vectors along the unknown dimension are checked when the graph runs (GatherV2)
    @test run(s, x[[2, 1, 2], [1, 3]], x => [1.0 2 3; 4 5 6]) == [4.0 6; 1 3; 4 6]
    e = ud_error(() -> run(s, x[[1, 3], :], x => [1.0 2 3; 4 5 6]))
    @test e isa OxiflowError && occursin("GatherV2", e.msg)
    @test run(s, x[2, [1, 3]], x => [1.0 2 3; 4 5 6]) == [4.0, 6.0]
    # slices differentiate with respect to the batch, and so do gathers along it or along a
    # known dimension of it (unknown_dims_ops.jl)
    gs = gradients(sum(x[2:3, 1:2] .^ 2), x)
    @test run(s, gs, x => [1.0 2 3; 4 5 6]) == [0.0 0 0; 8 10 0]
    @test run(s, gradients(sum(x[:, [1, 3, 3]]), x), x => [1.0 2 3; 4 5 6]) == [1.0 0 2; 1 0 2]
    @test run(s, gradients(sum(x[[1, 3, 1], :]), x), x => [1.0 2 3; 4 5 6; 7 8 9]) == [2.0 2 2; 0 0 0; 1 1 1]
end

@testset "cond and while_loop over a batch of unknown size" begin
    reset_default_graph()
    x = placeholder(Float64; shape=[nothing, 3])
    p = placeholder(Bool)
    Wv = randn(3, 2)
    c = cond(p, () -> sum(x * constant(Wv)), () -> -sum(x .^ 2))
    _, y = while_loop((i, a) -> i < 3, (i, a) -> (i + 1, 1.5 * tanh(a)), [constant(0), x])
    loop_loss = sum(y .^ 2)
    gl = gradients(loop_loss, x)
    f3(X) = sum((1.5 * tanh.(1.5 * tanh.(1.5 * tanh.(X)))) .^ 2)
    s = Session(emulated_gpus=0)
    for n in UD_BATCHES
        X = randn(n, 3)
        @test run(s, c, x => X, p => true) ≈ sum(X * Wv)
        @test run(s, c, x => X, p => false) ≈ -sum(X .^ 2)
        @test size(run(s, y, x => X)) == (n, 3)
        @test run(s, loop_loss, x => X) ≈ f3(X) rtol = 1e-12
        @test run(s, gl, x => X) ≈ fd_grad(f3, X) rtol = 1e-6 atol = 1e-8
    end
end

@testset "softmax cross entropy and batch normalization on a batch" begin
    reset_default_graph()
    Wv = randn(3, 4)
    x = placeholder(Float64; shape=[nothing, 3])
    labels = placeholder(Float64; shape=[nothing, 4])
    classes = placeholder(Int64; shape=[nothing])
    W = Variable(Wv)
    logits = x * W
    dense = mean(softmax_cross_entropy_with_logits(logits, labels))
    sparse = mean(softmax_cross_entropy_with_logits(logits, classes))     # 1-based classes
    gd = gradients(dense, W)
    bnx = batch_normalization(x; training=true)
    logsm(Z) = Z .- log.(sum(exp.(Z); dims=2))
    xent(Xm, L, A) = -mean(sum(L .* logsm(Xm * A); dims=2))
    for s in ud_sessions()
        init(s)
        for n in UD_BATCHES
            X = randn(n, 3); L = rand(n, 4); L ./= sum(L; dims=2); C = rand(1:4, n)
            onehot = [Float64(C[i] == j) for i in 1:n, j in 1:4]
            @test run(s, dense, Dict(x => X, labels => L)) ≈ xent(X, L, Wv) rtol = 1e-12
            @test run(s, sparse, Dict(x => X, classes => C)) ≈ xent(X, onehot, Wv) rtol = 1e-12
            @test run(s, gd, Dict(x => X, labels => L)) ≈ fd_grad(A -> xent(X, L, A), Wv) rtol = 1e-6 atol = 1e-8
            # training-mode batch norm: (x - batch mean) / sqrt(batch variance + 1e-3), gamma 1, beta 0
            mu = mean(X; dims=1); va = mean((X .- mu) .^ 2; dims=1)
            @test run(s, bnx, x => X) ≈ (X .- mu) ./ sqrt.(va .+ 1e-3) rtol = 1e-10 atol = 1e-12
        end
    end
end

@testset "errors name the placeholder, the op or the function, and the session goes on" begin
    reset_default_graph()
    x = placeholder(Float64; shape=[nothing, 3], name="features")
    Wv = randn(3, 2)
    y = x * constant(Wv)
    s = Session()
    X = randn(4, 3)
    check_usable() = @test run(s, y, x => X) ≈ X * Wv
    check_usable()
    # a feed whose known dimension is wrong, or of the wrong rank or dtype
    e = ud_error(() -> run(s, y, x => randn(4, 2)))
    @test e isa OxiflowError && occursin("features", e.msg) && occursin("[4,2]", e.msg)
    check_usable()
    e = ud_error(() -> run(s, y, x => randn(4)))
    @test e isa OxiflowError && occursin("features", e.msg)
    check_usable()
    e = ud_error(() -> run(s, y, x => rand(1:3, 4, 3)))
    @test e isa OxiflowError && occursin("features", e.msg) && occursin("Int64", e.msg)
    check_usable()
    # a mismatch only the run can see: an unknown batch against a known one
    z = x + constant(randn(5, 3))
    e = ud_error(() -> run(s, z, x => X))
    @test e isa OxiflowError && occursin("[4,3]", e.msg) && occursin("[5,3]", e.msg)
    check_usable()
    # ops the engine does not run on unknown dimensions yet refuse when the graph is built
    v3 = Variable(zeros(2, 3))
    for (f, op) in ((() -> assign(v3, x), "Assign"),)
        e = ud_error(f)
        @test e isa OxiflowError && e.kind == "UnimplementedError" && occursin(op, e.msg) && occursin("unknown dimension", e.msg)
        check_usable()
    end
    # functions that compute on sizes in Julia name themselves
    for (f, fname) in ((() -> x[end ÷ 2, 1], "end"), (() -> x[[true, false], :], "getindex"),
                       (() -> squeeze(x), "squeeze"), (() -> split(x, 2; dims=1), "split"),
                       (() -> einsum("ii->i", x), "einsum"),
                       (() -> x \ [1.0, 2.0], "\\"), (() -> map(r -> sum(r), x), "map"),
                       (() -> jacobian(sum(x; dims=2), x), "jacobian"), (() -> x + I, "UniformScaling"),
                       (() -> batch_normalization(placeholder(Float64; shape=[2, nothing])), "batch_normalization"))
        e = ud_error(f)
        @test e isa OxiflowError && occursin(fname, e.msg)
        check_usable()
    end
    @test run(s, sum(y), x => ones(2, 3)) ≈ sum(ones(2, 3) * Wv)
end

end
