# Sorting and special functions with ADCME's API (ADCME.jl src/ops.jl: `sort`, `argsort`,
# `topk`, `lgamma`). Ops: TopKV2, Invert (crates/oxiflow-core/src/ops/sort.rs); Lgamma,
# Digamma, Polygamma (crates/oxiflow-core/src/ops/special.rs).

export argsort, topk, lgamma

# The axis `dims` of `t` moved last (a `Transpose` when it is not), with the permutation that
# moves it back (`nothing`: none needed) and its length, which must be known.
function axis_last(t::Tensor, dims::Integer, fname)
    ndims(t) >= 1 || invalid("$fname: needs a tensor of rank >= 1, got a scalar")
    ax = dim0(t, dims, fname) + 1
    n = size(t, ax)
    n === nothing && invalid("$fname: dimension $ax of the tensor of size $(size(t)) is unknown; sorting needs its length (set_shape)")
    r = ndims(t)
    ax == r && return t, nothing, n
    perm = [setdiff(1:r, ax); ax]
    return permutedims(t, perm), invperm(perm), n
end

# Values and positions (0-based Int32) of `t` sorted along `dims`: `TopKV2` of all `n`
# entries, on the values themselves for a descending order, else on an order-reversing key
# (`-x` for floats, the bitwise complement `Invert` for integers, as TF's `tf.sort` does),
# mapped back afterwards.
function sorted_along(t::Tensor, rev::Bool, dims::Integer, fname)
    t.dtype in (Float32, Float64, Int32, Int64) ||
        invalid("$fname: needs a Float32, Float64, Int32 or Int64 tensor, got $(t.dtype)")
    x, back, n = axis_last(t, dims, fname)
    flip = rev ? identity : t.dtype <: AbstractFloat ? (a -> -a) : (a -> add_op("Invert", [a]))
    v, i = node_outputs(add_op("TopKV2", [flip(x)]; k=Int64(n)))
    v = flip(v)
    back === nothing && return v, i
    return permutedims(v, back), permutedims(i, back)
end

"""
    sort(t::Tensor; rev=false, dims=-1)

`t` sorted along dimension `dims` (`-1`, the default, is the last), ascending, or descending
with `rev=true` (ADCME's `sort`, TF's `tf.sort(t, axis=dims-1, direction=...)`). Float32,
Float64, Int32 and Int64; the result has `t`'s size and dtype, and the gradient of its values
goes back to the positions they came from (`TopKV2`'s gradient). A NaN sorts last in either
order. The sorted dimension must have a known length; the others may be unknown.
"""
function Base.sort(t::Tensor; rev::Bool=false, dims::Integer=-1)
    return sorted_along(t, rev, dims, "sort")[1]
end

"""
    argsort(t::Tensor; rev=false, dims=-1, stable=false)

The 1-based positions (Int32) that sort `t` along `dims`: `t[argsort(t)]` is `sort(t)` for a
vector (ADCME's `argsort`, TF's `tf.argsort(...) + 1`). Equal values keep their order (the
sort is stable whatever `stable` says). ADCME computes the axis as `dims + 1`, which sorts
the wrong dimension; here `dims` is the dimension, as in `sort`.
"""
function argsort(t::Tensor; rev::Bool=false, dims::Integer=-1, stable::Bool=false)
    return sorted_along(t, rev, dims, "argsort")[2] + Int32(1)
end

"""
    topk(t::Tensor, k::Integer=1; sorted=true) -> (values, indices)

The `k` largest entries along the last dimension of `t` and their 1-based positions (Int32),
largest first, equal values by position (TF's `tf.math.top_k`, op `TopKV2`; ADCME's `topk`).
ADCME returns TF's 0-based positions; here they are 1-based like `argmax` and `argsort`.
`k` must be at most the length of the last dimension (an `OxiflowError` naming `TopKV2`
otherwise); `sorted=false` gives the sorted order too. The values' gradient goes back to
where they came from.
"""
function topk(t::Tensor, k::Integer=1; sorted::Bool=true)
    v, i = node_outputs(add_op("TopKV2", [t]; k=Int64(k), sorted=sorted))
    return v, i + Int32(1)
end
topk(t, k::Integer=1; kwargs...) = topk(as_tensor(t), k; kwargs...)

"""
    lgamma(x)

`log|Γ(x)|` elementwise of a Float32/Float64 tensor (op `Lgamma`, TF's `tf.math.lgamma`,
ADCME's `lgamma`); a Julia number or array becomes a constant first. `+Inf` at 0, -1, -2, ...
Its gradient is `digamma(x)` (`Digamma`), whose gradient is `Polygamma(1, x)`, so derivatives
of every order exist. Reachable too as `tf.math.lgamma`, `tf.math.digamma` and
`tf.math.polygamma(a, x)` (`a`: the order, a float tensor; NaN where not a non-negative
integer).
"""
lgamma(x::Tensor) = add_op("Lgamma", [x])
lgamma(x::Union{Real,AbstractArray}) = lgamma(constant(float.(x)))

