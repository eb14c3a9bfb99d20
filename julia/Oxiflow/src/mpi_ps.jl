# Asynchronous data-parallel training over MPI: a parameter server on rank 0 (TF1's
# parameter-server pattern: `tf.train.replica_device_setter` placing the variables on a
# `ps` job, with between-graph replication and a plain optimizer, so each worker applies its
# own gradients without waiting for the others). The server itself is Rust
# (crates/oxiflow-mpi/src/ps.rs): a thread of rank 0 holding the parameters as one Float64
# vector, answering pushes and pulls from every rank.

export ParameterServer, ps_step!, ps_push!, ps_pull!, ps_pull, ps_stats

"""
    ParameterServer(sess, vars=get_collection(TRAINABLE_VARIABLES); learning_rate, momentum=0.0)

Asynchronous (parameter-server) training over MPI, TF1's `replica_device_setter` pattern
with asynchronous between-graph replication: rank 0 holds the parameters (a background
thread serves them), and every rank, rank 0 included, repeatedly computes gradients on its
own data and pushes them with [`ps_step!`](@ref); the server applies each push at once,
`v -= learning_rate * g` (TF's `GradientDescentOptimizer`), or with `momentum > 0` TF's
`MomentumOptimizer` (`accum = momentum * accum + g; v -= learning_rate * accum`, one
accumulator on the server shared by all ranks), and sends the pushing rank the new values.
No rank waits for another, so a gradient may have been computed from values that other
ranks' pushes have since changed: its *staleness* is the number of updates other ranks
applied between the moment this rank last received the values and its push. One rank alone
always has staleness 0; `n` ranks taking turns have `n - 1`; the mean over all pushes of all
ranks is at most `n - 1`. See [`ps_stats`](@ref).

Collective: every rank calls it after `mpi_init` and `init(sess)`, with the same variables
(Float64 `Variable`s of the same shapes, in the same order) and hyperparameters. Rank 0's
values in `sess` become the server's and are assigned to `vars` in every rank's `sess`, so
all ranks start equal (no [`broadcast_global_variables`](@ref) needed). The server talks on
its own duplicate of `MPI_COMM_WORLD`, so MPI ops in graphs do not interfere with it.

End with [`close`](@ref)`(ps, sess)` on every rank. A server never closed is stopped by
`mpi_finalize`.

Errors (`OxiflowError`, on every rank alike): MPI not initialized (FailedPreconditionError,
naming `mpi_init`) or a build without MPI; no variables, a variable that is not Float64;
`learning_rate` not finite and > 0, `momentum` not in [0, 1), ranks with different numbers
of parameters or hyperparameters (InvalidArgumentError); a rank that does not call it
within `OXIFLOW_MPI_TIMEOUT` seconds (DeadlineExceededError).
"""
mutable struct ParameterServer
    id::Int64
    vars::Vector{Tensor}
    shapes::Vector{Tuple}
    n::Int
    learning_rate::Float64
    momentum::Float64
    version::Int          # updates applied, as of this rank's last reply
    pushes::Int           # this rank's pushes
    staleness_sum::Int
    staleness_max::Int
    last_staleness::Int
    open::Bool
end

function ParameterServer(sess::Session, vars::AbstractVector=get_collection(TRAINABLE_VARIABLES);
                         learning_rate::Real, momentum::Real=0.0)
    vs = Tensor[v for v in vars]
    isempty(vs) && invalid("ParameterServer: no variables")
    for v in vs
        is_variable_op(v) || invalid("ParameterServer: $(v.name) is a $(v.op.type) tensor, not a Variable")
        v.dtype === Float64 || invalid("ParameterServer: $(v.name) is a $(v.dtype) variable; the parameter server holds Float64 variables only")
    end
    values = run(sess, vs)
    shapes = Tuple[size(x) for x in values]
    flat = reduce(vcat, (vec(collect(Float64, x)) for x in values); init=Float64[])
    id = oxf_ps_start(flat, Float64(learning_rate), Float64(momentum))
    ps = ParameterServer(id, vs, shapes, length(flat), Float64(learning_rate), Float64(momentum), 0, 0, 0, 0, 0, true)
    assign_flat(ps, sess, flat)
    return ps
end

# The flat parameter vector as one array per variable.
function unflatten(ps::ParameterServer, flat::Vector{Float64})
    out = Any[]
    k = 0
    for s in ps.shapes
        m = foldl(*, s; init=1)
        push!(out, s == () ? flat[k+1] : reshape(flat[k+1:k+m], s))
        k += m
    end
    return out
end

function assign_flat(ps::ParameterServer, sess::Session, flat::Vector{Float64})
    ops = [load_op(v) for v in ps.vars]
    run(sess, Tensor[last(o) for o in ops], (first(o) => x for (o, x) in zip(ops, unflatten(ps, flat)))...)
    return nothing
end

function check_open(ps::ParameterServer, what)
    ps.open || throw(OxiflowError(9, "FailedPreconditionError", "$what: this parameter server is closed"))
end

