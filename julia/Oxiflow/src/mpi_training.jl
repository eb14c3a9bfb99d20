# Horovod's data-parallel training API on the MPI collectives: `local_rank`/`local_size`,
# grouped (fused) all-reduce, `DistributedOptimizer` and `broadcast_global_variables`
# (horovod.tensorflow). Every rank runs the same program on its own shard of the data; the
# gradients are averaged over the ranks before each update, so every rank applies the same
# update and the variables stay equal on all ranks.

export mpi_local_rank, mpi_local_size, mpi_grouped_allreduce, DistributedOptimizer, broadcast_global_variables

"""
    mpi_local_rank()

This process's rank among the ranks on its host, 0-based (Horovod's `hvd.local_rank()`;
`MPI_Comm_split_type` with `MPI_COMM_TYPE_SHARED`). An `OxiflowError` when MPI is not
running.
"""
mpi_local_rank() = oxf_mpi_local_rank_size()[1]

"""
    mpi_local_size()

The number of ranks on this process's host (Horovod's `hvd.local_size()`). An
`OxiflowError` when MPI is not running.
"""
mpi_local_size() = oxf_mpi_local_rank_size()[2]

# Horovod's recipe, done by `mpi_init`: with several ranks on one host and GPUs visible, each
# rank keeps only GPU `local_rank` (modulo the GPU count), which its sessions then see as
# `GPU:0` (TF2's `set_visible_devices(gpus[hvd.local_rank()], "GPU")`). A lone rank on its
# host keeps every GPU. Returns the physical device kept, or `nothing`.
function pin_gpu_to_local_rank()
    lr, ls = oxf_mpi_local_rank_size()
    ls > 1 || return nothing
    gpus = list_physical_devices("GPU")
    isempty(gpus) && return nothing
    keep = gpus[lr % length(gpus) + 1]
    try
        set_visible_devices(keep, "GPU")
    catch e
        e isa OxiflowError || rethrow()
        @warn "mpi_init: could not give rank $(mpi_rank()) GPU $(lr % length(gpus)) of its host alone ($(e.msg)); its sessions see every GPU"
        return nothing
    end
    return keep
end

"""
    mpi_grouped_allreduce(tensors; op="mean")

Horovod's `grouped_allreduce` (its tensor fusion): the element-wise sum (`op="sum"`) or mean
over the ranks (`op="mean"`, floats only) of each tensor, made by one `MPI_Allreduce` of one
fusion buffer holding them all. `tensors`: a vector of tensors of one dtype (Float32,
Float64, Int32 or Int64), any shapes, the same on every rank. Returns a `Vector{Tensor}`,
one per input, same shapes. Differentiable (the gradient is the grouped all-reduce of the
output gradients). Op: `MpiGroupedAllreduce` (CPU). Errors: mixed dtypes or another `op`
(an `OxiflowError` when built); MPI not initialized or ranks that disagree (when run).
"""
function mpi_grouped_allreduce(tensors::AbstractVector; op::AbstractString="mean", name=nothing)
    op in ("sum", "mean") || invalid("mpi_grouped_allreduce: op must be \"sum\" or \"mean\", got $(repr(op))")
    isempty(tensors) && return Tensor[]
    return node_outputs(add_op("MpiGroupedAllreduce", Tensor[mpi_operand(t) for t in tensors]; reduction=String(op), name=name))
end

"""Horovod's default fusion threshold: at most 64 MiB of gradients per all-reduce."""
const FUSION_THRESHOLD = 64 * 1024^2

"""
    DistributedOptimizer(optimizer; fusion_threshold=64 MiB, op="mean", name="Distributed<Name>")

Horovod's `hvd.DistributedOptimizer`: wraps a TF1 optimizer so that `compute_gradients` (and
so `minimize`) averages each gradient over the MPI ranks (`op="sum"` adds them) before
`apply_gradients` applies it with the wrapped optimizer. Gradients are all-reduced in
buckets (Horovod's tensor fusion): consecutive gradients of one dtype, last variable first
(the order in which backpropagation produces them), are packed into one
`MpiGroupedAllreduce` until the next would exceed `fusion_threshold` bytes, so a step makes
one MPI call per `fusion_threshold` bytes of gradients and dtype (a gradient larger than the
threshold, or with a dimension unknown until run time, gets a bucket of its own).

With every rank feeding an equal shard of the batch and a loss that is a mean over its
shard, synchronous training over `n` ranks equals one process training on the whole batch.
Start from equal variables: run [`broadcast_global_variables`](@ref) after `init`.
"""
mutable struct DistributedOptimizer <: Optimizer
    optimizer::Optimizer
    fusion_threshold::Int
    op::String
    name::String
