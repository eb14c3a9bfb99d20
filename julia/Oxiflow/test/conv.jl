# 2-D convolution from Julia: tf.nn.conv2d against a direct Julia loop over TF's definition
# (NHWC arrays as they stand, SAME padding with the smaller half before), gradients against
# finite differences, ADCME's conv2d and Conv2D layers (variables, names, reuse), a small
# network trained on the repository's digits, and the errors.

# TF's conv2d by its definition, in Julia.
function conv_direct(X, F, s, same)
    n, h, w, c = size(X); kh, kw, _, oc = size(F)
    oh, ow = same ? (cld(h, s[1]), cld(w, s[2])) : (div(h - kh, s[1]) + 1, div(w - kw, s[2]) + 1)
    pt = same ? div(max((oh - 1) * s[1] + kh - h, 0), 2) : 0
    pl = same ? div(max((ow - 1) * s[2] + kw - w, 0), 2) : 0
    Y = zeros(n, oh, ow, oc)
    for b in 1:n, oy in 1:oh, ox in 1:ow, o in 1:oc, ky in 1:kh, kx in 1:kw
        iy = (oy - 1) * s[1] + ky - pt; ix = (ox - 1) * s[2] + kx - pl
        (1 <= iy <= h && 1 <= ix <= w) || continue
        Y[b, oy, ox, o] += sum(X[b, iy, ix, :] .* F[ky, kx, :, o])
    end
    return Y
end

# The gradients of sum(conv(X, F) .* U) for X and F by the same definition: each product
# X[b, iy, ix, c] F[ky, kx, c, o] of the sum contributes U[b, oy, ox, o] times the other.
function conv_direct_grads(X, F, U, s, same)
    n, h, w, c = size(X); kh, kw, _, oc = size(F); _, oh, ow, _ = size(U)
    pt = same ? div(max((oh - 1) * s[1] + kh - h, 0), 2) : 0
    pl = same ? div(max((ow - 1) * s[2] + kw - w, 0), 2) : 0
    GX = zeros(size(X)); GF = zeros(size(F))
    for b in 1:n, oy in 1:oh, ox in 1:ow, o in 1:oc, ky in 1:kh, kx in 1:kw
        iy = (oy - 1) * s[1] + ky - pt; ix = (ox - 1) * s[2] + kx - pl
        (1 <= iy <= h && 1 <= ix <= w) || continue
        GX[b, iy, ix, :] .+= U[b, oy, ox, o] .* F[ky, kx, :, o]
        GF[ky, kx, :, o] .+= U[b, oy, ox, o] .* X[b, iy, ix, :]
    end
    return GX, GF
end


function read_digits_for_conv()
    path = normpath(joinpath(@__DIR__, "..", "..", "..", "data", "digits.csv.gz"))
    rows = [parse.(Int, split(l, ',')) for l in eachline(IOBuffer(read(`gzip -dc $path`)))]
    X = zeros(Float32, length(rows), 8, 8, 1)
    for (b, r) in enumerate(rows), i in 1:8, j in 1:8
        X[b, i, j, 1] = r[(i-1)*8+j] / 16
    end
    return X, [r[65] for r in rows]
end

# A Julia batch of 8 or more stays column-major in the engine, where its convolution and
# both gradients, strided ones too, run the direct kernels (vectors of 16 Float32 or 8
# Float64 images, blocks of 8 output channels): 19 images and 10 channels end both in a part.
@testset "tf.nn.conv2d of a column-major batch: values and gradients against Julia" begin
    reset_default_graph()
    s = Session()
    X = randn(19, 6, 5, 3); F = randn(3, 3, 3, 10)
    for T in (Float64, Float32), (st, pad) in (((1, 1), "SAME"), ((2, 1), "VALID"))
        tol = T == Float64 ? 1e-12 : 1e-5
        same = pad == "SAME"
        want = conv_direct(X, F, st, same)
        U = randn(size(want)...)
        x = constant(T.(X)); f = constant(T.(F))
        y = tf.nn.conv2d(x, f, [1, st..., 1], pad)
        gx, gf = gradients(sum(y .* T.(U)), [x, f])
        got, gxv, gfv = run(s, [y, gx, gf])
        wgx, wgf = conv_direct_grads(T.(X), T.(F), T.(U), st, same)
        @test eltype(got) == T
        @test got ≈ conv_direct(T.(X), T.(F), st, same) rtol = tol
        @test gxv ≈ wgx rtol = tol
        @test gfv ≈ wgf rtol = tol
    end