"""
    ps_push!(ps, grads) -> Vector

Pushes this rank's gradients to the parameter server and returns the updated values, one
array per variable of `ps` (same shapes; a scalar for a 0-d variable). `grads`: one array
(or number) per variable, of its size (`nothing` for a variable without gradient, taken as
zeros), or one flat `Vector{Float64}` of all values in order. Records the push's staleness
in [`ps_stats`](@ref). Not collective: each rank pushes when it is ready. Errors: a
gradient count or size that does not match (InvalidArgumentError naming both; nothing is
sent and the server stays usable), a closed server (FailedPreconditionError), no reply in
`OXIFLOW_MPI_TIMEOUT` seconds (DeadlineExceededError).
"""
function ps_push!(ps::ParameterServer, grads::AbstractVector)
    check_open(ps, "ps_push!")
    flat = flatten_grads(ps, grads)
    params, version, staleness = oxf_ps_push(ps.id, flat, ps.n)
    ps.version = version
    ps.pushes += 1
    ps.staleness_sum += staleness
    ps.staleness_max = max(ps.staleness_max, staleness)
    ps.last_staleness = staleness
    return unflatten(ps, params)
end

function flatten_grads(ps::ParameterServer, grads::AbstractVector)
    grads isa AbstractVector{<:Real} && return collect(Float64, grads)
    length(grads) == length(ps.vars) ||
        invalid("ps_push!: $(length(grads)) gradients for the parameter server's $(length(ps.vars)) variables")
    parts = Vector{Float64}[]
    for (g, v, s) in zip(grads, ps.vars, ps.shapes)
        if g === nothing
            push!(parts, zeros(foldl(*, s; init=1)))
            continue
        end
        size(g) == s || invalid("ps_push!: the gradient of $(v.name) has size $(size(g)), the variable $s")
        push!(parts, vec(collect(Float64, g isa Number ? [g] : g)))
    end
    return reduce(vcat, parts; init=Float64[])
end

"""
    ps_step!(ps, sess, grads, feeds...) -> Int

One asynchronous training step on this rank: runs the gradient tensors `grads` (one per
variable of `ps`, as `gradients(loss, vars)` returns them; `nothing` entries count as
zeros) in `sess` with `feeds` (`placeholder => value` pairs, as `run` takes them), pushes
them with [`ps_push!`](@ref) and assigns the server's reply to the variables in `sess`.
Returns the push's staleness. Errors as `ps_push!` and `run`.
"""
function ps_step!(ps::ParameterServer, sess::Session, grads::AbstractVector, feeds...)
    check_open(ps, "ps_step!")
    length(grads) == length(ps.vars) ||
        invalid("ps_step!: $(length(grads)) gradients for the parameter server's $(length(ps.vars)) variables")
    present = [i for i in eachindex(grads) if grads[i] !== nothing]
    got = run(sess, Tensor[grads[i] for i in present], feeds...)
    values = Any[nothing for _ in grads]
    for (i, x) in zip(present, got)
        values[i] = x
    end
    new = ps_push!(ps, values)
    assign_flat(ps, sess, flatten_grads(ps, new))
    return ps.last_staleness
end

"""
    ps_pull(ps) -> Vector

The parameter server's current values, one array per variable of `ps` (same shapes; a
scalar for a 0-d variable); [`ps_pull!`](@ref) assigns them in a session instead. The next push's staleness
counts from this pull. Errors as [`ps_push!`](@ref).
"""
function ps_pull(ps::ParameterServer)
    check_open(ps, "ps_pull")
    params, version = oxf_ps_pull(ps.id, ps.n)
    ps.version = version
    return unflatten(ps, params)
end

"""
    ps_pull!(ps, sess)

Assigns the parameter server's current values to its variables in session `sess` (see
[`ps_pull`](@ref), which returns them instead). Returns `nothing`.
"""
function ps_pull!(ps::ParameterServer, sess::Session)
    assign_flat(ps, sess, flatten_grads(ps, ps_pull(ps)))
    return nothing
end

"""
    ps_stats(ps) -> NamedTuple

This rank's view of the parameter server: `pushes` (this rank's), `version` (updates
applied by all ranks, as of this rank's last reply), `last_staleness`, `mean_staleness`
(over this rank's pushes; 0.0 before the first), `max_staleness` and `total_staleness`
(their sum). A push's staleness is
the number of updates other ranks applied between this rank's previous reply from the
server (its previous push or pull, or the start) and this push.
"""
ps_stats(ps::ParameterServer) = (pushes=ps.pushes, version=ps.version, last_staleness=ps.last_staleness,
                                 mean_staleness=ps.pushes == 0 ? 0.0 : ps.staleness_sum / ps.pushes,
                                 max_staleness=ps.staleness_max, total_staleness=ps.staleness_sum)

"""
    close(ps::ParameterServer) -> Vector
    close(ps::ParameterServer, sess)

Closes the parameter server (collective: every rank calls it; it returns once all have,
and rank 0's server thread has stopped). Returns the final values, one array per variable;
with `sess` they are also assigned to the variables there, so every rank ends with the
same model. `ps` cannot be used afterwards. Errors: already closed (FailedPreconditionError);
a rank that does not close within `OXIFLOW_MPI_TIMEOUT` seconds (DeadlineExceededError;
rank 0's message names the ranks that did not).
"""
function Base.close(ps::ParameterServer)
    check_open(ps, "close")
    ps.open = false
    params, version = oxf_ps_close(ps.id, ps.n)
    ps.version = version
    return unflatten(ps, params)
end

function Base.close(ps::ParameterServer, sess::Session)
    values = close(ps)
    assign_flat(ps, sess, flatten_grads(ps, values))
    return values
end

function Base.show(io::IO, ps::ParameterServer)
    print(io, "ParameterServer(", length(ps.vars), " variables, ", ps.n, " parameters, learning_rate=",
          ps.learning_rate, ps.momentum > 0 ? ", momentum=$(ps.momentum)" : "", ps.open ? "" : ", closed", ")")
end
