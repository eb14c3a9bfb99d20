# Training layers (layers.jl) and replicas (replicas.jl): batch normalization and softmax
# cross-entropy against Julia formulas (TF 1.15's definitions), gradients against central
# finite differences in Float64, each on the CPU only and with the emulated GPU that
# runtests.jl enables; the data-parallel strategy against a single-device oracle.
using Statistics

const LAYER_SESSIONS = (("CPU", () -> Session(GPU=0)), ("emulated GPU", () -> Session()))

jl_bn(X, g, b, m, v; eps=1e-3) = (X .- m') ./ sqrt.(v' .+ eps) .* g' .+ b'
jl_bn_train(X, g, b) = jl_bn(X, g, b, vec(mean(X; dims=1)), vec(var(X; dims=1, corrected=false)))
function jl_xent(L, Y)
    m = maximum(L; dims=2)
    lse = m .+ log.(sum(exp.(L .- m); dims=2))
    return vec(-sum(Y .* (L .- lse); dims=2))
end

@testset "batch_normalization: values and moving statistics ($dev)" for (dev, mk) in LAYER_SESSIONS
    reset_default_graph()
    X = [0.3 -1.2 2.0; 1.1 0.4 -0.5; -0.7 2.2 0.9; 0.5 0.1 1.7]
    x = constant(X)
    y = batch_normalization(x; training=true)
    @test length(get_collection(UPDATE_OPS)) == 2
    names = sort([v.op.name for v in get_collection(GLOBAL_VARIABLES)])
    @test names == sort(["batch_normalization/" * n for n in ("gamma", "beta", "moving_mean", "moving_variance")])
    @test sort([v.op.name for v in get_collection(TRAINABLE_VARIABLES)]) == ["batch_normalization/beta", "batch_normalization/gamma"]
    yi = batch_normalization(x; training=false, name="batch_normalization", reuse=true)   # shares the variables
    @test length(get_collection(GLOBAL_VARIABLES)) == 4 && length(get_collection(UPDATE_OPS)) == 2
    istrain = placeholder(Bool; name="is_training")
    yt = bn(x; is_training=istrain, scope="batch_normalization")
    s = mk(); init(s)
    @test run(s, y) ≈ jl_bn_train(X, ones(3), zeros(3))
    @test run(s, yi) ≈ jl_bn(X, ones(3), zeros(3), zeros(3), ones(3))
    run(s, get_collection(UPDATE_OPS)[1:2])
    mm = 0.01 * vec(mean(X; dims=1)); mv = 0.99 .+ 0.01 * vec(var(X; dims=1, corrected=false))   # TF's momentum 0.99
    @test run(s, tensor("batch_normalization/moving_mean:0")) ≈ mm
    @test run(s, tensor("batch_normalization/moving_variance:0")) ≈ mv
    @test run(s, yi) ≈ jl_bn(X, ones(3), zeros(3), mm, mv)
    @test run(s, yt, istrain => true) ≈ jl_bn_train(X, ones(3), zeros(3))
    @test run(s, yt, istrain => false) ≈ jl_bn(X, ones(3), zeros(3), mm, mv)
    # the updates of the tensor-controlled layer leave the statistics alone when not training
    upd_t = get_collection(UPDATE_OPS)[3:4]
    run(s, upd_t, istrain => false)
    @test run(s, tensor("batch_normalization/moving_mean:0")) ≈ mm
    # errors name the layer and the shape
    e = try; batch_normalization(constant([1.0, 2.0])); nothing; catch err; err; end
    @test e isa OxiflowError && occursin("batch_normalization", e.msg) && occursin("(2,)", e.msg)
    e = try; batch_normalization(constant([1 2; 3 4])); nothing; catch err; err; end
    @test e isa OxiflowError && occursin("Int64", e.msg)
    @test run(s, y) ≈ jl_bn_train(X, ones(3), zeros(3))        # the graph stays usable
end

