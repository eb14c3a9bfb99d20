# TF1's names at the root of `tf` (tf_compat.jl), as ADCME's docs call them, against Julia
# Base with TF's conventions translated by hand: 0-based indices and axes, row-major
# `tf.reshape`, size -1 in `tf.slice` meaning "to the end".
using Random, Statistics, LinearAlgebra

@testset "tf.* TF1 root names: values against Julia" begin
    reset_default_graph()
    A = reshape(collect(1.0:12.0), 3, 4)
    a = constant(A)
    s = Session()
    @test run(s, tf.gather(a, [2, 0])) == A[[3, 1], :]
    @test run(s, tf.gather(a, constant([3]), axis=1)) == A[:, [4]]
    @test run(s, tf.gather(a, [1], -1)) == A[:, [2]]
    @test run(s, tf.gather_nd(a, [0 1; 2 3])) == [A[1, 2], A[3, 4]]
    @test run(s, tf.scatter_nd(reshape([0, 2], 2, 1), [5.0, 7.0], [4])) == [5.0, 0.0, 7.0, 0.0]
    @test run(s, tf.slice(a, [1, 1], [2, -1])) == A[2:3, 2:4]
    @test run(s, tf.slice(a, [0, 2], [1, 1])) == A[1:1, 3:3]
    p1, p2 = tf.split(a, 2, axis=1)
    @test run(s, p1) == A[:, 1:2] && run(s, p2) == A[:, 3:4]
    q = tf.split(a, [1, 2], 0)
    @test length(q) == 2 && run(s, q[2]) == A[2:3, :]
    @test run(s, tf.tile(a, [2, 1])) == repeat(A, 2, 1)
    @test run(s, tf.reverse(a, [0])) == reverse(A, dims=1) && run(s, tf.reverse(a, -1)) == reverse(A, dims=2)
    P = run(s, tf.pad(a, [[1, 0], [0, 2]]))
    @test size(P) == (4, 6) && P[2:4, 1:4] == A && sum(P) == sum(A)
    @test run(s, tf.pad(a, [1 1; 0 0]; constant_values=-1.0))[1, :] == fill(-1.0, 4)
    sh = tf.shape(a)
    @test sh.dtype == Int32 && run(s, sh) == Int32[3, 4]
    @test run(s, tf.norm(a)) ≈ norm(A) && run(s, tf.norm(a, ord=1)) ≈ sum(abs.(A))
    M = [4.0 1.0; 1.0 3.0]
    @test run(s, tf.matrix_inverse(M)) ≈ inv(M) && run(s, tf.matrix_determinant(M)) ≈ det(M)
    @test run(s, tf.matrix_solve(M, reshape([1.0, 2.0], 2, 1))) ≈ M \ [1.0, 2.0]
    @test run(s, tf.matrix_transpose(a)) == permutedims(A) && run(s, tf.trace(M)) == tr(M)
    @test run(s, tf.linalg.inv(M)) ≈ inv(M) && run(s, tf.linalg.diag_part(M)) == diag(M)   # arrays become tensors
    x = Variable([1.0, 2.0])
    f = x[1]^3 * x[2]
    H = tf.hessians(f, x)
    init(s)
    @test H isa Vector && run(s, H[1]) ≈ [6*1.0*2.0 3*1.0^2; 3*1.0^2 0.0]
end

@testset "tf.gradients sums ys (TF's rule, not ADCME's Jacobian); logical ops" begin
    reset_default_graph()
    u = Variable([1.0, 2.0, 3.0]); v = Variable(2.0); w = Variable([0.5, -1.0, 2.0])
    s = Session(); init(s)
    g = tf.gradients(u^2, u)
    @test g isa Vector && run(s, g[1]) == [2.0, 4.0, 6.0]              # d sum(u²)/du, shaped like u
    @test run(s, tf.gradients([u^2, v * u], [u, v])) == [[2.0, 4.0, 6.0] .+ 2.0, 6.0]
    gw = tf.gradients(u^2, u; grad_ys=w)[1]
    @test run(s, gw) == 2 .* [1.0, 2.0, 3.0] .* [0.5, -1.0, 2.0]
    @test run(s, tf.gradients(gw, w)[1]) == [2.0, 4.0, 6.0]            # differentiable in grad_ys
    @test tf.gradients(v, u) == [nothing]
    a = constant([true, true, false, false]); b = constant([true, false, true, false])
    @test run(s, a & b) == [true, false, false, false] && run(s, a | b) == [true, true, true, false]
    @test run(s, !a) == [false, false, true, true] && run(s, a & true) == [true, true, false, false]
    @test run(s, false | b) == [true, false, true, false]
    @test run(s, tf.logical_and(a, b)) == run(s, a & b) && run(s, tf.math.logical_or(a, b)) == run(s, a | b)
    @test run(s, tf.logical_not(a)) == [false, false, true, true]
    @test run(s, tf.not_equal(constant([1, 2]), 1)) == [false, true]
    e = try; constant([1.0]) & a; nothing; catch err; err; end
    @test e isa OxiflowError && occursin("needs Bool operands", e.msg)
