# Sparse matrices with ADCME's `SparseTensor` API (ADCME.jl src/sparse.jl), 1-based on the
# Julia side, built on the engine's sparse ops (crates/oxiflow-core/src/ops/sparse.rs and
# sparse_solve.rs): `SparseTensorDenseMatMul`, `SparseRemap` (merge, sort, select, drop),
# `SparseSparseMatMul` and `SparseSolve`, with the dense `ScatterNd`, `GatherV2`, `ConcatV2`
# and `Pack`. Solves and factorizations: sparse_solve.jl.
#
# A `SparseTensor` is TF's triple held as graph tensors: `indices` (Int64 `[nnz, 2]`, 0-based
# (row, col)), `values` (Float32/Float64 `[nnz]`) and the dense shape as Julia Ints. Repeated
# (row, col) entries are allowed everywhere and mean their sum, as in `sparse(I, J, V)`.

export SparseTensor, RawSparseTensor, spzero, spdiag, spdiagm, dense_to_sparse, find, rows, cols, nnz,
       compress, zero_out_row

import SparseArrays: spdiagm, nnz

"""
    SparseTensor

A sparse `m×n` matrix in the graph (ADCME's `SparseTensor`, TF's `tf.SparseTensor`), with
fields `indices` (an Int64 tensor `[nnz, 2]` of **0-based** `(row, col)` pairs, TF's layout),
`values` (a Float64 or Float32 tensor `[nnz]`) and `m`, `n` (Julia `Int`s: the dense shape is
static). `nnz` may be unknown (`size(s.values) == (nothing,)`) after an op whose number of
stored entries depends on the data (`+`, `getindex`, `compress`, a sparse-sparse product, ...);
every function here accepts such operands. Repeated `(row, col)` entries are allowed and mean
their sum (as `sparse(I, J, V)`); nothing needs the entries sorted.

Constructors (1-based): `SparseTensor(ii, jj, vv, m, n)`, `SparseTensor(A::SparseMatrixCSC)`,
`SparseTensor(A::Matrix)`, `SparseTensor(t::Tensor)` (= `dense_to_sparse(t)`), `constant(A::SparseMatrixCSC)`,
`spzero`, `spdiag`, `spdiagm`, `dense_to_sparse`; 0-based: [`RawSparseTensor`](@ref) and
`SparseTensor(indices::Tensor, values::Tensor, (m, n))`, which checks dtypes and shapes
(an `OxiflowError` otherwise) and copies nothing. `s.o` is ADCME's view of the TF object:
`s.o.indices`, `s.o.values` and `s.o.dense_shape` (an Int64 tensor).

`s._diag` is ADCME's mark of a matrix built as diagonal: `true` for `spdiag(v)`,
`spdiag(n)`, `spdiag(n, 0 => v)`, a Julia matrix for which `isdiag` holds, and the
triplet constructor's `is_diag=true`; scaling, negation, `copy` and the transpose keep it,
`+` and the sparse product of two marked matrices keep it. Nothing else reads it (ADCME's
solver takes a faster path for such a matrix).
"""
mutable struct SparseTensor
    indices::Tensor
    values::Tensor
    m::Int
    n::Int
    diag::Bool
    function SparseTensor(indices::Tensor, values::Tensor, shape::Tuple{Integer,Integer}; is_diag::Bool=false)
        m, n = Int(shape[1]), Int(shape[2])
        (m >= 0 && n >= 0) || invalid("SparseTensor: the dense shape must be non-negative, got ($m, $n)")
        (indices.dtype == Int64 && ndims(indices) == 2 && size(indices, 2) in (2, nothing)) ||
            invalid("SparseTensor: indices must be an Int64 tensor of shape [nnz, 2], got $(indices.dtype) of size $(size(indices))")
        (values.dtype in (Float32, Float64) && ndims(values) == 1) ||
            invalid("SparseTensor: values must be a Float64 or Float32 vector, got $(values.dtype) of size $(size(values))")
        a, b = size(indices, 1), size(values, 1)
        (a === nothing || b === nothing || a == b) ||
            invalid("SparseTensor: $a index rows but $b values")
        if getfield(indices, :graph) !== getfield(values, :graph) && !isempty(FUNCTION_STACK)
            # built inside a while_loop body or a cond branch from a matrix of the enclosing
            # graph: both parts become the body's captures
            indices, values = capture(indices), capture(values)
        end
        getfield(indices, :graph) === getfield(values, :graph) ||
            invalid("SparseTensor: indices and values come from different graphs")
        return new(indices, values, m, n, is_diag)
    end
end

sgraph(s::SparseTensor) = getfield(s.indices, :graph)

# ADCME's `s.o`, the `tf.SparseTensor` it wraps: `s.o.indices` (0-based, Int64 `[nnz, 2]`),
# `s.o.values`, `s.o.dense_shape` (an Int64 tensor `[m, n]`), as code written for ADCME reads them.
function Base.getproperty(s::SparseTensor, name::Symbol)
    name === :_diag && return getfield(s, :diag)
    name === :o || return getfield(s, name)
    return (indices=getfield(s, :indices), values=getfield(s, :values),
            dense_shape=constant_in(getfield(getfield(s, :indices), :graph), Int64[getfield(s, :m), getfield(s, :n)]))
end

# `s` with `f` applied to its values.
map_values(f, s::SparseTensor) = SparseTensor(s.indices, f(s.values), (s.m, s.n); is_diag=s._diag)

# Output `i` of the node that made `t` (ops with several outputs).
output_of(t::Tensor, i::Integer) = Tensor(getfield(t, :graph), getfield(t, :node), Int32(i))

