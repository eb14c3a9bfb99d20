# ADCME's SparseTensor API (sparse.jl, sparse_solve.jl). Oracles: Julia's SparseArrays
# (`sparse(I, J, V, m, n)`, `A[i, j]`, `[A B; C D]`, products) and LinearAlgebra (dense
# `A \ b`, least squares), central finite differences for gradients, TF's placement rules
# for ops without GPU kernels.
using SparseArrays
using Random

# Row-major (row, col) order of a Julia sparse matrix's stored entries: what a merged
# SparseTensor holds.
function rowmajor(A::SparseMatrixCSC)
    r, c, v = findnz(A)
    p = sortperm(collect(zip(r, c)))
    return hcat(r[p] .- 1, c[p] .- 1), v[p]
end

# A well-conditioned n×n sparse matrix with a repeated entry, as triplets (1-based).
function sparse_system(rng, n)
    A = sprand(rng, n, n, 0.3) + 4.0 * sparse(1.0I, n, n)
    r, c, v = findnz(A)
    return [r; r[1]], [c; c[1]], [v; 0.5]           # the first entry stored twice
end

err_of(f) = try; f(); nothing; catch e; e; end

@testset "sparse: construction, find, run, show" begin
    reset_default_graph()
    s = Session()
    ii = [1, 2, 3, 1, 4]; jj = [1, 3, 2, 1, 4]; vv = [1.0, 2.0, 3.0, 4.0, 5.0]    # (1, 1) twice
    S = sparse(ii, jj, vv, 4, 5)
    a = SparseTensor(ii, jj, vv, 4, 5)
    @test size(a) == (4, 5) && size(a, 1) == 4 && size(a, 2) == 5 && size(a, 3) == 1
    @test ndims(a) == 2 && eltype(a) == Float64 && nnz(a) == 5
    @test sprint(show, a) == "SparseTensor(4, 5, nnz=5, Float64)"
    A = run(s, a)
    @test A isa SparseMatrixCSC{Float64,Int} && A == S && A[1, 1] == 5.0
    # find, rows, cols, values: sorted by row, then column, repeats in the order given
    # (ADCME's canonical order); with auto_reorder off, the order given
    o = sortperm(collect(zip(ii, jj)))          # Julia's sortperm is stable
    @test o == [1, 4, 2, 3, 5]
    r, c, v = find(a)
    @test run(s, [r, c, v]) == [ii[o], jj[o], vv[o]]
    @test run(s, rows(a)) == ii[o] && run(s, cols(a)) == jj[o] && run(s, values(a)) == vv[o]
    Oxiflow.options.sparse.auto_reorder = false
    @test run(s, [find(a)...]) == [ii, jj, vv]
    reset_default_options()
    # a matrix of data-dependent nnz (a sum merges repeats): sorted too
    @test run(s, [find(a + a)...]) == [[1, 2, 3, 4], [1, 3, 2, 4], 2 .* [5.0, 2.0, 3.0, 5.0]]
    @test run(s, Array(a)) == Matrix(S)
    # ADCME's s.o, the TF SparseTensor: 0-based indices, values, dense shape
    @test run(s, a.o.indices) == [ii jj] .- 1 && run(s, a.o.values) == vv && run(s, a.o.dense_shape) == [4, 5]
    # mixed fetch lists and tuples, feeds
    p = placeholder(Float64; shape=[5])
    b = SparseTensor(ii, jj, p, 4, 5)
    out = run(s, (a, [sum(p), b]), p => 2vv)
    @test out[1] == S && out[2][1] ≈ 2sum(vv) && out[2][2] == 2S
    # without m, n (as sparse(I, J, V)); from Julia matrices; constant
    @test run(s, SparseTensor(ii, jj, vv)) == sparse(ii, jj, vv)
    J = sprand(MersenneTwister(1), 6, 4, 0.4)
    @test run(s, SparseTensor(J)) == J && run(s, constant(J)) == J
    M = [0.0 2.0; 3.0 0.0]
    @test run(s, SparseTensor(M)) == sparse(M) && nnz(SparseTensor(M)) == 2
    @test run(s, dense_to_sparse(M)) == sparse(M)
    # tensor indices (Int32 and Int64, with a length only known at run time), 1-based
    ti = placeholder(Int64; shape=[nothing]); tj = placeholder(Int32; shape=[nothing]); tv = placeholder(Float64; shape=[nothing])
    t = SparseTensor(ti, tj, tv, 4, 5)
    @test nnz(t) === nothing && sprint(show, t) == "SparseTensor(4, 5, nnz=?, Float64)"
    @test run(s, t, ti => ii, tj => Int32.(jj), tv => vv) == S
    # the 0-based raw form
    @test run(s, RawSparseTensor([0 1; 2 0], [1.5, 2.5], 3, 2)) == sparse([1, 3], [2, 1], [1.5, 2.5], 3, 2)
    # a dense tensor: its nonzeros, found when it runs (TF's from_dense: Where + GatherNd)
    d = dense_to_sparse(constant(M))
    D = run(s, d)
    @test D == sparse(M) && nnz(D) == 2 && nnz(d) === nothing
    @test run(s, SparseTensor(constant(M))) == sparse(M)
    P = placeholder(Float64; shape=[3, 4])
    for X in ([0.0 1.0 0.0 -2.0; 0.0 0.0 0.0 0.0; 3.5 0.0 -0.0 4.0], zeros(3, 4))
        @test run(s, dense_to_sparse(P), P => X) == sparse(X)
    end
    # differentiable: the gradient reaches the stored (nonzero) entries only
    X0 = [0.0 1.0 0.0 -2.0; 0.5 0.0 0.0 0.0; 3.5 0.0 -1.0 4.0]
    V = Variable(X0)
    L = sum(values(dense_to_sparse(V)) .^ 3)
    init(s)
    @test run(s, gradients(L, V)) ≈ fd_grad(X -> sum(X[X0 .!= 0] .^ 3), X0) rtol = 1e-6
