# Dense linear algebra with ADCME's semantics (ADCME.jl src/ops.jl): `\`, `inv`, `det`, `tr`,
# `diag`, `diagm`, `dot`, `batch_matmul`, `sym`, `spd`, `tril`, `triu`, `triangular_solve`,
# `cholesky_factor` (einsum: einsum.jl). Ops: crates/oxiflow-core/src/ops/linalg.rs and linalg/tri.rs.
# Unknown dimensions: the ops take them (a batch of matrices fed at run time, `inv`, `det`,
# `diag`, `svd`, `cholesky_factor`, `batch_matmul`, ...; gradients that need a matrix's row or
# column count say so, naming the op); `tril`/`triu` build a constant mask of the matrix
# size and raise an `OxiflowError` (UnimplementedError) naming themselves when it is unknown.

export batch_matmul, det, tr, diag, diagm, dot, I, sym, spd, tril, triu, einsum, solve_batch, vector,
       triangular_solve, cholesky_factor

"""
    A \\ b

Solves `A x = b` (ADCME's `\\`): a square `A` uses `MatrixSolve` (LU), any other shape
`MatrixSolveLs` (least squares; the minimum-norm solution when `A` has more columns than
rows). `b` is a vector (the result is a vector) or a matrix. Mismatched sizes raise an
`OxiflowError` naming both shapes when the graph is built; a singular `A` raises one naming
the op and the shape when the graph runs ("Input matrix is not invertible."). The size of
`A` must be known (it chooses the solver; otherwise an `OxiflowError`, UnimplementedError);
`b` may have an unknown dimension (right-hand sides fed at run time: a matrix `b` of
`nothing` columns), a length that differs from `A`'s rows then failing the run.
"""
function Base.:\(A::Tensor, b::Tensor)
    known_size(A, "\\")
    ndims(A) == 2 || invalid("\\: the matrix must have rank 2, got a tensor of shape $(size(A))")
    (ndims(b) in (1, 2) && size(b, 1) in (nothing, size(A, 1))) ||
        invalid("\\: cannot solve with a matrix of shape $(size(A)) and a right-hand side of shape $(size(b))")
    op = size(A, 1) == size(A, 2) ? "MatrixSolve" : "MatrixSolveLs"
    ndims(b) == 1 && return solve_vector(op, A, b)
    return add_op(op, [A, b])
end
# `op(A, b)` for a vector `b`: `b` as a column (`ExpandDims`, which keeps an unknown
# length), the result back to a vector (`Squeeze`).
function solve_vector(op, A, b; attrs...)
    x = add_op(op, [A, add_op("ExpandDims", [b]; dim=1)]; attrs...)
    return add_op("Squeeze", [x]; squeeze_dims=[1])
end

Base.:\(A::Tensor, b::Union{Number,AbstractArray}) = A \ as_tensor(b, A)
Base.:\(A::AbstractArray, b::Tensor) = as_tensor(A, b) \ b

"""
    inv(A), det(A)

Inverse (`MatrixInverse`) and determinant (`MatrixDeterminant`) of a square matrix or a
batch `[..., n, n]` (TF's `tf.linalg.inv`, `tf.linalg.det`). A singular `A` makes `inv`
fail when run, with an `OxiflowError` naming the op and the shape.
"""
Base.inv(A::Tensor) = add_op("MatrixInverse", [A])
LinearAlgebra.det(A::Tensor) = add_op("MatrixDeterminant", [A])

"""
    diag(A), tr(A)

Main diagonal (`MatrixDiagPart`; `min(m, n)` entries of an `m×n` matrix, TF's
`tf.linalg.diag_part`) and trace (`sum(diag(A))`).
"""
LinearAlgebra.diag(A::Tensor) = add_op("MatrixDiagPart", [A])
LinearAlgebra.tr(A::Tensor) = sum(diag(A); dims=ndims(A) - 1)

"""
    diagm(v), diagm(0 => v)

Square matrix with the vector tensor `v` on its diagonal (`MatrixDiag`, ADCME's `diagm`,
TF's `tf.linalg.diag`). Only the main diagonal is supported.
"""
LinearAlgebra.diagm(v::Tensor) = add_op("MatrixDiag", [v])
function LinearAlgebra.diagm(p::Pair{<:Integer,Tensor})
    first(p) == 0 || invalid("diagm: only the main diagonal (0 => v) is supported for tensors, got $(first(p)) => ...")
    return diagm(last(p))
