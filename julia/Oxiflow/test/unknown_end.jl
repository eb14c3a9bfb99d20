# `end` along unknown dimensions (`x[2:end, :]` of a batch fed at run time). Oracle: Julia's
# own indexing of the fed array, with the same index expression; for a range whose endpoint
# falls outside the fed size, TF's cut (documented) written out in Julia; central finite
# differences (fd.jl) and the hand formula for gradients. Each computation runs on the CPU
# and on the emulated GPU (runtests.jl calls use_emulated_gpus(1)).

# batch sizes, 0 rows included (Julia's empty ranges and out-of-bounds `end`)
const UE_BATCHES = (0, 1, 2, 5, 17)

# A CPU-only session and one with the emulated GPU.
ue_sessions() = (Session(emulated_gpus=0), Session())

# The error `f()` raises (`nothing` when it raises none).
ue_error(f) = try; f(); nothing; catch err; err; end

# Whether `f()` raises an OxiflowError whose message contains every string of `words`.
function ue_raises(f, words...)
    e = ue_error(f)
    e isa OxiflowError || return false
    return all(w -> occursin(w, e.msg), words)
end

# The same index expression applied to a tensor and to the fed array: `f(x)` and `f(X)`.
# Ranges here are in bounds for every size (maybe empty); an Int outside the fed size makes
# Julia raise, and the run must raise too.
const UE_FORMS3 = Any[
    # first dimension
    x -> x[end, :, :], x -> x[end-1, :, :], x -> x[end, 1, :], x -> x[end-2, :, 1],
    x -> x[2:end, :, :], x -> x[1:end-1, :, :], x -> x[1:2:end, :, :], x -> x[end:-1:1, :, :],
    x -> x[2:2:end-1, :, :], x -> x[end:-2:1, 1:1, :], x -> x[end-1:-1:2, :, [3, 1]],
    x -> x[3:end, 1, :], x -> x[1:end, :, 2], x -> x[5:end, :, :],
    x -> x[end:-1:2, :, :], x -> x[end-3:-1:1, :, :],
    # second dimension, mixed with Ints, ranges and vectors in the others
    x -> x[:, end, :], x -> x[:, end-1, 2], x -> x[:, 2:end, [3, 1]], x -> x[:, 1:end-1, 2:3],
    x -> x[:, end:-1:1, 1], x -> x[:, 1:2:end, end], x -> x[:, 2:2:end-1, :], x -> x[1, end, 2],
    # both
    x -> x[2:end, end:-1:1, :], x -> x[end, end, 2], x -> x[end:-1:1, 1:end-1, 3:-1:1],
    x -> x[1:2:end, end, [2, 2, 1]], x -> x[end-1, 2:end, :],
]
# ranges with an endpoint outside the fed size (Julia raises for some sizes): TF's cut,
# from the first element (the last one for a negative step), written out in Julia
const UE_CUT3 = Any[
    (x -> x[end-2:end, :, :], X -> X[max(end - 2, 1):end, :, :]),
    (x -> x[:, end-2:end, 2], X -> X[:, max(end - 2, 1):end, 2]),
    (x -> x[end-1:end, :, end], X -> X[max(end - 1, 1):end, :, end]),
    (x -> x[end-4:2:end, :, :], X -> X[max(end - 4, 1):2:end, :, :]),
    (x -> x[end-3:2:end-1, 1, :], X -> X[max(end - 3, 1):2:end-1, 1, :]),
    (x -> x[end+1:-1:1, :, :], X -> X[end:-1:1, :, :]),
    (x -> x[2:end+2, :, 1], X -> X[2:end, :, 1]),
    (x -> x[end:end, :, :], X -> X[max(end, 1):end, :, :]),
    (x -> x[end-1:end-1, :, end], X -> X[max(end - 1, 1):end-1, :, end]),
    (x -> x[end:-1:end-2, :, :], X -> X[end:-1:max(end - 2, 1), :, :]),
    (x -> x[end:-2:end-3, 1, :], X -> X[end:-2:max(end - 3, 1), 1, :]),
    (x -> x[:, 4:-1:end-1, 1], X -> X[:, min(4, end):-1:max(end - 1, 1), 1]),
]

# Whether `f(X)` is in bounds in Julia.
ue_inbounds(f, X) = try; f(X); true; catch err; err isa BoundsError || rethrow(); false; end

