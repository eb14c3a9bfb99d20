# `cond` (the functional `If` op). Oracles: Julia's own `if`, finite differences.

@testset "cond runs the branch its condition picks, with captured tensors" begin
    reset_default_graph()
    s = Session()
    X = rand(3); W = rand(3)
    x = placeholder(Float64; shape=[3]); p = placeholder(Bool)
    w = constant(W)
    y = cond(p, () -> sin(x) .* w, () -> x .^ 2 + 1.0)
    @test size(y) == (3,)
    @test run(s, y, x => X, p => true) ≈ sin.(X) .* W
    @test run(s, y, x => X, p => false) ≈ X .^ 2 .+ 1.0
    # several values, Julia values among them; a branch returning a captured tensor as is
    a, b = cond(p, () -> (x, sum(x)), () -> (2x, 0.0))
    @test run(s, [a, b], x => X, p => true) == [X, sum(X)]
    @test run(s, [a, b], x => X, p => false) == [2X, 0.0]
    # a Julia Bool just calls the chosen function
    @test cond(true, () -> 1, () -> 2) == 1
    # nested: the inner cond captures through the outer branch
    q = placeholder(Bool)
    z = cond(p, () -> cond(q, () -> x .* w, () -> x - w), () -> -x)
    for (pv, qv) in ((true, true), (true, false), (false, true))
        @test run(s, z, x => X, p => pv, q => qv) ≈ (pv ? (qv ? X .* W : X - W) : -X)
    end
    # tf.cond is the same function
    @test run(s, tf.cond(p, () -> x + 1.0, () -> x - 1.0), x => X, p => false) ≈ X .- 1
end

@testset "cond evaluates only the taken branch" begin
    reset_default_graph()
    s = Session()
    x = constant([1.0, 2.0, 3.0]); p = placeholder(Bool)
    # false_fn gathers at index 7 of a length-3 vector: it fails if it ever runs
    y = cond(p, () -> -x, () -> x[constant([7, 7, 7])])
    @test run(s, y, p => true) == [-1.0, -2.0, -3.0]
    e = try; run(s, y, p => false); nothing; catch err; err; end
    @test e isa OxiflowError && occursin("If", e.msg) && occursin("else_branch", e.msg) && occursin("GatherV2", e.msg)
    @test run(s, y, p => true) == [-1.0, -2.0, -3.0]      # the session is still usable
end

@testset "cond gradients match finite differences, also second derivatives" begin
    reset_default_graph()
    s = Session()
    V0 = rand(3); W = rand(3); c0 = 0.7
    v = Variable(V0); c = Variable(c0); p = placeholder(Bool)
    L = sum(cond(p, () -> sin(v) .* W * c, () -> v .^ 3 + c))
    gv, gc = gradients(L, [v, c])
    init(s)
    for taken in (true, false)
        f(V, C) = taken ? sum(sin.(V) .* W * C) : sum(V .^ 3 .+ C)
        @test run(s, gv, p => taken) ≈ fd_grad(V -> f(V, c0), V0) rtol = 1e-6
        @test run(s, gc, p => taken) ≈ fd_grad(C -> f(V0, C[1]), [c0])[1] rtol = 1e-6
    end
    # a second derivative through the If of the branches' gradients: d/dv sum(dL/dv)
    H = gradients(sum(gv), v)
    @test run(s, H, p => true) ≈ -sin.(V0) .* W * c0 rtol = 1e-10
    @test run(s, H, p => false) ≈ 6 .* V0 rtol = 1e-10
end

@testset "cond errors name If and the disagreement; the graph stays usable" begin
    reset_default_graph()
    x = constant(rand(3)); p = placeholder(Bool)
    err(f) = try; f(); nothing; catch e; e; end
    e = err(() -> cond(p, () -> x, () -> sum(x)))
    @test e isa OxiflowError && occursin("If", e.msg) && occursin("output 0", e.msg)
    e = err(() -> cond(p, () -> (x, x), () -> x))
    @test e isa OxiflowError && occursin("2 values", e.msg)
    e = err(() -> cond(constant(1.0), () -> x, () -> x))
    @test e isa OxiflowError && occursin("Bool scalar", e.msg)
    e = err(() -> cond(p, () -> Variable(1.0), () -> constant(1.0)))
    @test e isa OxiflowError && occursin("variable", e.msg)
    # assigning a variable inside a branch or body is refused (it would write through the
    # captured value, not to the variable), also when nothing reads the assignment
    v = Variable(1.0)
    e = err(() -> cond(p, () -> assign(v, 2.0), () -> v + 0.0))
    @test e isa OxiflowError && occursin("If", e.msg) && occursin("then_branch", e.msg) && occursin("Assign", e.msg)
    e = err(() -> cond(p, () -> (assign(v, 2.0); v + 1.0), () -> v + 0.0))
    @test e isa OxiflowError && occursin("Assign", e.msg)
    e = err(() -> while_loop((k, x) -> k < 2, (k, x) -> (k + 1, assign(v, x)), [constant(0), constant(1.0)]))
    @test e isa OxiflowError && occursin("While", e.msg) && occursin("body", e.msg) && occursin("Assign", e.msg)
    e = err(() -> cond(p, () -> placeholder(Float64), () -> constant(1.0)))
    @test e isa OxiflowError && occursin("Placeholder", e.msg)
    @test run(Session(), cond(p, () -> x, () -> 2x), p => false) ≈ 2 .* run(Session(), x)
