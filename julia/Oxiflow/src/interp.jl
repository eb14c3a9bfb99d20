# ADCME's `interp1` (src/rbf.jl there): piecewise-linear interpolation built from the
# interval search `_InterpInterval` (crates/oxiflow-core/src/ops/sort.rs), `GatherV2` and
# arithmetic, so that every input is differentiable, to any order.

export interp1

"""
    interp1(x, v, xq)

Piecewise-linear interpolation (ADCME's `interp1`, MATLAB's `interp1(x, v, xq)`): the values
at the query points `xq` of the function that is `v[i]` at the sample point `x[i]` and linear
in between. `x` is a vector of at least 2 strictly increasing points, `v` a vector of the
same length, and `xq` a vector (or any array, or a number) of points inside
`[x[1], x[end]]`; the result has `xq`'s shape. Tensors or Julia arrays in any mix, Float64 or
Float32 (the dtype of the first tensor among `v`, `x`, `xq`; Float64 when all are arrays).

Differentiable in `v`, `xq` and `x` (ADCME's op only in `v`): the result is
`v[i] + (xq - x[i]) / (x[i+1] - x[i]) * (v[i+1] - v[i])` with `i` from `_InterpInterval`,
built from `GatherV2` and elementwise ops. Errors: an `OxiflowError` naming the shapes when
`x` or `v` is not a vector or their lengths differ (when built); one naming `_InterpInterval`
and the 1-based position when a query point is outside the range or the sample points do
not increase strictly (when run, as ADCME's "interpolation point ... is not in the range").
`_InterpInterval` has a CPU kernel only: inside `@gpu` the session needs soft placement
(`Session(allow_soft_placement=true)`), which moves it to the CPU; the rest stays on the GPU.
"""
function interp1(x, v, xq)
    # all arrays: v becomes the Float64 tensor the others follow, as in ADCME
    x isa Tensor || v isa Tensor || xq isa Tensor || (v = constant(convert(Array{Float64}, as_array(v))))
    like = v isa Tensor ? v : x isa Tensor ? x : xq
    tv, tx, tq = as_tensor(v, like), as_tensor(x, like), as_tensor(xq, like)
    (ndims(tx) == 1 && ndims(tv) == 1) ||
        invalid("interp1: x and v must be vectors, got shapes $(size(tx)) and $(size(tv))")
    nx, nv = size(tx, 1), size(tv, 1)
    (nx === nothing || nv === nothing || nx == nv) ||
        invalid("interp1: x has $nx sample points but v has $nv values")
    i = add_op("_InterpInterval", [tx, tq])
    j = i + one(Int64)
    x0, x1 = add_op("GatherV2", [tx, i]), add_op("GatherV2", [tx, j])
    v0, v1 = add_op("GatherV2", [tv, i]), add_op("GatherV2", [tv, j])
    return v0 .+ (tq .- x0) ./ (x1 .- x0) .* (v1 .- v0)
end
