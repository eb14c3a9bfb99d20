# `t[...]`: 1-based indexing of tensors with Julia's rules (ADCME's getindex), built on
# `StridedSlice` (integers and ranges, with a shrink mask for integers) and `GatherV2`
# (integer vectors, Bool masks and Int tensor indices), all differentiable.

Base.firstindex(t::Tensor) = 1
Base.firstindex(t::Tensor, i::Integer) = 1

# One normalized index: `kind` is :int (an Int or an EndIndex, drops the dim), :range (a
# range or an EndRange, keeps it), :full (`:`), :vector (a Julia vector of 1-based ints,
# keeps the dim) or :tensor (an Int tensor).
struct Ix
    kind::Symbol
    val::Any
end

oob(i, k, t) = invalid("getindex (StridedSlice): index $i is out of bounds for dimension $k of size $(size(t, k)) (tensor of size $(size(t)))")

function normalize_index(t::Tensor, k::Int, i)
    d = size(t, k)
    if i isa Tensor
        i.dtype in (Int32, Int64) && ndims(i) <= 1 ||
            invalid("getindex (GatherV2): a tensor index must be a 0-d or 1-d Int32/Int64 tensor, got $(i.dtype) of size $(size(i))")
        return Ix(:tensor, i)
    elseif i isa Colon
        return Ix(:full, nothing)
    elseif i isa EndIndex || i isa EndRange
        return end_index(t, k, i)
    elseif i isa Bool
        invalid("getindex: a Bool scalar is not an index (dimension $k of a tensor of size $(size(t)))")
    elseif i isa Integer
        # along an unknown dimension the upper bound is checked when the graph runs
        1 <= i && (d === nothing || i <= d) || oob(i, k, t)
        return Ix(:int, Int(i))
    elseif i isa AbstractVector{Bool}
        d === nothing &&
            unimplemented("getindex: a Bool mask as index $k of $(t.name), of size $(size(t)): dimension $k is unknown until the graph runs, so the mask's length cannot be checked against it; use integer indices there")
        length(i) == d || invalid("getindex (GatherV2): a Bool mask of length $(length(i)) for dimension $k of size $d (tensor of size $(size(t)))")
        return Ix(:vector, findall(i))
    elseif i isa AbstractRange{<:Integer}
        isempty(i) && return Ix(:range, i)
        for j in (first(i), last(i))
            1 <= j && (d === nothing || j <= d) || oob(j, k, t)
        end
        (first(i) == 1 && last(i) == d && step(i) == 1) && return Ix(:full, nothing)
        return Ix(:range, i)
    elseif i isa AbstractVector{<:Integer}
        for j in i
            # along an unknown dimension GatherV2 checks the upper bound when it runs
            1 <= j && (d === nothing || j <= d) || invalid("getindex (GatherV2): index $j is out of bounds for dimension $k of size $d (tensor of size $(size(t)))")
        end
        return Ix(:vector, collect(Int, i))
    end
    invalid("getindex: cannot index a tensor with a $(typeof(i)); use Int, ranges, :, integer vectors, Bool masks or Int tensors")
end

# `end`, `end ± k` or a range with them along dimension `k` of `t` (whose size there is
# unknown: a known size makes `end` an Int). An index past the end raises now; one before
# the first element fails when the graph runs (StridedSlice checks it against the fed size).
function end_index(t::Tensor, k::Int, i)
    i.dim == k && size(t, k) === nothing ||
        invalid("getindex: `$i` as index $k of $(t.name), of size $(size(t)), is `end` of dimension $(i.dim)")
    if i isa EndIndex
        i.offset <= 0 ||
            invalid("getindex (StridedSlice): index $i is out of bounds for dimension $k, of unknown size (tensor of size $(size(t))): it is past the end for every size")
        return Ix(:int, i)
    end
    for j in (i.first, i.last)
        j isa Int && j < 1 && oob(j, k, t)
    end
    # `1:end` is all of it
    i.first isa Int && i.first == 1 && i.step == 1 && i.last isa EndIndex && i.last.offset >= 0 && return Ix(:full, nothing)
    return Ix(:range, i)
end

