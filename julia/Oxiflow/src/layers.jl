# Training layers for classifiers: batch normalization (ADCME's `bn`, TF's
# `tf.layers.batch_normalization`) and softmax cross-entropy (TF's
# `tf.nn.softmax_cross_entropy_with_logits` and the sparse variant). Batch normalization is
# a composite of the engine's ops, so its gradients (and second derivatives) come from
# those ops' gradients; the cross-entropy is TF's fused op `SoftmaxCrossEntropyWithLogits`,
# whose gradient reuses the softmax the loss computed.

export batch_normalization, bn, softmax_cross_entropy_with_logits, sparse_softmax_cross_entropy_with_logits

# Runs `f()` inside `tf.device(spec)` (a string or a device function).
with_device(f::Function, spec) = with_context(f, tf_device(spec))

# A reduction that keeps the reduced axes (TF's keepdims=True); 0-based `axes`.
reduce_keep(op, t::Tensor, axes) = add_op(op, [t]; axis=collect(Int, axes), keep_dims=true)

# Variable-scope names already used by unnamed layers, per graph (TF's layer-name
# uniquification: `batch_normalization`, `batch_normalization_1`, ...).
const LAYER_NAMES = WeakKeyDict{Any,Dict{String,Int}}()

function unique_layer_name(base::AbstractString)
    used = get!(() -> Dict{String,Int}(), LAYER_NAMES, get_default_graph())
    k = get(used, base, 0)
    used[base] = k + 1
    return k == 0 ? String(base) : "$(base)_$k"
end

"""
    batch_normalization(x; axis=-1, momentum=0.99, epsilon=1e-3, center=true, scale=true,
                        training=false, name=nothing, reuse=nothing)

TF 1.15's `tf.layers.batch_normalization` (non-fused) for a Float32/Float64 tensor `x` of
rank ≥ 2, normalizing each feature along `axis` (1-based, or -1 for the last axis) with
statistics over all other axes:

    y = gamma * (x - mean) / sqrt(var + epsilon) + beta

Variables (through [`get_variable`](@ref) in `variable_scope(name)`, so the same `name` with
`reuse=AUTO_REUSE` shares them between towers): `name/gamma` (ones, trainable when
`scale`), `name/beta` (zeros, trainable when `center`), `name/moving_mean` (zeros) and
`name/moving_variance` (ones), the last two not trainable. Without `name` the layer is
named `batch_normalization`, `batch_normalization_1`, ... in creation order.

- `training=true`: normalizes with the batch mean and the population (uncorrected) batch
  variance (TF's `nn.moments`), and adds to `UPDATE_OPS` two `Assign` ops, colocated with
  the moving variables (so they run on the parameter device), computing TF's
  `assign_moving_average`: `moving -= (moving - batch_stat) * (1 - momentum)`. Run them, e.g.
  by binding them to the training op (`control_dependencies(get_collection(UPDATE_OPS))`).
- `training=false`: normalizes with `moving_mean` and `moving_variance`; nothing is added.
- `training` a Bool scalar tensor: chooses at run time (`SelectV2`); the update ops leave the
  moving statistics unchanged when it is false (TF's `momentum = 1` branch).

Errors: an `OxiflowError` for a non-float or rank < 2 input, an unknown `axis`, or a
`momentum` outside [0, 1]. Other dimensions than the feature `axis` may be unknown (a batch
of any size, `placeholder(Float64; shape=[nothing, C])`); an unknown feature dimension raises
an `OxiflowError` (its variables need a size).
"""
function batch_normalization(x::Tensor; axis::Integer=-1, momentum::Real=0.99, epsilon::Real=1e-3, center::Bool=true,
                             scale::Bool=true, training=false, name=nothing, reuse=nothing)
    T = x.dtype
    T in (Float32, Float64) || invalid("batch_normalization: x must be Float32 or Float64, got $T (shape $(size(x)))")
    nd = ndims(x)
    nd >= 2 || invalid("batch_normalization: x must have rank ≥ 2 (batch and features), got shape $(size(x))")
    ax = axis == -1 ? nd : Int(axis)
    1 <= ax <= nd || invalid("batch_normalization: axis $axis out of range for shape $(size(x))")
    0 <= momentum <= 1 || invalid("batch_normalization: momentum must be in [0, 1], got $momentum")
    training isa Bool || (training isa Tensor && training.dtype == Bool && ndims(training) == 0) ||
        invalid("batch_normalization: training must be a Bool or a scalar Bool tensor")
    C = size(x, ax)
    C === nothing && unimplemented("batch_normalization: the feature dimension $ax of $(x.name), of size $(size(x)), is unknown; gamma, beta and the moving statistics need its size")
    red = [a - 1 for a in 1:nd if a != ax]                   # 0-based reduction axes
    bshape = [a == ax ? C : 1 for a in 1:nd]                 # broadcast shape of the statistics
    scope = name === nothing ? unique_layer_name("batch_normalization") : String(name)
    rs = reuse === nothing ? (name === nothing ? false : AUTO_REUSE) : reuse
    return variable_scope(scope; reuse=rs) do
        gamma = get_variable("gamma"; initializer=ones(T, C), trainable=scale)
        beta = get_variable("beta"; initializer=zeros(T, C), trainable=center)
        mmean = get_variable("moving_mean"; initializer=zeros(T, C), trainable=false)
        mvar = get_variable("moving_variance"; initializer=ones(T, C), trainable=false)
        shaped(v) = nd == 1 ? v : reshape(v, bshape)
        local mean_b, var_b
        if training !== false
            # nn.moments: variance around the stopped-gradient mean (same value, same gradient)
            m_keep = name_scope(() -> reduce_keep("Mean", x, red), "moments")
            mean_b = reshape(m_keep, [C])
            # Square, not Pow: TF's squared_difference, and a fraction of Pow's cost
            var_b = reshape(reduce_keep("Mean", add_op("Square", [x - independent(m_keep)]), red), [C])
            add_moving_average!(mmean, mean_b, momentum, training, "AssignMovingAvg")
            add_moving_average!(mvar, var_b, momentum, training, "AssignMovingAvg_1")
        end
        mean_u, var_u = if training === false
            (mmean, mvar)
        elseif training === true
            (mean_b, var_b)
        else
            (if_else(training, mean_b, mmean), if_else(training, var_b, mvar))
        end
        inv = name_scope("batchnorm") do
            r = 1.0 / sqrt(var_u + epsilon)
            scale ? r .* gamma : r
        end
        offset = center ? beta - mean_u .* inv : -(mean_u .* inv)
        return x .* shaped(inv) + shaped(offset)
    end