end

@testset "tf.nn.conv2d: values and gradients against Julia" begin
    reset_default_graph()
    s = Session()
    X = randn(2, 6, 5, 3); F = randn(3, 2, 3, 4)
    for (st, pad) in (((1, 1), "SAME"), ((2, 2), "SAME"), ((2, 1), "VALID"), ((1, 3), "valid"))
        y = tf.nn.conv2d(X, F, [1, st..., 1], pad)
        want = conv_direct(X, F, st, uppercase(pad) == "SAME")
        @test size(y) == size(want)
        @test run(s, y) ≈ want rtol = 1e-12
    end
    @test run(s, tf.nn.conv2d(Float32.(X); filters=F, strides=2, padding="SAME")) ≈ conv_direct(X, F, (2, 2), true) rtol = 1e-5
    # gradients with respect to the input and the filter
    W = randn(2, 3, 3, 4)
    x = constant(X); f = constant(F)
    loss = sum(tf.nn.conv2d(x, f, (2, 2), "SAME") .* W)
    gx, gf = run(s, gradients(loss, [x, f]))
    L(Xv, Fv) = sum(conv_direct(Xv, Fv, (2, 2), true) .* W)
    @test gx ≈ fd_grad(Xv -> L(Xv, F), X) rtol = 1e-6
    @test gf ≈ fd_grad(Fv -> L(X, Fv), F) rtol = 1e-6
    # an unknown batch
    p = placeholder(Float64; shape=[nothing, 6, 5, 3])
    yp = tf.nn.conv2d(p, F, 1, "VALID")
    @test size(yp) == (nothing, 4, 4, 4)
    @test run(s, yp, p => X[1:1, :, :, :]) ≈ conv_direct(X[1:1, :, :, :], F, (1, 1), false) rtol = 1e-12
    # errors name the op and leave the graph usable
    e = try tf.nn.conv2d(X, randn(3, 3, 2, 1), 1, "SAME"); nothing catch err; err end
    @test e isa OxiflowError && occursin("input depth 3 does not match the filter's in_channels 2", e.msg)
    @test_throws OxiflowError tf.nn.conv2d(X, F, 1, "FULL")
    e = try tf.nn.conv2d(X, F, 1, "SAME"; data_format="NCHW"); nothing catch err; err end
    @test e isa OxiflowError && occursin("only NHWC", e.msg)
    @test run(s, tf.nn.conv2d(X, F, 1, "SAME")) ≈ conv_direct(X, F, (1, 1), true) rtol = 1e-12
end

@testset "set_random_seed fixes the layers' initial kernels, as TF's graph seed does" begin
    function kernels(seed)
        reset_default_graph()
        set_random_seed(seed)
        x = constant(zeros(2, 5, 5, 3))
        conv2d(x, 4, 3)                                    # Conv/weights
        Conv2D(2, 3)(x)                                    # conv2d/kernel
        Conv1D(2, 3)(constant(zeros(2, 6, 3)))             # conv1d/kernel
        Conv2DTranspose(2, 3)(x)                           # conv2d_transpose/kernel
        s = Session(); init(s)
        # the kernels (the biases start at zero)
        return filter(v -> any(!iszero, v), run(s, get_collection(TRAINABLE_VARIABLES)))
    end
    a, b, c = kernels(5), kernels(5), kernels(6)
    @test length(a) == 4
    @test a == b
    @test all(a[i] != c[i] for i in eachindex(a))
