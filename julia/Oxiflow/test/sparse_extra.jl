# ADCME's SparseAssembler / accumulate / assemble, trisolve and reshape of a SparseTensor
# (sparse_assembly.jl). Oracles: Julia's `sparse(I, J, V, m, n)`, a dense
# `Tridiagonal(a, b, c) \ d`, a row-major reshape of the dense matrix built from Julia's
# column-major one, and central finite differences (`fd_grad`) for gradients.
using SparseArrays
using Random

sx_err(f) = try; f(); nothing; catch e; e; end

# Row-major (TF / NumPy) reshape of a dense matrix; Julia's `reshape` is column-major.
rowmajor_reshape(A::AbstractMatrix, m, n) = permutedims(reshape(permutedims(A), n, m))

@testset "sparse extra: SparseAssembler, accumulate, assemble" begin
    reset_default_graph()
    s = Session()
    # ADCME's example
    handle = SparseAssembler(100, 5, 0.0)
    op1 = accumulate(handle, 1, [1; 2; 3], [1.0; 2.0; 3.0])
    op2 = accumulate(handle, 2, [1; 3], [1.0; 1.0])
    A = assemble(5, 5, [op1; op2])
    @test A isa SparseTensor && size(A) == (5, 5) && eltype(A) == Float64 && nnz(A) == 5
    @test run(s, A) == sparse([1, 1, 1, 2, 2], [1, 2, 3, 1, 3], [1.0, 2.0, 3.0, 1.0, 1.0], 5, 5)
    # ADCME's second example: one row accumulated twice, repeats add up
    h0 = SparseAssembler(0, 5)
    ops = [accumulate(h0, 1, [1; 2; 3], ones(3)); accumulate(h0, 1, [3], [1.0]); accumulate(h0, 2, [1; 3], ones(2))]
    @test Matrix(run(s, assemble(5, 5, ops))) ≈ [1.0 1.0 2.0 0.0 0.0
                                                 1.0 0.0 1.0 0.0 0.0
                                                 zeros(3, 5)]
    # stored by row (ascending), in the order of ops within a row, not merged
    B = assemble(3, 4, [accumulate(h0, 3, 1:2, [5.0, 6.0]); accumulate(h0, 1, [4, 4], [1.0, 2.0]); accumulate(h0, 3, [2], [7.0])])
    @test run(s, [B.indices, B.values]) == [[0 3; 0 3; 2 0; 2 1; 2 1], [1.0, 2.0, 5.0, 6.0, 7.0]]
    @test run(s, B) == sparse([3, 3, 1, 1, 3], [1, 2, 4, 4, 2], [5.0, 6.0, 1.0, 2.0, 7.0], 3, 4)
    # a single op; integer values become Float64; an empty list is an empty matrix
    @test run(s, assemble(2, 3, accumulate(SparseAssembler(7, 2), 2, [3], [4]))) == sparse([2], [3], [4.0], 2, 3)
    @test run(s, assemble(2, 2, [])) == spzeros(2, 2)
    # m may exceed the handle's rows (only the accumulated rows must fit)
    @test size(assemble(6, 5, [op1; op2])) == (6, 5)
    # equal handles (same id, n, tol) combine
    @test SparseAssembler(100, 5, 0.0) == handle
    @test run(s, assemble(5, 5, [op1; accumulate(SparseAssembler(100, 5), 2, [1; 3], [1.0; 1.0])])) == run(s, A)
    # Base.accumulate keeps its meaning
    @test accumulate(+, [1, 2, 3]) == [1, 3, 6]

    # tol: |v| <= tol dropped entry by entry (before repeats add up); tol = 0 drops exact zeros
    ht = SparseAssembler(1, 3, 1e-8)
    T = assemble(3, 3, [accumulate(ht, 1, [1, 2, 2, 3], [1.0, 1e-9, 2.0, -1e-8]); accumulate(ht, 3, [1], [-3e-8])])
    @test nnz(T) == 3 && run(s, T) == sparse([1, 1, 3], [1, 2, 1], [1.0, 2.0, -3e-8], 3, 3)
    Z = assemble(2, 2, [accumulate(SparseAssembler(2, 2), 1, [1, 2], [0.0, 1.0])])
    @test nnz(Z) == 1 && nnz(run(s, Z)) == 1
    @test nnz(assemble(2, 2, [accumulate(SparseAssembler(2, 2, -1.0), 1, [1, 2], [0.0, 1.0])])) == 2   # tol < 0 keeps all

    # tensor values: equal to sparse(...), differentiable
    rng = MersenneTwister(11)
    rws = [2, 2, 1, 4, 4, 4]; cls = [1, 3, 3, 2, 2, 4]; v0 = rand(rng, 6) .+ 0.5
    W = rand(rng, 4, 4)
    hv = SparseAssembler(3, 4)
    vv = Variable(v0)
    parts = [accumulate(hv, 2, [1, 3], vv[1:2]); accumulate(hv, 1, [3], [v0[3]]); accumulate(hv, 4, [2, 2, 4], vv[4:6])]
    V = assemble(4, 4, parts)
    init(s)
    oracle(v) = sparse(rws, cls, [v[1:2]; v0[3]; v[4:6]], 4, 4)
    @test nnz(V) == 6 && run(s, V) ≈ oracle(v0)
    @test run(s, gradients(sum(W .* Array(V)), vv)) ≈ fd_grad(v -> sum(W .* Matrix(oracle(v))), v0) rtol = 1e-6 atol = 1e-9
    @test run(s, gradients(sum(V * ones(4)), vv)) ≈ [1.0, 1.0, 0.0, 1.0, 1.0, 1.0]     # v0[3] is a constant
    # a fed placeholder; a Float32 tensor is cast to Float64, as ADCME's convert_to_tensor
    p = placeholder(Float64; shape=[2])
    @test run(s, assemble(2, 2, accumulate(hv, 1, [2, 2], p)), p => [1.0, 2.5]) == sparse([1], [2], [3.5], 2, 2)
    @test eltype(assemble(2, 2, accumulate(hv, 1, [2], constant(Float32[1])))) == Float64
    # tensor values with tol > 0: dropped when the graph runs (not stored), gradient on the kept ones
    htol = SparseAssembler(4, 3, 0.01)
    w0 = [1.0, 0.001, -2.0, -0.005, 3.0]
    wv = Variable(w0)
    D = assemble(3, 3, [accumulate(htol, 2, [1, 2, 2], wv[1:3]); accumulate(htol, 3, [3, 1], wv[4:5]); accumulate(htol, 1, [1, 2], [4.0, 0.002])])
    init(s)
    drows = [2, 2, 2, 3, 3]; dcols = [1, 2, 2, 3, 1]
    doracle(w) = (k = abs.(w) .> 0.01; sparse([drows[k]; 1], [dcols[k]; 1], [w[k]; 4.0], 3, 3))
    R = run(s, D)
    @test R ≈ doracle(w0) && nnz(R) == 4 && Set(zip(findnz(R)[1], findnz(R)[2])) == Set([(1, 1), (2, 1), (2, 2), (3, 1)])
    W3 = rand(rng, 3, 3)
    @test run(s, gradients(sum(W3 .* Array(D)), wv)) ≈ fd_grad(w -> sum(W3 .* Matrix(doracle(w))), w0) rtol = 1e-6 atol = 1e-9
    @test run(s, D * [1.0, 2.0, 3.0]) ≈ Matrix(doracle(w0)) * [1.0, 2.0, 3.0] && run(s, D + D) ≈ 2doracle(w0)

    # errors
    e = sx_err(() -> accumulate(handle, 6, [1], [1.0]))
    @test e isa OxiflowError && occursin("row 6", e.msg) && occursin("5 rows", e.msg)
    e = sx_err(() -> accumulate(handle, 0, [1], [1.0]))
    @test e isa OxiflowError && occursin("row 0", e.msg)
    e = sx_err(() -> accumulate(handle, 1, [1, 0], [1.0, 2.0]))
    @test e isa OxiflowError && occursin("column index 0", e.msg) && occursin("position 2", e.msg)
    e = sx_err(() -> accumulate(handle, 1, [1, 2], [1.0]))
    @test e isa OxiflowError && occursin("2 columns but 1 values", e.msg)
    e = sx_err(() -> accumulate(handle, 1, [1, 2], constant([1.0, 2.0, 3.0])))
    @test e isa OxiflowError && occursin("2 columns but 3 values", e.msg)
    e = sx_err(() -> accumulate(handle, constant(1), [1], [1.0]))
    @test e isa OxiflowError && occursin("Julia integers", e.msg)
    e = sx_err(() -> accumulate(handle, 1, [1], "x"))
    @test e isa OxiflowError && occursin("vals", e.msg)
    e = sx_err(() -> assemble(5, 2, [op1; op2]))
    @test e isa OxiflowError && occursin("column 3", e.msg) && occursin("2 columns", e.msg)
    e = sx_err(() -> assemble(1, 5, [op1; op2]))
    @test e isa OxiflowError && occursin("row 2", e.msg) && occursin("1 rows", e.msg)
    e = sx_err(() -> assemble(5, 5, [op1; accumulate(SparseAssembler(101, 5), 2, [1], [1.0])]))
    @test e isa OxiflowError && occursin("different SparseAssemblers", e.msg) && occursin("101", e.msg)
    e = sx_err(() -> assemble(5, 5, [op1; accumulate(SparseAssembler(100, 5, 0.5), 2, [1], [1.0])]))
    @test e isa OxiflowError && occursin("different SparseAssemblers", e.msg)
    e = sx_err(() -> assemble(5, 5, [op1, 3]))
    @test e isa OxiflowError && occursin("accumulate", e.msg)
    e = sx_err(() -> assemble(constant(5), 5, [op1]))
    @test e isa OxiflowError && occursin("Julia integer", e.msg)
    e = sx_err(() -> SparseAssembler(1, constant(5)))
    @test e isa OxiflowError && occursin("n is a Tensor", e.msg)
    e = sx_err(() -> SparseAssembler(1, -2))
    @test e isa OxiflowError && occursin("non-negative", e.msg)