end

# TF's `assign_moving_average` (zero_debias=False), built next to the variable.
function add_moving_average!(v::Tensor, value::Tensor, momentum, training, opname)
    # outer device scopes (a tower's device function) do not apply: the update runs where
    # the variable lives, the parameter device
    upd = with_device(nothing) do
        colocate_with(v) do
            name_scope(opname) do
                delta = (v - value) * (1 - Float64(momentum))
                training isa Tensor && (delta = if_else(training, delta, zeros_like(delta)))
                assign(v, v - delta)
            end
        end
    end
    add_to_collection(UPDATE_OPS, upd)
    return upd
end

"""
    bn(x; is_training=false, scope=nothing, kwargs...)

ADCME's `bn` (layers.jl): [`batch_normalization`](@ref) with ADCME's keyword names,
`is_training` for `training` and `scope` for `name`; other keywords are passed on.
"""
function bn(x::Tensor; is_training=nothing, scope=nothing, kwargs...)
    kw = Dict{Symbol,Any}(kwargs)
    is_training === nothing || (kw[:training] = is_training)
    scope === nothing || (kw[:name] = scope)
    return batch_normalization(x; kw...)
end

"""
    softmax_cross_entropy_with_logits(logits, labels)
    softmax_cross_entropy_with_logits(; labels, logits)

Per-example cross-entropy `-sum(labels .* log(softmax(logits)))` over the last axis, so an
`N×C` input gives a length-`N` vector (rank r gives rank r - 1). The positional form is
ADCME's (`softmax_cross_entropy_with_logits(logits, labels)`, **logits first**): `labels`
of the same shape as `logits` (each row a probability distribution, a tensor or an array)
give TF 1.15's `tf.nn.softmax_cross_entropy_with_logits`; integer `labels` with one entry
per row (a vector or an Int32/Int64 tensor of rank `ndims(logits) - 1`) are **1-based**
class numbers and give `tf.nn.sparse_softmax_cross_entropy_with_logits(labels - 1)`, as
ADCME does. The keyword form is TF's, with dense labels.

Labels get no gradient (TF1's version stops it). One op, TF's
`SoftmaxCrossEntropyWithLogits`, computes the loss and its gradient with respect to
`logits`, `softmax(logits) - labels`, together; stably, with `z = logits - max(logits)`
and the loss `sum(labels .* (log(sum(exp(z))) - z))`, so huge logits do not overflow.
Second derivatives work (`hessian`). Float32/Float64 logits (a Julia array
becomes Float64); an `OxiflowError` when the shapes do not fit or a class is out of range.
The batch dimensions may be unknown (`placeholder(Float64; shape=[nothing, C])` logits and
labels); the class dimension must be known for integer labels.
"""
function softmax_cross_entropy_with_logits(logits, labels)
    lg = logits isa Tensor ? logits : labels isa Tensor ? constant_in(getfield(labels, :graph), Float64.(logits)) : constant(Float64.(logits))
    sparse = labels isa Tensor ? (labels.dtype in (Int32, Int64) && ndims(labels) == ndims(lg) - 1) :
             (labels isa AbstractArray{<:Integer} && ndims(labels) == ndims(lg) - 1)
    sparse || return dense_softmax_xent(labels, lg)
    ndims(lg) == 2 || invalid("softmax_cross_entropy_with_logits: class labels need N×C logits, got shape $(size(lg))")
    size(lg, 2) === nothing && unimplemented("softmax_cross_entropy_with_logits: the number of classes of $(lg.name), of size $(size(lg)), is unknown; class labels need it")
    if labels isa Tensor
        return sparse_softmax_cross_entropy_with_logits(labels - one(labels.dtype), lg)
    end
    C = size(lg, 2)
    for (i, l) in enumerate(labels)
        1 <= l <= C || invalid("softmax_cross_entropy_with_logits: class $l at position $i is outside 1:$C (labels are 1-based)")
    end
    return sparse_softmax_cross_entropy_with_logits(labels .- 1, lg)
