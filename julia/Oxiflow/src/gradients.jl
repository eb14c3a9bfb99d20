# Reverse-mode differentiation: gradients (ADCME's shape cases), gradient_checkpointing,
# jacobian, hessian, hessian_vector, gradient_magnitude, gradients_colocate.

pair(t::Tensor) = (Int64(getfield(t, :node)), Int32(getfield(t, :index)))

"""
    gradients(ys, xs; colocate=false, grad_ys=nothing)

Derivatives of `ys` with respect to `xs` (a tensor or a vector of tensors), built as new graph
nodes named `gradients/<forward op>_grad/<Op>` (TF's `tf.gradients`). As ADCME:

- scalar `ys`: the gradient, shaped like `xs` (`nothing` when `ys` does not depend on it);
- `grad_ys` given (shaped like `ys`): the vector-Jacobian product `sum(grad_ys .* ys)`'s gradient;
- vector `ys` and scalar `xs`: the vector `dys[i]/dxs`;
- vector `ys` and vector `xs`: the dense Jacobian, `length(ys) × length(xs)` ([`jacobian`](@ref));
- matrix `ys` and scalar `xs`: the matrix `dys[i,j]/dxs`.

Other shapes raise an `OxiflowError`. With a vector of `xs`, a vector of results. Unknown
dimensions (a batch fed at run time) are fine for a scalar `ys` or with `grad_ys`: the
gradient of a partial tensor is partial (its size comes from the feed); the Jacobian cases
need known sizes and raise an `OxiflowError` (UnimplementedError) otherwise.
`colocate=true` (TF's `colocate_gradients_with_ops`) puts each gradient op on its forward
op's device; otherwise gradient ops take the device scope active at this call.
"""
function gradients(ys::Tensor, xs::Tensor; colocate::Bool=false, grad_ys=nothing)
    if grad_ys === nothing && ndims(ys) != 0
        ry, rx = ndims(ys), ndims(xs)
        if (ry == 1 && rx <= 1) || (ry == 2 && rx == 0)
            J = jacobian(ys, xs; colocate=colocate)     # size(ys)..., size(xs)...
            return (J === nothing || rx == 1) ? J : add_op("Reshape", [J]; shape=collect(size(ys)))
        end
        invalid("gradients: no rule for a rank-$ry ys $(size(ys)) and a rank-$rx xs $(size(xs)); differentiate sum(ys) or give grad_ys")
    end
    return gradients(ys, [xs]; colocate=colocate, grad_ys=grad_ys)[1]
end

function gradients(ys::Tensor, xs::AbstractVector; colocate::Bool=false, grad_ys=nothing)
    if grad_ys === nothing && ndims(ys) != 0
        return Union{Tensor,Nothing}[gradients(ys, x; colocate=colocate) for x in xs]
    end
    gy = grad_ys === nothing ? nothing : as_tensor(grad_ys, ys)
    return raw_gradients(ys, xs, gy, colocate)
end

const GRADIENT_CHECKPOINTING = Ref{Union{Nothing,String}}(nothing)

