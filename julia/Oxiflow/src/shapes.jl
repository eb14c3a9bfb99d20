# Shape and layout functions on tensors, with ADCME's semantics (ADCME's ops.jl): `'`,
# `reshape` (two conventions), `vec`/`rvec`/`cvec`, `squeeze`, `concat`/`stack`/`unstack`/
# `split`, `vcat`/`hcat`, `repeat`, `reverse`, `diff`, `pad`, `copy`, `ones_like`,
# `zeros_like`, `convert_to_tensor`. Built on the engine's `Transpose`, `Reshape`,
# `ConcatV2`, `Pack`, `Unpack`, `SplitV`, `Tile`, `ReverseV2`, `Pad`, `Squeeze`,
# `StridedSlice`, `Identity`, `OnesLike`, `ZerosLike`, each with its gradient.
#
# Dimensions given by users (`dims=`) are 1-based as in Julia, and negative ones count from
# the end (`dims=-1` is the last dimension, as ADCME's `reverse(o; dims=-1)`); `dims=0` is the
# last dimension too (ADCME passes `dims - 1 = -1` to TF: `concat([a, b]; dims=0)`). A
# positional `axis` is 0-based as in TF, negative from the end.

# On Julia >= 1.9 `stack` is Base's; extend it there (for vectors of tensors) instead of
# exporting a second `stack`.
@static if isdefined(Base, :stack)
    import Base: stack
end

"""Every output of the node that produced `t` (for ops with several outputs)."""
function node_outputs(t::Tensor)
    g = getfield(t, :graph); n = getfield(t, :node)
    return Tensor[Tensor(g, n, Int32(i)) for i in 0:oxf_node_num_outputs(g, n)-1]
end

"""
    dim0(t, d, fname; rank=ndims(t)) -> Int

The 0-based TF axis of a user's 1-based dimension `d` of `t` (of a result of rank `rank`
when that differs, as for `stack`): `1..rank`; `-1..-rank` counted from the end (`-1` is
the last, as ADCME's `reverse`); `0` the last (ADCME's `dims - 1 = -1` in TF). Anything else
raises an `OxiflowError` naming `fname`, `d` and the shape.
"""
function dim0(t, d::Integer, fname; rank=ndims(t))
    k = d == 0 ? rank : d < 0 ? rank + 1 + d : d
    1 <= k <= rank ||
        invalid("$fname: dims $d out of range for a tensor of size $(size(t)) (valid: 1 to $rank, or -1 to -$rank from the end)")
    return Int(k - 1)
end

"""`axis0(t, a, fname; rank)`: a 0-based TF `axis` (negative counts from the end) checked and made non-negative."""
function axis0(t, a::Integer, fname; rank=ndims(t))
    k = a < 0 ? rank + a : a
    0 <= k < rank ||
        invalid("$fname: axis $a out of range for a tensor of size $(size(t)) (valid: 0 to $(rank - 1), or -1 to -$rank from the end)")
    return Int(k)
end

# 0-based axes from 1-based dims (an Int or a collection), each checked; repeats are an error.
function axes0(t::Tensor, dims, fname; rank=ndims(t))
    ds = dims isa Integer ? [dims] : collect(dims)
    ax = Int[dim0(t, d, fname; rank=rank) for d in ds]
    length(unique(ax)) == length(ax) || invalid("$fname: dims $(Tuple(ds)) name a dimension twice (tensor of size $(size(t)))")
    return ax
end

"""
    transpose_tensor(t, perm)

`Transpose` with a 0-based permutation (TF's `tf.transpose(t, perm)`).
"""
transpose_tensor(t::Tensor, perm) = add_op("Transpose", [t]; perm=Int[p for p in perm])

"""
    t'  (adjoint(t))

ADCME's `adjoint`: a scalar is itself; a vector of length `n` becomes a `1×n` row
(`rvec`); a matrix is transposed; a tensor of rank 3 or more swaps its last two dimensions
(TF's `tf.linalg.adjoint`). Op: `Transpose`. `transpose(t)` is the same (tensors are real).
"""
function Base.adjoint(t::Tensor)
    n = ndims(t)
    n == 0 && return t
    n == 1 && return rvec(t)
    return transpose_tensor(t, [0:n-3; n - 1; n - 2])
