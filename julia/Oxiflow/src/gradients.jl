# Reverse-mode differentiation.

pair(t::Tensor) = (Int64(getfield(t, :node)), Int32(getfield(t, :index)))

"""
    gradients(ys, xs; colocate=false, grad_ys=nothing)

The gradient of `ys` with respect to `xs` (a tensor or a vector of tensors), built as
new graph nodes named `gradients/<forward op>_grad/<Op>` (TF's `tf.gradients`). `ys` must be
a scalar unless `grad_ys` (same shape as `ys`) is given, which computes the
vector-Jacobian product. Returns `nothing` for an `x` that `ys` does not depend on (ADCME).

`colocate=true` (TF's `colocate_gradients_with_ops`) puts each gradient op on its forward
op's device; otherwise gradient ops take the device scope active at this call (default
placement: GPU:0 when there is one).
"""
function gradients(ys::Tensor, xs::Tensor; colocate::Bool=false, grad_ys=nothing)
    return gradients(ys, [xs]; colocate=colocate, grad_ys=grad_ys)[1]
end

function gradients(ys::Tensor, xs::AbstractVector; colocate::Bool=false, grad_ys=nothing)
    if grad_ys === nothing && ndims(ys) != 0
        invalid("gradients: ys has shape $(size(ys)); without grad_ys it must be a scalar (take sum(ys), or give grad_ys). Jacobians of vector ys are not supported yet")
    end
    gy = grad_ys === nothing ? nothing : [pair(as_tensor(grad_ys, ys))]
    g = getfield(ys, :graph)
    res = oxf_gradients(g, [pair(ys)], [pair(x) for x in xs], gy, colocate)
    return Union{Tensor,Nothing}[n < 0 ? nothing : Tensor(g, n, i) for (n, i) in res]
end