"""
    gradient_checkpointing(type="speed")
    gradient_checkpointing(nothing)

From now on every backward pass in this process ([`gradients`](@ref), `minimize`,
`compute_gradients`, [`jacobian`](@ref), [`hessian`](@ref), ...) recomputes forward
activations from checkpoints instead of keeping them until the backward pass needs them,
trading compute for memory, as ADCME's `gradient_checkpointing` (which swaps `tf.gradients`
for the gradient-checkpointing package's `gradients_speed`, `gradients_memory` or
`gradients_collection`; Chen et al. 2016, "Training deep nets with sublinear memory cost"):

- `"speed"`: the outputs of `MatMul`, `BatchMatMul`, `Conv2D` and `SparseTensorDenseMatMul`
  are kept; only the cheap ops between them (activations, bias adds, ...) are recomputed.
- `"memory"`: about `√n` of the `n` recomputable tensors are kept, chosen among the
  bottlenecks of the forward graph; memory `O(√n)` activations, one extra forward pass.
- `"collection"`: the tensors added with `add_to_collection("checkpoints", t)` are kept.

Gradients keep their values (the same kernels rerun on the same inputs). Recomputed ops are
named `gradients/recompute/<forward name>` in profiles and placed on their forward op's
device. Never recomputed: the xs and ys, tensors that do not depend on the xs, and stateful
ops (random numbers, variables, `Print`, MPI collectives), which are kept. A backward pass
that finds no checkpoint (say `"speed"` on a graph without matrix products) is an ordinary
one (the package raises an error there). `gradient_checkpointing(nothing)` turns it off
(Oxiflow's addition; ADCME has no way back). Unlike ADCME, whose switch reaches only
`tf.gradients`, the optimizers' passes are checkpointed too. An unknown `type` raises an
`OxiflowError` (InvalidArgumentError), as ADCME's `"ADCME: <type> not defined"`.
"""
function gradient_checkpointing(type::AbstractString="speed")
    type in ("speed", "memory", "collection") ||
        invalid("gradient_checkpointing: type '$type' not defined; use \"speed\", \"memory\" or \"collection\"")
    GRADIENT_CHECKPOINTING[] = String(type)
    @info "Loaded: $type"
    return nothing
end
gradient_checkpointing(::Nothing) = (GRADIENT_CHECKPOINTING[] = nothing; nothing)

# One backward pass of the core (`oxf_gradients_begin`/`_resume`); `gy` is `ys`'s seed
# tensor or `nothing`. The pass stops at each custom-gradient node (`register`,
# `tf.custom_gradient`) that gradients reach, and this builds the node's input gradients with
# its Julia builder, in the `gradients/<node>_grad` scope the pass leaves open. An error
# anywhere (the builder's too) aborts the pass: its nodes are removed.
# Every tensor must be in `ys`'s graph: the engine knows nodes by id, so a tensor of another
# graph would silently name an unrelated node.
function raw_gradients(ys::Tensor, xs::AbstractVector, gy, colocate::Bool)
    g = getfield(ys, :graph)
    for x in xs
        x isa Tensor || invalid("gradients: xs must be tensors, got $(typeof(x))")
        getfield(x, :graph) === g || invalid("gradients: $(x.name) belongs to another graph than $(ys.name)")
    end
    gy === nothing || getfield(gy, :graph) === g || invalid("gradients: grad_ys $(gy.name) belongs to another graph than $(ys.name)")
    tensors(list) = Union{Tensor,Nothing}[n < 0 ? nothing : Tensor(g, n, i) for (n, i) in list]
    run = oxf_gradients_begin(g, [pair(ys)], [pair(x) for x in xs], gy === nothing ? nothing : [pair(gy)], colocate,
                              something(GRADIENT_CHECKPOINTING[], ""))
    try
        supplied = nothing
        while true
            node, list = oxf_gradients_resume(run, supplied)
            node < 0 && return tensors(list)
            supplied = custom_input_grads(g, node, tensors(list))
        end
    finally
        oxf_gradients_free(run)
    end
end

# TF's row-major flat index of the Julia (column-major) Cartesian index `I` of `dims`.
row_major_index(dims, I) = isempty(dims) ? 1 : LinearIndices(reverse(dims))[reverse(Tuple(I))...]

"""
    jacobian(y, x; colocate=false)

The dense Jacobian `J[i..., j...] = ∂y[i...]/∂x[j...]`, of size `(size(y)..., size(x)...)`
(for vectors `length(y) × length(x)`), as ADCME's `jacobian` (TF's
`parallel_for.gradients.jacobian`). Built from one backward pass per component of `y`
(seeded with a one-hot `grad_ys`), each row placed with a one-hot `Mul` and summed with
`AddN`; rows `y` does not depend on are zeros. `nothing` when no component of `y` depends
on `x`. Needs float `y` and `x` with every dimension known (an unknown one raises an
`OxiflowError`, UnimplementedError: the number of rows is the number of elements).
"""
function jacobian(y::Tensor, x::Tensor; colocate::Bool=false)
    T = y.dtype
    T <: AbstractFloat && x.dtype <: AbstractFloat || invalid("jacobian: y and x must be float tensors, got $(y.dtype) and $(x.dtype)")
    ydims, xdims = known_size(y, "jacobian"), known_size(x, "jacobian")
    m, n = length(y), length(x)
    rows = Tensor[]
    for I in CartesianIndices(ydims)
        e = zeros(T, ydims...)
        e[I] = one(T)
        gi = raw_gradients(y, [x], constant_in(getfield(y, :graph), e), colocate)[1]
        gi === nothing && continue
        # place row I: (m×1 one-hot, TF row-major order) .* (1×n gradient)
        k = row_major_index(ydims, I)
        onehot = zeros(T, m, 1); onehot[k, 1] = one(T)
        push!(rows, constant_in(getfield(y, :graph), onehot) .* add_op("Reshape", [gi]; shape=[1, n]))
    end
    isempty(rows) && return nothing
    J = length(rows) == 1 ? rows[1] : add_op("AddN", rows)
    return (length(ydims) == 1 && length(xdims) == 1) ? J : add_op("Reshape", [J]; shape=[ydims..., xdims...])