end

"""
    dot(x, y)

`sum(x .* y)` (ADCME's `dot`), for tensors of one shape (or broadcastable ones).
"""
LinearAlgebra.dot(x::Tensor, y::Tensor) = sum(x .* y)
LinearAlgebra.dot(x::Tensor, y::AbstractArray) = sum(x .* y)
LinearAlgebra.dot(x::AbstractArray, y::Tensor) = sum(x .* y)

"""
    batch_matmul(a, b; adj_x=false, adj_y=false)

Batched matrix product (ADCME's `batch_matmul`, TF's `tf.matmul` on batches, op
`BatchMatMulV2`): `a[i,:,:] * b[i,:,:]` for `[..., m, k]` and `[..., k, n]` operands, batch
axes broadcasting. As in ADCME, a rank-3 `a` with a rank-2 `b` multiplies each matrix by the
matching row of `b`, `a[i,:,:] * b[i,:]` (`b` is a batch of vectors; the result is
`[batch, m]`). `adj_x`/`adj_y` transpose the last two axes of an operand first. Operands may
be tensors or Julia arrays in any mix (an array takes the tensor's dtype; two arrays keep
their own). Errors name both shapes. Dimensions may be unknown (`nothing`, a batch fed at
run time): sizes that differ are then an `OxiflowError` naming `BatchMatMulV2` when the graph
runs.
"""
function batch_matmul(a::Tensor, b::Tensor; adj_x::Bool=false, adj_y::Bool=false)
    (ndims(a) >= 2 && ndims(b) >= 1) ||
        invalid("batch_matmul: needs a tensor of rank ≥ 2 first, got shapes $(size(a)) and $(size(b))")
    if ndims(a) == 3 && ndims(b) == 2
        adj_y && invalid("batch_matmul: adj_y does not apply to a batch of vectors of shape $(size(b))")
        (size(b, 1) === nothing || size(a, 1) === nothing || size(b, 1) == size(a, 1)) ||
            invalid("batch_matmul: a batch of $(size(a, 1)) matrices $(size(a)) and $(size(b, 1)) vectors $(size(b))")
        bv = add_op("ExpandDims", [b]; dim=2)
        return add_op("Squeeze", [add_op("BatchMatMulV2", [a, bv]; adj_x=adj_x, adj_y=false)]; squeeze_dims=[2])
    end
    ndims(b) >= 2 || invalid("batch_matmul: cannot multiply shapes $(size(a)) and $(size(b))")
    return add_op("BatchMatMulV2", [a, b]; adj_x=adj_x, adj_y=adj_y)
end
batch_matmul(a::Tensor, b::AbstractArray; kw...) = batch_matmul(a, as_tensor(b, a); kw...)
batch_matmul(a::AbstractArray, b::Tensor; kw...) = batch_matmul(as_tensor(a, b), b; kw...)
batch_matmul(a::AbstractArray, b::AbstractArray; kw...) = batch_matmul(constant(a), constant(b); kw...)

