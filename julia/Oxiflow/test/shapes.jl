# Shape ops and indexing against Julia Base, gradients against central finite differences,
# each on the CPU and on an emulated GPU (runtests.jl calls use_emulated_gpus(1)).

# A CPU-only session and one with the emulated GPU, where ops with a GPU kernel go.
sessions() = (Session(emulated_gpus=0), Session())

# d/dX of sum(W .* f(X)) for a fixed random W, by the engine and by central differences
# of the same graph (Float64, h = 1e-6).
function check_grad(f, X; h=1e-6, rtol=1e-6)
    reset_default_graph()
    x = placeholder(Float64; shape=collect(size(X)))
    y = f(x)
    W = ndims(y) == 0 ? 1.3 : 0.5 .+ rand(size(y)...)
    loss = sum(y .* constant(W))
    g = gradients(loss, x)
    for s in sessions()
        G = run(s, g, x => X)
        fd = similar(X)
        for j in eachindex(X)
            E = zero(X); E[j] = h
            fd[j] = (run(s, loss, x => X + E) - run(s, loss, x => X - E)) / 2h
        end
        @test G ≈ fd rtol = rtol atol = 1e-8
    end
end

@testset "shape ops match Julia Base" begin
    reset_default_graph()
    A = reshape(collect(1.0:6.0), 2, 3); B = rand(2, 2); v = [1.0, 2.0, 3.0]; T3 = rand(2, 3, 4)
    a = constant(A); b = constant(B); cv = constant(v); t3 = constant(T3)
    for s in sessions()
        @test run(s, a') == A'
        @test run(s, transpose(a)) == transpose(A)
        @test run(s, cv') == v'                      # a vector's adjoint is a 1×n row
        @test run(s, constant(2.5)') == 2.5
        @test run(s, t3') == permutedims(T3, (1, 3, 2))   # rank 3: last two axes swap
        @test run(s, permutedims(t3, (3, 1, 2))) == permutedims(T3, (3, 1, 2))
        # two reshape conventions: integers are column-major (Julia), tuples row-major (TF)
        @test run(s, reshape(a, 3, 2)) == reshape(A, 3, 2)
        @test run(s, reshape(a, :, 1)) == reshape(A, :, 1)
        @test run(s, reshape(t3, 4, :)) == reshape(T3, 4, :)
        @test run(s, reshape(cv, 1, 3)) == reshape(v, 1, 3)
        @test run(s, reshape(a, 6)) == vec(A)
        @test run(s, reshape(a, (3, 2))) == permutedims(reshape(vec(permutedims(A)), 2, 3))
        @test run(s, reshape(a, [1, :])) == reshape(vec(permutedims(A)), 1, 6)
        @test run(s, vec(t3)) == vec(T3)
        @test run(s, rvec(a)) == reshape(A, 1, :) && run(s, cvec(a)) == reshape(A, :, 1)
        @test run(s, squeeze(constant(reshape(v, 1, 3, 1)))) == v
        @test size(squeeze(constant(reshape(v, 1, 3, 1)); dims=1)) == (3, 1)
        @test run(s, [a b]) == [A B] && run(s, [a; a]) == [A; A]
        @test run(s, [cv; 4.0; [5.0, 6.0]]) == [v; 4.0; [5.0, 6.0]]
        @test run(s, [cv cv]) == [v v] && run(s, [A[:, 1] a]) == [A[:, 1] A]
        @test run(s, [constant(1.0) 2.0 3.0]) == [1.0 2.0 3.0]
        @test run(s, [1.0; 2.0; cv]) == [1.0; 2.0; v] && run(s, [1.0 2.0 constant(3.0)]) == [1.0 2.0 3.0]
        @test run(s, [1.0 2.0; constant([3.0 4.0])]) == [1.0 2.0; 3.0 4.0]
        @test run(s, [a B; B a]) == [A B; B A]
        @test run(s, vcat(constant(1.0), 2.0)) == [1.0, 2.0]
        @test run(s, concat([a, constant(B)]; dims=2)) == hcat(A, B)
        @test run(s, concat([a, a], 0)) == vcat(A, A)
        @test run(s, stack([cv, 2cv])) == permutedims(hcat(v, 2v))
        @test run(s, stack([cv, 2cv]; dims=2)) == hcat(v, 2v)
        @test run(s, unstack(a)) == [A[1, :], A[2, :]]
        @test run(s, unstack(a; dims=2)) == [A[:, j] for j in 1:3]
        @test run(s, split(t3, 2; dims=3)) == [T3[:, :, 1:2], T3[:, :, 3:4]]
        @test run(s, split(t3, [1, -1]; dims=2)) == [T3[:, 1:1, :], T3[:, 2:3, :]]
        @test run(s, repeat(a, 2, 3)) == repeat(A, 2, 3)
        @test run(s, repeat(cv, 2)) == repeat(v, 2) && run(s, repeat(cv, 2, 2)) == repeat(v, 2, 2)
        @test run(s, reverse(cv)) == reverse(v)
        @test run(s, reverse(a; dims=2)) == reverse(A; dims=2)
        @test run(s, reverse(t3)) == T3[end:-1:1, end:-1:1, end:-1:1]
        @test run(s, diff(cv)) == diff(v) && run(s, diff(a; dims=2)) == diff(A; dims=2)
        P = zeros(4, 6); P[2:3, 3:5] = A
        @test run(s, pad(a, [1 1; 2 1])) == P
        P[P .== 0] .= -1.0
        @test run(s, pad(a, [1 1; 2 1]; constant_values=-1.0)) == P
        # an infinite or NaN fill keeps the inside as it is (no Inf * 0 there)
        for c in (-Inf, Inf, NaN)
            P[2:3, 3:5] = A; P[[1, 4], :] .= c; P[:, [1, 2, 6]] .= c
            @test isequal(run(s, pad(a, [1 1; 2 1]; constant_values=c)), P)
        end
        @test run(s, copy(a)) == A && copy(a).op.type == "Identity"
        @test run(s, ones_like(a)) == ones(2, 3) && run(s, zeros_like([1, 2])) == [0, 0]
        @test run(s, convert_to_tensor([1, 2]; dtype=Float32)) == Float32[1, 2]
    end
    @test convert_to_tensor(a) === a && convert_to_tensor(nothing) === nothing
    @test convert_to_tensor(a; dtype=Float32).dtype == Float32
    @test (size(t3), size(t3, 2), size(t3, 5), length(t3), ndims(t3)) == ((2, 3, 4), 3, 1, 24, 3)
    @test get_dtype(a) == Float64 && eltype(constant(Int32[1])) == Int32
    @test a'.op.type == "Transpose" && startswith(a'.op.name, "transpose")
    s = Session()
    @test assigned_device(s, a') == GPU0               # layout ops have GPU kernels
    # bad shapes: OxiflowErrors naming the op and both shapes; the graph stays usable
    e = try; reshape(a, (4, 2)); nothing; catch err; err; end
    @test e isa OxiflowError && occursin("Reshape", e.msg) && occursin("[2,3]", e.msg) && occursin("[4,2]", e.msg)
    e = try; reshape(a, 4, 2); nothing; catch err; err; end
    @test e isa OxiflowError && occursin("Reshape", e.msg) && occursin("(2, 3)", e.msg) && occursin("(4, 2)", e.msg)
    e = try; reshape(a, 4, :); nothing; catch err; err; end
    @test e isa OxiflowError && occursin("Reshape", e.msg) && occursin("(2, 3)", e.msg)
    e = try; [a; cv]; nothing; catch err; err; end
    @test e isa OxiflowError && occursin("ConcatV2", e.msg) && occursin("[2,3]", e.msg) && occursin("[3,1]", e.msg)
    e = try; squeeze(a; dims=1); nothing; catch err; err; end
    @test e isa OxiflowError && occursin("Squeeze", e.msg) && occursin("[2,3]", e.msg)
    e = try; split(a, 2; dims=2); nothing; catch err; err; end
    @test e isa OxiflowError && occursin("(2, 3)", e.msg)
    @test run(s, a + 1.0) == A .+ 1.0
end

@testset "indexing follows Julia's rules" begin
    reset_default_graph()
    v = [10.0, 20.0, 30.0, 40.0, 50.0]; M = reshape(collect(1.0:12.0), 3, 4); T3 = rand(3, 4, 2)
    tv = constant(v); tm = constant(M); tt = constant(T3)
    k = placeholder(Int64); ks = placeholder(Int32; shape=[2])
    for s in sessions()
        @test run(s, tv[2]) == v[2] && run(s, tv[end]) == v[end]
        @test run(s, tv[2:4]) == v[2:4] && run(s, tv[end:-2:1]) == v[end:-2:1]
        @test run(s, tv[4:-1:1]) == v[4:-1:1] && run(s, tv[:]) == v
        @test run(s, tv[[5, 1, 1]]) == v[[5, 1, 1]]
        mask = [true, false, true, true, false]
        @test run(s, tv[mask]) == v[mask]
        @test run(s, tv[k], k => 3) == v[3]
        @test run(s, tv[ks], ks => Int32[5, 2]) == v[[5, 2]]
        @test run(s, tm[2, 3]) == M[2, 3] && run(s, tm[end, end]) == M[end, end]
        @test run(s, tm[2, :]) == M[2, :] && run(s, tm[:, 3]) == M[:, 3]
        @test run(s, tm[1:2, 2:end]) == M[1:2, 2:end]
        @test run(s, tm[3:-2:1, [4, 1]]) == M[3:-2:1, [4, 1]]
        @test run(s, tm[[1, 3], [2, 2, 4]]) == M[[1, 3], [2, 2, 4]]
        @test run(s, tm[[true, false, true], 2]) == M[[true, false, true], 2]
        @test run(s, tm[k, 2:3], k => 2) == M[2, 2:3]
        @test run(s, tm[:, k], k => 4) == M[:, 4]
        @test run(s, tm[2]) == M[2, :]                         # ADCME: m[i] is row i
        @test run(s, tm[:]) == vec(M)
        @test run(s, tt[2, :, 1]) == T3[2, :, 1] && run(s, tt[1:2, 3, :]) == T3[1:2, 3, :]
        @test run(s, tt[[3, 1], end, 2]) == T3[[3, 1], end, 2]
        @test run(s, tt[2, [1, 4], k], k => 2) == T3[2, [1, 4], 2]
        @test run(s, tt[:, :, :]) == T3
        @test size(tm[2:1, :]) == (0, 4)
    end
    @test tv[2].op.type == "StridedSlice" && tv[[1, 2]].op.type == "GatherV2"
    # other dtypes keep theirs; a Variable is indexed through its read snapshot
    M32 = Float32.(M); I64 = [1 2; 3 4]
    for s in sessions()
        @test run(s, constant(M32)[2:3, end]) == M32[2:3, end] && constant(M32)[1, 1].dtype == Float32
        @test run(s, constant(I64)[[2, 1], 1]) == I64[[2, 1], 1] && run(s, constant(I64)') == permutedims(I64)
        @test run(s, constant([true, false, true])[2:3]) == [false, true]
    end
    θ = Variable([1.0, 2.0, 3.0])
    l = θ[3] * θ[1]^2
    gθ = gradients(l, θ)
    s = Session(); init(s)
    @test run(s, l) == 3.0 && run(s, gθ) == [6.0, 0.0, 1.0]
    # static out-of-bounds indices: OxiflowError at construction naming op, index and shape
    for (f, idx) in ((() -> tv[6], "6"), (() -> tm[0, 1], "0"), (() -> tm[1:4, 1], "4"), (() -> tv[[1, 7]], "7"))
        e = try; f(); nothing; catch err; err; end
        @test e isa OxiflowError && occursin(idx, e.msg) && occursin("out of bounds", e.msg) && occursin("getindex", e.msg)
    end
    e = try; tm[1, 2, 3]; nothing; catch err; err; end
    @test e isa OxiflowError && occursin("(3, 4)", e.msg)
    e = try; tv[[true, false]]; nothing; catch err; err; end
    @test e isa OxiflowError && occursin("mask", e.msg)
    # a tensor index out of bounds fails at run time naming the node; the session stays usable
    s = Session()
    x = tv[k]
    e = try; run(s, x, k => 9); nothing; catch err; err; end
    @test e isa OxiflowError && occursin("GatherV2", e.msg) && occursin("not in [0, 5)", e.msg)
    @test run(s, x, k => 1) == v[1]
end

@testset "shape op and indexing gradients against finite differences" begin
    X = rand(3, 4) .+ 0.5; V = rand(5) .+ 0.5
    check_grad(x -> x', X)
    check_grad(x -> reshape(x, 2, 6) * constant(rand(6, 2)), X)
    check_grad(x -> reshape(x, (6, 2)), X)
    check_grad(x -> vec(x)[2:7], X)
    check_grad(x -> [x x; sin(x) 2.0 * x], X)
    check_grad(x -> [x; ones(1, 4)], X)
    check_grad(x -> repeat(x, 2, 3), X)
    check_grad(x -> reverse(x; dims=1), X)
    check_grad(x -> diff(x; dims=2), X)
    check_grad(x -> pad(x, [1 0; 2 2]; constant_values=3.0), X)
    check_grad(x -> stack(unstack(x)[[1, 3]]), X)
    check_grad(x -> split(x, [1, 3]; dims=2)[2], X)
    check_grad(x -> x[2, 3]^2, X)
    check_grad(x -> x[3:-1:1, [4, 1, 4]], X)
    check_grad(x -> x[[true, false, true], end], X)
    check_grad(x -> x[:, 2] .* x[1, :][1:3], X)
    check_grad(v -> v[2]^2 + v[end] * v[1], V)
    check_grad(v -> v[[1, 1, 4]] .* v[2:4], V)
    # a run-time (tensor) index: d/dV sum(V[k]^2) = 2 V[k] at k, zero elsewhere
    reset_default_graph()
    x = placeholder(Float64; shape=[5]); k = placeholder(Int64)
    g = gradients(x[k]^2, x)
    for s in sessions()
        @test run(s, g, x => V, k => 4) ≈ [j == 4 ? 2V[4] : 0.0 for j in 1:5]
    end
end
