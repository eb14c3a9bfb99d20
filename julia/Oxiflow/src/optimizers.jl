# TF1 optimizers (tf.train.*Optimizer) on the engine's Apply* training ops.
#
# Each optimizer builds TF's graph: slot variables named `<var>/<Name>`, `<var>/<Name>_1`
# (and Adam's `beta1_power`, `beta2_power`) colocated with their variable (their initial
# values from `slot_inits`, as each TF optimizer's `_create_slots`), one update op per
# variable `<Name>/update_<var>/Apply<Name>` colocated with it (its reference inputs put it
# on the variable's device anyway), and a final `NoOp` named `<Name>` that runs them all.

"""A TF1 optimizer: `minimize(opt, loss)` or `opt.minimize(loss)` returns the training op."""
abstract type Optimizer end

# A hyperparameter an optimizer may take as a number or a tensor (TF converts either with
# `convert_to_tensor` and casts it to each variable's dtype): a real number or a scalar
# tensor, else an `OxiflowError` naming the optimizer, raised where it is built rather than
# at `minimize`.
function hyper_value(x, opt::AbstractString, name::AbstractString)
    x isa Real && !(x isa Bool) && return x
    x isa Tensor && ndims(x) == 0 && return x
    invalid("$opt: $name must be a number or a scalar tensor, got " *
            (x isa Tensor ? "a tensor of shape $(size(x))" : "$(repr(x)) ($(typeof(x)))"))
end

"""
    GradientDescentOptimizer(learning_rate=1e-3; name="GradientDescent")

TF's `tf.train.GradientDescentOptimizer`: `var -= learning_rate * grad` (`ApplyGradientDescent`).
`learning_rate` is a number or a scalar tensor (e.g. a placeholder).
"""
mutable struct GradientDescentOptimizer <: Optimizer
    learning_rate::Any
    name::String
    slots::Dict{Tensor,Vector{Tensor}}
end
GradientDescentOptimizer(learning_rate=1e-3; name::AbstractString="GradientDescent") =
    GradientDescentOptimizer(hyper_value(learning_rate, "GradientDescentOptimizer", "learning_rate"), String(name), Dict{Tensor,Vector{Tensor}}())

"""
    MomentumOptimizer(learning_rate, momentum; use_nesterov=false, name="Momentum")

TF's `tf.train.MomentumOptimizer` (`ApplyMomentum`): `accum = accum*momentum + grad`,
`var -= learning_rate*accum`; slot `<var>/Momentum` (zeros).
"""
mutable struct MomentumOptimizer <: Optimizer
    learning_rate::Any
    momentum::Any
    use_nesterov::Bool
    name::String
    slots::Dict{Tensor,Vector{Tensor}}
end
MomentumOptimizer(learning_rate, momentum; use_nesterov::Bool=false, name::AbstractString="Momentum") =
    MomentumOptimizer(hyper_value(learning_rate, "MomentumOptimizer", "learning_rate"),
                      hyper_value(momentum, "MomentumOptimizer", "momentum"), use_nesterov, String(name), Dict{Tensor,Vector{Tensor}}())

"""
    AdamOptimizer(learning_rate=1e-3; beta1=0.9, beta2=0.999, epsilon=1e-8, name="Adam")

TF's `tf.train.AdamOptimizer` (`ApplyAdam`, ADCME's `AdamOptimizer`): slots `<var>/Adam`
(m) and `<var>/Adam_1` (v), and `beta1_power`/`beta2_power` variables (colocated with the
first variable) that the training op multiplies by `beta1`/`beta2` after each step.
"""
mutable struct AdamOptimizer <: Optimizer
    learning_rate::Any
    beta1::Float64
    beta2::Float64
    epsilon::Float64
    name::String
    slots::Dict{Tensor,Vector{Tensor}}
    powers::Vector{Tensor}
end
AdamOptimizer(learning_rate=1e-3; beta1::Real=0.9, beta2::Real=0.999, epsilon::Real=1e-8, name::AbstractString="Adam") =
    AdamOptimizer(hyper_value(learning_rate, "AdamOptimizer", "learning_rate"), beta1, beta2, epsilon, String(name), Dict{Tensor,Vector{Tensor}}(), Tensor[])