"""
    RawSparseTensor(indices, values, m, n)

ADCME's `RawSparseTensor`: a `SparseTensor` from **0-based** `indices` (an Int64 tensor or
Julia integer matrix `[nnz, 2]`) and `values` (a float tensor or Julia vector), without
copying or sorting. `m`, `n` are Julia integers.
"""
function RawSparseTensor(indices, values, m::Integer, n::Integer)
    g = indices isa Tensor ? getfield(indices, :graph) : values isa Tensor ? getfield(values, :graph) : get_default_graph()
    it = indices isa Tensor ? indices : constant_in(g, convert(Matrix{Int64}, indices))
    vt = values isa Tensor ? values : constant_in(g, float_values(values))
    return SparseTensor(it, vt, (m, n))
end

# A Julia vector of values as a Float64 vector (Float32 stays Float32).
float_values(v::AbstractVector{Float32}) = collect(v)
float_values(v::AbstractVector{<:Real}) = collect(Float64, v)
float_values(v) = invalid("SparseTensor: values must be a vector of real numbers or a float tensor, got a $(typeof(v))")

# The static dense shape from user arguments: Julia integers only.
function dense_dim(d, what)
    d isa Tensor && invalid("SparseTensor: $what is a Tensor; Oxiflow keeps a sparse matrix's dense shape static, so give $what as a Julia integer")
    (d isa Integer && !(d isa Bool) && d >= 0) || invalid("SparseTensor: $what must be a non-negative Julia integer, got $(repr(d))")
    return Int(d)
end

# 1-based Julia indices, bounds-checked against `d` (naming the position).
function check_julia_index(fname, v::AbstractVector, d::Integer, what)
    for (k, x) in enumerate(v)
        1 <= x <= d || invalid("$fname: $what index $x (position $k) is out of bounds for a dimension of size $d")
    end
end

"""
    SparseTensor(ii, jj, vv, m, n)
    SparseTensor(ii, jj, vv)

The `m×n` sparse matrix with `vv[k]` at the **1-based** `(ii[k], jj[k])` (ADCME's
constructor, Julia's `sparse(ii, jj, vv, m, n)`; repeated positions add up). `ii`, `jj`:
Julia integer vectors or ranges, or Int32/Int64 tensors (1-based; may have an unknown
length); `vv`: a real Julia vector (kept as Float32 when it is one, else Float64) or a
Float64/Float32 tensor (gradients flow to it). `m`, `n` must be Julia integers (ADCME also
takes tensors; an `OxiflowError` says why not here); without them, as `sparse(ii, jj, vv)`,
they are `maximum(ii)` and `maximum(jj)`, for Julia index vectors. Errors
(`OxiflowError`): lengths that differ, a Julia index outside `1:m` / `1:n` (naming the
position); a tensor index out of bounds fails when an op reads it, naming the op.
"""
function SparseTensor(ii::Union{Tensor,AbstractVector{<:Integer}}, jj::Union{Tensor,AbstractVector{<:Integer}},
                      vv::Union{Tensor,AbstractVector{<:Real}}, m=nothing, n=nothing; is_diag::Bool=false)
    if m === nothing || n === nothing
        (ii isa Tensor || jj isa Tensor) &&
            invalid("SparseTensor: give the dense shape m, n when the indices are tensors")
        m === nothing && (m = isempty(ii) ? 0 : maximum(ii))
        n === nothing && (n = isempty(jj) ? 0 : maximum(jj))
    end
    m = dense_dim(m, "m"); n = dense_dim(n, "n")
    first_t = findfirst(x -> x isa Tensor, (ii, jj, vv))
    g = first_t === nothing ? get_default_graph() : getfield((ii, jj, vv)[first_t], :graph)
    lens = [x isa Tensor ? size(x, 1) : length(x) for x in (ii, jj, vv)]
    known = filter(l -> l !== nothing, lens)
    (isempty(known) || all(==(known[1]), known)) ||
        invalid("SparseTensor: ii, jj and vv have lengths $(join((l === nothing ? "?" : string(l) for l in lens), ", ")); they must be equal")
    for (x, what) in ((ii, "ii"), (jj, "jj"))
        x isa Tensor && !(x.dtype in (Int32, Int64) && ndims(x) == 1) &&
            invalid("SparseTensor: $what must be an Int32/Int64 vector, got $(x.dtype) of size $(size(x))")
    end
    idx = if ii isa Vector{Int64} && jj isa Vector{Int64}
        # the engine checks and writes the 0-based pairs in one pass
        Tensor(g, oxf_const_sparse_indices(g, ii, jj, m, n), 0)
    elseif !(ii isa Tensor) && !(jj isa Tensor)
        check_julia_index("SparseTensor", ii, m, "row")
        check_julia_index("SparseTensor", jj, n, "column")
        M = Matrix{Int64}(undef, length(ii), 2)
        M[:, 1] .= ii .- 1; M[:, 2] .= jj .- 1
        constant_in(g, M)
    else
        ii isa Tensor || check_julia_index("SparseTensor", ii, m, "row")
        jj isa Tensor || check_julia_index("SparseTensor", jj, n, "column")
        zero_based(x) = x isa Tensor ? cast(x, Int64) - 1 : constant_in(g, collect(Int64, x) .- 1)
        add_op("Pack", Tensor[zero_based(ii), zero_based(jj)]; axis=1)
    end
    vals = vv isa Tensor ? vv : constant_in(g, float_values(vv))
    return SparseTensor(idx, vals, (m, n); is_diag=is_diag)
end