end
softmax_cross_entropy_with_logits(; labels, logits) = dense_softmax_xent(labels, logits)

# TF's dense softmax cross-entropy, labels first.
function dense_softmax_xent(labels, logits)
    lg = logits isa Tensor ? logits : labels isa Tensor ? constant_in(getfield(labels, :graph), Float64.(logits)) : constant(Float64.(logits))
    lg.dtype in (Float32, Float64) || invalid("softmax_cross_entropy_with_logits: logits must be Float32 or Float64, got $(lg.dtype)")
    ndims(lg) >= 1 || invalid("softmax_cross_entropy_with_logits: logits must have rank ≥ 1, got a scalar")
    lb = labels isa Tensor ? labels : as_tensor(labels, lg)
    compatible_sizes(size(lb), size(lg)) ||
        invalid("softmax_cross_entropy_with_logits: labels of shape $(size(lb)) and logits of shape $(size(lg)) must have the same shape")
    return name_scope("softmax_cross_entropy_with_logits") do
        # TF's fused op: the loss and its gradient `softmax - labels` in one kernel
        loss, _ = node_outputs(add_op("SoftmaxCrossEntropyWithLogits", [lg, independent(cast(lb, lg.dtype))]))
        loss
    end
end

# Whether two static sizes can describe the same tensor (`nothing` matches any size; TF's
# `is_compatible_with`).
compatible_sizes(a, b) = length(a) == length(b) && all(x === nothing || y === nothing || x == y for (x, y) in zip(a, b))

"""
    sparse_softmax_cross_entropy_with_logits(labels, logits)
    sparse_softmax_cross_entropy_with_logits(; labels, logits)

TF's `tf.nn.sparse_softmax_cross_entropy_with_logits`: `labels` are class indices,
**0-based as in TF** (`0 ≤ label < C`), one per row of the `N×C` `logits`; the result is the
length-`N` vector `-log(softmax(logits))[i, labels[i]]`. `labels` is an integer array
(checked here: a label out of range raises an `OxiflowError` naming its position) or an
Int32/Int64 tensor of length `N` (the one-hot rows are gathered from the identity, so a
label out of range fails when the graph runs, an `OxiflowError` from that `GatherV2` naming
the label, as TF's CPU kernel fails). Gradient: `softmax - onehot`.
`N` may be unknown (a batch fed at run time); `C` must be known.
"""
function sparse_softmax_cross_entropy_with_logits(labels, logits::Tensor)
    ndims(logits) == 2 || invalid("sparse_softmax_cross_entropy_with_logits: logits must be N×C, got shape $(size(logits))")
    N, C = size(logits)
    C === nothing && unimplemented("sparse_softmax_cross_entropy_with_logits: the number of classes of $(logits.name), of size $(size(logits)), is unknown; it must be known")
    T = logits.dtype
    if labels isa Tensor
        labels.dtype in (Int32, Int64) || invalid("sparse_softmax_cross_entropy_with_logits: labels must be Int32/Int64, got $(labels.dtype)")
        compatible_sizes(size(labels), (N,)) || invalid("sparse_softmax_cross_entropy_with_logits: labels of shape $(size(labels)) do not match logits of shape $(size(logits))")
        eye = constant_in(getfield(labels, :graph), Matrix{T}(I, C, C))
        onehot = add_op("GatherV2", Tensor[eye, labels])
    else
        N === nothing || length(labels) == N || invalid("sparse_softmax_cross_entropy_with_logits: $(length(labels)) labels for logits of shape $(size(logits))")
        onehot = zeros(T, length(labels), C)
        for (i, l) in enumerate(labels)
            (l isa Integer && 0 <= l < C) ||
                invalid("sparse_softmax_cross_entropy_with_logits: label $l at position $i is outside the valid range [0, $C)")
            onehot[i, l+1] = one(T)
        end
    end
    return dense_softmax_xent(onehot, logits)
end
sparse_softmax_cross_entropy_with_logits(; labels, logits) = sparse_softmax_cross_entropy_with_logits(labels, logits)