end

@testset "sparse: spzero, spdiag, spdiagm" begin
    reset_default_graph()
    s = Session()
    @test run(s, spzero(3)) == spzeros(3, 3) && run(s, spzero(2, 4)) == spzeros(2, 4)
    @test run(s, spdiag(4)) == sparse(1.0I, 4, 4)
    v = [1.0, 2.0, 3.0]
    @test run(s, spdiag(v)) == spdiagm(0 => v) && run(s, spdiag(constant(v))) == spdiagm(0 => v)
    @test run(s, spdiag(5, -1 => -2 * ones(4), 0 => 2 * ones(5), 1 => constant(3 * ones(4)))) ==
          spdiagm(-1 => -2 * ones(4), 0 => 2 * ones(5), 1 => 3 * ones(4))
    t = constant([1.0, 2.0])
    st = spdiagm(1 => t, -2 => [5.0])
    @test st isa SparseTensor && run(s, st) == spdiagm(1 => [1.0, 2.0], -2 => [5.0])
    @test run(s, spdiagm(3, 4, 1 => t, 0 => [1.0])) == spdiagm(3, 4, 1 => [1.0, 2.0], 0 => [1.0])
    @test spdiagm(0 => [1.0, 2.0]) isa SparseMatrixCSC                   # Julia vectors only: SparseArrays'
    @test run(s, spdiagm(t)) == spdiagm(0 => [1.0, 2.0])
    e = err_of(() -> spdiag(3, 3 => [1.0]))
    @test e isa OxiflowError && occursin("diagonal 3", e.msg)
    e = err_of(() -> spdiag(3, 1 => [1.0, 2.0, 3.0]))
    @test e isa OxiflowError && occursin("3 values for diagonal 1", e.msg)
    # ADCME's _diag mark: set by the diagonal constructors, kept by what keeps a matrix
    # diagonal; every marked matrix is diagonal when run (Julia's isdiag)
    d = spdiag(constant(v)); full = SparseTensor(sparse([1, 2, 3], [1, 1, 3], v, 3, 3))
    marked = [d, spdiag(3), spdiag(3, 0 => v), SparseTensor(sparse(2.0I, 3, 3)), 2 * d, -d, d / 2, copy(d), d', d + d, d * d,
              SparseTensor([1, 2, 3], [1, 2, 3], v, 3, 3; is_diag=true)]
    @test all(x -> x._diag, marked)
    @test all(x -> isdiag(run(s, x)), marked)
    @test !any(x -> x._diag, [spdiag(5, -1 => -2 * ones(4), 0 => 2 * ones(5)), full, d + full, d * full, full',
                               SparseTensor([1, 2, 3], [1, 2, 3], v, 3, 3)])
    @test_throws OxiflowError spdiag(-1)
    # indices fed at run time are checked when the matrix is fetched
    ip = placeholder(Int64; shape=[2, 2])
    st = SparseTensor(ip, constant([1.0, 2.0]), (3, 3))
    e = err_of(() -> run(s, st, ip => [0 0; 5 1]))
    @test e isa OxiflowError && occursin("row index 5", e.msg) && occursin("3×3", e.msg)
    @test run(s, st, ip => [0 0; 2 1]) == sparse([1, 3], [1, 2], [1.0, 2.0], 3, 3)
end