"""
    SparseTensor(A::SparseMatrixCSC), constant(A::SparseMatrixCSC)
    SparseTensor(A::Matrix{<:Real})

The stored entries of a Julia sparse matrix as a `SparseTensor` (explicitly stored zeros
included, as `findnz` gives them), or the nonzeros of a dense Julia matrix (ADCME's
`SparseTensor(A)`, `constant(A)`, `dense_to_sparse(A)`). Float32 values stay Float32,
other reals become Float64; `constant`'s `dtype` (Float32 or Float64) converts them.
"""
function SparseTensor(A::SparseMatrixCSC)
    I, J, V = findnz(A)
    return SparseTensor(I, J, float_values(V), size(A, 1), size(A, 2); is_diag=isdiag(A))
end
SparseTensor(A::AbstractMatrix{<:Real}) = SparseTensor(sparse(A))
SparseTensor(s::SparseTensor) = s
SparseTensor(t::Tensor) = dense_to_sparse(t)

function constant(A::SparseMatrixCSC; dtype=nothing, name=nothing)
    dtype === nothing && return SparseTensor(A)
    dtype in (Float32, Float64) || invalid("constant: a sparse matrix's dtype must be Float32 or Float64, got $(repr(dtype))")
    I, J, V = findnz(A)
    return SparseTensor(I, J, convert(Vector{dtype}, V), size(A, 1), size(A, 2))
end
constant(s::SparseTensor; dtype=nothing, name=nothing) =
    (dtype === nothing || dtype == eltype(s)) ? s : map_values(v -> cast(v, dtype), s)

"""
    dense_to_sparse(A)

ADCME's `dense_to_sparse`. For a Julia matrix: its nonzeros (`SparseTensor(sparse(A))`).
For a dense `Tensor` (Float64 or Float32, rank 2, known size `m×n`): its nonzero entries,
found when the graph runs (TF's `tf.sparse.from_dense`, which ADCME calls: `Where` gives
their 0-based positions in row-major order, `GatherNd` their values), so `nnz` is unknown
until then. Differentiable with respect to `A` (the gradient reaches the nonzero entries;
a zero entry is not stored, so it gets none, as in TF).
"""
dense_to_sparse(A::AbstractMatrix{<:Real}) = SparseTensor(sparse(A))
function dense_to_sparse(A::Tensor)
    sz = known_size(A, "dense_to_sparse")
    length(sz) == 2 || invalid("dense_to_sparse: needs a matrix, got a tensor of size $sz")
    m, n = sz
    A.dtype in (Float32, Float64) || invalid("dense_to_sparse: needs a Float64 or Float32 tensor, got $(A.dtype)")
    idx = add_op("Where", Tensor[A])
    return SparseTensor(idx, add_op("GatherNd", Tensor[A, idx]), (m, n))
end

"""
    spzero(m, n=m; dtype=Float64)

An `m×n` `SparseTensor` without stored entries (ADCME's `spzero`).
"""
function spzero(m::Integer, n::Integer=m; dtype::Type=Float64)
    dtype in (Float32, Float64) || invalid("spzero: dtype must be Float32 or Float64, got $dtype")
    g = get_default_graph()
    return SparseTensor(constant_in(g, zeros(Int64, 0, 2)), constant_in(g, zeros(dtype, 0)), (dense_dim(m, "m"), dense_dim(n, "n")))
end

"""
    spdiag(n::Integer)
    spdiag(v)
    spdiag(m::Integer, k1 => v1, k2 => v2, ...)

ADCME's `spdiag`: the `n×n` sparse identity; the square matrix with the vector `v` (a Julia
vector or a float tensor of known length) on its diagonal; or the `m×m` matrix with `vi`
on diagonal `ki` (0 the main one, `k > 0` above, `k < 0` below), as
`spdiagm(m, m, k1 => v1, ...)`. A diagonal's values may be a tensor (differentiable) or a
Julia vector, of length at most its diagonal's (they fill it from its start, as
`SparseArrays.spdiagm`); a repeated offset adds up. Errors: an offset outside the
matrix, a vector longer than its diagonal.
"""
spdiag(n::Integer; dtype::Type=Float64) =
    n >= 0 ? spdiag(n, 0 => ones(dtype, n)) : invalid("spdiag: the order must be non-negative, got $n")
spdiag(v::Union{Tensor,AbstractVector{<:Real}}) = (L = vec_length(v, "spdiag"); spdiag(L, 0 => v))
function spdiag(m::Integer, p::Pair, ps::Pair...)
    s = diagonals_sparse("spdiag", (m, m), (p, ps...))
    s.diag = all(q -> first(q) == 0, (p, ps...))     # ADCME's is_diag
    return s
end

"""
    spdiagm(k1 => v1, k2 => v2, ...)
    spdiagm(m, n, k1 => v1, ...)
    spdiagm(v::Tensor)

`SparseArrays.spdiagm` when a diagonal is a `Tensor`: a `SparseTensor` (square of the
smallest size that holds the diagonals, or `m×n`) with the vectors or tensors `vi` on the
diagonals `ki`, the rules of `SparseArrays.spdiagm` (a shorter vector fills its diagonal
from the start; an impossible size is an `OxiflowError`). With only Julia vectors it stays
SparseArrays' function (a `SparseMatrixCSC`).
"""
SparseArrays.spdiagm(kv::Pair{<:Integer,<:Union{Tensor,AbstractVector}}...) = diagonals_sparse("spdiagm", nothing, kv)
SparseArrays.spdiagm(m::Integer, n::Integer, kv::Pair{<:Integer,<:Union{Tensor,AbstractVector}}...) =
    diagonals_sparse("spdiagm", (dense_dim(m, "m"), dense_dim(n, "n")), kv)
