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
    @test run(Session(), cond(p, () -> x, () -> 2x), p => false) ≈ 2 .* run(Session(), x)
end