@testset "sparse: arithmetic, products and transposes match SparseArrays" begin
    reset_default_graph()
    s = Session()
    rng = MersenneTwister(2)
    A = sprand(rng, 5, 4, 0.5); B = sprand(rng, 5, 4, 0.5); C = sprand(rng, 4, 3, 0.6)
    a = SparseTensor(A); b = SparseTensor(B); c = SparseTensor(C)
    x = rand(rng, 4); X = rand(rng, 4, 2); Y = rand(rng, 3, 5); D = rand(rng, 5, 4)
    @test run(s, -a) == -A
    sum_ab = a + b
    @test nnz(sum_ab) === nothing                                       # merged: depends on the data
    @test run(s, sum_ab) ≈ A + B && run(s, a - b) ≈ A - B
    @test run(s, a + B) ≈ A + B && run(s, A - b) ≈ A - B               # SparseMatrixCSC operands
    # merged entries are sorted row-major, one per position
    ix, vals = run(s, [sum_ab.indices, sum_ab.values])
    jix, jvals = rowmajor(A + B)
    @test ix == jix && vals ≈ jvals
    @test run(s, a + D) ≈ Matrix(A) + D && run(s, constant(D) - a) ≈ D - Matrix(A)
    @test run(s, a - constant(D)) ≈ Matrix(A) - D && run(s, D + a) ≈ D + Matrix(A)
    @test run(s, 2 * a) ≈ 2A && run(s, a * 2.5) ≈ 2.5A && run(s, a / 4) ≈ A / 4
    @test run(s, constant(3.0) * a) ≈ 3A && run(s, a / constant(2.0)) ≈ A / 2
    @test run(s, a * x) ≈ A * x && run(s, a * constant(X)) ≈ A * X
    @test run(s, Y * a) ≈ Y * A && run(s, constant(Y) * a) ≈ Y * A
    @test run(s, a * c) ≈ A * C && nnz(a * c) === nothing
    @test run(s, a') == sparse(A') && run(s, transpose(a)) == sparse(transpose(A)) && size(a') == (4, 5)
    @test run(s, a' * a) ≈ A' * A
    @test run(s, a * sparse(C)) ≈ A * C
    # unknown nnz flowing into further ops
    @test run(s, (a + b) * x) ≈ (A + B) * x
    @test run(s, ((a + b) * c)' * ones(5)) ≈ ((A + B) * C)' * ones(5)
    @test run(s, sum(a)) ≈ sum(A)
    @test run(s, sum(a; dims=1)) ≈ vec(sum(A; dims=1)) && run(s, sum(a; dims=2)) ≈ vec(sum(A; dims=2))
    @test run(s, sum(a + b; dims=2)) ≈ vec(sum(A + B; dims=2))
    # repeated entries add up in every op
    r = SparseTensor([1, 1, 2], [2, 2, 1], [1.0, 2.0, 4.0], 2, 2)
    R = sparse([1, 1, 2], [2, 2, 1], [1.0, 2.0, 4.0], 2, 2)
    @test run(s, r * [1.0, 10.0]) ≈ R * [1.0, 10.0] && run(s, Array(r)) == Matrix(R)
    @test run(s, r * r) ≈ R * R && run(s, r + r) ≈ 2R && run(s, sum(r; dims=1)) ≈ vec(sum(R; dims=1))
    # a chain of merges is sorted, one entry per position
    abc = (a + b) - (2 * a)
    ix, vals = run(s, [abc.indices, abc.values])
    jix, jvals = rowmajor(B - A)
    @test ix == jix && vals ≈ jvals
    # compress: sorted, merged
    cr = compress(r)
    @test run(s, [cr.indices, cr.values]) == [[0 1; 1 0], [3.0, 4.0]]
    # Float32 stays Float32
    f = SparseTensor(Float32.(A))
    @test eltype(f) == Float32 && eltype(run(s, f * Float32.(x))) == Float32
    @test run(s, f * Float32.(x)) ≈ Float32.(A * x) && run(s, f + f) ≈ Float32.(2A)
    @test eltype(run(s, f')) == Float32 && run(s, 2 * f) ≈ Float32.(2A)
end

@testset "sparse: vcat, hcat, hvcat, getindex" begin
    reset_default_graph()
    s = Session()
    rng = MersenneTwister(3)
    A = sprand(rng, 3, 4, 0.5); B = sprand(rng, 3, 2, 0.5); C = sprand(rng, 2, 4, 0.5); D = sprand(rng, 2, 2, 0.5)
    a, b, c, d = SparseTensor.((A, B, C, D))
    @test run(s, [a b]) == [A B] && run(s, [a; c]) == [A; C] && run(s, [a b; c d]) == [A B; C D]
    @test run(s, vcat(a, c, a)) == vcat(A, C, A) && run(s, hcat(a, b, b)) == hcat(A, B, B)
    @test run(s, [a + a b; c d]) ≈ [2A B; C D]                           # blocks of unknown nnz
    e = err_of(() -> [a; b])
    @test e isa OxiflowError && occursin("(3, 4)", e.msg) && occursin("(3, 2)", e.msg)
    E = sprand(rng, 6, 5, 0.6)
    Es = SparseTensor(E)
    for (i, j) in ((2:4, [1, 3]), (:, 2:5), (2:2:6, :), ([5, 1, 3], [4, 2]), (Bool[1, 0, 1, 1, 0, 0], 1:2:5), (6:-2:1, [true, false, false, true, true]))
        @test run(s, Es[i, j]) == E[i, j]
    end
    @test run(s, Es[3:end, end-1:end]) == E[3:end, end-1:end]
    # a repeated position selects it again (Julia's rule)
    @test run(s, Es[[2, 2, 1], [5, 1, 1]]) == E[[2, 2, 1], [5, 1, 1]]
    # a single integer: dense, that dimension dropped (ADCME)
    @test run(s, Es[2, :]) == Vector(E[2, :]) && run(s, Es[:, 3]) == Vector(E[:, 3])
    @test run(s, Es[4, 2]) == E[4, 2] && size(Es[4, 2]) == ()
    @test run(s, Es[[1, 4], 2]) == Vector(E[[1, 4], 2])
    @test run(s, (Es + Es)[2:3, 1:2]) ≈ 2E[2:3, 1:2]
    e = err_of(() -> Es[7, :])
    @test e isa OxiflowError && occursin("index 7", e.msg) && occursin("size 6", e.msg)
    e = err_of(() -> Es[1:2, [0, 1]])
    @test e isa OxiflowError && occursin("index 0", e.msg)
    e = err_of(() -> Es[constant([1, 2]), :])
    @test e isa OxiflowError && occursin("tensor index", e.msg)
end

@testset "sparse: scatter_update, scatter_add, zero_out_row, bind" begin
    reset_default_graph()
    s = Session()
    rng = MersenneTwister(4)
    A = sprand(rng, 6, 5, 0.6); B = sprand(rng, 3, 2, 0.7)
    a = SparseTensor(A); b = SparseTensor(B)
    for (i, j) in (([1, 4, 6], 2:3), (2:4, [5, 1]), (Bool[1, 0, 1, 0, 0, 1], [2, 3]))
        U = copy(A); U[i, j] = B
        @test run(s, scatter_update(a, i, j, b)) ≈ U
        P = copy(A); P[i, j] += B
        @test run(s, scatter_add(a, i, j, b)) ≈ P
        Q = copy(A); Q[i, j] -= B
        @test run(s, scatter_sub(a, i, j, B)) ≈ Q
    end
    # an empty block clears it (A's entries there stay stored, as zeros)
    u = run(s, scatter_update(a, :, 1:2, spzero(6, 2)))
    @test u == [spzeros(6, 2) A[:, 3:5]] && nnz(dropzeros(u)) == nnz(A[:, 3:5])
    @test run(s, scatter_update(A, [1, 4, 6], 2:3, b)) ≈ (U = copy(A); U[[1, 4, 6], 2:3] = B; U)   # A a SparseMatrixCSC
    # the dense forms keep working
    @test run(s, scatter_update(constant([1.0, 2.0, 3.0]), 2, 7.0)) == [1.0, 7.0, 3.0]
    @test run(s, scatter_add(constant(ones(2, 2)), 1, :, [1.0, 2.0])) == [2.0 3.0; 1.0 1.0]
    e = err_of(() -> scatter_update(a, 1:2, 1:2, b))
    @test e isa OxiflowError && occursin("(3, 2)", e.msg) && occursin("(2, 2)", e.msg)
    e = err_of(() -> scatter_update(a, [1, 1, 2], 1:2, b))
    @test e isa OxiflowError && occursin("repeats", e.msg)
    # zero_out_row, then identity rows (Dirichlet rows)
    Z = copy(A); Z[[2, 5], :] .= 0; dropzeros!(Z)
    z = zero_out_row(a, [2, 5])
    @test run(s, z) == Z
    @test run(s, z + SparseTensor([2, 5], [2, 5], [1.0, 1.0], 6, 5)) == Z + sparse([2, 5], [2, 5], [1.0, 1.0], 6, 5)
    # bind: the values wait for the op
    v = Variable(0.0)
    bound = bind(a, assign(v, 5.0))
    init(s)
    @test run(s, bound) == A && run(s, v) == 5.0
end

@testset "sparse: solves, factorizations, least squares" begin
    reset_default_graph()
    s = Session()
    rng = MersenneTwister(5)
    n = 8
    ii, jj, vv = sparse_system(rng, n)
    A = sparse(ii, jj, vv, n, n); a = SparseTensor(ii, jj, vv, n, n)
    b = rand(rng, n); Bm = rand(rng, n, 3)
    @test run(s, a \ b) ≈ Matrix(A) \ b && run(s, a \ constant(b)) ≈ Matrix(A) \ b
    @test run(s, a \ Bm) ≈ Matrix(A) \ Bm
    @test run(s, solve(a, b)) ≈ Matrix(A) \ b && run(s, solve(a, b; method="SparseLU")) ≈ Matrix(A) \ b
    F = factorize(a)
    @test F isa SparseFactorization{Float64} && F isa LinearAlgebra.Factorization && size(F) == (n, n)
    @test sprint(show, F) == "SparseFactorization(lu, SparseTensor(8, 8, nnz=$(length(vv)), Float64))"
    x1, x2, x3 = run(s, [F \ b, F \ Bm, F' \ b])          # one factorization serves the three
    @test x1 ≈ Matrix(A) \ b && x2 ≈ Matrix(A) \ Bm && x3 ≈ Matrix(A)' \ b
    @test run(s, solve(F, b)) ≈ Matrix(A) \ b && run(s, lu(a) \ b) ≈ Matrix(A) \ b
    # Cholesky on a symmetric positive definite matrix; refused on an unsymmetric one
    S = A + A' + 2n * I
    sp = SparseTensor(S)
    @test run(s, cholesky(sp) \ b) ≈ Matrix(S) \ b && run(s, factorize(sp; method="cholesky") \ b) ≈ Matrix(S) \ b
    e = err_of(() -> run(s, cholesky(a) \ b))
    @test e isa OxiflowError && occursin("SparseSolve", e.msg) && occursin("symmetric", e.msg)
    e = err_of(() -> run(s, cholesky(SparseTensor(sparse([1.0 2.0; 2.0 1.0]))) \ [1.0, 1.0]))
    @test e isa OxiflowError && occursin("SparseSolve", e.msg) && occursin("not positive definite", e.msg)
    # ADCME's options.sparse.solver picks the method of `\` without one: Cholesky refuses the
    # unsymmetric `a` that LU solves; a factorization made before keeps its method
    Oxiflow.options.sparse.solver = "SimplicialLLT"
    @test run(s, sp \ b) ≈ Matrix(S) \ b && run(s, F \ b) ≈ Matrix(A) \ b
    e = err_of(() -> run(s, a \ b))
    @test e isa OxiflowError && occursin("SparseSolve", e.msg) && occursin("symmetric", e.msg)
    Oxiflow.options.sparse.solver = "SparseQR"
    @test run(s, a \ b) ≈ Matrix(A) \ b
    Oxiflow.options.sparse.solver = "Pardiso"
    e = err_of(() -> sp \ b)
    @test e isa OxiflowError && occursin("options.sparse.solver", e.msg) && occursin("Pardiso", e.msg)
    reset_default_options()
    @test Oxiflow.options.sparse.solver == "SparseLU" && Oxiflow.options.sparse.auto_reorder
    # least squares: a tall matrix
    T = sprand(rng, 12, 5, 0.4) + sparse(1.0I, 12, 5); r = rand(rng, 12)
    t = SparseTensor(T)
    @test run(s, t \ r) ≈ Matrix(T) \ r && run(s, qr(t) \ r) ≈ Matrix(T) \ r
    R2 = rand(rng, 12, 2)
    @test run(s, t \ R2) ≈ Matrix(T) \ R2
    # unknown nnz in the matrix: a product, then a solve
    @test run(s, (a * a) \ b) ≈ (Matrix(A) * Matrix(A)) \ b
    @test run(s, (a + a) \ b) ≈ (2Matrix(A)) \ b
    # Float32
    f = SparseTensor(ii, jj, Float32.(vv), n, n)
    xf = run(s, f \ Float32.(b))
    @test eltype(xf) == Float32
    @test xf ≈ Float32.(Matrix(A) \ b) rtol = 1e-4
    # errors: sizes when the op is added; a singular matrix when it runs, session usable
    e = err_of(() -> a \ rand(n + 1))
    @test e isa OxiflowError && occursin("(8, 8)", e.msg) && occursin("(9,)", e.msg)
    e = err_of(() -> SparseTensor(sprand(3, 5, 0.5)) \ rand(3))
    @test e isa OxiflowError && occursin("fewer rows than columns", e.msg)
    e = err_of(() -> factorize(t; method="lu"))
    @test e isa OxiflowError && occursin("square", e.msg)
    sing = SparseTensor([1, 2, 1, 2], [1, 1, 2, 2], [1.0, 2.0, 2.0, 4.0], 2, 2)
    e = err_of(() -> run(s, sing \ [1.0, 1.0]))
    @test e isa OxiflowError && occursin("SparseSolve", e.msg) && occursin("singular", e.msg)
    @test run(s, a \ b) ≈ Matrix(A) \ b
end

@testset "sparse: gradients match finite differences" begin
    reset_default_graph()
    s = Session()
    rng = MersenneTwister(6)
    n = 6
    ii, jj, v0 = sparse_system(rng, n)
    mat(v) = Matrix(sparse(ii, jj, v, n, n))
    b0 = rand(rng, n); w = rand(rng, n); W = rand(rng, n, n)
    vv = Variable(v0); bb = Variable(b0)
    a = SparseTensor(ii, jj, vv, n, n)
    init(s)
    check(loss, f_v) = @test run(s, gradients(loss, vv)) ≈ fd_grad(f_v, v0) rtol = 1e-5 atol = 1e-8
    # products
    check(sum(w .* (a * bb)), v -> sum(w .* (mat(v) * b0)))
    check(sum(W .* (constant(W') * a)), v -> sum(W .* (W' * mat(v))))
    @test run(s, gradients(sum(w .* (a * bb)), bb)) ≈ mat(v0)' * w
    check(sum(W .* Array(a * a)), v -> sum(W .* (mat(v) * mat(v))))
    # sums, +, transposes, scaling
    check(sum(sin(Array(a + a' * 2.0)) .* W), v -> sum(sin.(mat(v) + 2 * mat(v)') .* W))
    check(sum(a; dims=1)[2] + sum(a; dims=2)[3] * 3 + sum(a), v -> sum(mat(v)[:, 2]) + 3 * sum(mat(v)[3, :]) + sum(mat(v)))
    # getindex, scatter_update, vcat
    check(sum(W[1:3, 1:2] .* Array(a[2:4, [5, 1]])), v -> sum(W[1:3, 1:2] .* mat(v)[2:4, [5, 1]]))
    check(sum(w[1:2] .* a[[3, 3], 2]), v -> sum(w[1:2] .* mat(v)[[3, 3], 2]))
    B = SparseTensor([1, 2], [2, 1], vv[1:2] * 3.0, 2, 2)
    upd(v) = (M = mat(v); M[[2, 5], 3:4] = Matrix(sparse([1, 2], [2, 1], 3 * v[1:2], 2, 2)); M)
    check(sum(W .* Array(scatter_update(a, [2, 5], 3:4, B))), v -> sum(W .* upd(v)))
    check(sum(vcat(W, W) .* Array([a; 2 * a])), v -> sum(vcat(W, W) .* [mat(v); 2 * mat(v)]))
    # chains of merges and merged operands in blocks, scatters and solves (K1 + K2 + K3)
    check(sum(W .* Array(a + 2 * a' - a * 0.5)), v -> sum(W .* (mat(v) + 2 * mat(v)' - 0.5 * mat(v))))
    check(sum(vcat(W, W) .* Array([a + a'; -a])), v -> sum(vcat(W, W) .* [mat(v) + mat(v)'; -mat(v)]))
    check(sum(W .* Array(zero_out_row(a + a, [1, 3]) + a[:, [2, 1, 3, 4, 5, 6]])),
          v -> sum(W .* ((M = 2 * mat(v); M[[1, 3], :] .= 0; M) + mat(v)[:, [2, 1, 3, 4, 5, 6]])))
    check(sum(W .* Array(scatter_add(a + a', 2:3, [1, 6], compress(a)[1:2, 4:5]))),
          v -> sum(W .* (M = mat(v) + mat(v)'; M[2:3, [1, 6]] += mat(v)[1:2, 4:5]; M)))
    check(sum(w .* ((a + a' + spdiag(n)) \ bb)), v -> sum(w .* ((mat(v) + mat(v)' + I) \ b0)))
    # solves: LU with respect to the values and the right-hand side
    check(sum(w .* (a \ bb)), v -> sum(w .* (mat(v) \ b0)))
    @test run(s, gradients(sum(w .* (a \ bb)), bb)) ≈ fd_grad(b -> sum(w .* (mat(v0) \ b)), b0) rtol = 1e-5
    # least squares (QR) on a tall matrix
    m = 9
    ti = [collect(1:n); 7; 8; 9; 9]; tj = [collect(1:n); 1; 2; 3; 5]
    t0 = [fill(3.0, n); 1.0; -1.0; 2.0; 0.5]
    r0 = rand(rng, m)
    tv = Variable(t0); rv = Variable(r0)
    t = SparseTensor(ti, tj, tv, m, n)
    init(s)
    tmat(v) = Matrix(sparse(ti, tj, v, m, n))
    loss = sum(w .* (t \ rv))
    @test run(s, t \ rv) ≈ tmat(t0) \ r0
    @test run(s, gradients(loss, tv)) ≈ fd_grad(v -> sum(w .* (tmat(v) \ r0)), t0) rtol = 1e-5
    @test run(s, gradients(loss, rv)) ≈ fd_grad(r -> sum(w .* (tmat(t0) \ r)), r0) rtol = 1e-5
end

@testset "sparse: gradients through concatenations of unknown nnz" begin
    # `+`, blocks and scatters concatenate entries whose count may be known only at run time
    # (a product, a selection, a merge); the engine differentiates `ConcatV2` along such a
    # dimension, so these chains match finite differences.
    reset_default_graph()
    s = Session()
    rng = MersenneTwister(7)
    n = 5
    ii, jj, v0 = sparse_system(rng, n)
    mat(v) = Matrix(sparse(ii, jj, v, n, n))
    W = rand(rng, n, n); W2 = rand(rng, n, 2n); w = rand(rng, n)
    C = sprand(rng, n, n, 0.5); c = SparseTensor(C)
    vv = Variable(v0)
    a = SparseTensor(ii, jj, vv, n, n)
    init(s)
    check(loss, f_v) = @test run(s, gradients(loss, vv)) ≈ fd_grad(f_v, v0) rtol = 1e-5 atol = 1e-8
    # (A * B) + C, C + (A * B), (A * B) - C
    ab = a * a'
    @test nnz(ab) === nothing
    check(sum(W .* Array(ab + c)), v -> sum(W .* (mat(v) * mat(v)' + C)))
    check(sum(W .* Array(c + a * a)), v -> sum(W .* (C + mat(v) * mat(v))))
    check(sum(W .* Array(a * a - a')), v -> sum(W .* (mat(v) * mat(v) - mat(v)')))
    # blocks of a product: [A*B  C], [A*B; C], [A*B C; C' A]
    check(sum(W2 .* Array([ab c])), v -> sum(W2 .* [mat(v) * mat(v)' C]))
    check(sum(W2' .* Array([a * a; a])), v -> sum(W2' .* [mat(v) * mat(v); mat(v)]))
    check(sum([W W; W W] .* Array([ab c; c' a])), v -> sum([W W; W W] .* [mat(v) * mat(v)' C; C' mat(v)]))
    # merges of merges: (A + B) + C after compress, scatter_add of a product
    check(sum(W .* Array((compress(a) + a') + 2 * a)), v -> sum(W .* (mat(v) + mat(v)' + 2 * mat(v))))
    check(sum(W .* Array(compress(a + c) + (a' + a))), v -> sum(W .* (mat(v) + C + mat(v)' + mat(v))))
    check(sum(W .* Array(scatter_add(a, 2:3, [1, 4], (a * a)[1:2, 2:3]))),
          v -> sum(W .* (M = mat(v); M[2:3, [1, 4]] += (mat(v) * mat(v))[1:2, 2:3]; M)))
    # getindex with a repeated index (a product with a selection matrix), then +, blocks, solves
    p = [2, 2, 1, 4, 5]
    check(sum(W .* Array(a[p, :] + a)), v -> sum(W .* (mat(v)[p, :] + mat(v))))
    check(sum(W .* Array(a[:, p] - c)), v -> sum(W .* (mat(v)[:, p] - C)))
    check(sum(W2 .* Array([a[p, :] a])), v -> sum(W2 .* [mat(v)[p, :] mat(v)]))
    check(sum(w .* ((a * a + spdiag(n)) \ w)), v -> sum(w .* ((mat(v) * mat(v) + I) \ w)))
    # the values are exact too
    @test run(s, ab + c) ≈ sparse(mat(v0) * mat(v0)') + C
    @test run(s, [ab c]) ≈ [sparse(mat(v0) * mat(v0)') C]
    @test run(s, a[p, :] + a) ≈ sparse(mat(v0)[p, :] + mat(v0))
end

@testset "sparse: a selection then + stores no extra entries" begin
    # zero_out_row and getindex followed by +, a block or scatter_add store only the
    # positions of their operands: no (1, 1) entry appears unless an operand has one
    reset_default_graph()
    s = Session()
    A = sparse([1, 2, 3, 3, 4], [2, 3, 1, 4, 2], [1.0, 2.0, 3.0, 4.0, 5.0], 4, 4)
    B = sparse([2, 4], [2, 4], [1.0, 1.0], 4, 4)
    a = SparseTensor(A); b = SparseTensor(B)
    positions(t) = Set(zip(run(s, rows(t)), run(s, cols(t))))
    stored(M) = Set(zip(findnz(M)[1], findnz(M)[2]))
    for (t, M) in ((zero_out_row(a, [1, 3]) + b, (Z = copy(A); Z[[1, 3], :] .= 0; dropzeros!(Z) + B)),
                   (zero_out_row(a + b, 2:3) + b, (Z = A + B; Z[2:3, :] .= 0; dropzeros!(Z) + B)),
                   (a[[2, 3, 4], [2, 3, 4]] + b[[1, 3, 4], 2:4], A[2:4, 2:4] + B[[1, 3, 4], 2:4]),
                   ([zero_out_row(a, 1) b], [(Z = copy(A); Z[1, :] .= 0; dropzeros!(Z)) B]),
                   (scatter_add(zero_out_row(a, [1, 2]), 3:4, 3:4, b[1:2, 1:2]),
                    (Z = copy(A); Z[1:2, :] .= 0; dropzeros!(Z); Z[3:4, 3:4] += B[1:2, 1:2]; Z)))
        R = run(s, t)
        @test R ≈ M
        @test !((1, 1) in stored(M))                 # no operand stores (1, 1) ...
        @test !((1, 1) in positions(t)) && !((1, 1) in stored(R))   # ... nor does the result
        @test positions(t) == stored(M)
    end
end

@testset "sparse: errors name the function and the sizes" begin
    reset_default_graph()
    a = SparseTensor([1, 2], [1, 2], [1.0, 2.0], 2, 2)
    b = SparseTensor([1], [3], [1.0], 2, 3)
    e = err_of(() -> a + b)
    @test e isa OxiflowError && occursin("+", e.msg) && occursin("(2, 2)", e.msg) && occursin("(2, 3)", e.msg)
    e = err_of(() -> a - b)
    @test e isa OxiflowError && occursin("(2, 2)", e.msg) && occursin("(2, 3)", e.msg)
    e = err_of(() -> b * a)
    @test e isa OxiflowError && occursin("(2, 3)", e.msg) && occursin("(2, 2)", e.msg)
    e = err_of(() -> a * rand(3))
    @test e isa OxiflowError && occursin("(3,)", e.msg)
    e = err_of(() -> a + rand(3, 3))
    @test e isa OxiflowError && occursin("(3, 3)", e.msg)
    e = err_of(() -> SparseTensor([1, 3], [1, 1], [1.0, 1.0], 2, 2))
    @test e isa OxiflowError && occursin("row index 3", e.msg)
    e = err_of(() -> SparseTensor([1, 2], [2, 0], [1.0, 1.0], 2, 2))
    @test e isa OxiflowError && occursin("column index 0 (position 2)", e.msg)
    e = err_of(() -> SparseTensor(1:2, Int32[2, 5], [1.0, 1.0], 2, 4))   # not Vector{Int64}: Julia's check
    @test e isa OxiflowError && occursin("column index 5 (position 2)", e.msg)
    e = err_of(() -> SparseTensor([1, 2], [1, 1], [1.0, 1.0], constant(2), 2))
    @test e isa OxiflowError && occursin("Julia integer", e.msg)
    e = err_of(() -> SparseTensor([1, 2], [1], [1.0, 1.0], 2, 2))
    @test e isa OxiflowError && occursin("lengths", e.msg)
    e = err_of(() -> a + SparseTensor([1], [1], Float32[1], 2, 2))
    @test e isa OxiflowError && occursin("Float32", e.msg)
    # a tensor index out of bounds fails when the op runs, naming it; the session goes on
    s = Session()
    k = placeholder(Int64; shape=[1])
    bad = SparseTensor(k, [1], [1.0], 2, 2)
    e = err_of(() -> run(s, bad * [1.0, 1.0], k => [3]))
    @test e isa OxiflowError && occursin("SparseTensorDenseMatMul", e.msg) && occursin("out of bounds", e.msg)
    @test run(s, bad * [1.0, 1.0], k => [2]) == [0.0, 1.0]
end

@testset "sparse: placement (CPU kernels only)" begin
    reset_default_graph()
    a = SparseTensor([1, 2], [1, 2], [2.0, 4.0], 2, 2)
    b = constant([1.0, 1.0])
    free = a \ b
    @gpu begin
        global sparse_on_gpu = a \ b
    end
    @test sparse_on_gpu.device == "/device:GPU:0"
    s = Session(emulated_gpus=1)
    @test assigned_device(s, free) == "/job:localhost/replica:0/task:0/device:CPU:0"   # no GPU kernel
    e = err_of(() -> run(s, sparse_on_gpu))
    @test e isa OxiflowError && occursin("Cannot assign a device for operation $(sparse_on_gpu.op.name)", e.msg) &&
          occursin("no supported kernel for GPU devices", e.msg) && occursin("SparseSolve", e.msg)
    soft = Session(emulated_gpus=1, soft=true)
    @test assigned_device(soft, sparse_on_gpu) == "/job:localhost/replica:0/task:0/device:CPU:0"
    @test run(soft, sparse_on_gpu) ≈ [0.5, 0.25]
end

@testset "sparse: a matrix of the enclosing graph inside a while_loop body" begin
    reset_default_graph()
    A0 = sparse([1, 2, 2, 3], [1, 1, 2, 3], [4.0, 1.0, 3.0, 2.0], 3, 3)
    A = SparseTensor(A0)
    c = Variable(0.5)
    # x_{k+1} = (A + c I) \ (A' x_k), three times: scaled, transposed and solved in the body
    body(k, x) = (k + 1, (A + c * spdiag(3)) \ (A' * x))
    _, x = while_loop((k, x) -> k < 3, body, [constant(0), constant([1.0, 2.0, 3.0])])
    s = Session(); init(s)
    xj(cv) = (y = [1.0, 2.0, 3.0]; for _ in 1:3; y = (Matrix(A0) + cv * I) \ (Matrix(A0)' * y); end; y)
    @test run(s, x) ≈ xj(0.5) rtol = 1e-12
    @test run(s, gradients(sum(x), c)) ≈ (sum(xj(0.5 + 1e-6)) - sum(xj(0.5 - 1e-6))) / 2e-6 rtol = 1e-6
end