end
Base.transpose(t::Tensor) = adjoint(t)

"""
    permutedims(t, perm)

Julia's `permutedims` with a 1-based permutation (`Transpose`).
"""
function Base.permutedims(t::Tensor, perm)
    sort(collect(perm)) == collect(1:ndims(t)) || invalid("permutedims: $perm is not a permutation of 1:$(ndims(t)) (tensor of size $(size(t)))")
    return transpose_tensor(t, [p - 1 for p in perm])
end

# Reverses every axis (a no-op below rank 2), used to express column-major reshapes.
flip_axes(t::Tensor) = ndims(t) < 2 ? t : transpose_tensor(t, ndims(t)-1:-1:0)

# Target dims with at most one `:` or -1 resolved from the element count; with `check`,
# an element count that does not fit is an error here (else the engine reports it). When
# `t` has an unknown dimension its element count is known only at run time: the `:` or -1
# stays -1 for the engine's `Reshape` to resolve when the graph runs.
function resolve_dims(t::Tensor, dims, fname; check=true)
    free = findall(d -> d isa Colon || d == -1, collect(dims))
    length(free) <= 1 || invalid("$fname: at most one dimension may be `:` or -1, got $(Tuple(dims))")
    known = prod(Int[d for d in dims if !(d isa Colon || d == -1)])
    for d in dims
        (d isa Colon || d >= -1) || invalid("$fname: negative dimension $d in $(Tuple(dims))")
    end
    out = Int[d isa Colon ? -1 : Int(d) for d in dims]
    is_fully_defined(t) || return out
    n = length(t)
    if !isempty(free)
        (known > 0 && n % known == 0) || invalid("Reshape: cannot reshape a tensor of size $(size(t)) ($n elements) to $(Tuple(dims))")
        out[free[1]] = n ÷ known
    end
    !check || prod(out) == n || invalid("Reshape: cannot reshape a tensor of size $(size(t)) ($n elements) to size $(Tuple(out)) ($(prod(out)) elements)")
    return out
end

"""
    reshape(t, (d1, d2, ...))   reshape(t, [d1, d2, ...])
    reshape(t, d1, d2, ...)

ADCME's two conventions. A tuple or vector of dimensions reshapes in **row-major** order,
exactly as `tf.reshape` (`reshape(t, (2, 3))`); separate integer arguments (one of them may
be `:`) reshape in **column-major** order, exactly as Julia's `reshape(A, 2, 3)` (done as
`Transpose`, `Reshape`, `Transpose`). In the tuple form one entry may be `-1` or `:`.
An element count that does not fit raises an `OxiflowError` naming `Reshape` and both
shapes.

A tensor with an unknown dimension (`size(t) == (nothing, 10)`) reshapes in both forms when
one target entry is `-1` or `:`: that entry is computed when the graph runs, from the fed
size (`reshape(x, (-1, 5))` of an `n×10` batch is `2n×5`), and is unknown (`nothing`) in
the result's `size`. A fed size whose element count does not fit fails at run time, naming
`Reshape`. Without a `-1`/`:` the engine raises an `OxiflowError` naming `Reshape` ("give -1
for one dimension of the target"), since the element count cannot be checked statically.
"""
Base.reshape(t::Tensor, dims::Tuple) = add_op("Reshape", [t]; shape=resolve_dims(t, dims, "reshape"; check=false))
Base.reshape(t::Tensor, dims::AbstractVector) = add_op("Reshape", [t]; shape=resolve_dims(t, dims, "reshape"; check=false))
function Base.reshape(t::Tensor, d1::Union{Integer,Colon}, ds::Union{Integer,Colon}...)
    dims = resolve_dims(t, (d1, ds...), "reshape")
    is_fully_defined(t) && dims == collect(size(t)) && return t
    ndims(t) <= 1 && length(dims) <= 1 && return add_op("Reshape", [t]; shape=dims)
    return flip_axes(add_op("Reshape", [flip_axes(t)]; shape=reverse(dims)))
end