end

@testset "while_loop matches a Julia loop, with captures, TensorArray and nesting" begin
    reset_default_graph()
    s = Session()
    i, x = while_loop((i, x) -> i < 10, (i, x) -> (i + 1, x * 1.1), [constant(0), constant(1.0)])
    @test run(s, [i, x]) ≈ [10, 1.1^10]
    # a placeholder the body reads, and maximum_iterations
    a = placeholder(Float64; shape=[2])
    _, y = while_loop((k, y) -> k < 100, (k, y) -> (k + 1, sin(y) .* a), [constant(0), constant([0.3, -0.2])]; maximum_iterations=7)
    A = [1.5, 0.7]; Y = [0.3, -0.2]
    for _ in 1:7; Y = sin.(Y) .* A; end
    @test run(s, y, a => A) ≈ Y
    # TF's limits: 0 and a negative maximum_iterations run no iteration
    for m in (0, -1)
        @test run(s, while_loop(z -> z < 1000.0, z -> 2z, constant(1.0); maximum_iterations=m)) == 1.0
    end
    @test_throws OxiflowError while_loop(z -> z < 1000.0, z -> 2z, constant(1.0); maximum_iterations=2.5)
    # a single loop variable comes back as one tensor; zero iterations return the start
    @test run(s, while_loop(z -> sum(z) > 100.0, z -> 2z, constant([1.0, 2.0]))) == [1.0, 2.0]
    # TensorArray: u_k = a .* u_{k-1} stored at each step (ADCME's pattern)
    ta = write(TensorArray(5), 1, constant([1.0, 2.0]))
    _, ta = while_loop((k, ta) -> k <= 5, (k, ta) -> (k + 1, write(ta, k, read(ta, k - 1) .* a)), [constant(2), ta])
    U = zeros(5, 2); U[1, :] = [1.0, 2.0]
    for k in 2:5; U[k, :] = U[k-1, :] .* A; end
    @test run(s, stack(ta), a => A) ≈ U
    @test size(ta) == 5 && size(stack(ta)) == (5, 2)
    # cond inside the body
    _, w = while_loop((k, w) -> k < 4, (k, w) -> (k + 1, cond(k < 2, () -> w + 1.0, () -> 2w)), [constant(0), constant(1.0)])
    @test run(s, w) == ((1.0 + 1 + 1) * 2 * 2)
    @test run(s, tf.while_loop((k, v) -> k < 3, (k, v) -> (k + 1, v * 3.0), [constant(0), constant(1.0)])[2]) == 27.0
end