SparseArrays.spdiagm(v::Tensor) = spdiag(v)

function vec_length(v, fname)
    v isa Tensor || return length(v)
    ndims(v) == 1 || invalid("$fname: a diagonal must be a vector, got a tensor of size $(size(v))")
    return known_size(v, fname)[1]
end

function diagonals_sparse(fname, shape, kv)
    isempty(kv) && invalid("$fname: give at least one diagonal k => v")
    lens = Int[]
    for (k, v) in kv
        k isa Integer || invalid("$fname: a diagonal offset must be an integer, got $(repr(k))")
        v isa Union{Tensor,AbstractVector{<:Real}} || invalid("$fname: a diagonal must be a real vector or a tensor, got a $(typeof(v))")
        push!(lens, vec_length(v, fname))
    end
    # the size that holds every diagonal (SparseArrays' rule)
    need_m = maximum(k >= 0 ? L : L - k for ((k, _), L) in zip(kv, lens))
    need_n = maximum(k >= 0 ? L + k : L for ((k, _), L) in zip(kv, lens))
    m, n = shape === nothing ? (max(need_m, need_n), max(need_m, need_n)) : shape
    for ((k, _), L) in zip(kv, lens)
        diag_len = k >= 0 ? min(m, n - k) : min(m + k, n)
        (-m < k < n || (L == 0 && -m <= k <= n)) ||
            invalid("$fname: diagonal $k is outside a $m×$n matrix")
        L <= diag_len || invalid("$fname: $L values for diagonal $k, which has $diag_len entries in a $m×$n matrix")
    end
    ts = [v for (_, v) in kv if v isa Tensor]
    g = isempty(ts) ? get_default_graph() : getfield(ts[1], :graph)
    T = !isempty(ts) ? ts[1].dtype : all(v -> eltype(v) == Float32, (v for (_, v) in kv)) ? Float32 : Float64
    T in (Float32, Float64) || invalid("$fname: diagonals must be Float32 or Float64, got $T")
    ii = Int[]; jj = Int[]
    for ((k, _), L) in zip(kv, lens)
        append!(ii, k >= 0 ? (1:L) : (1-k:L-k)); append!(jj, k >= 0 ? (1+k:L+k) : (1:L))
    end
    vals = if isempty(ts)
        constant_in(g, convert(Vector{T}, vcat((collect(v) for (_, v) in kv)...)))
    else
        parts = Tensor[v isa Tensor ? v : constant_in(g, convert(Vector{T}, v)) for (_, v) in kv]
        for p in parts
            p.dtype == T || invalid("$fname: diagonals of dtypes $T and $(p.dtype); use one dtype")
        end
        length(parts) == 1 ? parts[1] : add_op("ConcatV2", parts; axis=0)
    end
    M = Matrix{Int64}(undef, length(ii), 2)
    M[:, 1] .= ii .- 1; M[:, 2] .= jj .- 1
    return SparseTensor(constant_in(g, M), vals, (m, n))
end

# ---------------------------------------------------------------- accessors

# Column `c` (0 or 1) of the indices: an Int64 vector of 0-based rows or columns.
index_column(s::SparseTensor, c::Integer) = add_op("GatherV2", [s.indices, constant_in(sgraph(s), Int64(c))]; axis=1)

"""
    find(s) -> (rows, cols, values)

ADCME's `find`: the **1-based** row and column indices (Int64 tensors) and the values of the
stored entries of `s`, sorted by row, then column (TF's canonical order, in which ADCME keeps
every `SparseTensor`: `tf.sparse.reorder` in its constructors; op `SparseReorder`); repeated
positions stay, in the order stored. Gradients flow to the values. With
`Oxiflow.options.sparse.auto_reorder = false` (ADCME's switch for that reordering) they come
in the order stored. `rows(s)`, `cols(s)` and `values(s)` are
each one of them, in the same order.
"""
function find(s::SparseTensor)
    if options.sparse.auto_reorder
        r = add_op("SparseReorder", Tensor[s.indices, s.values]; dense_shape=[s.m, s.n])
        s = SparseTensor(r, output_of(r, 1), (s.m, s.n))
    end
    return index_column(s, 0) + 1, index_column(s, 1) + 1, s.values
end
"""`rows(s)`: the 1-based row of each stored entry of `s` (an Int64 tensor `[nnz]`), in [`find`](@ref)'s order (ADCME)."""
rows(s::SparseTensor) = find(s)[1]
"""`cols(s)`: the 1-based column of each stored entry of `s` (an Int64 tensor `[nnz]`), in [`find`](@ref)'s order (ADCME)."""
cols(s::SparseTensor) = find(s)[2]
"""`values(s)`: the values `[nnz]` of a `SparseTensor`, in [`find`](@ref)'s order (ADCME's `values`); the field `s.values` is in the order stored."""
Base.values(s::SparseTensor) = find(s)[3]

"""
    size(s), size(s, i), eltype(s), ndims(s), nnz(s)

The dense shape `(m, n)` (Julia Ints), the values' element type (Float64 or Float32; ADCME
returns the pair `(Int64, Float64)`), 2, and the number of stored entries when it is known
statically (`nothing` when it depends on the data; repeats count separately).
"""
Base.size(s::SparseTensor) = (s.m, s.n)
Base.size(s::SparseTensor, i::Integer) = i == 1 ? s.m : i == 2 ? s.n : i >= 3 ? 1 :
    invalid("size: dimension $i of a SparseTensor (dimensions are 1 and 2)")