@testset "end along unknown dimensions" begin

@testset "lastindex, the marker and its ranges" begin
    reset_default_graph()
    x = placeholder(Float64; shape=[nothing, 4, nothing])
    e = lastindex(x, 1)
    @test e isa Oxiflow.EndIndex && e == Oxiflow.EndIndex(1, 0) && lastindex(x) == e
    @test lastindex(x, 2) === 4 && lastindex(x, 3) == Oxiflow.EndIndex(3, 0)
    # known dimensions: the Int, as before
    c = placeholder(Float64; shape=[3, nothing])
    @test lastindex(c, 1) === 3 && lastindex(c) === 3 && lastindex(constant(rand(2, 5)), 2) === 5
    @test size(c[end, :]) == (nothing,) && size(c[2:end, end]) == (2,)
    # arithmetic with integers shifts the offset; the difference of two is an Int
    @test (e - 1).offset == -1 && (e + 2).offset == 2 && (1 + e).offset == 1 && (e - 3 + 1).offset == -2
    @test (e - 1) - (e - 4) === 3 && e - e === 0 && +e == e
    @test sprint(show, e) == "end" && sprint(show, e - 2) == "end-2" && sprint(show, e + 1) == "end+1"
    r = 2:2:(e - 1)
    @test r isa Oxiflow.EndRange && first(r) == 2 && step(r) == 2 && sprint(show, r) == "2:2:end-1"
    @test (e:-1:1) isa Oxiflow.EndRange && ((e - 2):e) isa Oxiflow.EndRange && (e:3) isa Oxiflow.EndRange
    @test sprint(show, e:-1:1) == "end:-1:1" && sprint(show, 1:e) == "1:end"
    # static shapes of the results
    @test size(x[end, :, :]) == (4, nothing) && size(x[2:end, :, end]) == (nothing, 4)
    @test size(x[end:-1:1, end, 1:2:end]) == (nothing, nothing) && size(x[end-1, 2, end]) == ()
end

@testset "results equal Julia's indexing of the fed array, batches of 0, 1, 2, 5, 17" begin
    reset_default_graph()
    x = placeholder(Float64; shape=[nothing, nothing, 3])
    outs = [f(x) for f in UE_FORMS3]
    cuts = [f(x) for (f, _) in UE_CUT3]
    for s in ue_sessions(), n in UE_BATCHES, m in (1, 4)
        X = randn(n, m, 3)
        ok = [ue_inbounds(f, X) for f in UE_FORMS3]
        got = run(s, outs[ok], x => X)
        for (g, f) in zip(got, UE_FORMS3[ok])
            w = f(X)
            @test size(g) == size(w) && g == w
        end
        # an Int index outside the fed size (`end-1` of 1 row, `end` of 0 rows) fails the run
        for k in findall(!, ok)
            @test ue_raises(() -> run(s, outs[k], x => X), "StridedSlice", "out of bounds")
        end
        got = run(s, cuts, x => X)
        for (g, (f, oracle)) in zip(got, UE_CUT3)
            w = oracle(X)
            @test size(g) == size(w) && g == w
            ue_inbounds(f, X) && @test g == f(X)
        end
    end
    # one index on a matrix or more is a row (ADCME's `m[i]`), not Julia's linear index
    s = Session()
    X = randn(5, 2, 3)
    @test run(s, x[end], x => X) == X[end, :, :] && run(s, x[2:end], x => X) == X[2:end, :, :]
    # a vector of unknown length
    v = placeholder(Int64; shape=[nothing])
    vforms = Any[v -> v[end], v -> v[end-1], v -> v[2:end], v -> v[end:-1:1], v -> v[1:2:end-1], v -> v[end-1:-1:1]]
    vouts = [f(v) for f in vforms]
    for s in ue_sessions(), n in UE_BATCHES
        V = collect(1:n) .* 10
        for (o, f) in zip(vouts, vforms)
            if ue_inbounds(f, V)
                @test run(s, o, v => V) == f(V)
            else
                @test ue_raises(() -> run(s, o, v => V), "StridedSlice", "out of bounds")
            end
        end
    end
end