end

@testset "tf.* TF1 root names: random draws, variables, placeholders, compat.v1" begin
    reset_default_graph()
    tf.set_random_seed(5)
    r = tf.random_normal((2000,), dtype=tf.float64)
    u = tf.random_uniform([2000]; minval=2.0, maxval=4.0)
    @test r.dtype == Float64 && u.dtype == Float32          # TF1's default dtype: float32
    s = Session()
    rv, uv = run(s, [r, u])
    @test abs(mean(rv)) < 0.1 && abs(std(rv) - 1) < 0.1
    @test all(2 .<= uv .< 4) && abs(mean(uv) - 3) < 0.1
    @test run(s, r) != rv                                   # a new draw per run
    # one graph seed: the same draws again in a new graph and session
    reset_default_graph(); tf.set_random_seed(5)
    @test run(Session(), tf.random_normal((2000,), dtype=tf.float64)) == rv
    # TF1's positional order (shape, mean, stddev, dtype, seed); tensor parameters
    # differentiate (the reparameterization μ + σ ε)
    reset_default_graph(); tf.set_random_seed(5)
    @test run(Session(), tf.random_normal((2000,), 0, 1, tf.float64)) == rv
    reset_default_graph(); tf.set_random_seed(5)
    @test run(Session(), tf.random_normal((2000,), 3.0, 2.0, dtype=tf.float64)) ≈ 3 .+ 2 .* rv
    reset_default_graph()
    μ, σ = constant([1.0, -1.0]), constant([0.5, 2.0])
    z = tf.random_normal((2,), μ, σ, dtype=tf.float64)
    s = Session()
    zv, gμ, gσ = run(s, [z, gradients(sum(z), μ), gradients(sum(z), σ)])
    @test gμ == [1.0, 1.0] && gσ ≈ (zv .- [1.0, -1.0]) ./ [0.5, 2.0]     # ∂z/∂σ = ε
    e = try; tf.random_normal((2,), constant(Float32[0, 0]), 1.0, tf.float64); nothing; catch err; err; end
    @test e isa OxiflowError && occursin("normal: mean", e.msg)
    uv2 = run(s, tf.random_uniform((1000,), 5, 7, tf.float64))
    @test all(5 .<= uv2 .< 7) && eltype(uv2) == Float64
    lo = constant([0.0, 10.0])
    uv3 = run(s, tf.random_uniform((2,), lo, lo + 1, tf.float64))
    @test 0 <= uv3[1] < 1 && 10 <= uv3[2] < 11
    tf.compat.v1.logging.set_verbosity(tf.compat.v1.logging.WARNING)   # accepted, as TF's

    reset_default_graph()
    v = tf.Variable([1.0, 2.0]; name="v")
    x = tf.placeholder(tf.float64, shape=[nothing, 2])
    y = tf.compat.v1.reduce_sum(x * v)   # tf.compat.v1 is tf
    tf.compat.v1.logging.set_verbosity(tf.compat.v1.logging.ERROR)
    s = Session()
    run(s, tf.global_variables_initializer())
    @test run(s, y, x => [1.0 1.0; 2.0 0.5]) == 1 + 2 + 2 + 1
    @test tf.trainable_variables() == [v] && tf.global_variables() == [v]
    run(s, tf.group(tf.assign(v, [3.0, 4.0])))
    @test run(s, v) == [3.0, 4.0]
    @test tf.get_default_graph() === Oxiflow.get_default_graph()
    e = try; tf.placeholder(tf.float64); nothing; catch err; err; end
    @test e isa OxiflowError && occursin("tf.placeholder", e.msg) && occursin("unknown rank", e.msg)
    e = try; tf.gather(constant([1.0, 2.0]), [0], axis=1); nothing; catch err; err; end
    @test e isa OxiflowError && occursin("tf.gather", e.msg) && occursin("axis 1", e.msg)
    e = try; tf.gather(constant([1.0, 2.0]), [0.5]); nothing; catch err; err; end
    @test e isa OxiflowError && occursin("tf.gather: indices must be integers", e.msg)
    e = try; run(s, tf.split(constant(ones(3, 4)), [1, 1], 0)); nothing; catch err; err; end
    @test e isa OxiflowError && occursin("SplitV", e.msg) && occursin("has size 3", e.msg)
    e = try; run(s, tf.gather(constant([1.0, 2.0]), [5])); nothing; catch err; err; end
    @test e isa OxiflowError && occursin("GatherV2", e.msg)
    @test run(s, v) == [3.0, 4.0]                           # the session stays usable
    e = try; tf.slice(constant(ones(2, 2)), [0], [1]); nothing; catch err; err; end
    @test e isa OxiflowError && occursin("tf.slice", e.msg) && occursin("2 entries", e.msg)
    e = try; tf.slice(constant(ones(2, 3)), constant([0, 0]), [1, 1]); nothing; catch err; err; end
    @test e isa OxiflowError && occursin("integer vectors", e.msg)
    e = try; tf.slice(constant(ones(2, 3)), [1, 1], [2, 1]); nothing; catch err; err; end
    @test e isa OxiflowError && occursin("go past dimension 0", e.msg)
    @test_throws OxiflowError tf.zeros([-1, 2])
    # past the end of a dimension known only when run: an error then, not a shorter slice
    p = placeholder(Float64; shape=[nothing])
    e = try; run(s, tf.slice(p, [3], [2]), p => ones(4)); nothing; catch err; err; end
    @test e isa OxiflowError && occursin("EnsureShape", e.msg)
    @test run(s, tf.slice(p, [2], [2]), p => [1.0, 2.0, 3.0, 4.0]) == [3.0, 4.0]
    @test run(s, tf.slice(p, [1], [-1]), p => [1.0, 2.0, 3.0]) == [2.0, 3.0]