end

"""
    hessian(f, x)

The Hessian `H[i, j] = ∂²f/∂x[i]∂x[j]` of a scalar `f` with respect to a vector `x`
(`length(x) × length(x)`; for a scalar `x`, the scalar second derivative), as ADCME's
`hessian` (TF's `tf.hessians`): the [`jacobian`](@ref) of the gradient graph, so every op
on the path needs a differentiable gradient. `nothing` when `f` does not depend on `x`.
An `x` with an unknown dimension raises an `OxiflowError` (UnimplementedError).
"""
function hessian(f::Tensor, x::Tensor)
    ndims(f) == 0 || invalid("hessian: f must be a scalar, got shape $(size(f))")
    ndims(x) <= 1 || invalid("hessian: x must be a scalar or a vector, got shape $(size(x))")
    known_size(x, "hessian")
    g = gradients(f, x)
    g === nothing && return nothing
    ndims(x) == 0 && return something_or_zero(gradients(g, x), x)
    H = jacobian(g, x)
    return H === nothing ? constant_in(getfield(x, :graph), zeros(x.dtype, length(x), length(x))) : H
end

something_or_zero(t, like::Tensor) = t === nothing ? constant_in(getfield(like, :graph), zeros(like.dtype, size(like)...)) : t

"""
    hessian_vector(f, x, v)

The Hessian-vector product `H * v` of a scalar `f` with respect to `x` (`v` shaped like `x`,
a tensor or a Julia array), without forming `H`: the gradient of `sum(∇f .* stop_gradient(v))`
(TF's `_hessian_vector_product`, ADCME's `hessian_vector`). `nothing` when `f` does not
depend on `x`.
"""
function hessian_vector(f::Tensor, x::Tensor, v)
    ndims(f) == 0 || invalid("hessian_vector: f must be a scalar, got shape $(size(f))")
    vt = independent(as_tensor(v, x))
    size(vt) == size(x) || invalid("hessian_vector: v has size $(size(vt)) but x has size $(size(x))")
    g = gradients(f, x)
    g === nothing && return nothing
    return something_or_zero(gradients(sum(g .* vt), x), x)
end

"""
    gradient_magnitude(l, o)

ADCME's `gradient_magnitude`: the global norm `sqrt(Σ_k sum(g_k^2))` of the gradients of
the scalar `l` with respect to `o` (a tensor or a vector of tensors; TF's `tf.global_norm`).
Inputs `l` does not depend on count as zero.
"""
function gradient_magnitude(l::Tensor, o)
    gs = filter(g -> g !== nothing, gradients(l, o isa Tensor ? [o] : collect(o)))
    isempty(gs) && return constant_in(getfield(l, :graph), zero(l.dtype))
    return sqrt(add_n([sum(g^2) for g in gs]))
end

"""
    gradients_colocate(loss, xs)

ADCME's `gradients_colocate`: `gradients(loss, xs; colocate=true)`, each gradient op on its
forward op's device (TF's `Optimizer.compute_gradients(..., colocate_gradients_with_ops=True)`).
"""
gradients_colocate(loss::Tensor, xs; use_locking::Bool=true) = gradients(loss, xs; colocate=true)