"""
    RMSPropOptimizer(learning_rate=1e-3; decay=0.9, momentum=0.0, epsilon=1e-10, name="RMSProp")

TF's `tf.train.RMSPropOptimizer` (`ApplyRMSProp`, not centered): slots `<var>/RMSProp`
(mean square, initialised to ones as in TF) and `<var>/RMSProp_1` (momentum, zeros).
"""
mutable struct RMSPropOptimizer <: Optimizer
    learning_rate::Any
    decay::Float64
    momentum::Float64
    epsilon::Float64
    name::String
    slots::Dict{Tensor,Vector{Tensor}}
end
RMSPropOptimizer(learning_rate=1e-3; decay::Real=0.9, momentum::Real=0.0, epsilon::Real=1e-10, name::AbstractString="RMSProp") =
    RMSPropOptimizer(hyper_value(learning_rate, "RMSPropOptimizer", "learning_rate"), decay, momentum, epsilon, String(name), Dict{Tensor,Vector{Tensor}}())

"""
    AdagradOptimizer(learning_rate=1e-3; initial_accumulator_value=0.1, name="Adagrad")

TF's `tf.train.AdagradOptimizer` (`ApplyAdagrad`, ADCME's `AdagradOptimizer`; Duchi et al.
2011): `accum += grad^2`, `var -= learning_rate * grad / sqrt(accum)` (TF's
`training_ops.cc`). Slot `<var>/Adagrad` (TF's "accumulator"), initialised to
`initial_accumulator_value` (must be positive).
"""
mutable struct AdagradOptimizer <: Optimizer
    learning_rate::Any
    initial_accumulator_value::Float64
    name::String
    slots::Dict{Tensor,Vector{Tensor}}
end
function AdagradOptimizer(learning_rate=1e-3; initial_accumulator_value::Real=0.1, name::AbstractString="Adagrad")
    initial_accumulator_value > 0 || invalid("AdagradOptimizer: initial_accumulator_value must be positive, got $initial_accumulator_value")
    return AdagradOptimizer(hyper_value(learning_rate, "AdagradOptimizer", "learning_rate"), initial_accumulator_value, String(name), Dict{Tensor,Vector{Tensor}}())
end

"""
    AdadeltaOptimizer(learning_rate=1e-3; rho=0.95, epsilon=1e-8, name="Adadelta")

TF's `tf.train.AdadeltaOptimizer` (`ApplyAdadelta`, ADCME's `AdadeltaOptimizer`; Zeiler
2012), with TF's update (`training_ops.cc`): `accum = rho*accum + (1-rho)*grad^2`,
`update = sqrt(accum_update + epsilon) / sqrt(accum + epsilon) * grad`,
`accum_update = rho*accum_update + (1-rho)*update^2`, `var -= learning_rate*update`. Slots
`<var>/Adadelta` ("accum") and `<var>/Adadelta_1` ("accum_update"), zeros; hyperparameter
tensors `<Name>/lr`, `<Name>/rho`, `<Name>/epsilon` as TF names them.
"""
mutable struct AdadeltaOptimizer <: Optimizer
    learning_rate::Any
    rho::Float64
    epsilon::Float64
    name::String
    slots::Dict{Tensor,Vector{Tensor}}
end
AdadeltaOptimizer(learning_rate=1e-3; rho::Real=0.95, epsilon::Real=1e-8, name::AbstractString="Adadelta") =
    AdadeltaOptimizer(hyper_value(learning_rate, "AdadeltaOptimizer", "learning_rate"), rho, epsilon, String(name), Dict{Tensor,Vector{Tensor}}())

"""
    AdagradDAOptimizer(learning_rate, global_step; initial_gradient_squared_accumulator_value=0.1,
                       l1_regularization_strength=0.0, l2_regularization_strength=0.0, name="AdagradDA")

TF's `tf.train.AdagradDAOptimizer` (`ApplyAdagradDA`, Adagrad dual averaging, Duchi et al.
2011). `global_step` is a scalar Int64 tensor (usually a `Variable`) that the user
increments; as in TF the update does not increment it, and the op gets `t = global_step + 1`
(TF's `_prepare`). With `g` the sum of the gradients so far (slot `<var>/AdagradDA`, zeros)
and `gg` the sum of their squares (slot `<var>/AdagradDA_1`, starting at
`initial_gradient_squared_accumulator_value`): `var = -lr * sign(g) * max(|g| - l1*t, 0) /
(l2*t*lr + sqrt(gg))` (with `l1 = 0`: `-lr * g / (l2*t*lr + sqrt(gg))`; TF's
`training_ops.cc`). CPU only (TF has no GPU kernel): its variables are placed on the CPU.
"""
mutable struct AdagradDAOptimizer <: Optimizer
    learning_rate::Any
    global_step::Tensor
    initial_gradient_squared_accumulator_value::Float64
    l1_regularization_strength::Float64
    l2_regularization_strength::Float64
    name::String
    slots::Dict{Tensor,Vector{Tensor}}