end

@testset "sparse extra: trisolve" begin
    reset_default_graph()
    s = Session()
    rng = MersenneTwister(12)
    n = 7
    a0 = rand(rng, n - 1); b0 = rand(rng, n) .+ 4; c0 = rand(rng, n - 1); d0 = rand(rng, n)
    x0 = Tridiagonal(a0, b0, c0) \ d0
    x = trisolve(a0, b0, c0, d0)
    @test x isa Tensor && x.dtype == Float64 && size(x) == (n,)
    @test run(s, x) ≈ x0
    # ADCME's own check: diagm(0 => b, -1 => a, 1 => c) \ d
    @test run(s, x) ≈ diagm(0 => b0, -1 => a0, 1 => c0) \ d0
    @test run(s, trisolve(constant(a0), constant(b0), constant(c0), constant(d0))) ≈ x0
    @test run(s, trisolve(a0, constant(b0), c0, constant(Float32.(d0)))) ≈ Tridiagonal(a0, b0, c0) \ Float64.(Float32.(d0))
    @test run(s, trisolve(Float64[], [2.0], Float64[], [3.0])) ≈ [1.5]                      # n = 1
    @test run(s, trisolve([1.0], [2.0, 3.0], [4.0], [1.0, 1.0])) ≈ [2.0 4.0; 1.0 3.0] \ [1.0, 1.0]
    # gradients with respect to each of a, b, c, d
    av = Variable(a0); bv = Variable(b0); cv = Variable(c0); dv = Variable(d0)
    w = rand(rng, n)
    xt = trisolve(av, bv, cv, dv)
    loss = sum(w .* xt)
    init(s)
    f(a, b, c, d) = sum(w .* (Tridiagonal(a, b, c) \ d))
    ga, gb, gc, gd = run(s, gradients(loss, [av, bv, cv, dv]))
    @test ga ≈ fd_grad(a -> f(a, b0, c0, d0), a0) rtol = 1e-6 atol = 1e-9
    @test gb ≈ fd_grad(b -> f(a0, b, c0, d0), b0) rtol = 1e-6 atol = 1e-9
    @test gc ≈ fd_grad(c -> f(a0, b0, c, d0), c0) rtol = 1e-6 atol = 1e-9
    @test gd ≈ fd_grad(d -> f(a0, b0, c0, d), d0) rtol = 1e-6 atol = 1e-9
    # a nonlinear loss through a mix of Julia and tensor diagonals
    loss2 = sum(trisolve(a0, bv, cv, d0)^2)
    @test run(s, gradients(loss2, bv)) ≈ fd_grad(b -> sum((Tridiagonal(a0, b, c0) \ d0) .^ 2), b0) rtol = 1e-6 atol = 1e-9
    # errors: lengths when the op is added, a singular matrix when it runs
    e = sx_err(() -> trisolve(ones(n), b0, c0, d0))
    @test e isa OxiflowError && occursin("a $n", e.msg) && occursin("length(b) - 1 = $(n - 1)", e.msg)
    e = sx_err(() -> trisolve(a0, b0, ones(n - 2), d0))
    @test e isa OxiflowError && occursin("c $(n - 2)", e.msg)
    e = sx_err(() -> trisolve(a0, b0, c0, constant(ones(n + 1))))
    @test e isa OxiflowError && occursin("d $(n + 1)", e.msg)
    e = sx_err(() -> trisolve(Float64[], Float64[], Float64[], Float64[]))
    @test e isa OxiflowError && occursin("empty", e.msg)
    e = sx_err(() -> trisolve(a0, constant(ones(n, 2)), c0, d0))
    @test e isa OxiflowError && occursin("vector", e.msg)
    e = sx_err(() -> trisolve(a0, b0, c0, placeholder(Float64; shape=[nothing])))
    @test e isa OxiflowError && occursin("unknown dimension", e.msg)
    e = sx_err(() -> run(s, trisolve([1.0], [1.0, 1.0], [1.0], [1.0, 2.0])))
    @test e isa OxiflowError && occursin("SparseSolve", e.msg) && occursin("singular", e.msg)