Base.eltype(s::SparseTensor) = s.values.dtype
Base.ndims(s::SparseTensor) = 2
SparseArrays.nnz(s::SparseTensor) = (a = size(s.values, 1)) === nothing ? size(s.indices, 1) : a
Base.lastindex(s::SparseTensor, i::Integer) = size(s, i)
Base.firstindex(s::SparseTensor, i::Integer) = 1
"""`copy(s)`: a `SparseTensor` whose indices and values are `Identity`s of `s`'s (ADCME)."""
Base.copy(s::SparseTensor) = SparseTensor(copy(s.indices), copy(s.values), (s.m, s.n); is_diag=s._diag)

"""
    Array(s)

The dense `m×n` tensor of `s` (repeats summed), one `ScatterNd` (TF's
`tf.sparse.to_dense`), differentiable with respect to the values.
"""
Base.Array(s::SparseTensor) = add_op("ScatterNd", [s.indices, s.values]; shape=[s.m, s.n])

# ---------------------------------------------------------------- merging and remapping

# `SparseRemap(indices, values, row_map, col_map)` into an `m×n` result: each entry (i, j)
# moves to (row_map[i], col_map[j]) (0-based; -1 drops it), then sorting and merging.
function remap(s::SparseTensor, row_map::AbstractVector{<:Integer}, col_map::AbstractVector{<:Integer}, m::Integer, n::Integer)
    g = sgraph(s)
    r = add_op("SparseRemap", Tensor[s.indices, s.values, constant_in(g, collect(Int64, row_map)), constant_in(g, collect(Int64, col_map))];
               dense_shape=[Int(m), Int(n)])
    return SparseTensor(r, output_of(r, 1), (m, n))
end

"""
    compress(A)

ADCME's `compress`: `A` with its entries sorted row-major and repeated positions merged
(summed), one `SparseRemap` with identity maps; its nnz is unknown statically. Unlike
ADCME's, the input need not be sorted.
"""
compress(A::SparseTensor) = remap(A, 0:A.m-1, 0:A.n-1, A.m, A.n)

# Entries of several sparse matrices in one `m×n` (no merge), each shifted by `shifts[k]`
# (rows, columns); their counts may be unknown.
function concat_entries(ss::Vector{SparseTensor}, m, n; shifts=nothing)
    g = sgraph(ss[1])
    idx = Tensor[]
    for (k, s) in enumerate(ss)
        s.values.dtype == ss[1].values.dtype ||
            invalid("SparseTensor: cannot combine $(ss[1].values.dtype) and $(s.values.dtype) values; cast one")
        sh = shifts === nothing ? (0, 0) : shifts[k]
        push!(idx, sh == (0, 0) ? s.indices : s.indices + constant_in(g, Int64[sh[1], sh[2]]))
    end
    length(ss) == 1 && return SparseTensor(idx[1], ss[1].values, (m, n))
    return SparseTensor(add_op("ConcatV2", idx; axis=0), add_op("ConcatV2", Tensor[s.values for s in ss]; axis=0), (m, n))
end

# ---------------------------------------------------------------- arithmetic

"""
    -s, s1 + s2, s1 - s2, s + d, d - s, a * s, s / a

ADCME's arithmetic on `SparseTensor`s. `-s` negates the values. `s1 ± s2` (equal sizes,
else an `OxiflowError` naming both sizes) concatenates the entries and merges them with a
`SparseRemap` (sorted, repeats summed; nnz unknown afterwards). A `SparseTensor` and a
dense matrix (tensor or Julia matrix of the same size) give a dense tensor (`ScatterNd` +
`Add`/`Sub`). A Julia `SparseMatrixCSC` operand becomes a `SparseTensor` first. A scalar
(Julia number or rank-0 tensor) scales the values (`a * s`, `s * a`, `s / a`).
"""
Base.:-(s::SparseTensor) = map_values(-, s)
Base.:+(s::SparseTensor) = s

function Base.:+(a::SparseTensor, b::SparseTensor)
    size(a) == size(b) || invalid("+: cannot add SparseTensors of sizes $(size(a)) and $(size(b))")
    c = compress(concat_entries(SparseTensor[a, b], a.m, a.n))
    c.diag = a._diag && b._diag
    return c
end
function Base.:-(a::SparseTensor, b::SparseTensor)
    size(a) == size(b) || invalid("-: cannot subtract SparseTensors of sizes $(size(a)) and $(size(b))")
    return a + (-b)
end

const DenseOperand = Union{Tensor,AbstractMatrix{<:Real}}

function dense_like(fname, s::SparseTensor, d)
    t = as_tensor(d, s.values)
    t.dtype == s.values.dtype || invalid("$fname: a $(s.values.dtype) SparseTensor and a $(t.dtype) tensor; cast one")
    sz = size(t)
    (length(sz) == 2 && all(k -> sz[k] === nothing || sz[k] == size(s, k), 1:2)) ||
        invalid("$fname: cannot combine a SparseTensor of size $(size(s)) and a dense operand of size $sz")
    return t
end
Base.:+(s::SparseTensor, d::DenseOperand) = Array(s) + dense_like("+", s, d)
Base.:+(d::DenseOperand, s::SparseTensor) = dense_like("+", s, d) + Array(s)
Base.:-(s::SparseTensor, d::DenseOperand) = Array(s) - dense_like("-", s, d)
Base.:-(d::DenseOperand, s::SparseTensor) = dense_like("-", s, d) - Array(s)
for f in (:+, :-)
    @eval Base.$f(a::SparseTensor, b::SparseMatrixCSC{<:Real}) = $f(a, SparseTensor(b))
    @eval Base.$f(a::SparseMatrixCSC{<:Real}, b::SparseTensor) = $f(SparseTensor(a), b)
end

