# Data parallelism in one graph: the same tower built on several devices with shared
# variables on a parameter device (TF1's multi-GPU "tower" pattern, seed 000's
# assign_to_device), combined synchronously (gradients averaged with AddN, one update per
# step; tf.distribute.MirroredStrategy, seed 003) or asynchronously (each replica applies
# its own gradients, no barrier; seed 004).

export replicate, MirroredStrategy, num_replicas, DistributedTrainer

"""
    assign_to_device(device, ps_device="/device:CPU:0")

Seed 000's device function: `VariableV2` (and TF's `Variable`, `AutoReloadVariable`) nodes
go to `ps_device`, every other node to `device`. Use it as `@pywith tf.device(f)`. Not
exported (programs define their own, as seed 000 does): `Oxiflow.assign_to_device`.
"""
function assign_to_device(device::AbstractString, ps_device::AbstractString="/device:CPU:0")
    return node -> (node.op in ("Variable", "VariableV2", "AutoReloadVariable") ? ps_device : device)
end

"""
    replicate(f, devices; ps_device="/device:CPU:0")

Builds `f(i)` once per device (`i` = 1, 2, ...), each under name scope `replica_<i-1>` and
the device function `assign_to_device(devices[i], ps_device)`: every op of tower `i` is
requested on `devices[i]`, and variables it creates go to `ps_device`. Variables are
shared between towers when `f` closes over them or creates them with `get_variable` (or
named layers such as `batch_normalization(...; name)`) under `AUTO_REUSE`. Returns the
vector of `f`'s results. `devices` are device strings (`"/gpu:0"`, `"/device:GPU:1"`).
"""
function replicate(f::Function, devices; ps_device::AbstractString="/device:CPU:0")
    isempty(devices) && invalid("replicate: no devices given")
    return [name_scope("replica_$(i-1)") do
                with_device(() -> f(i), assign_to_device(String(d), String(ps_device)))
            end for (i, d) in enumerate(devices)]
end

"""
    MirroredStrategy(devices=nothing; ps_device="/device:CPU:0")

A `tf.distribute.MirroredStrategy`-style helper for data parallelism on one machine.
`devices` defaults to every GPU of a session created now (`/device:GPU:0`, ...; real or
emulated), or `["/device:CPU:0"]` when there is none. Variables live on `ps_device`.

- `strategy.scope() do ... end` or `@pywith strategy.scope() begin ... end` (TF's
  `with strategy.scope():`): ops created inside, the model's variables, go to `ps_device`.
- `minimize(strategy, opt, loss_fn, inputs...; mode=:sync)` (or `strategy.minimize(...)`):
  the training step, a [`DistributedTrainer`](@ref).
- `num_replicas(strategy)` (`strategy.num_replicas_in_sync`).
"""
struct MirroredStrategy
    devices::Vector{String}
    ps_device::String
end
function MirroredStrategy(devices=nothing; ps_device::AbstractString="/device:CPU:0")
    ds = if devices === nothing
        gpus = [d.name for d in list_devices() if d.type == "GPU"]
        isempty(gpus) ? ["/device:CPU:0"] : gpus
    else
        String[String(d) for d in devices]
    end
    isempty(ds) && invalid("MirroredStrategy: no devices given")
    return MirroredStrategy(ds, String(ps_device))
end

"""`num_replicas(strategy)`: the number of replicas (devices) of a `MirroredStrategy`."""
num_replicas(s::MirroredStrategy) = length(s.devices)

function Base.getproperty(s::MirroredStrategy, p::Symbol)
    ps = getfield(s, :ps_device)
    p === :scope && return (f...) -> isempty(f) ? tf_device(ps) : with_device(f[1], ps)
    p === :minimize && return (args...; kw...) -> minimize(s, args...; kw...)
    p === :num_replicas_in_sync && return length(getfield(s, :devices))
    return getfield(s, p)
end

"""
    DistributedTrainer

What `minimize(strategy, ...)` returns. Fields: `train_op` (run it for one step),
`loss` (the mean of the replicas' losses, weighted by their slice sizes, on the parameter
device), `replica_losses`, `replica_train_ops` (async: one per replica), `update_ops` (the
`UPDATE_OPS` bound to the training), `mode` (`:sync` or `:async`), `strategy`.
"""
struct DistributedTrainer
    train_op::Tensor
    loss::Tensor
    replica_losses::Vector{Tensor}
    replica_train_ops::Vector{Tensor}
    update_ops::Vector{Tensor}
    mode::Symbol
    strategy::MirroredStrategy
end