end

@testset "conv2d and Conv2D layers: variables, names, reuse, training" begin
    reset_default_graph()
    X = randn(2, 5, 5, 2)
    y1 = conv2d(X, 3, 3; activation="relu")          # Conv/weights, no bias (ADCME's default)
    y2 = conv2d(X, 4, (2, 3), 2, "VALID"; bias=true)  # Conv_1/weights, Conv_1/biases
    names = [v.name for v in get_collection(TRAINABLE_VARIABLES)]
    @test names == ["Conv/weights:0", "Conv_1/weights:0", "Conv_1/biases:0"]
    layer = Conv2D(4, 3, 1, "tanh")
    z1 = layer(X); z2 = layer(2 .* X)
    @test length(get_collection(TRAINABLE_VARIABLES)) == 5    # conv2d/kernel, conv2d/bias once
    @test layer.kernel.name == "conv2d/kernel:0" && size(layer.kernel) == (3, 3, 2, 4)
    s = Session(); init(s)
    W1, W2, b2, K, b = run(s, [get_collection(TRAINABLE_VARIABLES)...])
    @test run(s, y1) ≈ max.(conv_direct(X, W1, (1, 1), true), 0) rtol = 1e-12
    @test run(s, y2) ≈ conv_direct(X, W2, (2, 2), false) .+ reshape(b2, 1, 1, 1, 4) rtol = 1e-12
    @test run(s, z2) ≈ tanh.(conv_direct(2 .* X, K, (1, 1), false) .+ reshape(b, 1, 1, 1, 4)) rtol = 1e-12
    # Glorot uniform bounds: sqrt(6 / (kh kw (c + oc)))
    @test maximum(abs.(K)) <= sqrt(6 / (9 * (2 + 4))) && std(vec(K)) > 0.3 * sqrt(6 / 54) / sqrt(3)
    @test_throws OxiflowError layer(randn(2, 5, 5, 3))
    @test_throws OxiflowError conv2d(randn(5, 5), 3, 3)
    # a small convolutional network learns the 8×8 digits. Its accuracy after 8 epochs varies
    # with the initial weights (0.89-0.95 over unseeded runs), so the weights are seeded.
    reset_default_graph()
    set_random_seed(20261130)
    D = read_digits_for_conv()
    Xtr, ytr = D[1][1:1000, :, :, :], D[2][1:1000]
    Xte, yte = D[1][1001:end, :, :, :], D[2][1001:end]
    xb = placeholder(Float32; shape=[nothing, 8, 8, 1]); lb = placeholder(Int64; shape=[nothing])
    h = Conv2D(8, 3, 1, "relu"; padding="same")(xb)
    h = conv2d(h, 16, 3, 2; activation="relu", bias=true)          # 4×4×16
    logits = Dense(10)(reshape(h, (-1, 256)))
    loss = mean(sparse_softmax_cross_entropy_with_logits(lb, logits))
    train = AdamOptimizer(0.01).minimize(loss)
    s = Session(); init(s)
    for epoch in 1:8, k in 1:50:1000
        run(s, train, xb => Xtr[k:k+49, :, :, :], lb => ytr[k:k+49])
    end
    pred = [argmax(r) - 1 for r in eachrow(run(s, logits, xb => Xte))]
    @test mean(pred .== yte) > 0.9
end

# Keras' Conv1D by its definition: pad (SAME: the smaller half before; causal: k - 1 before)
function conv1d_direct(X, K, s, padding)
    n, L, c = size(X); k, _, f = size(K)
    out = padding == "valid" ? div(L - k, s) + 1 : cld(L, s)
    before = padding == "causal" ? k - 1 : padding == "same" ? div(max((out - 1) * s + k - L, 0), 2) : 0
    Y = zeros(n, out, f)
    for b in 1:n, t in 1:out, o in 1:f, j in 1:k
        i = (t - 1) * s + j - before
        1 <= i <= L && (Y[b, t, o] += sum(X[b, i, :] .* K[j, :, o]))
    end
    return Y