"""
    sym(A)

ADCME's `sym`: the symmetric part `(A + A') / 2` of a square matrix (a tensor or a Julia
matrix), as a tensor.
"""
sym(A::Tensor) = (A + A') / 2
sym(A::AbstractMatrix) = sym(constant(A))

"""
    spd(A)

ADCME's `spd`: the symmetric positive semi-definite matrix `A * A'` of a square matrix (a
tensor or a Julia matrix; ADCME's source computes `o * o'`), positive definite when `A` is
nonsingular. A non-square input raises an `OxiflowError` ("Input `o` must be a square
matrix" in ADCME); with an unknown dimension (`nothing`) the product is formed as it is,
without that check.
"""
function spd(A::Tensor)
    m, n = size(A, 1), size(A, ndims(A))
    (ndims(A) == 2 && (m === nothing || n === nothing || m == n)) || invalid("spd: the input must be a square matrix, got shape $(size(A))")
    return A * A'
end
spd(A::AbstractMatrix) = spd(constant(A))

# The Bool mask `keep(i, j)` over the last two axes of `A` (`i`, `j` 1-based), as a constant.
function band_mask(A::Tensor, keep, fname)
    ndims(A) >= 2 || invalid("$fname: needs a matrix or a batch of matrices, got shape $(size(A))")
    m, n = size(A, ndims(A) - 1), size(A, ndims(A))
    (m === nothing || n === nothing) &&
        unimplemented("$fname: $(A.name) has size $(size(A)): the row or column count of its matrices is unknown until the graph runs, and the mask needs it (a batch dimension may be unknown)")
    return constant_in(getfield(A, :graph), Bool[keep(i, j) for i in 1:m, j in 1:n])
end

"""
    tril(A, k=0), triu(A, k=0)

The lower (upper) triangle of a matrix or of each matrix of a batch `[..., m, n]`, as
Julia's `tril`/`triu` (ADCME's `tril`/`triu`, TF's `tf.linalg.band_part` family): `tril`
keeps the elements with `j - i ≤ k`, `triu` those with `j - i ≥ k`, the rest become 0.
`SelectV2` with a constant mask, so the gradient passes through the kept elements only
(and an `Inf` outside the triangle still gives 0). The mask needs the matrix size: a batch
dimension may be unknown (`nothing`), an unknown row or column count raises an
`OxiflowError` (UnimplementedError).
"""
function LinearAlgebra.tril(A::Tensor, k::Integer=0)
    return add_op("SelectV2", [band_mask(A, (i, j) -> j - i <= k, "tril"), A, zeros_like(A)])
end
function LinearAlgebra.triu(A::Tensor, k::Integer=0)
    return add_op("SelectV2", [band_mask(A, (i, j) -> j - i >= k, "triu"), A, zeros_like(A)])
end

"""
    triangular_solve(A, b; lower=true, adjoint=false, name=nothing)

Solves `A x = b`, or `A' x = b` with `adjoint=true`, for a triangular `A` (ADCME's
`triangular_solve`, TF's `tf.linalg.triangular_solve`; op `MatrixTriangularSolve`). Only the
triangle of `A` that `lower` names is read, diagonal included: the other may hold anything.
`A` is `n×n` and `b` a vector of length `n` (the result is a vector) or an `n×k` matrix;
batches `[..., n, n]` and `[..., n, k]` with equal batch axes work too. Float32 or Float64,
tensors or Julia arrays; differentiable in both (TF's `_MatrixTriangularSolveGrad`: the
gradient of `A` stays in its triangle). Runs on the CPU. Mismatched sizes raise an
`OxiflowError` naming both shapes when the graph is built; a zero on the diagonal raises one
when it runs ("Input matrix is not invertible.").
"""
function triangular_solve(A, b; lower::Bool=true, adjoint::Bool=false, name=nothing)
    a = A isa Tensor ? A : (b isa Tensor ? as_tensor(A, b) : constant(A))
    r = as_tensor(b, a)
    if ndims(r) == 1
        return solve_vector("MatrixTriangularSolve", a, r; name=name, lower=lower, adjoint=adjoint)
    end
    return add_op("MatrixTriangularSolve", [a, r]; name=name, lower=lower, adjoint=adjoint)
end

"""
    cholesky_factor(A; name=nothing)

The lower-triangular `L` with `L * L' == A` for a symmetric positive definite `A` (`n×n`, or
a batch `[..., n, n]`; op `Cholesky`, TF's `tf.linalg.cholesky`, also reached as
`tf.linalg.cholesky` and `tf.cholesky` here). Only the lower triangle of `A` is read; `L` has
zeros above the diagonal. Float32 or Float64 (computed in Float64), on the CPU.
Differentiable: TF's `_CholeskyGrad`, which returns the symmetric gradient (it treats `A`
as symmetric). A matrix that is not positive definite raises an `OxiflowError` naming the
op and the shape when the graph runs ("Cholesky decomposition was not successful.").
Solve `A x = b` with it as `triangular_solve(L, triangular_solve(L, b); adjoint=true)`.
"""
cholesky_factor(A; name=nothing) = add_op("Cholesky", [as_tensor(A)]; name=name)

"""
    solve_batch(A, rhs)

ADCME's `solve_batch`: solves `A x = b` for every row `b` of the `k×m` matrix `rhs` with the
`m×n` matrix `A` (square: LU; otherwise least squares, as `\\`), returning the `k×n` matrix
of solutions, row by row: `(A \\ rhs')'`. Tensors or Julia matrices; a composite of
`Transpose` and `MatrixSolve`/`MatrixSolveLs`, so differentiable in both. `rhs` may have an
unknown number of rows (fed at run time); `A`'s size must be known (as for `\\`).
"""
function solve_batch(A, rhs)
    a = A isa Tensor ? A : (rhs isa Tensor ? as_tensor(A, rhs) : constant(A))
    r = as_tensor(rhs, a)
    known_size(a, "solve_batch")
    (ndims(a) == 2 && ndims(r) == 2 && size(r, 2) in (nothing, size(a, 1))) ||
        invalid("solve_batch: needs an m×n matrix and k×m right-hand sides, got shapes $(size(a)) and $(size(r))")
    return (a \ r')'
end

"""
    vector(i, v, n)

ADCME's `vector`: the length-`n` vector with `v[k]` at the 1-based position `i[k]` and zeros
elsewhere (values at a repeated position are summed; TF's `scatter_nd`, op `ScatterNd`,
whose gradient gathers `v`'s gradient back). `i` is an integer vector, range or Int tensor;
`v` a tensor or array of the same length; `n` an integer. Julia indices outside `1:n` raise an
`OxiflowError` naming the position. `i` and `v` may be tensors of unknown length (fed at
run time); lengths that differ then fail the run, naming `ScatterNd`.
"""
function vector(i, v, n::Integer)
    idx = if i isa Tensor
        i.dtype in (Int32, Int64) && ndims(i) == 1 || invalid("vector: indices must be an Int vector, got $(i.dtype) of shape $(size(i))")
        add_op("ExpandDims", [i - one(i.dtype)]; dim=1)
    else
        ii = collect(Int64, i)
        for (k, j) in enumerate(ii)
            1 <= j <= n || invalid("vector: index $j at position $k is outside 1:$n")
        end
        ix = reshape(ii .- 1, length(ii), 1)
        v isa Tensor ? constant_in(getfield(v, :graph), ix) : constant(ix)
    end
    vals = v isa Tensor ? v : constant_in(getfield(idx, :graph), v)
    ndims(vals) == 1 && (size(vals, 1) === nothing || size(idx, 1) === nothing || size(vals, 1) == size(idx, 1)) ||
        invalid("vector: $(size(idx, 1)) indices but values of shape $(size(vals))")
    return add_op("ScatterNd", [idx, vals]; shape=[Int(n)])
end

# ---------------------------------------------------------------- singular value decomposition
# Op: Svd (crates/oxiflow-core/src/ops/linalg.rs).

export svd, TFSVD

"""
    TFSVD

What `svd(A::Tensor)` returns (ADCME's `TFSVD`): `S` (singular values, non-negative and
non-increasing, `[..., p]` with `p = min(m, n)`), `U` (`[..., m, p]`), `V` (`[..., n, p]`)
and `Vt` (`V` with its last two axes swapped, `[..., p, n]`), so that
`A ≈ U * diagm(S) * Vt` for a matrix.
"""
struct TFSVD
    S::Tensor
    U::Tensor
    V::Tensor
    Vt::Tensor
end

"""
    svd(A::Tensor; full=false)

Thin singular value decomposition of a Float32/Float64 matrix `[m, n]` or batch
`[..., m, n]` (`Svd`, TF's `tf.linalg.svd(A, full_matrices=False, compute_uv=True)`, ADCME's
`svd`), returning a [`TFSVD`](@ref) with fields `S`, `U`, `V`, `Vt`. The signs of the columns
of `U` and `V` are the factorization's (faer's), as arbitrary as LAPACK's. CPU only (as
`inv`). Differentiable through `S`, `U` and `V` (TF's `_SvdGrad`; singular values must be
distinct for the gradient through `U` and `V` to be finite). `full=true` (full matrices) is
not supported. A rank < 2 or non-float tensor is an `OxiflowError` naming the op.
"""
function LinearAlgebra.svd(A::Tensor; full::Bool=false)
    full && invalid("svd: full=true (full_matrices) is not supported for tensors; use the thin SVD (full=false)")
    ndims(A) >= 2 || invalid("Svd: the input must have rank >= 2 (a matrix or a batch of matrices), got a tensor of shape $(size(A))")
    S, U, V = node_outputs(add_op("Svd", [A]; compute_uv=true, full_matrices=false))
    r = ndims(A)
    Vt = r == 2 ? V' : transpose_tensor(V, [0:r-3; r - 1; r - 2])
    return TFSVD(S, U, V, Vt)
end