"""
    minimize(strategy::MirroredStrategy, opt, loss_fn, inputs...; mode=:sync,
             colocate=true, var_list=nothing)

Data-parallel training step. Each input tensor (batch along dimension 1, e.g. a
placeholder `[N, 64]`) is split on the parameter device into `R = num_replicas(strategy)`
consecutive slices (`SplitV`; `N` must be known and divisible by `R` when `R > 1`, else an
`OxiflowError`); replica `i` builds `loss_fn(slices_i...)` (a scalar: the mean loss over its
slice) through [`replicate`](@ref), and its gradients with `gradients(...; colocate)` (on
its device when `colocate=true`). Batch-norm update ops created by a replica are bound to
that replica's training (TF's tower pattern: in `:sync` mode only replica 0's, as TF's
multi-GPU examples).

- `mode=:sync`: per variable `AddN` of the replicas' gradients times `1/R` on the parameter
  device, then one `apply_gradients` (one update per step, all replicas wait for it). With
  equal slices the averaged gradient is the gradient of the mean loss over the whole
  batch, so the result equals one device on the same global batch (up to rounding), for
  models whose towers do not use batch statistics.
- `mode=:async`: each replica applies its own gradients with its own update ops, no
  barrier between replicas: a replica reads the variables when its first op runs and
  updates them as soon as its gradients are ready, while others may be mid-step (updates
  are not locked against each other beyond the variable store's own, as TF's
  `use_locking=false` and Hogwild). `train_op` groups the replicas' ops.

Variables: `var_list`, or the trainable variables that exist after the towers are built.
"""
function minimize(s::MirroredStrategy, opt::Optimizer, loss_fn::Function, inputs::Tensor...; mode::Symbol=:sync,
                  colocate::Bool=true, var_list=nothing)
    mode in (:sync, :async) || invalid("minimize(strategy): mode must be :sync or :async, got :$mode")
    R = num_replicas(s)
    isempty(inputs) && invalid("minimize(strategy): no input tensors to split")
    for t in inputs
        ndims(t) >= 1 || invalid("minimize(strategy): input $(t.name) is a scalar; inputs are batches along dimension 1")
        size(t, 1) === nothing && R > 1 &&
            unimplemented("minimize(strategy): the batch dimension of $(t.name) (size $(size(t))) is unknown, so it cannot be split into $R slices yet; give the placeholder its batch size")
        R == 1 || size(t, 1) % R == 0 ||
            invalid("minimize(strategy): the batch of $(t.name) (shape $(size(t))) does not split into $R equal slices")
    end
    slices = with_device(s.ps_device) do
        [R == 1 ? Tensor[t] : split(t, R; dims=1) for t in inputs]
    end
    upd = Vector{Vector{Tensor}}()
    losses = replicate(s.devices; ps_device=s.ps_device) do i
        k = length(get_collection(UPDATE_OPS))
        l = loss_fn([sl[i] for sl in slices]...)
        l isa Tensor && ndims(l) == 0 || invalid("minimize(strategy): loss_fn must return a scalar tensor")
        push!(upd, get_collection(UPDATE_OPS)[k+1:end])
        l
    end
    vars = var_list === nothing ? get_collection(TRAINABLE_VARIABLES) : collect(Tensor, var_list)
    isempty(vars) && invalid("minimize(strategy): no trainable variables")
    grads = Vector{Vector{Any}}()
    for (i, d) in enumerate(s.devices)
        g = name_scope("replica_$(i-1)") do
            with_device(() -> gradients(losses[i], vars; colocate=colocate), assign_to_device(d, s.ps_device))
        end
        push!(grads, collect(Any, g))
    end
    total = with_device(s.ps_device) do
        R == 1 ? losses[1] : add_n(losses) * (1.0 / R)
    end
    if mode === :sync
        avg = with_device(s.ps_device) do
            name_scope("average_gradients") do
                Any[all(gs -> gs[j] === nothing, grads) ? nothing :
                    (R == 1 ? grads[1][j] : add_n(Tensor[gs[j] for gs in grads if gs[j] !== nothing]) * (1.0 / R))
                    for j in eachindex(vars)]
            end
        end
        u = upd[1]
        train = control_dependencies(() -> apply_gradients(opt, collect(zip(avg, vars))), u)
        return DistributedTrainer(train, total, losses, Tensor[train], u, mode, s)
    else
        trains = Tensor[control_dependencies(() -> apply_gradients(opt, collect(zip(grads[i], vars))), upd[i]) for i in 1:R]
        train = group(trains; name="async_train")
        return DistributedTrainer(train, total, losses, trains, vcat(upd...), mode, s)
    end
end