end

# the transpose of conv_direct: every input pixel scattered through the kernel
function conv_transpose_direct(X, K, s, same)
    n, h, w, c = size(X); kh, kw, f, _ = size(K)
    oh, ow = same ? (h * s[1], w * s[2]) : ((h - 1) * s[1] + kh, (w - 1) * s[2] + kw)
    pt = same ? div(max((h - 1) * s[1] + kh - oh, 0), 2) : 0
    pl = same ? div(max((w - 1) * s[2] + kw - ow, 0), 2) : 0
    Y = zeros(n, oh, ow, f)
    for b in 1:n, y in 1:h, x in 1:w, ky in 1:kh, kx in 1:kw
        iy = (y - 1) * s[1] + ky - pt; ix = (x - 1) * s[2] + kx - pl
        (1 <= iy <= oh && 1 <= ix <= ow) || continue
        Y[b, iy, ix, :] .+= K[ky, kx, :, :] * X[b, y, x, :]
    end
    return Y
end

@testset "Conv1D and Conv2DTranspose layers against Julia loops" begin
    reset_default_graph()
    X = randn(2, 9, 3)
    layers = [Conv1D(4, 3), Conv1D(4, 3, 2, "relu"; padding="same"), Conv1D(2, 4, 2; padding="causal", use_bias=false)]
    ys = [l(X) for l in layers]
    s = Session(); init(s)
    @test [l.name for l in layers] == ["conv1d", "conv1d_1", "conv1d_2"] && size(layers[1].kernel) == (3, 3, 4)
    for (l, y, act) in zip(layers, ys, (identity, x -> max(x, 0.0), identity))
        K = run(s, l.kernel); b = l.use_bias ? run(s, l.bias) : zeros(l.filters)
        want = act.(conv1d_direct(X, K, l.strides, l.padding) .+ reshape(b, 1, 1, :))
        @test size(y) == size(want)
        @test run(s, y) ≈ want rtol = 1e-12
    end
    # causal: output t does not see inputs after t
    Xc = copy(X); Xc[:, 6:end, :] .= 100
    @test run(s, layers[3](Xc))[:, 1:2, :] ≈ run(s, ys[3])[:, 1:2, :] rtol = 1e-12
    # gradient of a Conv1D output in its kernel against finite differences
    W = randn(size(ys[1])...)
    gk = run(s, gradients(sum(ys[1] .* W), layers[1].kernel))
    K1 = run(s, layers[1].kernel)
    @test gk ≈ fd_grad(Kv -> sum(conv1d_direct(X, Kv, 1, "valid") .* W), K1) rtol = 1e-6
    @test_throws OxiflowError layers[1](randn(2, 9, 5))
    @test_throws OxiflowError Conv1D(4, 3; padding="full")
    # transposed convolution: the scatter loop, the adjoint of conv2d, sizes and gradients
    Z = randn(2, 3, 4, 2)
    for (st, pad) in (((1, 1), "valid"), ((2, 2), "same"), ((2, 3), "valid"), ((2, 1), "same"))
        l = Conv2DTranspose(3, (3, 2), st; padding=pad)
        y = l(Z)
        init(s)
        K = run(s, l.kernel)
        want = conv_transpose_direct(Z, K, st, pad == "same") .+ reshape(run(s, l.bias), 1, 1, 1, :)
        @test size(y) == size(want)
        @test run(s, y) ≈ want rtol = 1e-12
        U = randn(size(want)...)                      # <convT(Z), U> = <Z, conv(U)>
        @test sum((run(s, y) .- reshape(run(s, l.bias), 1, 1, 1, :)) .* U) ≈ sum(Z .* conv_direct(U, K, st, pad == "same")) rtol = 1e-10
        gk = run(s, gradients(sum(y .* U), l.kernel))
        @test gk ≈ fd_grad(Kv -> sum(conv_transpose_direct(Z, Kv, st, pad == "same") .* U), K) rtol = 1e-6
    end
    p = placeholder(Float64; shape=[nothing, 3, 4, 2])
    lt = Conv2DTranspose(1, 2, 2; padding="same", name="up")
    yp = lt(p)
    init(s)
    @test size(yp) == (nothing, 6, 8, 1) && size(run(s, yp, p => Z)) == (2, 6, 8, 1)
    @test_throws OxiflowError lt(randn(2, 3, 4, 3))