@testset "batch_normalization: updates on the parameter device, gradients ($dev)" for (dev, mk) in LAYER_SESSIONS
    reset_default_graph()
    X0 = [0.3 -1.2 2.0; 1.1 0.4 -0.5; -0.7 2.2 0.9; 0.5 0.1 1.7; 0.2 -0.3 0.6]
    W = [0.5 -1.0 0.3; 1.2 0.7 -0.4; -0.6 0.2 0.9; 0.8 -0.5 1.1; -0.2 0.4 0.3]
    g0 = [1.5, 0.7, -0.4]; b0 = [0.1, -0.2, 0.3]
    local x, y
    @pywith tf.device(Oxiflow.assign_to_device(dev == "CPU" ? "/device:CPU:0" : "/device:GPU:0")) begin
        x = Variable(X0; name="x")
        y = batch_normalization(x; training=true, name="bn")
    end
    gamma = tensor("bn/gamma:0"); beta = tensor("bn/beta:0")
    @test gamma.device == "/device:CPU:0"
    loss = sum(y .* W)
    gs = gradients(loss, [x, gamma, beta]; colocate=true)
    s = mk(); init(s)
    run(s, [assign(gamma, g0), assign(beta, b0)])
    gx, gg, gb = run(s, gs)
    @test gx ≈ fd_grad(X -> sum(jl_bn_train(X, g0, b0) .* W), X0) rtol = 1e-6
    @test gg ≈ vec(fd_grad(g -> sum(jl_bn_train(X0, vec(g), b0) .* W), reshape(g0, 1, 3))) rtol = 1e-6
    @test gb ≈ vec(sum(W; dims=1))
    upd = get_collection(UPDATE_OPS)
    run(s, upd)
    @test assigned_device(s, upd[1]) == CPU0                   # with the moving variable
    if dev == "emulated GPU"
        @test assigned_device(s, y) == GPU0
    end
end

@testset "softmax cross-entropy: values, stability, gradients ($dev)" for (dev, mk) in LAYER_SESSIONS
    reset_default_graph()
    L0 = [1.0 -2.0 0.5 3.0; 0.2 0.1 -0.3 0.0; 2.5 -1.5 1.0 -0.5]
    Y = [0.0 0.0 1.0 0.0; 0.25 0.25 0.25 0.25; 1.0 0.0 0.0 0.0]
    lg = Variable(L0; name="logits")
    xe = softmax_cross_entropy_with_logits(lg, Y)
    @test size(xe) == (3,)
    sp = sparse_softmax_cross_entropy_with_logits([2, 0, 3], lg)
    spt = sparse_softmax_cross_entropy_with_logits(labels=constant([2, 0, 3]), logits=lg)
    big = softmax_cross_entropy_with_logits(labels=Y, logits=constant(L0 .* 1000))
    g = gradients(sum(xe), lg)
    W = [0.3, -1.1, 0.7]
    gw = gradients(sum(xe .* W), lg; colocate=true)
    v = Variable([0.4, -1.3, 2.1, 0.2]; name="v")
    h = hessian(softmax_cross_entropy_with_logits(v, [0.0, 1.0, 0.0, 0.0]), v)
    s = mk(); init(s)
    @test run(s, xe) ≈ jl_xent(L0, Y)
    # one op, TF's SoftmaxCrossEntropyWithLogits, which has a GPU kernel
    @test xe.op.type == "SoftmaxCrossEntropyWithLogits"
    @test assigned_device(s, xe) == (dev == "CPU" ? CPU0 : GPU0)
    onehot = Float64[c - 1 == l for l in [2, 0, 3], c in 1:4]
    @test run(s, sp) ≈ jl_xent(L0, onehot)
    @test run(s, spt) ≈ jl_xent(L0, onehot)
    bv = run(s, big)
    @test all(isfinite, bv) && bv ≈ jl_xent(L0 .* 1000, Y)
    P = exp.(L0) ./ sum(exp.(L0); dims=2)
    @test run(s, g) ≈ P - Y                                      # TF's gradient: softmax - labels
    @test run(s, gw) ≈ fd_grad(L -> sum(jl_xent(L, Y) .* W), L0) rtol = 1e-6
    p = exp.([0.4, -1.3, 2.1, 0.2]); p ./= sum(p)
    @test run(s, h) ≈ Diagonal(p) - p * p'                       # second derivatives work
    e = try; softmax_cross_entropy_with_logits(lg, ones(2, 4)); nothing; catch err; err; end
    @test e isa OxiflowError && occursin("(2, 4)", e.msg) && occursin("(3, 4)", e.msg)
    e = try; sparse_softmax_cross_entropy_with_logits([2, 4, 0], lg); nothing; catch err; err; end
    @test e isa OxiflowError && occursin("label 4 at position 2", e.msg)
    # a fed label out of range fails when run (TF's CPU kernel), not a silent loss
    lp = placeholder(Int64; shape=[3])
    bad = sparse_softmax_cross_entropy_with_logits(lp, lg)
    e = try; run(s, bad, lp => [2, 7, 0]); nothing; catch err; err; end
    @test e isa OxiflowError && occursin("7", e.msg) && occursin("GatherV2", e.msg)
    @test run(s, bad, lp => [2, 0, 3]) ≈ run(s, sp)
    @test run(s, xe) ≈ jl_xent(L0, Y)
