# Custom gradients (ADCME's `register`, TF's `tf.custom_gradient`): the forward values
# against Julia, the gradients against the given backward function (worked out in Julia) or,
# where the backward is the true derivative, against finite differences of the Julia
# function; second derivatives, nested gradients inside a backward, placement of the
# backward's ops, and the errors with the graph left usable.

@testset "register: backward replaces the forward ops' gradient" begin
    reset_default_graph()
    X = [0.5, -1.0, 2.0]
    softplus(x) = log(1 + exp(x))
    sp = register(x -> log(1 + exp(x)), (dy, y, x) -> dy * (1 - 1 / exp(y)))
    x = constant(X)
    y = sp(x)
    s = Session()
    @test run(s, y) ≈ softplus.(X)
    g = gradients(sum(y), x)
    @test startswith(g.name, "gradients/IdentityN_grad/")
    @test run(s, g) ≈ fd_grad(v -> sum(softplus.(v)), X) rtol = 1e-7
    # a seed other than ones reaches the backward as dy
    W = [2.0, -3.0, 0.5]
    @test run(s, gradients(sum(constant(W) .* y), x)) ≈ W .* fd_grad(v -> sum(softplus.(v)), X) rtol = 1e-7
    # only the backward counts: 3x for d(x^2)/dx (through the forward ops as well it would be 5x)
    sq = register(x -> x^2, (dy, y, x) -> 3 * dy * x)
    z = constant(2.0)
    @test run(s, gradients(sq(z), z)) == 6.0
    # Julia values are converted to tensors; the result differentiates twice
    h = hessian(sum(sp(x)), x)
    σ(v) = 1 / (1 + exp(-v))
    @test run(s, h) ≈ Diagonal(σ.(X) .* (1 .- σ.(X))) rtol = 1e-7
    @test run(s, sp([0.0, 1.0])) ≈ softplus.([0.0, 1.0])
    # a batch of unknown size (a placeholder's `nothing` dimension) passes through
    xp = placeholder(Float64; shape=[nothing])
    yv, gv = run(s, [sp(xp), gradients(sum(sp(xp)), xp)], xp => [X; 3.0])
    @test yv ≈ softplus.([X; 3.0]) && gv ≈ σ.([X; 3.0])
    # a gradient reaches x both through the custom op and around it
    @test run(s, gradients(sum(sp(x) + x .* x), x)) ≈ fd_grad(v -> sum(softplus.(v) + v .* v), X) rtol = 1e-7
end

@testset "register: several outputs, a non-float input, nested gradients" begin
    reset_default_graph()
    s = Session()
    # multiple=true: backward(dy1, dy2, y1, y2, a, b)
    fm = register((a, b) -> (a * b, a + b), (d1, d2, y1, y2, a, b) -> (d1 * b + d2, d1 * a + 10 * d2); multiple=true)
    a = constant(3.0); b = constant(5.0)
    p, q = fm(a, b)
    @test run(s, [p, q]) == [15.0, 8.0]
    @test run(s, gradients(p + 2q, [a, b])) == [5.0 + 2.0, 3.0 + 20.0]
    # no gradient reaches q: its dy is zeros
    @test run(s, gradients(p, [a, b])) == [5.0, 3.0]
    # an Int64 input gets nothing
    scale = register((x, n) -> x * cast(n, Float64), (dy, y, x, n) -> (dy * cast(n, Float64), nothing))
    x = constant([1.0, 2.0]); n = constant(4)
    @test run(s, scale(x, n)) == [4.0, 8.0]
    @test run(s, gradients(sum(scale(x, n)), x)) == [4.0, 4.0]
    # a backward that runs its own backward pass (ADCME's newton_raphson_with_grad does)
    cube = register(x -> x^3, (dy, y, x) -> dy .* gradients(sum(x^3), x))
    X = [0.5, -2.0]
    v = constant(X)
    @test run(s, gradients(sum(cube(v)), v)) ≈ 3 .* X .^ 2
    # tf.custom_gradient: (y, grad_fn), one and several outputs
    clip = tf.custom_gradient(x -> (x * 1.0, dy -> clamp(dy, -1.0, 1.0)))
    @test run(s, gradients(sum(constant([3.0, -0.5]) .* clip(v)), v)) == [1.0, -0.5]
    two = tf.custom_gradient(x -> ((sin(x), cos(x)), (d1, d2) -> d1 + 2d2))
    u1, u2 = two(v)
    @test run(s, [u1, u2]) ≈ [sin.(X), cos.(X)]
    @test run(s, gradients(sum(u1) + sum(u2), v)) == [3.0, 3.0]