# (`:` is resolved from the element count: statically when it is known, else at run time, so
# these work on tensors with unknown dimensions.)
"""`vec(t)`: the elements in column-major order as a vector (Julia's `vec`; ADCME)."""
Base.vec(t::Tensor) = ndims(t) == 1 ? t : reshape(t, :)
"""`rvec(t)`: the elements in column-major order as a `1×n` row (ADCME)."""
rvec(t::Tensor) = reshape(t, 1, :)
"""`cvec(t)`: the elements in column-major order as an `n×1` column (ADCME)."""
cvec(t::Tensor) = reshape(t, :, 1)

"""
    squeeze(t; dims=nothing)

Drops dimensions of size 1: all of them, or the 1-based `dims` (each must have size 1,
else an `OxiflowError` naming `Squeeze` and the shape). TF's `tf.squeeze`. On a tensor
with an unknown dimension `dims` must be given (which dimensions have size 1 is otherwise
only known at run time; an `OxiflowError` says so); a `dims` entry that is unknown is
checked to be 1 when the graph runs.
"""
function squeeze(t::Tensor; dims=nothing)
    dims === nothing && !is_fully_defined(t) &&
        invalid("squeeze: $(t.name) has size $(size(t)) with an unknown dimension, so which dimensions have size 1 is only known when the graph runs; name them with dims=... (Squeeze)")
    dims === nothing && return add_op("Squeeze", [t])
    return add_op("Squeeze", [t]; squeeze_dims=axes0(t, dims, "squeeze"))
end

# Tensors from a mix of tensors and Julia values (values take the first tensor's dtype).
function as_tensors(xs, fname)
    i = findfirst(x -> x isa Tensor, xs)
    i === nothing && invalid("$fname: needs at least one Tensor")
    like = xs[i]
    return Tensor[as_tensor(x, like) for x in xs]
end

# A positional 0-based `axis` or a 1-based `dims` keyword (either may be negative), for a
# result of rank `rank`.
function axis_arg(t, args, dims, default, fname; rank=ndims(t))
    !isempty(args) && return axis0(t, args[1], fname; rank=rank)
    dims === nothing && return default
    return dim0(t, dims, fname; rank=rank)
end

"""
    concat(ts, axis=0; dims)

Concatenates tensors (or a mix with Julia arrays) along the 0-based `axis` (TF) or the
1-based `dims` (ADCME's keyword). Scalars are stacked into a vector. `ConcatV2`.
"""
function concat(ts::AbstractVector, args...; dims=nothing)
    xs = as_tensors(ts, "concat")
    length(xs) == 1 && return xs[1]
    ndims(xs[1]) == 0 && return stack(xs)
    return add_op("ConcatV2", xs; axis=axis_arg(xs[1], args, dims, 0, "concat"))
end

"""
    stack(ts, axis=0; dims)

Stacks same-shaped tensors along a new 0-based `axis` / 1-based `dims` (TF's `tf.stack`,
`Pack`).
"""
function stack(ts::AbstractVector{<:Tensor}, args...; dims=nothing)
    isempty(ts) && invalid("stack: needs at least one tensor")
    return add_op("Pack", Vector{Tensor}(ts); axis=axis_arg(ts[1], args, dims, 0, "stack"; rank=ndims(ts[1]) + 1))
end

"""
    unstack(t, axis=0; dims)

The slices of `t` along a 0-based `axis` / 1-based `dims`, as a vector of tensors
(TF's `tf.unstack`, `Unpack`). That dimension must be known (the engine raises an
`OxiflowError` naming `Unpack` otherwise); others may be unknown.
"""
unstack(t::Tensor, args...; dims=nothing) = node_outputs(add_op("Unpack", [t]; axis=axis_arg(t, args, dims, 0, "unstack")))