scalar_of(fname, s::SparseTensor, a) = a isa Tensor ?
    (ndims(a) == 0 ? cast(a, s.values.dtype) : invalid("$fname: needs a scalar, got a tensor of size $(size(a))")) :
    as_tensor(a, s.values)
Base.:*(a::Number, s::SparseTensor) = (c = scalar_of("*", s, a); map_values(v -> v * c, s))
Base.:*(s::SparseTensor, a::Number) = a * s
Base.:/(s::SparseTensor, a::Union{Number,Tensor}) = (c = scalar_of("/", s, a); map_values(v -> v / c, s))

"""
    s * x, x * s, s1 * s2

Products with a `SparseTensor` `s` (`m×n`): `s * x` for a dense vector or matrix `x` (Julia
array or tensor; `SparseTensorDenseMatMul`, TF's `tf.sparse.sparse_dense_matmul`) is a
dense vector `[m]` or matrix `[m, k]`; `x * s` for a dense matrix `x` `[p, m]` is the dense
`[p, n]` (the same op with both adjoint flags, then a transpose); `s1 * s2` of two
`SparseTensor`s is a `SparseTensor` (`SparseSparseMatMul`, sorted, nnz unknown; every
product of stored entries is stored, zero or not). A rank-0 tensor scales the values.
Inner sizes that differ raise an `OxiflowError` naming both sizes. Differentiable with
respect to the values and the dense operand (a sparse-sparse product to first order only).
"""
function Base.:*(s::SparseTensor, x::Union{Tensor,AbstractVecOrMat{<:Real}})
    x isa Tensor && ndims(x) == 0 && return (c = scalar_of("*", s, x); map_values(v -> v * c, s))
    t = as_tensor(x, s.values)
    t.dtype == s.values.dtype || invalid("*: a $(s.values.dtype) SparseTensor times a $(t.dtype) tensor; cast one")
    r = ndims(t)
    (r in (1, 2) && size(t, 1) in (s.n, nothing)) ||
        invalid("*: cannot multiply a SparseTensor of size $(size(s)) by a dense operand of size $(size(t))")
    b = r == 1 ? reshape(t, [engine_dim(size(t, 1)), 1]) : t
    y = add_op("SparseTensorDenseMatMul", Tensor[s.indices, s.values, b]; dense_shape=[s.m, s.n])
    return r == 1 ? reshape(y, [s.m]) : y
end
function Base.:*(x::Union{Tensor,AbstractMatrix{<:Real}}, s::SparseTensor)
    x isa Tensor && ndims(x) == 0 && return (c = scalar_of("*", s, x); map_values(v -> v * c, s))
    t = as_tensor(x, s.values)
    t.dtype == s.values.dtype || invalid("*: a $(t.dtype) tensor times a $(s.values.dtype) SparseTensor; cast one")
    (ndims(t) == 2 && size(t, 2) in (s.m, nothing)) ||
        invalid("*: cannot multiply a dense operand of size $(size(t)) by a SparseTensor of size $(size(s))" *
                (ndims(t) == 1 ? " (for a row vector use x' * s)" : ""))
    y = add_op("SparseTensorDenseMatMul", Tensor[s.indices, s.values, t]; dense_shape=[s.m, s.n], adjoint_a=true, adjoint_b=true)
    return transpose_tensor(y, [1, 0])
end
function Base.:*(a::SparseTensor, b::SparseTensor)
    a.n == b.m || invalid("*: cannot multiply SparseTensors of sizes $(size(a)) and $(size(b))")
    a.values.dtype == b.values.dtype || invalid("*: SparseTensors of dtypes $(a.values.dtype) and $(b.values.dtype); cast one")
    r = add_op("SparseSparseMatMul", Tensor[a.indices, a.values, b.indices, b.values]; a_shape=[a.m, a.n], b_shape=[b.m, b.n])
    return SparseTensor(r, output_of(r, 1), (a.m, b.n); is_diag=a._diag && b._diag)
end
Base.:*(a::SparseTensor, b::SparseMatrixCSC{<:Real}) = a * SparseTensor(b)
Base.:*(a::SparseMatrixCSC{<:Real}, b::SparseTensor) = SparseTensor(a) * b

"""
    s', adjoint(s), transpose(s)

The `n×m` transpose: the index columns swapped (`GatherV2`), values shared (ADCME's
`adjoint`; the values are real, so both are the same). Not re-sorted.
"""
Base.adjoint(s::SparseTensor) =
    SparseTensor(add_op("GatherV2", [s.indices, constant_in(sgraph(s), Int64[1, 0])]; axis=1), s.values, (s.n, s.m); is_diag=s._diag)
Base.transpose(s::SparseTensor) = adjoint(s)

"""
    sum(s; dims=nothing)

ADCME's `sum` of a `SparseTensor` (TF's `tf.sparse.reduce_sum`): all values (a scalar);
`dims=1` the column sums (a dense vector of length `n`); `dims=2` the row sums (length
`m`). Products with a vector of ones (`SparseTensorDenseMatMul`), differentiable.
"""
function Base.sum(s::SparseTensor; dims=nothing)
    (dims === nothing || dims === missing) && return sum(s.values)
    dims == 2 && return s * ones(eltype(s), s.n)
    dims == 1 || invalid("sum: dims must be 1 or 2 for a SparseTensor, got $(repr(dims))")
    y = add_op("SparseTensorDenseMatMul", Tensor[s.indices, s.values, constant_in(sgraph(s), ones(eltype(s), s.m, 1))];
               dense_shape=[s.m, s.n], adjoint_a=true)
    return reshape(y, [s.n])
end

