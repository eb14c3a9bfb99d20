# Ops on tensors with unknown dimensions beyond the elementwise core (unknown_dims.jl):
# `repeat` (Tile), `pad` (Pad), `reverse` (ReverseV2), `print_tensor` (Print),
# `batch_matmul` (BatchMatMulV2), `diag`/`diagm` of batches (MatrixDiagPart, MatrixDiag), the
# factorizations and solves (`inv`, `det`, `cholesky_factor`, `triangular_solve`, `svd`, `\`,
# `solve_batch`), the Julia functions `std(corrected=true)`, `tril`/`triu`, `spd`, `vector`,
# and the gradients of vector indices and `gather_nd` (GatherV2, GatherNd) when a dimension
# the index does not address is unknown. Oracles: the same function in plain Julia on the fed
# array, and central finite differences of it (fd.jl) for gradients. Every check runs on the
# CPU and on the emulated GPU, at several fed sizes, through one graph and one session.

using Statistics

# A CPU-only session and one with the emulated GPU (runtests.jl sets one up).
udo_sessions() = (Session(emulated_gpus=0), Session())

# The error `f()` raises (`nothing` when it raises none).
udo_error(f) = try; f(); nothing; catch err; err; end

# `build(x)` for a placeholder of partial `shape` equals `oracle(X)` for feeds `X` of each
# size in `sizes`, and the gradient of `sum(build(x)^2)` with respect to `x` equals finite
# differences of `sum(oracle(X)^2)`; the static size of the result is `want`.
# `gen(dims...)` draws the feeds.
function udo_check(build, oracle, shape, sizes, want; gen=randn)
    reset_default_graph()
    x = placeholder(Float64; shape=shape)
    y = build(x)
    @test size(y) == want
    loss = sum(y^2)
    g = gradients(loss, x)
    @test size(g) == size(x)
    for s in udo_sessions(), dims in sizes
        X = gen(dims...)
        yv, gv = run(s, [y, g], Dict(x => X))
        @test size(yv) == size(oracle(X))
        @test yv ≈ oracle(X) rtol = 1e-12
        @test gv ≈ fd_grad(A -> sum(oracle(A) .^ 2), X) rtol = 1e-6 atol = 1e-8
    end
end

@testset "ops on tensors with unknown dimensions" begin

@testset "repeat (Tile) with one, two and no unknown dimensions, and a zero count" begin
    udo_check(x -> repeat(x, 2, 3), X -> repeat(X, 2, 3), [nothing, 2], [(1, 2), (4, 2)], (nothing, 6))
    # two unknown dimensions: the gradient reshapes to the run-time tiled shape
    udo_check(x -> repeat(x, 3, 1, 2), X -> repeat(X, 3, 1, 2), [nothing, nothing, 2], [(1, 3, 2), (2, 1, 2), (3, 4, 2)], (nothing, nothing, 4))
    udo_check(x -> repeat(x, 2, 2), X -> repeat(X, 2, 2), [nothing, nothing], [(2, 3), (1, 1)], (nothing, nothing))
    # a vector repeated with two counts becomes a matrix, as in Julia
    udo_check(x -> repeat(x, 2, 3), X -> repeat(X, 2, 3), [nothing], [(1,), (5,)], (nothing, 3))
    # a zero count: an empty result and a zero gradient
    udo_check(x -> repeat(x, 0, 2), X -> repeat(X, 0, 2), [nothing, 3], [(2, 3)], (0, 6))
end

@testset "pad (Pad), also along an unknown dimension with nothing after it" begin
    udo_check(x -> pad(x, [1 2; 0 1]), X -> [zeros(1, size(X, 2) + 1); [X zeros(size(X, 1))]; zeros(2, size(X, 2) + 1)],
              [nothing, 3], [(1, 3), (4, 3)], (nothing, 4))
    udo_check(x -> pad(x, [0 0; 2 0]), X -> [zeros(size(X, 1), 2) X], [nothing, nothing], [(2, 3), (5, 1)], (nothing, nothing))
    udo_check(x -> pad(x, [3 0; 0 0]), X -> [zeros(3, size(X, 2)); X], [nothing, nothing], [(1, 2), (3, 3)], (nothing, nothing))
    # constant_values: a second Pad of ones_like marks the border
    udo_check(x -> pad(x, [1 1]; constant_values=2.5), X -> [2.5; X; 2.5], [nothing], [(1,), (6,)], (nothing,))
end