@testset "gradients equal the hand formula and finite differences" begin
    reset_default_graph()
    x = placeholder(Float64; shape=[nothing, 4])
    g1 = gradients(sum(x[2:end, :] .^ 2), x)
    forms = Any[x -> x[end, :], x -> x[1:end-1, 2:end], x -> x[end:-1:1, end], x -> x[1:2:end, :],
                x -> x[end-1:-1:2, 4:-3:1], x -> x[2:2:end-1, end:-1:1], x -> x[end:-1:end-1, :]]
    # the same in Julia; the last one cut to the first row for a 1-row batch
    oracles = Any[forms[1:end-1]..., X -> X[end:-1:max(end - 1, 1), :]]
    # a nonlinear function of each selected element: its gradient lands on the right ones
    loss(y) = sum(sin.(y) .+ y .^ 3)
    lossj(Y) = sum(sin.(Y) .+ Y .^ 3)
    gs = [gradients(loss(f(x)), x) for f in forms]
    for s in ue_sessions(), n in (1, 2, 5, 17)
        X = randn(n, 4)
        @test run(s, g1, x => X) == [zeros(1, 4); 2X[2:end, :]]
        got = run(s, gs, x => X)
        for (g, f) in zip(got, oracles)
            @test size(g) == (n, 4)
            @test g ≈ fd_grad(A -> lossj(f(A)), X) rtol = 1e-6 atol = 1e-8
        end
    end
end

@testset "what needs the size raises an OxiflowError naming getindex; the session goes on" begin
    reset_default_graph()
    x = placeholder(Float64; shape=[nothing, nothing, 3])
    y = x[2:end, end, :]
    s = Session()
    X = randn(4, 2, 3)
    check_usable() = @test run(s, y, x => X) == X[2:end, end, :]
    check_usable()
    for f in (() -> x[end ÷ 2, :, :], () -> x[div(end, 2), :, :], () -> x[2end, :, :],
              () -> x[end * 2, :, :], () -> x[end / 2, :, :], () -> x[length(1:end), :, :],
              () -> x[(end > 3 ? 1 : 2), :, :], () -> x[(end == 3 ? 1 : 2), :, :],
              () -> x[min(end, 3), :, :], () -> x[:, -end, :], () -> x[Int(end), :, :],
              () -> x[end .- (0:1), :, :], () -> x[collect(2:end), :, :], () -> x[3 - end, :, :],
              () -> x[end % 2, :, :], () -> x[:, last(1:end), :], () -> x[(1:end) .+ 1, :, :],
              () -> x[end + end, :, :], () -> x[reverse(1:end), :, :], () -> x[isempty(2:end) ? 1 : 2, :, :],
              () -> x[1:end:5, :, :], () -> x[2:end:end, :, :])
        e = ue_error(f)
        @test e isa OxiflowError && e.kind == "UnimplementedError" && occursin("getindex", e.msg) &&
              occursin("unknown until the graph runs", e.msg) && occursin("end", e.msg)
        check_usable()
    end
    # a comparison is never answered silently (`==` would otherwise be false)
    @test ue_raises(() -> lastindex(x, 1) == 3, "getindex", "unknown until the graph runs")
    @test ue_raises(() -> isequal(lastindex(x, 1), 3), "getindex", "unknown until the graph runs")
    # forms that are never right raise when the graph is built
    @test ue_raises(() -> x[end+1, :, :], "getindex", "StridedSlice", "end+1", "out of bounds")
    @test ue_raises(() -> x[0:end, :, :], "getindex", "index 0", "out of bounds")
    @test ue_raises(() -> x[end:-1:0, :, :], "getindex", "index 0", "out of bounds")
    @test ue_raises(() -> x[1:0:end, :, :], "getindex", "step 0")
    @test ue_raises(() -> x[1.0:end, :, :], "getindex", "integer")
    @test ue_raises(() -> x[:, lastindex(x, 1), :], "getindex", "dimension 1")
    check_usable()
    # an index outside the fed size fails the run, naming StridedSlice; the session goes on
    for (t, Xb) in ((x[end-4, :, :], X), (x[:, end-2, 1], X), (x[end, :, :], zeros(0, 2, 3)))
        @test ue_raises(() -> run(s, t, x => Xb), "StridedSlice", "out of bounds")
        check_usable()
    end
    X5 = randn(5, 2, 3)
    @test run(s, x[end-4, :, :], x => X5) == X5[1, :, :]
end

end