"""
    tf.math.erf(x), tf.math.erfc(x), tf.math.erfinv(x), tf.math.ndtri(p)
    tf.math.bessel_i0e(x), tf.math.bessel_i1e(x)

TF's error functions elementwise on a Float32/Float64 tensor (ops `Erf`, `Erfc`, `Erfinv`;
also `tf.erf`, `tf.erfc`): `erf(x) = 2/√π ∫₀ˣ e^{-t²} dt`, `erfc = 1 - erf` (accurate where
it is tiny), the inverse of `erf` on `[-1, 1]` (`±Inf` at `±1`, NaN outside) and the
standard normal quantile `Φ⁻¹(p)` (op `Ndtri`, precise far into the lower tail). A Julia
number or array becomes a Float64 constant. Gradients are TF's (`2/√π e^{-x²}`, its
negative, `√π/2 e^{erfinv(x)²}`). And the exponentially scaled modified Bessel functions
`e^{-|x|} I₀(x)`, `e^{-|x|} I₁(x)` (ops `BesselI0e`, `BesselI1e`, gradients TF's). Not
exported: Julia's `erf` belongs to SpecialFunctions.
CPU kernels (soft placement moves them off a GPU).
"""
tf_special(op::String) = x -> add_op(op, Tensor[x isa Tensor ? x : constant(float.(x))])

"""
    digamma(x)

ψ(x), the derivative of `lgamma`, elementwise of a Float32/Float64 tensor (op `Digamma`,
TF's `tf.math.digamma`, which the `tf` object here offers too); `+Inf` at 0, -1, -2, ...; an
`OxiflowError` naming `Digamma` for an integer tensor.
"""
digamma(x) = add_op("Digamma", [as_tensor(x)])

"""
    polygamma(a, x)

ψ⁽ᵃ⁾(x), the `a`-th derivative of ψ (op `Polygamma`, TF's `tf.math.polygamma`, which the
`tf` object here offers too): `a` and `x` Float32/Float64 of one dtype, broadcast (a number
`a` takes `x`'s dtype); NaN where `a` is not a non-negative integer, `±Inf` at 0, -1, -2, ...
Differentiable in `x` (`Polygamma(a + 1, x)`), not in `a`.
"""
function polygamma(a, x)
    xt = as_tensor(x)
    return add_op("Polygamma", [as_tensor(a, xt), xt])
end

"""
    findall(t::Tensor)

The 1-based positions of the `true` entries of a Bool vector (an Int64 vector) or matrix (an
Int64 `k×2` matrix of (row, column) pairs, row by row) (ADCME's `findall`, `tf.where(t) + 1`,
op `Where`). `k` is known only when the graph runs. Julia's `findall` on a matrix goes column
by column and returns `CartesianIndex`es; this is ADCME's order and form.
"""
function Base.findall(t::Tensor)
    ndims(t) in (1, 2) || invalid("findall: needs a Bool vector or matrix, got a tensor of size $(size(t))")
    t.dtype == Bool || invalid("findall: needs a Bool tensor, got $(t.dtype)")
    w = add_op("Where", [t]) + 1
    return ndims(t) == 1 ? add_op("Squeeze", [w]; squeeze_dims=[1]) : w
end

# tf.sort, tf.argsort and tf.math.top_k: TF's 0-based axis and positions.
function tf_sort_args(values, axis, direction, fname)
    x = as_tensor(values)
    direction in ("ASCENDING", "DESCENDING") || invalid("$fname: direction must be \"ASCENDING\" or \"DESCENDING\", got $(repr(direction))")
    return x, axis0(x, axis, fname) + 1, direction == "DESCENDING"
end
function tf_sort(values; axis=-1, direction="ASCENDING", name=nothing)
    x, d, rev = tf_sort_args(values, axis, direction, "tf.sort")
    return sorted_along(x, rev, d, "tf.sort")[1]
end
function tf_argsort(values; axis=-1, direction="ASCENDING", stable=false, name=nothing)
    x, d, rev = tf_sort_args(values, axis, direction, "tf.argsort")
    return sorted_along(x, rev, d, "tf.argsort")[2]
end
tf_top_k(input, k=1; sorted=true, name=nothing) =
    Tuple(node_outputs(add_op("TopKV2", [as_tensor(input)]; k=Int64(k), sorted=sorted, name=name)))