end

@testset "sparse extra: reshape is row-major (tf.sparse.reshape)" begin
    reset_default_graph()
    s = Session()
    # the oracle by hand on a tiny case
    A = [1.0 2.0 3.0; 4.0 5.0 6.0]
    @test rowmajor_reshape(A, 3, 2) == [1.0 2.0; 3.0 4.0; 5.0 6.0]
    @test rowmajor_reshape(A, 1, 6) == [1.0 2.0 3.0 4.0 5.0 6.0]
    a = SparseTensor(A)
    r = reshape(a, 3, 2)
    @test r isa SparseTensor && size(r) == (3, 2) && nnz(r) == 6
    @test Matrix(run(s, r)) == [1.0 2.0; 3.0 4.0; 5.0 6.0]
    @test Matrix(run(s, reshape(a, (6, 1)))) == reshape([1.0, 2.0, 3.0, 4.0, 5.0, 6.0], 6, 1)
    # random matrices with a repeated entry, several shapes; -1 and : inferred
    rng = MersenneTwister(13)
    ii = [1, 1, 3, 6, 2, 5, 6]; jj = [2, 2, 4, 1, 3, 4, 4]; vv = rand(rng, 7)
    S = sparse(ii, jj, vv, 6, 4); b = SparseTensor(ii, jj, vv, 6, 4)
    for (m, n) in ((3, 8), (2, 12), (24, 1), (1, 24), (8, 3), (12, 2), (4, 6))
        R = run(s, reshape(b, m, n))
        @test size(R) == (m, n) && Matrix(R) ≈ rowmajor_reshape(Matrix(S), m, n)
    end
    @test size(reshape(b, -1, 3)) == (8, 3) && size(reshape(b, 12, :)) == (12, 2) && size(reshape(b, (:, 6))) == (4, 6)
    @test size(reshape(b, [2, 12])) == (2, 12)
    @test run(s, reshape(b, -1, 3)) ≈ sparse(rowmajor_reshape(Matrix(S), 8, 3))
    @test reshape(b, 6, 4) === b                                              # same shape: s itself
    # entries keep their order and repeats (the values tensor is the same)
    rb = reshape(b, 3, 8)
    @test rb.values === b.values
    lin = (ii .- 1) .* 4 .+ (jj .- 1)
    @test run(s, rb.indices) == hcat(lin .÷ 8, lin .% 8)
    # reshape back, and an input of unknown nnz
    @test run(s, reshape(reshape(b, 3, 8), 6, 4)) == S
    @test run(s, reshape(b + b, 8, 3)) ≈ sparse(rowmajor_reshape(Matrix(2S), 8, 3))
    @test run(s, reshape(spzero(2, 3), 3, 2)) == spzeros(3, 2) && size(reshape(spzero(0, 3), 5, 0)) == (5, 0)
    # differentiable with respect to the values
    v = Variable(vv)
    c = SparseTensor(ii, jj, v, 6, 4)
    W = rand(rng, 3, 8); x = rand(rng, 8)
    init(s)
    fv(u) = rowmajor_reshape(Matrix(sparse(ii, jj, u, 6, 4)), 3, 8)
    @test run(s, gradients(sum(W .* Array(reshape(c, 3, 8))), v)) ≈ fd_grad(u -> sum(W .* fv(u)), vv) rtol = 1e-6 atol = 1e-9
    @test run(s, gradients(sum(sin(reshape(c, 3, 8) * x)), v)) ≈ fd_grad(u -> sum(sin.(fv(u) * x)), vv) rtol = 1e-6 atol = 1e-9
    # errors
    e = sx_err(() -> reshape(b, 5, 5))
    @test e isa OxiflowError && occursin("(6, 4)", e.msg) && occursin("(5, 5)", e.msg) && occursin("24", e.msg)
    e = sx_err(() -> reshape(b, 2, 3, 4))
    @test e isa OxiflowError && occursin("two dimensions", e.msg)
    e = sx_err(() -> reshape(b, 24))
    @test e isa OxiflowError && occursin("two dimensions", e.msg)
    e = sx_err(() -> reshape(b, -1, :))
    @test e isa OxiflowError && occursin("at most one", e.msg)
    e = sx_err(() -> reshape(b, -1, 5))
    @test e isa OxiflowError && occursin("cannot infer", e.msg)
    e = sx_err(() -> reshape(b, constant(3), 8))
    @test e isa OxiflowError && occursin("Tensor", e.msg)
    e = sx_err(() -> reshape(b, -3, -8))
    @test e isa OxiflowError && occursin("non-negative", e.msg)