end
function AdagradDAOptimizer(learning_rate, global_step; initial_gradient_squared_accumulator_value::Real=0.1,
                            l1_regularization_strength::Real=0.0, l2_regularization_strength::Real=0.0,
                            name::AbstractString="AdagradDA")
    (global_step isa Tensor && global_step.dtype == Int64 && ndims(global_step) == 0) ||
        invalid("AdagradDAOptimizer: global_step must be a scalar Int64 tensor (a Variable), got $(global_step isa Tensor ? "a $(global_step.dtype) tensor of shape $(size(global_step))" : repr(global_step))")
    initial_gradient_squared_accumulator_value > 0 ||
        invalid("AdagradDAOptimizer: initial_gradient_squared_accumulator_value must be positive, got $initial_gradient_squared_accumulator_value")
    return AdagradDAOptimizer(hyper_value(learning_rate, "AdagradDAOptimizer", "learning_rate"), global_step, initial_gradient_squared_accumulator_value, l1_regularization_strength,
                              l2_regularization_strength, String(name), Dict{Tensor,Vector{Tensor}}())
end

function Base.getproperty(o::Optimizer, s::Symbol)
    s === :minimize && return (loss; kw...) -> minimize(o, loss; kw...)
    s === :apply_gradients && return (gv; kw...) -> apply_gradients(o, gv; kw...)
    s === :compute_gradients && return (loss; kw...) -> compute_gradients(o, loss; kw...)
    return getfield(o, s)
end

"""
    compute_gradients(opt, loss; var_list=nothing, colocate_gradients_with_ops=false)

TF's `Optimizer.compute_gradients`: `(gradient, variable)` pairs for `var_list` (default:
the trainable variables); the gradient is `nothing` where `loss` does not depend on it.
"""
function compute_gradients(opt::Optimizer, loss::Tensor; var_list=nothing, colocate_gradients_with_ops::Bool=false)
    vars = var_list === nothing ? get_collection(TRAINABLE_VARIABLES) : (var_list isa Tensor ? [var_list] : collect(var_list))
    isempty(vars) && invalid("$(getfield(opt, :name)): no variables to optimize")
    ndims(loss) == 0 || invalid("$(getfield(opt, :name)): the loss must be a scalar, got shape $(size(loss))")
    gs = gradients(loss, Tensor[v for v in vars]; colocate=colocate_gradients_with_ops)
    return [(g, v) for (g, v) in zip(gs, vars)]
end

"""
    minimize(opt, loss; var_list=nothing, colocate_gradients_with_ops=false, name=nothing)
    opt.minimize(loss)

TF's `Optimizer.minimize`: [`compute_gradients`](@ref) then [`apply_gradients`](@ref).
Returns the training op; run it (with `init(sess)` done after it was built, so the slot
variables get their initial values) to take one step.
"""
function minimize(opt::Optimizer, loss::Tensor; var_list=nothing, colocate_gradients_with_ops::Bool=false, name=nothing)
    gv = compute_gradients(opt, loss; var_list=var_list, colocate_gradients_with_ops=colocate_gradients_with_ops)
    all(p -> p[1] === nothing, gv) && invalid("No gradients provided for any variable: $(join([v.name for (_, v) in gv], ", ")) do not affect $(loss.name)")
    return apply_gradients(opt, gv; name=name)
end

