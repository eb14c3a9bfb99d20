# ADCME's `cell`: a list of arrays of different lengths as TF's `tf.RaggedTensor` with one
# ragged dimension, its rows concatenated in one tensor and cut by row splits.

export cell, RaggedTensor

"""
    RaggedTensor

Rows of different lengths (TF's `tf.RaggedTensor` with one ragged dimension, as ADCME's
[`cell`](@ref) returns): `values`, the rows concatenated along their first dimension (a
`Tensor` of size `(total length, rest...)`), cut by `splits` (a Julia vector of `nrows + 1`
offsets: row `i` is `values[splits[i]+1 : splits[i+1], ...]`). `r[i]` is row `i` (a
tensor), `length(r)` the number of rows, `r.values` and `r.row_splits` (an Int64 tensor) are
TF's fields, and `run(sess, r)` returns a `Vector` of the rows' arrays. Only the row
dimension is ragged.
"""
struct RaggedTensor
    values::Tensor
    splits::Vector{Int}
end

function Base.getproperty(r::RaggedTensor, s::Symbol)
    s === :row_splits && return constant_in(getfield(getfield(r, :values), :graph), Int64.(getfield(r, :splits)))
    return getfield(r, s)
end

Base.length(r::RaggedTensor) = length(r.splits) - 1
Base.lastindex(r::RaggedTensor) = length(r)
Base.eltype(r::RaggedTensor) = r.values.dtype
Base.show(io::IO, r::RaggedTensor) =
    print(io, "RaggedTensor($(length(r)) rows of lengths $(diff(r.splits)), values $(r.values.name), dtype=$(eltype(r)))")

"""
    getindex(r::RaggedTensor, i::Integer) -> Tensor

Row `i` (1-based) of `r`: a tensor of size `(length of row i, rest...)`. An index out of
`1:length(r)` raises an `OxiflowError` (InvalidArgumentError).
"""
function Base.getindex(r::RaggedTensor, i::Integer)
    1 <= i <= length(r) || invalid("RaggedTensor: row $i is out of bounds for a RaggedTensor of $(length(r)) rows")
    lo, hi = r.splits[i], r.splits[i+1]
    v = r.values
    return ndims(v) == 1 ? v[lo+1:hi] : v[lo+1:hi, ntuple(_ -> Colon(), ndims(v) - 1)...]
end

"""
    cell(arr; dtype=eltype(arr[1]))

ADCME's `cell` (TF's `tf.ragged.constant`): the arrays in `arr` (vectors, or arrays whose
sizes differ in the first dimension only) as one [`RaggedTensor`](@ref) whose row `i` is
`arr[i]`, of `dtype` (default: the first array's element type, as ADCME; the others are
converted to it). Errors (`OxiflowError`, InvalidArgumentError): an `arr` that is not a
vector of arrays, arrays whose other dimensions differ, or values that do not convert to
`dtype` exactly.
"""
function cell(arr::AbstractVector; dtype=nothing)
    all(a -> a isa AbstractArray && ndims(a) >= 1, arr) ||
        invalid("cell: expected a vector of arrays (the rows), got $(summary(arr)) with a $(typeof(arr[findfirst(a -> !(a isa AbstractArray && ndims(a) >= 1), arr)]))")
    T = dtype !== nothing ? dtype : isempty(arr) ? Float64 : eltype(arr[1])
    rest = isempty(arr) ? () : size(arr[1])[2:end]
    for a in arr
        size(a)[2:end] == rest ||
            invalid("cell: the rows must differ in their first dimension only, got sizes $(size(arr[1])) and $(size(a))")
    end
    values = isempty(arr) ? zeros(T, 0) : reduce(vcat, [value_of_dtype(a, T, "cell") for a in arr])
    splits = cumsum([0; [size(a, 1) for a in arr]])
    return RaggedTensor(constant(values), splits)
end

collect_leaves!(leaves, r::RaggedTensor) = (push!(leaves, r.values); nothing)
function rebuild(r::RaggedTensor, vals, k)
    v = rebuild(r.values, vals, k)
    rows = ndims(v) == 1 ? [v[r.splits[i]+1:r.splits[i+1]] for i in 1:length(r)] :
           [v[r.splits[i]+1:r.splits[i+1], ntuple(_ -> Colon(), ndims(v) - 1)...] for i in 1:length(r)]
    return rows
end