end

@testset "sparse extra: second derivatives through a sparse-sparse product" begin
    reset_default_graph()
    s = Session()
    A0 = sprand(MersenneTwister(5), 4, 5, 0.5); B0 = sprand(MersenneTwister(6), 5, 3, 0.5)
    ia, ja, va = findnz(A0); ib, jb, vb = findnz(B0)
    a = Variable(va); b = Variable(vb)
    A = SparseTensor(ia, ja, a, 4, 5); B = SparseTensor(ib, jb, b, 5, 3)
    L = sum(Array(A * B) .^ 2)
    ga, gb = gradients(L, [a, b])
    init(s)
    f(x, y) = sum((Matrix(sparse(ia, ja, x, 4, 5)) * Matrix(sparse(ib, jb, y, 5, 3))) .^ 2)
    @test run(s, ga) ≈ fd_grad(x -> f(x, vb), va) rtol = 1e-6
    # d/da and d/db of sum(dL/da), against finite differences of the engine's first gradient
    h_aa, h_ab = gradients(sum(ga), [a, b])
    first_grad(x, y) = (run(s, assign(a, x)); run(s, assign(b, y)); g = sum(run(s, ga)); run(s, assign(a, va)); run(s, assign(b, vb)); g)
    @test run(s, h_aa) ≈ fd_grad(x -> first_grad(x, vb), va; h=1e-5) rtol = 1e-5
    @test run(s, h_ab) ≈ fd_grad(y -> first_grad(va, y), vb; h=1e-5) rtol = 1e-5
end