"""
    apply_gradients(opt, grads_and_vars; name=nothing)

TF's `Optimizer.apply_gradients`: one update op per `(gradient, variable)` pair whose
gradient is not `nothing`, and a `NoOp` named after the optimizer (`"Adam"`, `"Adam_1"`, ...)
that runs them. Gradients must have their variable's shape and dtype.
"""
function apply_gradients(opt::Optimizer, grads_and_vars; name=nothing)
    gv = [(g, v) for (g, v) in grads_and_vars if g !== nothing]
    isempty(gv) && invalid("No gradients provided for any variable")
    for (g, v) in gv
        is_variable_op(v) || invalid("apply_gradients: $(v.name) is not a Variable")
        size(g) == size(v) || invalid("apply_gradients: gradient $(g.name) has size $(size(g)) but $(v.name) has size $(size(v))")
    end
    vars = Tensor[v for (_, v) in gv]
    create_slots!(opt, vars)
    gr = getfield(vars[1], :graph)
    scope = oxf_push_name_scope(gr, name === nothing ? getfield(opt, :name) : String(name))
    local updates
    try
        hyper = prepare(opt)
        # the float hyperparameters cast once per variable dtype, not once per variable (TF
        # casts per variable and Grappler folds the casts of constants; 4 casts per Float32
        # variable were a third of a small Adam step's ops)
        by_dtype = Dict{Type,Any}(T => map(x -> x isa Tensor && x.dtype <: AbstractFloat ? cast(x, T) : x, hyper)
                                  for T in unique(Type[v.dtype for (_, v) in gv]))
        updates = Tensor[]
        for (g, v) in gv
            vname = v.op.name
            oxf_push_name_scope(gr, "update_" * vname)
            try
                push!(updates, colocate_with(() -> apply_one(opt, by_dtype[v.dtype], g, v), v))
            finally
                oxf_pop_name_scope(gr)
            end
        end
        append!(updates, finish(opt, updates))
    finally
        oxf_pop_name_scope(gr)
    end
    return group(updates; name=scope * "/")
end

# Slot variable `<var>/<opt name>` (unique: the second is `<var>/<opt name>_1`), colocated
# with `v`, not trainable.
slot(opt::Optimizer, v::Tensor, value) =
    colocate_with(() -> Variable(value; name=v.op.name * "/" * getfield(opt, :name), trainable=false), v)

# Initial values of a variable's slots, in slot order (TF's `_create_slots`).
slot_inits(::GradientDescentOptimizer, T, dims) = Any[]
slot_inits(::MomentumOptimizer, T, dims) = Any[zeros(T, dims...)]
slot_inits(::AdamOptimizer, T, dims) = Any[zeros(T, dims...), zeros(T, dims...)]
slot_inits(::RMSPropOptimizer, T, dims) = Any[ones(T, dims...), zeros(T, dims...)]
slot_inits(o::AdagradOptimizer, T, dims) = Any[fill(T(o.initial_accumulator_value), dims)]
slot_inits(::AdadeltaOptimizer, T, dims) = Any[zeros(T, dims...), zeros(T, dims...)]
slot_inits(o::AdagradDAOptimizer, T, dims) = Any[zeros(T, dims...), fill(T(o.initial_gradient_squared_accumulator_value), dims)]

function create_slots!(opt::Optimizer, vars)
    slots = getfield(opt, :slots)
    for v in vars
        haskey(slots, v) && continue
        slots[v] = Tensor[slot(opt, v, x) for x in slot_inits(opt, v.dtype, size(v))]
    end
    if opt isa AdamOptimizer && isempty(getfield(opt, :powers))
        v = vars[1]; T = v.dtype
        colocate_with(v) do
            push!(getfield(opt, :powers), Variable(T(getfield(opt, :beta1)); name="beta1_power", trainable=false))
            push!(getfield(opt, :powers), Variable(T(getfield(opt, :beta2)); name="beta2_power", trainable=false))
        end
    end
    return nothing
end

hyper_tensor(x::Tensor, name) = x
hyper_tensor(x::Real, name) = constant(Float64(x); name=name)

# TF's `_prepare`: the hyperparameters as tensors `<Name>/learning_rate`, ...
prepare(o::GradientDescentOptimizer) = (lr=hyper_tensor(o.learning_rate, "learning_rate"),)
prepare(o::MomentumOptimizer) = (lr=hyper_tensor(o.learning_rate, "learning_rate"), momentum=hyper_tensor(o.momentum, "momentum"))
prepare(o::AdamOptimizer) = (lr=hyper_tensor(o.learning_rate, "learning_rate"), beta1=hyper_tensor(o.beta1, "beta1"),
                             beta2=hyper_tensor(o.beta2, "beta2"), epsilon=hyper_tensor(o.epsilon, "epsilon"))