end

@testset "register: the backward's ops colocate with the forward op" begin
    reset_default_graph()
    x = constant([1.0, 2.0])
    fw = @pywith tf.device("/device:CPU:0") begin
        register(x -> exp(x), (dy, y, x) -> dy * y)(x)
    end
    # TF's colocate_gradients_with_ops: the forward op's device, not the active scope
    g = @pywith tf.device("/device:GPU:0") begin
        gradients(sum(fw), x; colocate=true)
    end
    s = Session()
    @test assigned_device(s, g) == CPU0
    @test run(s, g) ≈ exp.([1.0, 2.0])
    g2 = @pywith tf.device("/device:GPU:0") begin
        gradients(sum(fw), x)
    end
    @test assigned_device(Session(), g2) == GPU0
    # a tensor of an earlier graph is refused, not answered for another node
    reset_default_graph()
    e = try; assigned_device(Session(), g2); nothing; catch err; err; end
    @test e isa OxiflowError && occursin("another graph", e.msg)
end

@testset "register: errors name the input and leave the graph usable" begin
    reset_default_graph()
    s = Session()
    x = constant([1.0, 2.0, 3.0])
    nodes() = Oxiflow.oxf_graph_num_nodes(Oxiflow.get_default_graph())
    # each failing pass removes what it built, the backward's nodes included
    function grad_error(y)
        n = nodes()
        e = try gradients(y, x); nothing catch err; err end
        @test nodes() == n
        return e
    end
    bad_size = register(x -> sum(x), (dy, y, x) -> dy)
    e = grad_error(bad_size(x))
    @test e isa OxiflowError && occursin("register: the gradient for input 1 has dtype Float64 and size (), but the input has dtype Float64 and size (3,)", e.msg)
    bad_count = register((a, b) -> a + b, (dy, y, a, b) -> dy)
    e = grad_error(sum(bad_count(x, x)))
    @test e isa OxiflowError && occursin("returned 1 gradients for 2 inputs", e.msg)
    bad_dtype = register(x -> x, (dy, y, x) -> cast(dy, Float32))
    e = grad_error(sum(bad_dtype(x)))
    @test e isa OxiflowError && occursin("has dtype Float32", e.msg)
    throws = register(x -> 2x, (dy, y, x) -> error("user bug"))
    e = grad_error(sum(throws(x)))
    @test e isa ErrorException && e.msg == "user bug"
    @test_throws OxiflowError register(x -> (x, x), (dy, y, x) -> dy)(x)
    # inside a loop body the engine builds the gradient without Julia
    _, w = while_loop((k, w) -> k < 2, (k, w) -> (k + 1, register(v -> 2v, (dy, y, v) -> 2dy)(w)), [constant(0), x])
    e = grad_error(sum(w))
    @test e isa OxiflowError && occursin("has a custom gradient", e.msg) && occursin("while_loop", e.msg)
    # the graph still differentiates and runs
    good = register(x -> 2x, (dy, y, x) -> 2dy)
    @test run(s, gradients(sum(good(x)), x)) == [2.0, 2.0, 2.0]
    @test run(s, w) == 4 .* [1.0, 2.0, 3.0]
end