@testset "reverse (ReverseV2) along known, unknown and all dimensions" begin
    udo_check(x -> reverse(x; dims=1), X -> reverse(X; dims=1), [nothing, 3], [(1, 3), (5, 3)], (nothing, 3))
    udo_check(x -> reverse(x; dims=2), X -> reverse(X; dims=2), [nothing, 3], [(4, 3)], (nothing, 3))
    udo_check(x -> reverse(x; dims=(1, 3)), X -> reverse(reverse(X; dims=1); dims=3), [nothing, 2, nothing], [(2, 2, 3), (1, 2, 1)], (nothing, 2, nothing))
end

@testset "batch_matmul (BatchMatMulV2) over an unknown batch, broadcast and adjoint" begin
    B = randn(3, 4)
    bmm(X, Y) = cat([X[i, :, :] * Y for i in 1:size(X, 1)]...; dims=3) |> A -> permutedims(A, (3, 1, 2))
    # a batch of one broadcast over the unknown batch (a rank-2 operand would be ADCME's
    # batch of vectors, below)
    udo_check(x -> batch_matmul(x, constant(reshape(B, 1, 3, 4))), X -> bmm(X, B), [nothing, 2, 3], [(1, 2, 3), (4, 2, 3)], (nothing, 2, 4))
    # an unknown row count in each matrix; adj_x transposes it away
    Bt = randn(2, 4)
    udo_check(x -> batch_matmul(x, constant(reshape(Bt, 1, 2, 4)); adj_x=true), X -> cat([X[i, :, :]' * Bt for i in 1:size(X, 1)]...; dims=3) |> A -> permutedims(A, (3, 1, 2)),
              [nothing, 2, nothing], [(3, 2, 5), (1, 2, 1)], (nothing, nothing, 4))
    # both operands fed with the same unknown batch; the gradients of both
    reset_default_graph()
    a = placeholder(Float64; shape=[nothing, 2, 3]); b = placeholder(Float64; shape=[nothing, 3, 2])
    c = batch_matmul(a, b)
    @test size(c) == (nothing, 2, 2)
    ga, gb = gradients(sum(c^2), [a, b])
    f(A, Bb) = sum(sum(cat([A[i, :, :] * Bb[i, :, :] for i in 1:size(A, 1)]...; dims=3) .^ 2))
    for s in udo_sessions(), n in (1, 3)
        A = randn(n, 2, 3); Bb = randn(n, 3, 2)
        cv, gav, gbv = run(s, [c, ga, gb], Dict(a => A, b => Bb))
        @test cv ≈ permutedims(cat([A[i, :, :] * Bb[i, :, :] for i in 1:n]...; dims=3), (3, 1, 2)) rtol = 1e-12
        @test gav ≈ fd_grad(X -> f(X, Bb), A) rtol = 1e-6 atol = 1e-8
        @test gbv ≈ fd_grad(X -> f(A, X), Bb) rtol = 1e-6 atol = 1e-8
    end
    # a rank-3 batch times a batch of vectors (ADCME's form)
    v = placeholder(Float64; shape=[nothing, 3])
    mv = batch_matmul(a, v)
    @test size(mv) == (nothing, 2)
    A = randn(4, 2, 3); V = randn(4, 3)
    @test run(Session(), mv, Dict(a => A, v => V)) ≈ vcat([(A[i, :, :] * V[i, :])' for i in 1:4]...) rtol = 1e-12
    # inner dimensions that differ are caught when a known size shows it, or when run
    e = udo_error(() -> batch_matmul(a, constant(randn(1, 4, 2))))
    @test e isa OxiflowError && occursin("BatchMatMulV2", e.msg)
    w = placeholder(Float64; shape=[nothing, nothing, 2])
    bad = batch_matmul(a, w)
    s = Session()
    e = udo_error(() -> run(s, bad, Dict(a => randn(2, 2, 3), w => randn(2, 4, 2))))
    @test e isa OxiflowError && occursin("BatchMatMulV2", e.msg)
    @test size(run(s, bad, Dict(a => randn(2, 2, 3), w => randn(2, 3, 2)))) == (2, 2, 2)
end

@testset "diag and diagm (MatrixDiagPart, MatrixDiag) of batches" begin
    dpart(X) = [X[b, i, i] for b in 1:size(X, 1), i in 1:min(size(X, 2), size(X, 3))]
    udo_check(x -> diag(x), dpart, [nothing, 3, 3], [(1, 3, 3), (4, 3, 3)], (nothing, 3))
    udo_check(x -> diag(x), dpart, [nothing, 2, 4], [(3, 2, 4)], (nothing, 2))
    dmat(V) = cat([reshape(diagm(V[b, :]), 1, size(V, 2), size(V, 2)) for b in 1:size(V, 1)]...; dims=1)
    udo_check(x -> diagm(x), dmat, [nothing, 3], [(1, 3), (5, 3)], (nothing, 3, 3))
    udo_check(x -> diagm(x), dmat, [2, nothing], [(2, 4), (2, 1)], (2, nothing, nothing))
    # the forward pass of a matrix whose size is unknown works; its gradient is refused
    reset_default_graph()
    x = placeholder(Float64; shape=[nothing, nothing])
    d = diag(x)
    @test size(d) == (nothing,)
    X = randn(3, 5)
    @test run(Session(), d, Dict(x => X)) ≈ [X[i, i] for i in 1:3]
    e = udo_error(() -> gradients(sum(d), x))
    @test e isa OxiflowError && occursin("MatrixDiagPart", e.msg) && occursin("unknown", e.msg)
end

# `f` applied to each matrix `X[i, :, :]` of a batch, the results stacked along a new first
# dimension (scalars give a vector).
function udo_batched(f, X)
    rs = [f(X[i, :, :]) for i in 1:size(X, 1)]
    rs[1] isa Number && return collect(rs)
    return permutedims(cat(rs...; dims=ndims(rs[1]) + 1), (ndims(rs[1]) + 1, 1:ndims(rs[1])...))
end
# a batch of well-conditioned matrices (eigenvalues away from 0)
udo_wellcond(dims...) = randn(dims...) .+ 4 .* reshape(Matrix(1.0I, dims[end-1], dims[end]), 1, dims[end-1], dims[end])

@testset "inv, det, cholesky_factor, triangular_solve, svd and solves of batches" begin
    udo_check(x -> inv(x), X -> udo_batched(inv, X), [nothing, 3, 3], [(1, 3, 3), (4, 3, 3)], (nothing, 3, 3); gen=udo_wellcond)
    # a square matrix whose order is unknown: [?, 3] is 3×3
    udo_check(x -> det(x), X -> udo_batched(det, X), [nothing, 3, 3], [(2, 3, 3), (5, 3, 3)], (nothing,); gen=udo_wellcond)
    reset_default_graph()
    @test size(inv(placeholder(Float64; shape=[nothing, 3]))) == (3, 3)
    # Cholesky of the SPD batch x x' + 3I, through batch_matmul
    three() = constant(reshape(3.0 * Matrix(1.0I, 3, 3), 1, 3, 3))
    udo_check(x -> cholesky_factor(batch_matmul(x, x; adj_y=true) + three()), X -> udo_batched(A -> Matrix(cholesky(Symmetric(A * A' + 3I)).L), X),
              [nothing, 3, 3], [(1, 3, 3), (3, 3, 3)], (nothing, 3, 3))
    # triangular solves against a known lower triangle, right-hand sides fed in any number
    L = tril(randn(3, 3)) + 4I
    udo_check(x -> triangular_solve(constant(L), x), X -> L \ X, [3, nothing], [(3, 1), (3, 5)], (3, nothing))
    udo_check(x -> triangular_solve(constant(L), x; adjoint=true), X -> L' \ X, [3, nothing], [(3, 2)], (3, nothing))
    # `\` and solve_batch with a known A and an unknown number of right-hand sides; LU and
    # least squares
    A = randn(3, 3) + 4I
    udo_check(x -> constant(A) \ x, X -> A \ X, [3, nothing], [(3, 1), (3, 4)], (3, nothing))
    udo_check(x -> solve_batch(constant(A), x), X -> (A \ X')', [nothing, 3], [(1, 3), (6, 3)], (nothing, 3))
    T = randn(5, 3)
    udo_check(x -> constant(T) \ x, X -> T \ X, [5, nothing], [(5, 2)], (3, nothing))
    # the singular values of a batch and the gradient of their sum (the nuclear norm)
    udo_check(x -> svd(x).S, X -> udo_batched(svdvals, X), [nothing, 4, 3], [(1, 4, 3), (3, 4, 3)], (nothing, 3))
    # U diagm(S) V' rebuilds the batch: the gradient through U and V as well
    udo_check(x -> (f = svd(x); batch_matmul(f.U, batch_matmul(diagm(f.S), f.Vt))), X -> X, [nothing, 3, 2], [(1, 3, 2), (2, 3, 2)], (nothing, 3, 2))
    # gradients that need the matrix's own size say so, naming the op
    reset_default_graph()
    x = placeholder(Float64; shape=[nothing, nothing])
    for (y, op) in ((svd(x).S, "Svd"), (cholesky_factor(x), "Cholesky"), (diag(x), "MatrixDiagPart"))
        e = udo_error(() -> gradients(sum(y), x))
        @test e isa OxiflowError && occursin(op, e.msg) && occursin("unknown", e.msg)
    end
    # a batch that does not fit the known matrix fails the run naming the op
    b = placeholder(Float64; shape=[nothing, nothing])
    y = constant(A) \ b
    s = Session()
    e = udo_error(() -> run(s, y, Dict(b => randn(4, 2))))
    @test e isa OxiflowError && occursin("MatrixSolve", e.msg)
    @test run(s, y, Dict(b => [1.0 0; 0 1; 0 0])) ≈ A \ [1.0 0; 0 1; 0 0]
end

@testset "std with corrected=true, tril, triu, spd and vector over unknown dimensions" begin
    udo_check(x -> std(x; dims=1, corrected=true), X -> vec(Statistics.std(X; dims=1, corrected=true)), [nothing, 3], [(2, 3), (7, 3)], (3,))
    udo_check(x -> std(x; corrected=true), X -> Statistics.std(X; corrected=true), [nothing, nothing], [(2, 3), (4, 1)], ())
    # one element: NaN, as Statistics.std of one number
    reset_default_graph()
    x = placeholder(Float64; shape=[nothing])
    @test isnan(run(Session(), std(x; corrected=true), Dict(x => [2.5])))
    @test isnan(Statistics.std([2.5]; corrected=true))
    # triangles of a batch of matrices (the matrix size known)
    trib(f, X) = permutedims(cat([f(X[i, :, :]) for i in 1:size(X, 1)]...; dims=3), (3, 1, 2))
    udo_check(x -> tril(x), X -> trib(tril, X), [nothing, 3, 4], [(1, 3, 4), (3, 3, 4)], (nothing, 3, 4))
    udo_check(x -> triu(x, 1), X -> trib(A -> triu(A, 1), X), [nothing, 3, 3], [(2, 3, 3)], (nothing, 3, 3))
    reset_default_graph()
    e = udo_error(() -> tril(placeholder(Float64; shape=[3, nothing])))
    @test e isa OxiflowError && occursin("tril", e.msg) && occursin("unknown", e.msg)
    # spd of a matrix of unknown size: A A' as it is
    udo_check(x -> spd(x), X -> X * X', [nothing, nothing], [(2, 2), (3, 3)], (nothing, nothing))
    # vector with indices and values fed in any number; repeated positions add up
    reset_default_graph()
    i = placeholder(Int64; shape=[nothing]); v = placeholder(Float64; shape=[nothing])
    y = vector(i, v, 5)
    @test size(y) == (5,)
    gv = gradients(sum(y .* constant(collect(1.0:5.0))), v)
    for s in udo_sessions()
        @test run(s, y, Dict(i => [2, 5, 2], v => [1.0, 2.0, 3.0])) == [0.0, 4.0, 0.0, 0.0, 2.0]
        @test run(s, gv, Dict(i => [4, 1], v => [1.0, 1.0])) == [4.0, 1.0]
        e = udo_error(() -> run(s, y, Dict(i => [2, 6], v => [1.0, 2.0])))
        @test e isa OxiflowError && occursin("ScatterNd", e.msg)
        e = udo_error(() -> run(s, y, Dict(i => [2, 3], v => [1.0])))
        @test e isa OxiflowError && occursin("ScatterNd", e.msg)
    end
end

@testset "einsum over unknown dimensions" begin
    W = randn(3, 4)
    bjk(X) = permutedims(cat([X[b, :, :] * W for b in 1:size(X, 1)]...; dims=3), (3, 1, 2))
    udo_check(x -> einsum("bij,jk->bik", x, constant(W)), bjk, [nothing, 2, 3], [(1, 2, 3), (4, 2, 3)], (nothing, 2, 4))
    udo_check(x -> einsum("ij,jk->ik", x, constant(W)), X -> X * W, [nothing, 3], [(5, 3)], (nothing, 4))
    # two kept letters, one unknown: grouped into one Reshape -1
    udo_check(x -> einsum("bcj,jk->bck", x, constant(W)), bjk, [nothing, 2, 3], [(3, 2, 3)], (nothing, 2, 4))
    udo_check(x -> einsum("ij,jk->ki", x, constant(W)), X -> (X * W)', [nothing, 3], [(2, 3)], (4, nothing))
    udo_check(x -> einsum("bi,bi->b", x, x), X -> vec(sum(X .^ 2; dims=2)), [nothing, 3], [(1, 3), (6, 3)], (nothing,))
    udo_check(x -> einsum("bij->bji", x), X -> permutedims(X, (1, 3, 2)), [nothing, 2, 3], [(3, 2, 3)], (nothing, 3, 2))
    udo_check(x -> einsum("ij->j", x), X -> vec(sum(X; dims=1)), [nothing, 3], [(4, 3)], (3,))
    # both operands with the unknown batch
    reset_default_graph()
    a = placeholder(Float64; shape=[nothing, 2, 3]); b = placeholder(Float64; shape=[nothing, 3, 2])
    c = einsum("bij,bjk->bik", a, b)
    @test size(c) == (nothing, 2, 2)
    A = randn(3, 2, 3); B = randn(3, 3, 2)
    @test run(Session(), c, Dict(a => A, b => B)) ≈ permutedims(cat([A[i, :, :] * B[i, :, :] for i in 1:3]...; dims=3), (3, 1, 2))
    # two unknown letters kept apart, and a diagonal along an unknown dimension, raise
    x2 = placeholder(Float64; shape=[nothing, nothing, 3])
    e = udo_error(() -> einsum("bcj,jk->bck", x2, constant(W)))
    @test e isa OxiflowError && occursin("einsum", e.msg) && occursin("more than one unknown", e.msg)
    e = udo_error(() -> einsum("ii->i", placeholder(Float64; shape=[nothing, 3])))
    @test e isa OxiflowError && occursin("einsum", e.msg) && occursin("unknown", e.msg)
end

@testset "tf.shape of a batch is the fed size (Shape)" begin
    reset_default_graph()
    x = placeholder(Float64; shape=[nothing, 3, nothing])
    sh = tf.shape(x)
    @test sh.op.type == "Shape" && sh.dtype == Int32 && size(sh) == (3,)
    sh64 = tf.shape(x; out_type=Int64)
    @test sh64.dtype == Int64
    # the batch mean written the TF1 way: a sum divided by the fed row count
    m = sum(x; dims=1) / cast(Float64, sh[1])
    g = gradients(sum(m), x)
    for s in udo_sessions(), n in (1, 4)
        X = randn(n, 3, 2)
        @test run(s, sh, Dict(x => X)) == Int32[n, 3, 2]
        @test run(s, sh64, Dict(x => X)) == Int64[n, 3, 2]
        @test run(s, m, Dict(x => X)) ≈ dropdims(sum(X; dims=1); dims=1) / n rtol = 1e-12
        # Shape has no gradient (TF's NotDifferentiable): only the sum's path contributes
        @test run(s, g, Dict(x => X)) ≈ fill(1 / n, n, 3, 2) rtol = 1e-12
    end
    # a fully known shape stays a constant; other out_types are refused
    @test tf.shape(constant(rand(2, 5))).op.type == "Const"
    e = udo_error(() -> tf.shape(x; out_type=Float64))
    @test e isa OxiflowError && occursin("out_type", e.msg)
end

@testset "print_tensor (Print) of a batch prints the fed value and passes it and its gradient on" begin
    reset_default_graph()
    x = placeholder(Float64; shape=[nothing, 2])
    p = print_tensor(x, "batch")
    @test size(p) == (nothing, 2)
    g = gradients(sum(p^2), x)
    s = Session()
    X = [1.5 -2.0; 3.25 4.0; 0.5 0.125]
    local pv, gv
    out = captured_stderr(() -> ((pv, gv) = run(s, [p, g], Dict(x => X))))
    @test pv == X && gv ≈ 2X
    @test occursin("batch", out) && occursin("3.25", out) && occursin("0.125", out)
end

@testset "gradients of vector indices and gather_nd along known dimensions of a batch" begin
    # a vector index of columns (GatherV2 along a known axis), with a repeat that sums
    udo_check(x -> x[:, [3, 1, 3]], X -> X[:, [3, 1, 3]], [nothing, 4], [(1, 4), (6, 4)], (nothing, 3))
    # an Int tensor index, and two unknown dimensions around the indexed one
    udo_check(x -> x[:, constant([2, 2, 1]), :], X -> X[:, [2, 2, 1], :], [nothing, 3, nothing], [(2, 3, 1), (1, 3, 4)], (nothing, 3, nothing))
    # a 0-d tensor index drops the dimension
    udo_check(x -> x[:, constant(2)], X -> X[:, 2], [nothing, 3], [(5, 3)], (nothing,))
    # gather_nd of rows of a matrix with an unknown column count
    udo_check(x -> tf.gather_nd(x, reshape([2, 0, 2], 3, 1)), X -> X[[3, 1, 3], :], [4, nothing], [(4, 1), (4, 3)], (3, nothing))
    # a hidden layer of an unknown batch, then a column selection: the weights' gradient
    reset_default_graph()
    x = placeholder(Float64; shape=[nothing, 3])
    Wv = randn(3, 4)
    W = Variable(Wv)
    loss = sum(tanh(x * W)[:, [4, 2]] .^ 2)
    gW = gradients(loss, W)
    for s in udo_sessions()
        init(s)
        X = randn(5, 3)
        @test run(s, gW, Dict(x => X)) ≈ fd_grad(A -> sum(tanh.(X * A)[:, [4, 2]] .^ 2), Wv) rtol = 1e-6 atol = 1e-8
    end
end

@testset "gradients of gathers along the unknown dimension itself" begin
    # rows of the batch (GatherV2 along axis 0): the gradient scatters into the fed row count
    udo_check(x -> x[[2, 1, 2], :], X -> X[[2, 1, 2], :], [nothing, 3], [(2, 3), (5, 3)], (3, 3))
    udo_check(x -> x[[3, 1]], X -> X[[3, 1]], [nothing], [(3,), (7,)], (2,))
    # along an inner unknown axis, with known dimensions on both sides, and an index matrix
    udo_check(x -> x[:, [1, 2, 1], :], X -> X[:, [1, 2, 1], :], [2, nothing, 3], [(2, 2, 3), (2, 4, 3)], (2, 3, 3))
    udo_check(x -> tf.gather(x, [1 0; 0 0]; axis=1), X -> reshape(X[:, [2, 1, 1, 1]], size(X, 1), 2, 2), [nothing, nothing],
              [(3, 2), (1, 5)], (nothing, 2, 2))
    # gather_nd of elements of a matrix with both dimensions unknown
    udo_check(x -> tf.gather_nd(x, [0 1; 1 0; 0 1]), X -> [X[1, 2], X[2, 1], X[1, 2]], [nothing, nothing], [(2, 2), (3, 4)], (3,))
    # boundary values of a batch of collocation points: the weights' gradient
    reset_default_graph()
    x = placeholder(Float64; shape=[nothing, 2])
    Wv = randn(2, 1)
    W = Variable(Wv)
    u = tanh(x * W)
    loss = sum((u[[1, 4], 1] - [0.5, -0.5])^2)
    gW, gx = gradients(loss, [W, x])
    for s in udo_sessions()
        init(s)
        X = randn(6, 2)
        ub(A, Y) = tanh.(Y * A)[[1, 4], 1]
        @test run(s, gW, Dict(x => X)) ≈ fd_grad(A -> sum((ub(A, X) - [0.5, -0.5]) .^ 2), Wv) rtol = 1e-6 atol = 1e-8
        @test run(s, gx, Dict(x => X)) ≈ fd_grad(Y -> sum((ub(Wv, Y) - [0.5, -0.5]) .^ 2), X) rtol = 1e-6 atol = 1e-8
        # an index beyond the fed batch is the gather's error, naming it, and the session runs on
        e = udo_error(() -> run(s, gW, Dict(x => randn(3, 2))))
        @test e isa OxiflowError && occursin("GatherV2", e.msg) && occursin("indices", e.msg)
        @test size(run(s, gx, Dict(x => randn(4, 2)))) == (4, 2)
    end
    # the second derivative through the scatter (a Hessian-vector product of a gathered loss)
    reset_default_graph()
    x = placeholder(Float64; shape=[nothing])
    g = gradients(sum(x[[2, 2, 3]] .^ 3), x)
    h = gradients(sum(g .* x), x)
    X = [0.5, -1.0, 2.0, 3.0]
    # g = [0, 6 x₂², 3 x₃², 0], so ∇ sum(g .* x) = ∇(6 x₂³ + 3 x₃³)
    @test run(Session(), h, Dict(x => X)) ≈ [0.0, 18 * X[2]^2, 9 * X[3]^2, 0.0]
end

end