end

# TF's pooling by its definition: each window's max or mean over its elements inside the
# input (SAME: padding split with the smaller half before)
function pool_direct(X, k, s, same, f)
    n, h, w, c = size(X)
    oh, ow = same ? (cld(h, s[1]), cld(w, s[2])) : (div(h - k[1], s[1]) + 1, div(w - k[2], s[2]) + 1)
    pt = same ? div(max((oh - 1) * s[1] + k[1] - h, 0), 2) : 0
    pl = same ? div(max((ow - 1) * s[2] + k[2] - w, 0), 2) : 0
    Y = zeros(n, oh, ow, c)
    for b in 1:n, oy in 1:oh, ox in 1:ow, ch in 1:c
        vals = [X[b, iy, ix, ch] for iy in (oy-1)*s[1]+1-pt:(oy-1)*s[1]+k[1]-pt, ix in (ox-1)*s[2]+1-pl:(ox-1)*s[2]+k[2]-pl
                if 1 <= iy <= h && 1 <= ix <= w]
        Y[b, oy, ox, ch] = f(vals)
    end
    return Y
end

@testset "tf.nn.max_pool, avg_pool, tf.layers pooling: against Julia loops, gradients" begin
    reset_default_graph()
    s = Session()
    X = randn(2, 7, 6, 3)
    for (k, st, pad) in (((2, 2), (2, 2), "VALID"), ((3, 3), (2, 2), "SAME"), ((3, 2), (1, 2), "SAME"), ((2, 3), (3, 1), "valid"))
        same = uppercase(pad) == "SAME"
        for (fn, f) in ((tf.nn.max_pool, maximum), (tf.nn.avg_pool, v -> sum(v) / length(v)))
            y = fn(X, [1, k..., 1], [1, st..., 1], pad)
            want = pool_direct(X, k, st, same, f)
            @test size(y) == size(want)
            @test run(s, y) ≈ want rtol = 1e-12
        end
    end
    @test run(s, tf.layers.max_pooling2d(X, 2, 2)) ≈ pool_direct(X, (2, 2), (2, 2), false, maximum) rtol = 1e-12
    @test run(s, tf.layers.average_pooling2d(Float32.(X), (3, 3), 2; padding="same")) ≈
          pool_direct(X, (3, 3), (2, 2), true, v -> sum(v) / length(v)) rtol = 1e-5
    # gradients (random data: no ties)
    x = constant(X)
    W = randn(2, 4, 3, 3)
    for (fn, f) in ((tf.nn.max_pool, maximum), (tf.nn.avg_pool, v -> sum(v) / length(v)))
        g = run(s, gradients(sum(fn(x, 3, 2, "SAME") .* W), x))
        @test g ≈ fd_grad(Xv -> sum(pool_direct(Xv, (3, 3), (2, 2), true, f) .* W), X) rtol = 1e-6
    end
    # an unknown batch
    p = placeholder(Float64; shape=[nothing, 7, 6, 3])
    yp = tf.nn.max_pool(p, 3, 2, "SAME")
    @test size(yp) == (nothing, 4, 3, 3)
    @test run(s, yp, p => X) ≈ pool_direct(X, (3, 3), (2, 2), true, maximum) rtol = 1e-12
    @test_throws OxiflowError tf.nn.max_pool(X, 8, 1, "VALID")
    @test_throws OxiflowError tf.nn.avg_pool(X, 2, 2, "FULL")
    @test_throws OxiflowError tf.nn.avg_pool(X, 2, 2, "SAME"; data_format="NCHW")
end