"""
    split(t, n::Integer; dims=1)
    split(t, sizes::Vector; dims=1)

Cuts `t` along `dims` into `n` equal pieces or pieces of `sizes` (one may be -1), as a
vector of tensors (ADCME's `split`, TF's `tf.split`, `SplitV`). Other dimensions may be
unknown; `dims` itself must be known (an `OxiflowError` otherwise: the number or sizes of the
pieces would depend on the feed).
"""
function Base.split(t::Tensor, n_or_sizes::Union{Integer,AbstractVector{<:Integer}}; dims=1)
    ax = axes0(t, dims, "split")[1]
    d = size(t, ax + 1)
    sizes = if n_or_sizes isa Integer
        d === nothing && unimplemented("split: dimension $(ax + 1) of $(t.name), of size $(size(t)), is unknown, so it cannot be cut into $n_or_sizes equal pieces yet; split along a known dimension")
        (n_or_sizes > 0 && d % n_or_sizes == 0) || invalid("split: dimension $(ax + 1) of a tensor of size $(size(t)) does not split into $n_or_sizes equal pieces")
        fill(d ÷ n_or_sizes, n_or_sizes)
    else
        collect(Int, n_or_sizes)
    end
    return node_outputs(add_op("SplitV", [t]; size_splits=sizes, axis=ax))
end

# `x` with trailing dimensions of size 1 up to rank `r` (a vector becomes a column); with
# an unknown dimension by `ExpandDims`, which keeps it.
function pad_rank(x::Tensor, r)
    ndims(x) >= r && return x
    is_fully_defined(x) && return add_op("Reshape", [x]; shape=[collect(size(x)); ones(Int, r - ndims(x))])
    for k in ndims(x):r-1
        x = add_op("ExpandDims", [x]; dim=k)
    end
    return x
end

function tensor_vcat(xs)
    ts = as_tensors(xs, "vcat")
    r = maximum(ndims.(ts))
    r == 0 && return stack(ts)
    length(ts) == 1 && return ts[1]
    return add_op("ConcatV2", Tensor[pad_rank(x, r) for x in ts]; axis=0)
end

function tensor_hcat(xs)
    ts = as_tensors(xs, "hcat")
    r = max(2, maximum(ndims.(ts)))
    return add_op("ConcatV2", Tensor[pad_rank(x, r) for x in ts]; axis=1)
end

const TensorOrValue = Union{Tensor,Number,AbstractArray}

"""
    [a; b]  (vcat)     [a b]  (hcat)     [a b; c d]  (hvcat)

Julia's concatenation on tensors and tensor/array mixes: `vcat` joins along dimension 1
(scalars into a vector; a vector next to matrices counts as a column), `hcat` along
dimension 2 (vectors become columns, scalars a `1×n` row). Arrays take the tensor's
dtype. One of the first three pieces must be a tensor. `ConcatV2` / `Pack`.
"""
const JuliaValue = Union{Number,AbstractArray}
# A tensor among the first three pieces (Julia dispatches on positions, not on "any").
Base.vcat(a::Tensor, xs::TensorOrValue...) = tensor_vcat(Any[a, xs...])
Base.vcat(a::JuliaValue, b::Tensor, xs::TensorOrValue...) = tensor_vcat(Any[a, b, xs...])
Base.vcat(a::JuliaValue, b::JuliaValue, c::Tensor, xs::TensorOrValue...) = tensor_vcat(Any[a, b, c, xs...])
Base.hcat(a::Tensor, xs::TensorOrValue...) = tensor_hcat(Any[a, xs...])
Base.hcat(a::JuliaValue, b::Tensor, xs::TensorOrValue...) = tensor_hcat(Any[a, b, xs...])
Base.hcat(a::JuliaValue, b::JuliaValue, c::Tensor, xs::TensorOrValue...) = tensor_hcat(Any[a, b, c, xs...])
function tensor_hvcat(rows::Tuple{Vararg{Int}}, xs)
    k = 0
    parts = Any[]
    for n in rows
        row = Any[xs[k+1:k+n]...]
        push!(parts, any(x -> x isa Tensor, row) ? tensor_hcat(row) : hcat(row...))
        k += n
    end
    return tensor_vcat(parts)
end
Base.hvcat(rows::Tuple{Vararg{Int}}, a::Tensor, xs::TensorOrValue...) = tensor_hvcat(rows, Any[a, xs...])
Base.hvcat(rows::Tuple{Vararg{Int}}, a::JuliaValue, b::Tensor, xs::TensorOrValue...) = tensor_hvcat(rows, Any[a, b, xs...])
Base.hvcat(rows::Tuple{Vararg{Int}}, a::JuliaValue, b::JuliaValue, c::Tensor, xs::TensorOrValue...) = tensor_hvcat(rows, Any[a, b, c, xs...])