end

function DistributedOptimizer(optimizer::Optimizer; fusion_threshold::Integer=FUSION_THRESHOLD, op::AbstractString="mean", name=nothing)
    op in ("sum", "mean") || invalid("DistributedOptimizer: op must be \"sum\" or \"mean\", got $(repr(op))")
    fusion_threshold >= 0 || invalid("DistributedOptimizer: fusion_threshold must be 0 or more bytes, got $fusion_threshold")
    nm = name === nothing ? "Distributed" * getfield(optimizer, :name) : String(name)
    return DistributedOptimizer(optimizer, Int(fusion_threshold), String(op), nm)
end

function compute_gradients(o::DistributedOptimizer, loss::Tensor; var_list=nothing, colocate_gradients_with_ops::Bool=false)
    gv = compute_gradients(getfield(o, :optimizer), loss; var_list=var_list, colocate_gradients_with_ops=colocate_gradients_with_ops)
    grads = Any[g for (g, _) in gv]
    present = [i for i in eachindex(grads) if grads[i] !== nothing]
    for bucket in fusion_buckets(Tensor[grads[i] for i in present], getfield(o, :fusion_threshold))
        ids = present[bucket]
        name = getfield(o, :name) * "/allreduce"
        reduced = mpi_grouped_allreduce(Tensor[grads[i] for i in ids]; op=getfield(o, :op), name=name)
        for (i, r) in zip(ids, reduced)
            grads[i] = r
        end
    end
    return [(grads[i], v) for (i, (_, v)) in enumerate(gv)]
end

apply_gradients(o::DistributedOptimizer, grads_and_vars; name=nothing) =
    apply_gradients(getfield(o, :optimizer), grads_and_vars; name=name)

# Bytes of `t`, or `nothing` when a dimension is unknown until run time.
function static_bytes(t::Tensor)
    s = size(t)
    any(d -> d === nothing, s) && return nothing
    return foldl(*, s; init=1) * sizeof(eltype(t))
end

"""
    fusion_buckets(grads, threshold) -> Vector{Vector{Int}}

Indices into `grads` grouped into all-reduce buckets: per dtype, from the last gradient to
the first, each bucket holding at most `threshold` bytes (a larger gradient, or one of
unknown size, alone). Every index is in exactly one bucket.
"""
function fusion_buckets(grads::Vector{Tensor}, threshold::Int)
    buckets = Vector{Int}[]
    open = Dict{Any,Tuple{Vector{Int},Int}}()   # dtype => (bucket being filled, its bytes)
    for i in reverse(eachindex(grads))
        b = static_bytes(grads[i])
        dt = eltype(grads[i])
        if b === nothing || b > threshold
            push!(buckets, [i])
            continue
        end
        cur, bytes = get(open, dt, (Int[], 0))
        if !isempty(cur) && bytes + b > threshold
            push!(buckets, cur)
            cur, bytes = Int[], 0
        end
        push!(cur, i)
        open[dt] = (cur, bytes + b)
    end
    for (cur, _) in values(open)
        isempty(cur) || push!(buckets, cur)
    end
    # build them in the order their first gradient appears from the end, so the node order
    # (the order every rank issues them in) follows backpropagation
    sort!(buckets; by=b -> -b[1])
    return buckets
end

"""
    broadcast_global_variables(root=0)

Horovod's `hvd.broadcast_global_variables(root_rank)`: an op that, when run, assigns every
global variable (`GLOBAL_VARIABLES` of the default graph: model variables and optimizer
slots) rank `root`'s value (`MpiBcast` then `Assign` per variable). Run it once after
`init(sess)` so every rank starts from the same variables, and after building the optimizer
so its slots are included. An `OxiflowError` when the graph has no variables or `root` is
not a non-negative integer; MPI errors when run.
"""
function broadcast_global_variables(root::Integer=0)
    r = mpi_root("broadcast_global_variables", root)
    vars = get_collection(GLOBAL_VARIABLES)
    isempty(vars) && invalid("broadcast_global_variables: the default graph has no variables")
    return group(Tensor[assign(v, mpi_bcast(v; root=r)) for v in vars]; name="broadcast_global_variables")
end
