# `end` in `t[...]` along a dimension whose size is unknown until the graph runs (a batch
# dimension fed at run time): a symbolic index `n + offset` and ranges of such indices,
# which `getindex` (indexing.jl) turns into StridedSlice's negative indices and masks.

"""
    EndIndex

What `end` stands for in `t[...]` along dimension `dim` of a tensor whose size there is
unknown until the graph runs (`size(t, dim) === nothing`): the index `n + offset` of the fed
size `n`, so `end` has offset 0 and `end - 1` offset -1. `lastindex(t, dim)` returns one for
such a dimension (the size, an `Int`, for a known dimension).

What works: `end ± k` and `k + end` for an integer `k` (another `EndIndex`), `e1 - e2` (the
difference of the offsets, an `Int`), and ranges `a:b` and `a:s:b` with `end` in one or both
endpoints and an integer step (an [`EndRange`](@ref)). As an index it takes one element and
drops the dimension, like an `Int`: `x[end, :]`, `x[end-1, :]`; one before the first element
(`x[end-2, :]` of a 2-row batch) fails when the graph runs, an `OxiflowError` naming
`StridedSlice`, and one past the end (`end + 1`) raises when the graph is built.

Everything else needs `n` itself (`end ÷ 2`, `2end`, `-end`, `end < 3`, `Int(end)`,
`end .- (0:2)`) and raises an `OxiflowError` (UnimplementedError) naming `getindex` and
saying that the dimension is unknown until the graph runs.
"""
struct EndIndex
    dim::Int
    offset::Int
end

"""
    EndRange

A range with `end` in an endpoint (`2:end`, `1:end-1`, `end-2:end`, `1:2:end`,
`end:-1:1`) along dimension `dim` of a tensor whose size there is unknown until the graph
runs: `first:step:last`, each endpoint an `Int` or an [`EndIndex`](@ref), `step` a nonzero
`Int`. As an index it keeps the dimension and becomes one `StridedSlice` with negative
indices and masks, so it selects what Julia's range selects from the fed value. When an
endpoint falls outside the fed size (`end-4:end` of a 2-row batch) the slice is cut to it
from the first (or, for a negative step, the last) element, as TF's slices are, where Julia
raises a `BoundsError`. An integer endpoint below 1 raises when the graph is built.

`first` and `step` are known; what needs the fed size (`length`, `last`, `isempty`,
`collect`, iteration, `reverse`, broadcasting) raises an `OxiflowError` (UnimplementedError)
naming `getindex`.
"""
struct EndRange
    dim::Int
    first::Union{Int,EndIndex}
    step::Int
    last::Union{Int,EndIndex}
end

function Base.show(io::IO, e::EndIndex)
    print(io, "end")
    e.offset == 0 || print(io, e.offset > 0 ? "+" : "-", abs(e.offset))
end
Base.show(io::IO, r::EndRange) =
    print(io, r.first, ":", r.step == 1 ? "" : string(r.step, ":"), r.last)

# The error for what needs the unknown size; `what` is the expression as written (`desc`
# says it otherwise).
end_unknown(dim, what; desc="`$what`") =
    unimplemented("getindex: $desc along dimension $dim: that dimension is unknown until the graph runs, so `end` there is not a number yet; only `end`, `end ± k` (k an integer) and ranges with them (2:end, 1:end-1, end-2:end, 1:2:end, end:-1:1) are supported")

Base.lastindex(t::Tensor) = lastindex(t, 1)
function Base.lastindex(t::Tensor, i::Integer)
    d = size(t, i)
    return d === nothing ? EndIndex(Int(i), 0) : d
end

Base.:+(e::EndIndex) = e
Base.:+(e::EndIndex, k::Integer) = EndIndex(e.dim, e.offset + Int(k))
Base.:+(k::Integer, e::EndIndex) = e + k
Base.:-(e::EndIndex, k::Integer) = EndIndex(e.dim, e.offset - Int(k))
function Base.:-(a::EndIndex, b::EndIndex)
    a.dim == b.dim || invalid("getindex: `$a - $b` subtracts `end` of dimension $(b.dim) from `end` of dimension $(a.dim)")
    return a.offset - b.offset
end
Base.:(==)(a::EndIndex, b::EndIndex) = a.dim == b.dim && a.offset == b.offset