end

@testset "tf.print, tf.Print, print_tensor: what they write, and their values and gradients" begin
    reset_default_graph()
    x = Variable([1.0, 2.0, 3.0])
    y = bind(2x, tf.print("x is", x, "and", constant(reshape(collect(1:12), 3, 4)); summarize=1))
    z = print_tensor(constant([1.5 2.0; 3.0 4.0]), "the matrix")
    w = tf.Print(x, [x, constant(true)], "data: ")
    g = gradients(sum(w .* w), x)
    s = Session(); init(s)
    local vals
    out = captured_stderr(() -> (vals = run(s, [y, z, g])))
    @test vals[1] == [2.0, 4.0, 6.0] && vals[2] == [1.5 2.0; 3.0 4.0]
    @test vals[3] == [2.0, 4.0, 6.0]                         # the gradient passes to the input only
    @test occursin("x is [1 ... 3] and [[1 ... 10]\n ...\n [3 ... 12]]\n", out)   # NumPy's elision
    @test occursin("the matrix\n[[1.5 2]\n [3 4]]\n", out)
    @test occursin("data: [1 2 3] true\n", out)
    @test captured_stderr(() -> run(s, 2x)) == ""            # not bound: not run, nothing printed
    @test captured_stderr(() -> run(s, tf.print("only text {}"))) == "only text { }\n"
    e = try; tf.Print(x, [], "x"; first_n=2); nothing; catch err; err; end
    @test e isa OxiflowError && occursin("first_n", e.msg)
end

@testset "debug prints a failed run's error instead of raising it" begin
    reset_default_graph()
    s = Session()
    p = placeholder(Float64; shape=[2])
    @test debug(s, constant([1.0, 2.0]) .* 2) == [2.0, 4.0]
    path = tempname()
    r = open(path, "w") do io
        redirect_stdout(() -> debug(s, p * 2), io)
    end
    @test r === nothing
    @test occursin("You must feed a value for placeholder tensor", read(path, String))
    @test_throws OxiflowError run(s, p * 2)
end
