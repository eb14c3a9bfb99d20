# Solves with a `SparseTensor` (ADCME's `\`, `factorize`, `solve`), one engine op:
# `SparseSolve` (crates/oxiflow-core/src/ops/sparse_solve.rs; LU, Cholesky, QR least squares),
# whose factorizations the session caches by (method, indices, values).

export SparseFactorization, solve, factorize

import LinearAlgebra: factorize

"""
    SparseFactorization

What `factorize(A::SparseTensor)` returns (ADCME's `factorize` returns the pair of the matrix
and a factorization handle; this is a `LinearAlgebra.Factorization`): the matrix `A`, the
`method` (`"lu"`, `"cholesky"` or `"qr"`) and whether it stands for `A'`. `F \\ b` (and
`solve(F, b)`) adds a `SparseSolve` on `A`'s own indices and values tensors. No op runs
when it is made: the engine caches each factorization per session, keyed by the method and
the matrix's indices and values, so every solve with `F` in a run (and in later runs while
the values do not change), its transposed solves (`F' \\ b`) and the gradients' transposed
solves factorize `A` once.
"""
struct SparseFactorization{T} <: Factorization{T}
    A::SparseTensor
    method::String
    adjoint::Bool
end

# ADCME's solver names and the engine's, lowercased; `nothing` picks by shape: a square
# matrix by `Oxiflow.options.sparse.solver` (ADCME's "auto"), a tall one by QR.
function solve_method(A::SparseTensor, method, fname)
    if method === nothing || lowercase(string(method)) == "auto"
        if A.m == A.n
            s = options.sparse.solver
            lowercase(s) == "auto" && return "lu"
            return solve_method(A, s, "$fname (Oxiflow.options.sparse.solver)")
        end
        A.m > A.n && return "qr"
        invalid("$fname: a SparseTensor of size $(size(A)) has fewer rows than columns; SparseSolve solves square systems (LU, Cholesky) and least squares with m ≥ n (QR)")
    end
    m = lowercase(string(method))
    m in ("lu", "sparselu") && return "lu"
    m in ("cholesky", "llt", "simplicialllt") && return "cholesky"
    m in ("qr", "sparseqr", "lstsq") && return "qr"
    m == "simplicialldlt" && invalid("$fname: SimplicialLDLT is not available; use method=\"cholesky\" for a symmetric positive definite matrix or \"lu\"")
    invalid("$fname: unknown method $(repr(method)) (expected \"lu\", \"cholesky\" or \"qr\")")
end

"""
    factorize(A::SparseTensor; method=nothing) -> SparseFactorization
    lu(A::SparseTensor), cholesky(A::SparseTensor), qr(A::SparseTensor)

ADCME's `factorize`: a [`SparseFactorization`](@ref) of `A` for repeated solves `F \\ b`.
`method`: `"lu"` (square), `"cholesky"` (symmetric positive definite, checked when the solve
runs), `"qr"` (least squares, `m ≥ n`), or `nothing` (square: LU; tall: QR); ADCME's names
`"SparseLU"`, `"SimplicialLLT"`, `"SparseQR"` are accepted. `lu`, `cholesky` and `qr` of a
`SparseTensor` are the same with the method fixed. A method that does not fit the shape
raises an `OxiflowError`.
"""
function factorize(A::SparseTensor; method=nothing)
    how = solve_method(A, method, "factorize")
    how in ("lu", "cholesky") && A.m != A.n &&
        invalid("factorize: method \"$how\" needs a square matrix, got a SparseTensor of size $(size(A)) (use \"qr\" for least squares)")
    how == "qr" && A.m < A.n &&
        invalid("factorize: least squares (\"qr\") needs at least as many rows as columns, got a SparseTensor of size $(size(A))")
    return SparseFactorization{eltype(A)}(A, how, false)
end
LinearAlgebra.lu(A::SparseTensor) = factorize(A; method="lu")
LinearAlgebra.cholesky(A::SparseTensor) = factorize(A; method="cholesky")
LinearAlgebra.qr(A::SparseTensor) = factorize(A; method="qr")

Base.size(F::SparseFactorization) = F.adjoint ? (F.A.n, F.A.m) : (F.A.m, F.A.n)
Base.size(F::SparseFactorization, i::Integer) = size(F)[i]
"""`F'`, `transpose(F)`: the factorization of `A'` (solves `A' x = b` with `A`'s factorization; not for `"qr"`)."""
function Base.adjoint(F::SparseFactorization{T}) where {T}
    F.method == "qr" && invalid("adjoint: the transpose of a least-squares (\"qr\") factorization is not supported")
    return SparseFactorization{T}(F.A, F.method, !F.adjoint)
end
Base.transpose(F::SparseFactorization) = adjoint(F)

# `SparseSolve` of `A` (or `A'`) with a dense right-hand side of one or several columns.
function sparse_solve(A::SparseTensor, b, how::String, adj::Bool, fname)
    t = as_tensor(b, A.values)
    t.dtype == A.values.dtype || invalid("$fname: a $(A.values.dtype) SparseTensor and a $(t.dtype) right-hand side; cast one")
    rows_ = adj ? A.n : A.m
    (ndims(t) in (1, 2) && size(t, 1) in (rows_, nothing)) ||
        invalid("$fname: cannot solve with a SparseTensor of size $(adj ? (A.n, A.m) : size(A)) and a right-hand side of size $(size(t))")
    return add_op("SparseSolve", Tensor[A.indices, A.values, t]; dense_shape=[A.m, A.n], method=how, adjoint=adj)
end

"""
    A \\ b, solve(A, b; method=nothing)
    F \\ b, solve(F, b)

Solves `A x = b` for a `SparseTensor` `A` (`m×n`) and a dense `b` (a vector of length `m`
or an `m×k` matrix, Julia array or tensor, `A`'s dtype): a square `A` by sparse LU, a tall
one (`m > n`) in the least-squares sense by sparse QR (ADCME's `\\` and
`sparse_least_square`), or with the given `method` (see [`factorize`](@ref)); `F \\ b` with
a `SparseFactorization`. One `SparseSolve` op (CPU only), differentiable with respect to the
values of `A` and `b` (adjoint method). A singular matrix (or, for `"cholesky"`, one that is
not symmetric positive definite; for `"qr"`, rank deficient) raises an `OxiflowError` naming
`SparseSolve` when the graph runs, and the session stays usable; sizes that do not fit raise
one when the op is added. ADCME's `\\` of a matrix `b` solves for its rows; here, as
Julia's, for its columns.
"""
Base.:\(A::SparseTensor, b::Union{Tensor,AbstractVecOrMat{<:Real}}) = solve(A, b)
Base.:\(F::SparseFactorization, b::Union{Tensor,AbstractVecOrMat{<:Real}}) = solve(F, b)
Base.:\(F::SparseFactorization, b::Diagonal{<:Real}) = solve(F, Matrix(b))
solve(A::SparseTensor, b; method=nothing) = solve(factorize(A; method=method), b)
solve(F::SparseFactorization, b) = sparse_solve(F.A, b, F.method, F.adjoint, "\\")