# Everything else with a number or another `end` needs the size: a clear error, not a
# MethodError or a silently wrong value (`==` would otherwise be `===`, i.e. false).
# `end_expr`: `a op b` as written, for the error (infix operators between, functions around).
end_expr(sym, a, b) = occursin(r"^[a-z]", sym) ? "$sym($a, $b)" : "$a $sym $b"
for (f, sym) in ((:+, "+"), (:-, "-"), (:*, "*"), (:/, "/"), (:div, "÷"), (:fld, "fld"),
                 (:cld, "cld"), (:rem, "%"), (:mod, "mod"), (:^, "^"), (://, "//"),
                 (:<, "<"), (:<=, "<="), (:>, ">"), (:>=, ">="), (:(==), "=="),
                 (:isless, "isless"), (:isequal, "isequal"), (:min, "min"), (:max, "max"),
                 (:cmp, "cmp"), (:&, "&"), (:|, "|"), (:xor, "xor"), (:<<, "<<"), (:>>, ">>"))
    @eval Base.$f(a::EndIndex, b::Number) = end_unknown(a.dim, end_expr($sym, a, b))
    @eval Base.$f(a::Number, b::EndIndex) = end_unknown(b.dim, end_expr($sym, a, b))
    # `e1 - e2` is an Int and `==`/`isequal` compare the offsets (above)
    f in (:-, :(==), :isequal) || @eval Base.$f(a::EndIndex, b::EndIndex) = end_unknown(a.dim, end_expr($sym, a, b))
end
Base.:-(e::EndIndex) = end_unknown(e.dim, "-$e")
for f in (:abs, :sign, :float, :iseven, :isodd, :signbit, :zero, :one, :length, :iterate)
    @eval Base.$f(e::EndIndex) = end_unknown(e.dim, string($(string(f)), "(", e, ")"))
end
Base.broadcastable(e::EndIndex) = end_unknown(e.dim, e; desc="`$e` in a broadcast (`.+`, `.-`, ...)")
(::Type{T})(e::EndIndex) where {T<:Number} = end_unknown(e.dim, "$T($e)")
Base.convert(::Type{T}, e::EndIndex) where {T<:Number} = end_unknown(e.dim, "convert($T, $e)")

# `a:b`, `a:s:b` with `end` in an endpoint.
function end_range(a, s, b)
    e = a isa EndIndex ? a : b
    what = s isa Integer && s == 1 ? "$a:$b" : "$a:$s:$b"
    s isa EndIndex && end_unknown(e.dim, what; desc="`$what` (`end` as the step)")
    for j in (a, s, b)
        j isa Union{EndIndex,Integer} && !(j isa Bool) ||
            invalid("getindex: the range `$what` along dimension $(e.dim) needs integer endpoints and step, got a $(typeof(j))")
    end
    s == 0 && invalid("getindex: the range `$what` along dimension $(e.dim) has step 0")
    a isa EndIndex && b isa EndIndex && a.dim != b.dim &&
        invalid("getindex: the range `$what` mixes `end` of dimensions $(a.dim) and $(b.dim)")
    return EndRange(e.dim, a isa EndIndex ? a : Int(a), Int(s), b isa EndIndex ? b : Int(b))
end
Base.:(:)(a::EndIndex, b::EndIndex) = end_range(a, 1, b)
Base.:(:)(a::EndIndex, b) = end_range(a, 1, b)
Base.:(:)(a, b::EndIndex) = end_range(a, 1, b)
Base.:(:)(a::EndIndex, s, b::EndIndex) = end_range(a, s, b)
Base.:(:)(a::EndIndex, s, b) = end_range(a, s, b)
Base.:(:)(a, s, b::EndIndex) = end_range(a, s, b)

Base.first(r::EndRange) = r.first
Base.step(r::EndRange) = r.step
for f in (:length, :size, :isempty, :last, :iterate, :collect, :reverse, :sum, :minimum, :maximum)
    @eval Base.$f(r::EndRange) = end_unknown(r.dim, string($(string(f)), "(", r, ")"))
end
Base.getindex(r::EndRange, i...) = end_unknown(r.dim, "($r)[$(join(i, ", "))]")
Base.broadcastable(r::EndRange) = end_unknown(r.dim, r; desc="`$r` in a broadcast (`.+`, `.-`, ...)")
Base.in(x, r::EndRange) = end_unknown(r.dim, "$x in $r")

# StridedSlice's (begin, end, begin mask, end mask) of an `EndRange` along a dimension of
# fed size n: `end + off` is the 0-based n + off - 1, i.e. TF's negative index off - 1. An
# endpoint past the size is cut (a mask, or an empty slice when the whole range lies past
# it); one before the first element is clamped by the kernel, as TF's slices are.
function end_range_slice(r::EndRange)
    f, s, l = r.first, r.step, r.last
    empty = (0, 0, false, false)
    if s > 0
        # begin: 0-based first; a first past the end selects nothing
        f isa EndIndex && f.offset >= 1 && return empty
        b = f isa EndIndex ? f.offset - 1 : f - 1
        # end (exclusive): 0-based last + 1, i.e. off for `end + off`; to the end with the mask
        l isa EndIndex && l.offset >= 0 && return (b, 0, false, true)
        return (b, l isa EndIndex ? l.offset : l, false, false)
    end
    # a negative step: from `first` down to `last`, TF's end one below the 0-based last
    l isa EndIndex && l.offset >= 2 && return empty        # last past the end: nothing
    fm = f isa EndIndex && f.offset >= 1                   # first past the end: from the last element
    b = fm ? 0 : f isa EndIndex ? f.offset - 1 : f - 1
    l isa Int && l == 1 && return (b, 0, fm, true)         # down to the first element: the end mask
    return (b, l isa EndIndex ? l.offset - 2 : l - 2, fm, false)
end