# The StridedSlice of the :int and :range indices (others kept whole); `t` when there is
# nothing to slice.
function slice_part(t::Tensor, ixs::Vector{Ix})
    any(x -> x.kind in (:int, :range), ixs) || return t
    n = length(ixs)
    b = zeros(Int, n); e = zeros(Int, n); s = ones(Int, n)
    bm = 0; em = 0; sm = 0
    for (k, x) in enumerate(ixs)
        bit = 1 << (k - 1)
        if x.kind == :int && x.val isa EndIndex
            # `end + off` is TF's negative index off - 1 (-1: the last element); the kernel
            # checks it against the fed size (TF ignores `end` for a shrunk axis)
            b[k] = x.val.offset - 1; e[k] = x.val.offset; sm |= bit
        elseif x.kind == :int
            b[k] = x.val - 1; e[k] = x.val; sm |= bit
        elseif x.kind == :range && x.val isa EndRange
            b[k], e[k], bmk, emk = end_range_slice(x.val)
            s[k] = x.val.step
            bmk && (bm |= bit); emk && (em |= bit)
        elseif x.kind == :range
            r = x.val
            if isempty(r)
                b[k] = 0; e[k] = 0
            else
                b[k] = first(r) - 1; s[k] = step(r)
                if step(r) > 0
                    e[k] = last(r)
                elseif last(r) >= 2
                    e[k] = last(r) - 2
                else
                    em |= bit          # down to the first element: TF needs the end mask
                end
            end
        else
            bm |= bit; em |= bit
        end
    end
    return strided_slice_op(t, b, e, s, bm, em, sm)
end

"""
    t[i, j, ...]

1-based indexing with Julia's rules (ADCME's `getindex`), one index per dimension:
an `Int` (drops the dimension), a range with or without step, `end`, `:` (these keep the
dimension), a `Vector{Int}`, a `Vector{Bool}` mask, or an `Int32`/`Int64` tensor (0-d:
drops the dimension; 1-d: keeps it; checked when run). Several vector indices select
their product, as in Julia. `t[:]` is `vec(t)`; `t[i]` on a tensor of rank ≥ 2 is the
slice `t[i, :, ...]` along the first dimension (ADCME's row access `m[2]`).

Tensors with an unknown dimension (`size(t, k) === nothing`, a batch fed at run time) are
indexed the same way: along the unknown dimension an `Int`, an integer vector or an Int
tensor beyond the fed size fails when the graph runs (an `OxiflowError` naming
`StridedSlice` or `GatherV2`), and a range is cut to the fed size, as TF's slices are
(`x[1:3, :]` of a 2-row batch has 2 rows). `end` there is an [`EndIndex`](@ref) (the fed size,
known when the graph runs): `end` and `end - k` as an index (`x[end, :]`, `x[end-1, :]`) and
ranges with them (`x[2:end, :]`, `x[1:end-1, :]`, `x[end-2:end, :]`, `x[1:2:end, :]`,
`x[end:-1:1, :]`, an [`EndRange`](@ref)) become one `StridedSlice` with TF's negative indices
and select what Julia selects from the fed value; `end - k` before the first element fails
the run (naming `StridedSlice`), and a range endpoint outside the fed size is cut to it as
above (`x[end-4:end, :]` of a 2-row batch has 2 rows, where Julia raises). Whatever needs the
size itself (`end ÷ 2`, `2end`, `end < 3`, `length(1:end)`) and a Bool mask along an unknown
dimension raise an `OxiflowError` (UnimplementedError) naming `getindex`. A vector or
tensor index differentiates when its own dimension is known, whatever the others
(`x[:, [3, 1]]` of a batch); along the unknown dimension itself (`x[[2, 1], :]`) `gradients`
raises an `OxiflowError` naming `GatherV2` (slices with `:`, `Int`s, `end` and ranges
differentiate).

Ops: `StridedSlice` for integers and ranges, then `GatherV2` per vector or tensor index;
both have gradients (`StridedSliceGrad`, `ScatterNd`). A static index out of bounds is an
`OxiflowError` at graph construction naming the op, the index and the shape; a tensor
index out of bounds fails the run with an error naming the `GatherV2` node (0-based, TF's
text), and the session stays usable.
"""
function Base.getindex(t::Tensor, I...)
    n = ndims(t)
    if isempty(I)
        n == 0 && return t
        invalid("getindex: t[] needs a scalar tensor, got size $(size(t))")
    end
    length(I) == 1 && I[1] isa Colon && return vec(t)
    if length(I) == 1 && n >= 2
        I = (I[1], ntuple(_ -> Colon(), n - 1)...)
    end
    length(I) == n || invalid("getindex: $(length(I)) indices for a tensor of size $(size(t)); give one index per dimension")
    ixs = Ix[normalize_index(t, k, I[k]) for k in 1:n]
    out = slice_part(t, ixs)
    axis = 0      # axis of the current dimension in `out`
    for x in ixs
        if x.kind == :vector
            out = add_op("GatherV2", [out, constant_in(getfield(out, :graph), Int64[j - 1 for j in x.val])]; axis=axis)
        elseif x.kind == :tensor
            out = add_op("GatherV2", [out, x.val - 1]; axis=axis)
            ndims(x.val) == 0 && (axis -= 1)   # a 0-d index drops the dimension
        end
        x.kind == :int || (axis += 1)
    end
    return out
end