@testset "while_loop gradients match finite differences" begin
    reset_default_graph()
    s = Session()
    A0 = [1.2, 0.8]; U0 = [0.4, -0.6]; W = [0.5, 1.5]
    a = Variable(A0); u0 = Variable(U0)
    ta = write(TensorArray(6), 1, u0)
    _, ta = while_loop((k, ta) -> k <= 6, (k, ta) -> (k + 1, write(ta, k, sin(read(ta, k - 1)) .* a)), [constant(2), ta])
    L = sum(stack(ta) * W)
    ga, gu = gradients(L, [a, u0])
    init(s)
    function f(Av, Uv)
        U = zeros(6, 2); U[1, :] = Uv
        for k in 2:6; U[k, :] = sin.(U[k-1, :]) .* Av; end
        return sum(U * W)
    end
    @test run(s, L) ≈ f(A0, U0)
    @test run(s, ga) ≈ fd_grad(Av -> f(Av, U0), A0) rtol = 1e-6
    @test run(s, gu) ≈ fd_grad(Uv -> f(A0, Uv), U0) rtol = 1e-6
    # back_prop=false stops the gradient at the loop's outputs
    _, z = while_loop((k, z) -> k < 3, (k, z) -> (k + 1, z .* a), [constant(0), u0]; back_prop=false)
    @test gradients(sum(z), a) === nothing
    # second derivatives through the loop (WhileGradGrad): d/da and d/du0 of sum(dL/da),
    # against finite differences of the hand-written adjoint of f
    function f_grad_a(Av, Uv)
        U = zeros(6, 2); U[1, :] = Uv
        for k in 2:6; U[k, :] = sin.(U[k-1, :]) .* Av; end
        Ub = repeat(W', 6); Ab = zeros(2)
        for k in 6:-1:2
            Ab .+= Ub[k, :] .* sin.(U[k-1, :])
            Ub[k-1, :] .+= Ub[k, :] .* Av .* cos.(U[k-1, :])
        end
        return Ab
    end
    @test f_grad_a(A0, U0) ≈ fd_grad(Av -> f(Av, U0), A0) rtol = 1e-6
    haa, hau = gradients(sum(ga), [a, u0])
    @test run(s, haa) ≈ fd_grad(Av -> sum(f_grad_a(Av, U0)), A0) rtol = 1e-6
    @test run(s, hau) ≈ fd_grad(Uv -> sum(f_grad_a(A0, Uv)), U0) rtol = 1e-6
    # a third derivative is an error naming WhileGradGrad
    e = try; gradients(sum(haa), a); nothing; catch err; err; end
    @test e isa OxiflowError && occursin("WhileGradGrad", e.msg)
end

@testset "while_loop gradients through state the body overwrites in place" begin
    # The gradient rebuilds a loop variable the body only updates by scatters (a
    # TensorArray, scatter_update/scatter_add) from its final value, undoing each
    # iteration's writes: rows written twice (a ring buffer), reads of earlier rows, two
    # scatters in a row on one variable and a matrix updated element by element must all
    # give back the value each iteration saw. Oracle: finite differences of a Julia loop.
    reset_default_graph()
    s = Session()
    A0 = [0.9, 1.1]; T0 = 0.7; W1 = [0.5 -1.0; 2.0 0.3; -0.7 1.2]; W2 = [1.0, -2.0, 0.5, 3.0]; W3 = [0.2, -0.4]
    a = Variable(A0); θ = Variable(T0)
    ring = write(TensorArray(3), 1, constant([0.3, -0.2]))
    hist = write(TensorArray(9), 1, constant([0.0, 0.0]))
    acc = constant(zeros(4)); M = constant(zeros(3, 3))
    function body(k, ring, acc, M, hist)
        prev = read(ring, mod(k - 2, 3) + 1)               # the row written last iteration
        v = sin(prev) .* a + θ
        ring = write(ring, mod(k - 1, 3) + 1, v)           # overwrites a row of 3 iterations ago
        acc = scatter_add(acc, mod(k, 4) + 1, θ * v[1])
        acc = scatter_update(acc, mod(k + 1, 4) + 1, v[2] * acc[1])
        M = scatter_update(M, mod(k, 3) + 1, mod(k + 1, 3) + 1, v[1] + 0.5 * M[1, 1])
        (k + 1, ring, acc, M, write(hist, k, v .* v))
    end
    _, ring_n, acc_n, M_n, hist_n = while_loop((k, r...) -> k <= 9, body, [constant(2), ring, acc, M, hist])
    L = sum(stack(ring_n) .* W1) + sum(acc_n .* W2) + sum(M_n .* M_n) + sum(stack(hist_n) * W3)
    ga, gθ = gradients(L, [a, θ])
    init(s)
    function f(Av, Tv)
        R = zeros(3, 2); R[1, :] = [0.3, -0.2]; H = zeros(9, 2); acc = zeros(4); M = zeros(3, 3)
        for k in 2:9
            v = sin.(R[mod(k - 2, 3) + 1, :]) .* Av .+ Tv
            R[mod(k - 1, 3) + 1, :] = v
            acc[mod(k, 4) + 1] += Tv * v[1]
            acc[mod(k + 1, 4) + 1] = v[2] * acc[1]
            M[mod(k, 3) + 1, mod(k + 1, 3) + 1] = v[1] + 0.5 * M[1, 1]
            H[k, :] = v .* v
        end
        return sum(R .* W1) + sum(acc .* W2) + sum(M .* M) + sum(H * W3)
    end
    @test run(s, L) ≈ f(A0, T0)
    @test run(s, ga) ≈ fd_grad(Av -> f(Av, T0), A0) rtol = 1e-6
    @test run(s, gθ) ≈ fd_grad(Tv -> f(A0, Tv[1]), [T0])[1] rtol = 1e-6
    # the same state as a TensorArray of many rows: the gradient stays right at every length
    for n in (1, 2, 50)
        reset_default_graph(); s = Session()
        θ = Variable(T0)
        ta = write(TensorArray(n + 1), 1, constant([1.0, 0.5]))
        _, ta = while_loop((k, ta) -> k <= n + 1, (k, ta) -> (k + 1, write(ta, k, cos(read(ta, k - 1)) * θ)), [constant(2), ta])
        g = gradients(sum(stack(ta)), θ)
        init(s)
        fn(Tv) = (U = zeros(n + 1, 2); U[1, :] = [1.0, 0.5]; for k in 2:n+1; U[k, :] = cos.(U[k-1, :]) * Tv; end; sum(U))
        @test run(s, g) ≈ fd_grad(Tv -> fn(Tv[1]), [T0])[1] rtol = 1e-6
    end
end

@testset "a TensorArray without element shape enters while_loop; cond returns TensorArrays" begin
    # ADCME's own test: the body writes the array through a cond, the first element there
    reset_default_graph()
    s = Session()
    A = rand(10)
    a = constant(A)
    function body(i, var)
        var = tf.cond(tf.equal(i, 1), () -> write(var, i, a), () -> write(var, i, 2 * read(var, i - 1)))
        return i + 1, var
    end
    out_i, out_ta = tf.while_loop((i, var) -> tf.less(i, 11), body, [constant(1, dtype=Int32), TensorArray(10)])
    @test out_ta isa TensorArray && size(stack(out_ta)) == (10, 10)
    @test run(s, stack(out_ta)) ≈ [2.0^(i - 1) * A[j] for i in 1:10, j in 1:10]
    @test run(s, gradients(sum(read(out_ta, 10)), a)) ≈ 512 * ones(10)
    # a cond returning a TensorArray outside a loop
    ta = write(TensorArray(3), 1, constant([1.0, 2.0]))
    p = placeholder(Bool)
    c = cond(p, () -> write(ta, 2, constant([3.0, 4.0])), () -> ta)
    @test c isa TensorArray
    @test run(s, stack(c), p => true) == [1.0 2.0; 3.0 4.0; 0.0 0.0]
    @test run(s, stack(c), p => false) == [1.0 2.0; 0.0 0.0; 0.0 0.0]
    err(f) = try; f(); nothing; catch e; e; end
    e = err(() -> cond(p, () -> ta, () -> stack(ta)))
    @test e isa OxiflowError && occursin("TensorArray of size 3 in true_fn and a tensor in false_fn", e.msg)
    # a body that never writes the array: its element shape stays unknown
    e = err(() -> while_loop((i, t) -> i < 3, (i, t) -> (i + 1, t), [constant(0), TensorArray(4)]))
    @test e isa OxiflowError && occursin("loop variable 2", e.msg) && occursin("writes nothing", e.msg)
    # a body that reads before any write
    e = err(() -> while_loop((i, t) -> i < 3, (i, t) -> (i + 1, write(t, i + 1, read(t, 1))), [constant(0), TensorArray(4)]))
    @test e isa OxiflowError && occursin("nothing was written", e.msg)
    @test run(s, stack(c), p => true)[2, :] == [3.0, 4.0]     # the graph is still usable
end

@testset "pmap with an index range (ADCME's three-argument form)" begin
    reset_default_graph()
    s = Session()
    x = constant(ones(10))
    y3 = pmap(1:10, x) do z
        z[2] + cast(Float64, z[1])
    end
    @test run(s, y3) == collect(2.0:11.0)
    y4 = pmap(z -> cast(Float64, z[1]) * z[2] - z[3], 2:2:6, [constant([1.0, 2.0, 3.0]), constant([0.5, 0.5, 0.5])])
    @test run(s, y4) == [2 * 1.0 - 0.5, 4 * 2.0 - 0.5, 6 * 3.0 - 0.5]
    @test run(s, pmap(z -> 2z, [3, 1, 2], Tensor[])) == [6, 2, 4]
end

@testset "while_loop errors name While and the loop variable" begin
    reset_default_graph()
    err(f) = try; f(); nothing; catch e; e; end
    e = err(() -> while_loop((x,) -> sum(x) < 1.0, x -> sum(x), constant([1.0, 2.0])))
    @test e isa OxiflowError && occursin("While", e.msg) && occursin("loop variable 0", e.msg)
    e = err(() -> while_loop(x -> x, x -> x, constant(1.0)))
    @test e isa OxiflowError && occursin("Bool scalar", e.msg)
    e = err(() -> while_loop((i, x) -> i < 3, (i, x) -> i + 1, [constant(0), constant(1.0)]))
    @test e isa OxiflowError && occursin("1 values for 2 loop variables", e.msg)
    e = err(() -> while_loop((k, t) -> k < 2, (k, t) -> (k + 1, t), [constant(0), TensorArray(3)]))
    @test e isa OxiflowError && occursin("element shape", e.msg)
    # a failing body names the iteration; the session stays usable
    k = placeholder(Int64)
    _, v = while_loop((i, v) -> i < 3, (i, v) -> (i + 1, v + constant([1.0, 2.0, 3.0])[reshape(k + i, [1])]), [constant(0), constant([0.0])])
    s = Session()
    e = err(() -> run(s, v, k => 2))
    @test e isa OxiflowError && occursin("While", e.msg) && occursin("iteration 2", e.msg)
    @test run(s, v, k => 1) == [1.0 + 2.0 + 3.0]
end

@testset "map applies f to each slice, like Julia's mapslices; differentiable" begin
    reset_default_graph()
    s = Session()
    A = rand(5, 3); B = rand(5, 3)
    @test run(s, map(x -> sum(x), constant(A))) ≈ vec(sum(A; dims=2))
    @test run(s, map(x -> 2x, constant(A))) ≈ 2A
    @test run(s, map(xy -> xy[1] .* xy[2], [constant(A), constant(B)])) ≈ A .* B
    w = constant([1.0, 2.0, 3.0])
    @test run(s, map(x -> sum(x .* w), constant(A))) ≈ A * [1.0, 2.0, 3.0]   # captures w
    v = Variable(A)
    init(s)
    @test run(s, gradients(sum(map(x -> sin(x) .* w, v)), v)) ≈ cos.(A) .* [1.0 2.0 3.0]
    e = try; map(x -> x, [constant(A), constant(rand(4, 3))]); nothing; catch err; err; end
    @test e isa OxiflowError && occursin("first dimensions differ", e.msg)
    # pmap (ADCME's parallel map) gives map's result, for one tensor and for several
    @test run(s, pmap(x -> sum(x .* w), constant(A))) ≈ A * [1.0, 2.0, 3.0]
    @test run(s, pmap(xy -> xy[1] - xy[2], [constant(A), constant(B)])) ≈ A - B
end

@testset "map and while_loop nest inside each other" begin
    reset_default_graph()
    s = Session()
    A = rand(4, 3)
    # a map inside a loop body, capturing the loop variable
    _, M = while_loop((k, m) -> k < 2, (k, m) -> (k + 1, map(r -> r .* 2.0, m)), [constant(0), constant(A)])
    @test run(s, M) ≈ 4A
    # a loop inside map's function
    @test run(s, map(r -> while_loop((k, v) -> k < 3, (k, v) -> (k + 1, v + r), [constant(0), r])[2], constant(A))) ≈ 4A
end

@testset "no silently wrong gradient through a random op in a branch or loop body" begin
    reset_default_graph()
    x = Variable([1.0, 2.0]); p = placeholder(Bool)
    y = cond(p, () -> x .* tf.random.normal((2,); dtype=Float64), () -> x)
    e = try; gradients(sum(y), x); nothing; catch err; err; end
    @test e isa OxiflowError && occursin("If", e.msg) && occursin("RandomStandardNormal", e.msg)
    _, z = while_loop((k, v) -> k < 2, (k, v) -> (k + 1, v + tf.random.normal((2,); dtype=Float64)), [constant(0), x])
    e = try; gradients(sum(z), x); nothing; catch err; err; end
    @test e isa OxiflowError && occursin("While", e.msg) && occursin("RandomStandardNormal", e.msg)
    # without gradients, a random op in a loop body draws new values each iteration
    ta = write(TensorArray(3), 1, constant([0.0]))
    _, ta = while_loop((k, t) -> k <= 3, (k, t) -> (k + 1, write(t, k, tf.random.normal((1,); dtype=Float64))), [constant(2), ta])
    s = Session(); init(s)
    draws = run(s, stack(ta))
    @test draws[2] != draws[3] && draws[2] != 0.0
end