"""
    repeat(t, counts...; outer=counts)

Julia's `repeat(A, counts...)`: `t` tiled `counts[i]` times along dimension `i` (a vector
repeated with two counts becomes a matrix, as in Julia and ADCME). `Tile`; an unknown
dimension (`nothing`) stays unknown, tiled when the graph runs.
"""
function Base.repeat(t::Tensor, counts::Integer...; outer=nothing)
    c = outer === nothing ? collect(Int, counts) : collect(Int, outer)
    all(>=(0), c) || invalid("repeat: negative count in $(Tuple(c))")
    r = max(ndims(t), length(c))
    x = pad_rank(t, r)
    return add_op("Tile", [x]; multiples=[c; ones(Int, r - length(c))])
end

"""
    reverse(t; dims=nothing)

`t` with the order of its elements reversed along the 1-based `dims` (all dimensions when
`nothing`, as Julia ≥ 1.6). `ReverseV2`.
"""
function Base.reverse(t::Tensor; dims=nothing)
    ax = dims === nothing ? collect(0:ndims(t)-1) : axes0(t, dims, "reverse")
    return add_op("ReverseV2", [t]; axis=ax)
end

# `StridedSlice` with 0-based `begin`, exclusive `end`, `strides` and TF's bit masks
# (`begin` and `end` are Julia keywords, hence the pairs).
function strided_slice_op(t::Tensor, b, e, s, bm, em, sm)
    attrs = (Symbol("begin") => b, Symbol("end") => e, :strides => s, :begin_mask => bm, :end_mask => em, :shrink_axis_mask => sm)
    return add_op("StridedSlice", [t]; attrs...)
end

# StridedSlice of 0-based [b, e) along one axis, everything along the others.
function slice_along(t::Tensor, ax::Integer, b::Integer, e::Integer)
    n = ndims(t)
    full = 0
    for k in 0:n-1
        k == ax || (full |= 1 << k)
    end
    return strided_slice_op(t, [k == ax ? b : 0 for k in 0:n-1], [k == ax ? e : 0 for k in 0:n-1], ones(Int, n), full, full, 0)
end

"""
    diff(t; dims=1)

Differences of neighbours along `dims`, as Julia's `diff` (`t[2:end] - t[1:end-1]`,
ADCME). `StridedSlice` and `Sub`. Along an unknown dimension the slices are TF's `t[1:]`
and `t[:-1]`, sized when the graph runs.
"""
function Base.diff(t::Tensor; dims=1)
    ax = axes0(t, dims, "diff")[1]
    d = size(t, ax + 1)
    if d === nothing
        n = ndims(t); all_ = (1 << n) - 1; others = all_ & ~(1 << ax)
        hi = strided_slice_op(t, [k == ax ? 1 : 0 for k in 0:n-1], zeros(Int, n), ones(Int, n), others, all_, 0)
        lo = strided_slice_op(t, zeros(Int, n), [k == ax ? -1 : 0 for k in 0:n-1], ones(Int, n), all_, others, 0)
        return hi - lo
    end
    return slice_along(t, ax, 1, d) - slice_along(t, ax, 0, max(d - 1, 0))
end

"""
    pad(t, paddings; constant_values=0, mode="CONSTANT")

Pads `t` with `paddings[i, 1]` values before and `paddings[i, 2]` after dimension `i`
(an `ndims(t)×2` integer matrix, as `tf.pad`), filled with `constant_values` (any value,
`-Inf` and `NaN` included). Only `"CONSTANT"` mode. `Pad`, and for a nonzero fill a
`SelectV2` against a padded mask of the inside.
"""
function pad(t::Tensor, paddings::AbstractMatrix{<:Integer}; constant_values=0, mode="CONSTANT")
    uppercase(mode) == "CONSTANT" || invalid("pad: mode $mode is not supported (only \"CONSTANT\")")
    size(paddings) == (ndims(t), 2) || invalid("pad: paddings must be a $(ndims(t))×2 matrix for a tensor of size $(size(t)), got size $(size(paddings))")
    flat = Int[paddings[i, j] for i in 1:ndims(t) for j in 1:2]
    p = add_op("Pad", [t]; paddings=flat)
    constant_values == 0 && return p
    # a Bool mask of the inside (a padded `true`), so that an infinite or NaN fill value
    # never meets the values of `t` in arithmetic
    inside = add_op("Pad", [ones_like(t) > 0]; paddings=flat)
    return if_else(inside, p, constant_values)