"""
    bind(s::SparseTensor, ops...)

ADCME's `bind`: `s` with its values computed only after `ops` ran (tensors or
`SparseTensor`s): an `Identity` of the values under `control_dependencies`. ADCME returns
the bound values tensor; here the result is a `SparseTensor`.
"""
Base.bind(s::SparseTensor, ops::Union{Tensor,SparseTensor}...) =
    map_values(v -> bind(v, Tensor[o isa SparseTensor ? o.values : o for o in ops]...), s)

# ---------------------------------------------------------------- concatenation

"""
    [A B], [A; B], [A B; C D]  (hcat, vcat, hvcat)

Block concatenation of `SparseTensor`s (ADCME's `vcat`/`hcat`/`hvcat`, TF's
`tf.sparse.concat`): indices shifted, entries concatenated (`ConcatV2`, no merge; nnz is the
sum). Sizes that do not fit raise an `OxiflowError` naming them; values need one dtype.
"""
Base.vcat(a::SparseTensor, bs::SparseTensor...) = join_blocks("vcat", SparseTensor[a, bs...], 1)
Base.hcat(a::SparseTensor, bs::SparseTensor...) = join_blocks("hcat", SparseTensor[a, bs...], 2)

# `ss` joined along dimension `dim` (1: stacked rows, 2: side by side columns).
function join_blocks(fname, ss::Vector{SparseTensor}, dim::Int)
    other = 3 - dim
    all(s -> size(s, other) == size(ss[1], other), ss) ||
        invalid("$fname: SparseTensors of sizes $(join(map(size, ss), ", ")) have different numbers of $(other == 1 ? "rows" : "columns")")
    offs = cumsum([0; [size(s, dim) for s in ss]])
    shape = dim == 1 ? (offs[end], ss[1].n) : (ss[1].m, offs[end])
    return concat_entries(ss, shape...; shifts=[dim == 1 ? (offs[k], 0) : (0, offs[k]) for k in eachindex(ss)])
end
function Base.hvcat(rows::Tuple{Vararg{Int}}, a::SparseTensor, xs::SparseTensor...)
    ss = SparseTensor[a, xs...]
    sum(rows) == length(ss) || invalid("hvcat: $(length(ss)) blocks for rows of $(rows) blocks")
    k = 0
    blocks = SparseTensor[]
    for r in rows
        push!(blocks, hcat(ss[k+1:k+r]...))
        k += r
    end
    return vcat(blocks...)
end

# ---------------------------------------------------------------- indexing

# The 1-based positions a Julia index selects in a dimension of size `d`, and whether it
# was a single integer (that dimension is then dropped).
function sparse_positions(fname, i, d::Integer, k::Integer)
    i isa Tensor && unimplemented("$fname: a tensor index on a SparseTensor is not supported; index with Julia integers, ranges, integer vectors, Bool masks or `:`")
    p = scatter_positions(fname, i, d, k)
    return p, i isa Integer
end

"""
    s[i, j]

ADCME's `getindex` of a `SparseTensor`, 1-based, one index per dimension: a range (with
`end`), `:`, an integer vector or a Bool mask keep the dimension; the result is a
`SparseTensor` of size `(length(i), length(j))` holding the entries of `s` in the selected
rows and columns, one `SparseRemap` (sorted, repeats merged, nnz unknown). An index vector
that repeats a position (`s[[1, 1], :]`) is a product with a 0/1 selection matrix
(`SparseSparseMatMul`) along that dimension, as Julia's `A[[1, 1], :]`. A single integer
index returns a **dense** tensor with that dimension dropped, as ADCME's `getindex`
(`squeeze(Array(...))`): `s[2, :]` is a vector of length `n`, `s[2, 3]` a scalar tensor
(Julia's `A[2, :]` is a `SparseVector`). Differentiable with respect to the values. An index out
of bounds raises an `OxiflowError` naming the dimension and position; a tensor index raises
one too (the maps are built in Julia).
"""
function Base.getindex(s::SparseTensor, i, j)
    p, drop_i = sparse_positions("getindex", i, s.m, 1)
    q, drop_j = sparse_positions("getindex", j, s.n, 2)
    t = select(s, p, q)
    (drop_i || drop_j) || return t
    d = Array(t)
    return drop_i && drop_j ? reshape(d, Int[]) : reshape(d, [drop_i ? length(q) : length(p)])
end
Base.getindex(s::SparseTensor, I...) =
    invalid("getindex: a SparseTensor takes two indices s[i, j], got $(length(I))")

# 0-based map of a dimension of size `d` onto the selected unique positions `p` (-1 elsewhere).
function select_map(p::AbstractVector{<:Integer}, d::Integer)
    map = fill(-1, d)
    for (k, x) in enumerate(p)
        map[x] = k - 1
    end
    return map
end

# A 0/1 selection matrix: entry (k, p[k]) for each k, `length(p)×d`.
function selector(p, d, like::SparseTensor)
    g = sgraph(like)
    M = hcat(collect(Int64, 0:length(p)-1), collect(Int64, p) .- 1)
    return SparseTensor(constant_in(g, M), constant_in(g, ones(eltype(like), length(p))), (length(p), d))
end