prepare(o::RMSPropOptimizer) = (lr=hyper_tensor(o.learning_rate, "learning_rate"), decay=hyper_tensor(o.decay, "decay"),
                                momentum=hyper_tensor(o.momentum, "momentum"), epsilon=hyper_tensor(o.epsilon, "epsilon"))
prepare(o::AdagradOptimizer) = (lr=hyper_tensor(o.learning_rate, "learning_rate"),)
prepare(o::AdadeltaOptimizer) = (lr=hyper_tensor(o.learning_rate, "lr"), rho=hyper_tensor(o.rho, "rho"),
                                 epsilon=hyper_tensor(o.epsilon, "epsilon"))
# TF's AdagradDA `_prepare`: the step the op sees is `global_step + 1`, computed once next
# to the learning rate (TF's "global step on worker").
function prepare(o::AdagradDAOptimizer)
    lr = hyper_tensor(o.learning_rate, "learning_rate")
    step = colocate_with(() -> add_op("Identity", [o.global_step]) + 1, lr)
    return (lr=lr, step=step)
end

function apply_one(o::GradientDescentOptimizer, h, g, v)
    T = v.dtype
    return add_op("ApplyGradientDescent", (var=v, alpha=cast(h.lr, T), delta=cast(g, T)))
end
function apply_one(o::MomentumOptimizer, h, g, v)
    T = v.dtype; s = getfield(o, :slots)[v]
    return add_op("ApplyMomentum", (var=v, accum=s[1], lr=cast(h.lr, T), grad=cast(g, T), momentum=cast(h.momentum, T));
                  use_nesterov=o.use_nesterov)
end
function apply_one(o::AdamOptimizer, h, g, v)
    T = v.dtype; s = getfield(o, :slots)[v]; p = getfield(o, :powers)
    return add_op("ApplyAdam", (var=v, m=s[1], v=s[2], beta1_power=cast(p[1], T), beta2_power=cast(p[2], T),
                                lr=cast(h.lr, T), beta1=cast(h.beta1, T), beta2=cast(h.beta2, T),
                                epsilon=cast(h.epsilon, T), grad=cast(g, T)))
end
function apply_one(o::RMSPropOptimizer, h, g, v)
    T = v.dtype; s = getfield(o, :slots)[v]
    return add_op("ApplyRMSProp", (var=v, ms=s[1], mom=s[2], lr=cast(h.lr, T), rho=cast(h.decay, T),
                                   momentum=cast(h.momentum, T), epsilon=cast(h.epsilon, T), grad=cast(g, T)))
end

function apply_one(o::AdagradOptimizer, h, g, v)
    T = v.dtype; s = getfield(o, :slots)[v]
    return add_op("ApplyAdagrad", (var=v, accum=s[1], lr=cast(h.lr, T), grad=cast(g, T)))
end
function apply_one(o::AdadeltaOptimizer, h, g, v)
    T = v.dtype; s = getfield(o, :slots)[v]
    return add_op("ApplyAdadelta", (var=v, accum=s[1], accum_update=s[2], lr=cast(h.lr, T), rho=cast(h.rho, T),
                                    epsilon=cast(h.epsilon, T), grad=cast(g, T)))
end
function apply_one(o::AdagradDAOptimizer, h, g, v)
    T = v.dtype; s = getfield(o, :slots)[v]
    step = add_op("Identity", [h.step])       # TF: identity(global step on worker) on the variable's device
    l1 = cast(constant(o.l1_regularization_strength), T)
    l2 = cast(constant(o.l2_regularization_strength), T)
    return add_op("ApplyAdagradDA", (var=v, gradient_accumulator=s[1], gradient_squared_accumulator=s[2], grad=cast(g, T),
                                     lr=cast(h.lr, T), l1=l1, l2=l2, global_step=step))
end

# TF's `_finish`: extra ops run with the updates (Adam: beta powers *= beta after them).
finish(::Optimizer, updates) = Tensor[]
function finish(o::AdamOptimizer, updates)
    p = getfield(o, :powers)
    return control_dependencies(updates) do
        colocate_with(p[1]) do
            Tensor[assign(p[1], p[1] * getfield(o, :beta1)), assign(p[2], p[2] * getfield(o, :beta2))]
        end
    end
end