end

"""`copy(t)`: a new tensor with the same value (`Identity`, TF's `tf.identity`; ADCME)."""
Base.copy(t::Tensor) = add_op("Identity", [t])

"""`ones_like(t)`: ones of the shape and dtype of `t` (a tensor or Julia array). `OnesLike`."""
ones_like(t::Tensor) = add_op("OnesLike", [t])
ones_like(a::Union{Number,AbstractArray}) = ones_like(constant(a))
"""`zeros_like(t)`: zeros of the shape and dtype of `t` (a tensor or Julia array). `ZerosLike`."""
zeros_like(t::Tensor) = add_op("ZerosLike", [t])
zeros_like(a::Union{Number,AbstractArray}) = zeros_like(constant(a))

"""
    convert_to_tensor(x; dtype=nothing)

ADCME's `convert_to_tensor`: `nothing`/`missing` pass through; a tensor is returned as is
or `cast` to `dtype`; a number or array becomes a `constant` (of `dtype` when given).
"""
convert_to_tensor(x::Nothing; dtype=nothing) = x
convert_to_tensor(x::Missing; dtype=nothing) = x
convert_to_tensor(x::Tensor; dtype=nothing) = dtype === nothing ? x : cast(x, dtype)
convert_to_tensor(x::Union{Number,AbstractArray}; dtype=nothing) = constant(x; dtype=dtype)

"""`shapes_compatible(a, b)`: whether static sizes `a` and `b` (tuples with `nothing` for an
unknown dimension) can describe one tensor: same rank, and equal wherever both are known
(TF's `TensorShape.is_compatible_with`)."""
shapes_compatible(a, b) = length(a) == length(b) && all(d === nothing || e === nothing || d == e for (d, e) in zip(a, b))

"""
    set_shape(o, shape), set_shape(o, dims::Integer...)

ADCME's `set_shape` (TF's `Tensor.set_shape`): checks that `o`'s static shape is compatible
with `shape` (a tuple or vector; `nothing` or -1 entries match any size, and an unknown
dimension of `o` matches any size). A shape that differs in rank or in a known size raises
an `OxiflowError` with TF's text ("Shapes (2, 3) and (3, 2) are incompatible"). When
`shape` adds nothing, `o` itself is returned.

When `shape` gives a size to an unknown dimension of `o` (`set_shape(x, [5, 10])` for
`size(x) == (nothing, 10)`), the result is a new tensor with the refined static shape, an
`EnsureShape` node (TF's `tf.ensure_shape`): later ops see the known size, and a run whose
value does not have it fails with an `OxiflowError` naming `EnsureShape` and both shapes.
Its gradient passes through. Oxiflow tensors are immutable, so TF's in-place refinement
becomes a new tensor: use the result (`x5 = set_shape(x, [5, 10])`), which is what ADCME's
`set_shape` returns. An engine without `EnsureShape` raises an `OxiflowError`
(UnimplementedError) for a refinement instead.
"""
function set_shape(o::Tensor, shape::Union{Tuple,AbstractVector})
    s = size(o)
    want = Any[d === nothing || d == -1 ? nothing : d for d in shape]
    shapes_compatible(want, s) || invalid("set_shape: Shapes $(s) and $(Tuple(shape)) are incompatible ($(o.name))")
    refined = [k for (k, d) in enumerate(want) if d !== nothing && s[k] === nothing]
    isempty(refined) && return o
    merged = Int64[engine_dim(want[k] !== nothing ? want[k] : s[k]) for k in eachindex(s)]
    return add_op("EnsureShape", [o]; shape=merged)
end
set_shape(o::Tensor, dims::Union{Integer,Nothing}...) = set_shape(o, dims)