# `s[p, q]` for 1-based position vectors.
function select(s::SparseTensor, p::AbstractVector{<:Integer}, q::AbstractVector{<:Integer})
    up, uq = allunique(p), allunique(q)
    t = s
    if up || uq
        t = remap(s, up ? select_map(p, s.m) : 0:s.m-1, uq ? select_map(q, s.n) : 0:s.n-1, up ? length(p) : s.m, uq ? length(q) : s.n)
    end
    up || (t = selector(p, s.m, s) * t)
    uq || (t = t * selector(q, s.n, s)')
    return t
end

"""
    zero_out_row(A, rows)

ADCME's `zero_out_row`: `A` without the stored entries of the given 1-based `rows` (an
integer, integer vector, range or Bool mask), as `A[rows, :] .= 0` (e.g. before putting
identity rows for Dirichlet conditions). One `SparseRemap` (sorted, merged, nnz unknown).
"""
function zero_out_row(A::Union{SparseTensor,SparseMatrixCSC}, rows)
    A = SparseTensor(A)
    p, _ = sparse_positions("zero_out_row", rows, A.m, 1)
    rmap = collect(0:A.m-1)
    rmap[p] .= -1
    return remap(A, rmap, 0:A.n-1, A.m, A.n)
end

# ---------------------------------------------------------------- scatter

# B's entries moved into the block (p, q) of an `m×n` matrix (the 0-based position tables
# gathered at B's rows and columns).
function moved(B::SparseTensor, p, q, m, n)
    g = sgraph(B)
    r = add_op("GatherV2", [constant_in(g, collect(Int64, p) .- 1), index_column(B, 0)]; axis=0)
    c = add_op("GatherV2", [constant_in(g, collect(Int64, q) .- 1), index_column(B, 1)]; axis=0)
    return SparseTensor(add_op("Pack", Tensor[r, c]; axis=1), B.values, (m, n))
end

function block_args(fname, A, i1, j1, B)
    A = SparseTensor(A); B = SparseTensor(B)
    p, _ = sparse_positions(fname, i1, A.m, 1)
    q, _ = sparse_positions(fname, j1, A.n, 2)
    size(B) == (length(p), length(q)) ||
        invalid("$fname: a SparseTensor of size $(size(B)) for an index block of size $((length(p), length(q)))")
    A.values.dtype == B.values.dtype || invalid("$fname: SparseTensors of dtypes $(A.values.dtype) and $(B.values.dtype); cast one")
    return A, p, q, B
end

const SparseOperand = Union{SparseTensor,SparseMatrixCSC}

"""
    scatter_update(A::SparseTensor, i, j, B)
    scatter_add(A::SparseTensor, i, j, B)
    scatter_sub(A::SparseTensor, i, j, B)

ADCME's sparse `scatter_update` (`A[i, j] = B`) and `scatter_add` (`A[i, j] += B`), and
`A[i, j] -= B`: a new `SparseTensor`. `i`, `j`: 1-based integers, ranges, integer vectors,
Bool masks or `:`; `B`: a `SparseTensor` or `SparseMatrixCSC` of size
`(length(i), length(j))` (an `OxiflowError` otherwise, naming both sizes); `A` may be a
`SparseMatrixCSC`. `scatter_update` zeroes the values of `A`'s entries inside the block (a
0/1 mask gathered from constant row and column membership tables) and adds `B`'s entries
moved into it; its `i` and `j` must not repeat a position. The result is merged and sorted by
a `SparseRemap` (nnz unknown); a position of the block that `A` stored and `B` does not
stays stored, with value 0. Differentiable with respect to both values.
"""
function scatter_update(A::SparseOperand, i1, j1, B::SparseOperand)
    A, p, q, B = block_args("scatter_update", A, i1, j1, B)
    (allunique(p) && allunique(q)) || invalid("scatter_update: the index block repeats a row or column; each position must be updated once")
    m, n = A.m, A.n
    g = sgraph(A); T = eltype(A)
    inrow = zeros(T, m); inrow[p] .= 1
    incol = zeros(T, n); incol[q] .= 1
    # 0 for A's entries inside the block, 1 elsewhere (membership tables gathered at the entries)
    inside = add_op("GatherV2", [constant_in(g, inrow), index_column(A, 0)]; axis=0) *
             add_op("GatherV2", [constant_in(g, incol), index_column(A, 1)]; axis=0)
    kept = SparseTensor(A.indices, A.values * (1 - inside), (m, n))
    return compress(concat_entries(SparseTensor[kept, moved(B, p, q, m, n)], m, n))
end
function scatter_add(A::SparseOperand, i1, j1, B::SparseOperand)
    A, p, q, B = block_args("scatter_add", A, i1, j1, B)
    return compress(concat_entries(SparseTensor[A, moved(B, p, q, A.m, A.n)], A.m, A.n))
end
scatter_sub(A::SparseOperand, i1, j1, B::SparseOperand) = scatter_add(A, i1, j1, -SparseTensor(B))

# ---------------------------------------------------------------- fetching

# `run(sess, s)` fetches the indices and values and gives a `SparseMatrixCSC`; a
# `SparseTensor` may sit anywhere in a vector or tuple of fetches.
collect_leaves!(leaves, s::SparseTensor) = (push!(leaves, s.indices); push!(leaves, s.values); nothing)
function rebuild(s::SparseTensor, vals, k)
    idx = rebuild(s.indices, vals, k)
    v = rebuild(s.values, vals, k)
    # indices computed or fed at run time are only checked here (the ops that read them
    # check their own)
    size(idx, 1) == length(v) ||
        invalid("run: the fetched SparseTensor has $(size(idx, 1)) index rows but $(length(v)) values")
    for (c, d, what) in ((1, s.m, "row"), (2, s.n, "column"))
        bad = findfirst(i -> !(0 <= i < d), view(idx, :, c))
        bad === nothing || invalid("run: entry $bad of the fetched SparseTensor has $what index $(idx[bad, c]) (0-based), outside 0:$(d - 1) of its $(s.m)×$(s.n) shape")
    end
    return sparse(idx[:, 1] .+ 1, idx[:, 2] .+ 1, v, s.m, s.n)
end