end

@testset "variables created under control_dependencies initialise (TF's init_scope)" begin
    reset_default_graph()
    a = Variable(1.0; name="a")
    upd = assign(a, a + 1.0)
    local b
    control_dependencies([upd]) do
        b = Variable(5.0; name="b")      # as an optimizer's slots inside control_dependencies(UPDATE_OPS)
    end
    s = Session(); init(s)
    @test run(s, a) == 1.0 && run(s, b) == 5.0                 # init did not run the update
end

@testset "MirroredStrategy: sync step equals one device, async updates per replica" begin
    reset_default_graph()
    X = [0.1 0.5; -0.3 0.8; 0.7 -0.2; 0.4 0.4; -0.6 0.1; 0.9 0.3; 0.2 -0.7; -0.1 -0.4]
    Y = X * [1.5, -2.0] .+ 0.5
    strategy = MirroredStrategy(["/device:CPU:0", "/device:GPU:0"])
    @test num_replicas(strategy) == 2 && strategy.num_replicas_in_sync == 2
    local w, c
    strategy.scope() do
        w = Variable(zeros(2); name="w"); c = Variable(0.0; name="c")
    end
    @test w.device == "/device:CPU:0"
    x = placeholder(Float64; shape=[8, 2], name="x"); y = placeholder(Float64; shape=[8], name="y")
    tr = minimize(strategy, GradientDescentOptimizer(0.1), (xs, ys) -> mean((xs * w + c - ys)^2), x, y)
    @test length(tr.replica_losses) == 2
    s = Session(); init(s)
    l, _ = run(s, [tr.loss, tr.train_op], x => X, y => Y)
    @test l ≈ mean(Y .^ 2)
    # one GD step on the whole batch (Julia's gradient of the mean squared error at 0)
    gw = -2 / 8 * X' * Y; gc = -2 / 8 * sum(Y)
    @test run(s, w) ≈ -0.1 * gw atol = 1e-12
    @test run(s, c) ≈ -0.1 * gc atol = 1e-12
    e = try; minimize(strategy, GradientDescentOptimizer(0.1), xs -> sum(xs), placeholder(Float64; shape=[3, 2])); nothing; catch err; err; end
    @test e isa OxiflowError && occursin("does not split into 2", e.msg)
    # async: each replica applies its own gradient, so one run takes two steps
    tra = minimize(strategy, GradientDescentOptimizer(0.1), (xs, ys) -> mean((xs * w + c - ys)^2), x, y; mode=:async)
    @test length(tra.replica_train_ops) == 2
    init(s)
    run(s, tra.train_op, x => X, y => Y)
    # both replicas read the zero start or one of them read the other's update; either way
    # the loss went down and both slices' gradients were applied
    l1 = run(s, tr.loss, x => X, y => Y)
    @test l1 < mean(Y .^ 2)
    @test run(s, w) != -0.1 * gw
end
