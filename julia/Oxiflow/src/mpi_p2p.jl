# ADCME's point-to-point MPI ops (ADCME.jl src/mpi.jl: mpi_send, mpi_recv, mpi_sendrecv,
# mpi_gather, mpi_halo_exchange, mpi_halo_exchange2), each a graph op with its adjoint, on
# the engine's `MpiSend`, `MpiRecv`, `MpiSendRecv`, `MpiGather` and `MpiHaloExchange`
# (crates/oxiflow-core/src/ops/p2p.rs). Ranks are 0-based.

export mpi_send, mpi_recv, mpi_sendrecv, mpi_exchange, mpi_gather, mpi_halo_exchange, mpi_halo_exchange2

function mpi_peer(fname, what, r)
    (r isa Integer && !(r isa Bool) && r >= 0) ||
        invalid("$fname: $what must be a rank (a non-negative Julia integer), got $(repr(r))")
    return Int(r)
end

function mpi_tag(fname, tag)
    (tag isa Integer && !(tag isa Bool) && 0 <= tag <= 32766) ||
        invalid("$fname: tag must be an integer from 0 to 32766, got $(repr(tag))")
    return Int(tag)
end

"""
    mpi_send(a, dest, tag=0; tag=tag)

ADCME's `mpi_send`: sends `a` to rank `dest` and returns `a` itself, so that the send is a
node of the graph (run the result, or something computed from it, to send). `a`: a tensor
(Float64, Float32, Int32 or Int64, any shape) or a Julia number or array (made a Float64
constant). Rank `dest` receives it with [`mpi_recv`](@ref) (same dtype, element count and
`tag`). The send completes once `dest` has received (no buffering), so the two ends must run
their MPI ops in a compatible order.

Differentiable: the gradient of `a` is the output's gradient plus the gradient that rank
`dest`'s `mpi_recv` sends back (ADCME's kernel returns the latter only). Because that
gradient is a message, both ranks must differentiate: when `dest`'s loss uses what it
received, this rank's loss must use this output.

Errors when the graph runs (an `OxiflowError`): `dest` not a rank of the job or this rank
(InvalidArgumentError naming the node), a receiver that expects another dtype, count or tag
(FailedPreconditionError on both ranks), no receiver within `OXIFLOW_MPI_TIMEOUT` seconds
(DeadlineExceededError). Op: `MpiSend` (CPU).
"""
mpi_send(a, dest::Integer, tag_::Integer=0; tag::Integer=tag_, name=nothing) =
    add_op("MpiSend", Tensor[mpi_operand(a)]; dest=mpi_peer("mpi_send", "dest", dest), tag=mpi_tag("mpi_send", tag), name=name)

"""
    mpi_recv(a, src, tag=0; tag=tag)

ADCME's `mpi_recv`: returns the tensor rank `src` sent with [`mpi_send`](@ref) (or
[`mpi_sendrecv`](@ref)); `a` gives its shape and dtype (ADCME: "`mpi_recv` requires an
input for gradient backpropagation"), its values are not used. ADCME's example, on 2 or
more ranks:

```julia
r = mpi_rank()
a = constant(Float64(r))
if r == 1
    a = mpi_send(a, 0)
end
if r == 0
    a = mpi_recv(a, 1)
end
# run(sess, a) == 1.0 on ranks 0 and 1
```

Differentiable: the output's gradient is sent back to `src` (where `mpi_send` adds it to its
input's gradient); `a` gets zeros. Errors as for [`mpi_send`](@ref), with `src`. Op:
`MpiRecv` (CPU).
"""
mpi_recv(a, src::Integer, tag_::Integer=0; tag::Integer=tag_, name=nothing) =
    add_op("MpiRecv", Tensor[mpi_operand(a)]; src=mpi_peer("mpi_recv", "src", src), tag=mpi_tag("mpi_recv", tag), name=name)

"""
    mpi_sendrecv(a, dest, src, tag=0; tag=tag)

ADCME's `mpi_sendrecv`: a one-way message, called with the same arguments on every rank:
rank `src` sends `a` to rank `dest` (`mpi_send(a, dest)`), rank `dest` returns what `src`
sent (`mpi_recv(a, src)`), and every other rank returns `a` unchanged. ADCME's example:
`a = mpi_sendrecv(constant(ones(10) * r), 0, 2)` leaves rank 2's values on ranks 0 and 2.
`dest` and `src` must be different ranks. Differentiable through [`mpi_send`](@ref) and
[`mpi_recv`](@ref) (both ends must differentiate). For both directions at once (`MPI_Sendrecv`:
every rank sends and receives, a ring) use [`mpi_exchange`](@ref).
"""
function mpi_sendrecv(a, dest::Integer, src::Integer, tag_::Integer=0; tag::Integer=tag_, name=nothing)
    d, s = mpi_peer("mpi_sendrecv", "dest", dest), mpi_peer("mpi_sendrecv", "src", src)
    d == s && invalid("mpi_sendrecv: dest and src are both rank $d; a rank does not message itself")
    r = mpi_rank()
    r == s && return mpi_send(a, d; tag=tag, name=name)
    r == d && return mpi_recv(a, s; tag=tag, name=name)
    return mpi_operand(a)
end

"""
    mpi_exchange(a, dest, src, tag=0; tag=tag)

Sends `a` to rank `dest` and returns what rank `src` sends, both at once (`MPI_Sendrecv`:
the send and the receive are posted together, so a ring, `mpi_exchange(a, (r+1) % n,
(r+n-1) % n)` on every rank `r`, or two ranks swapping, does not deadlock). The result has
`a`'s shape and dtype; `src` must send the same dtype, element count and `tag`. `a` as for
[`mpi_send`](@ref). `dest` and `src` must be ranks other than this one (they may be equal).
Not in ADCME (whose [`mpi_sendrecv`](@ref) is one-way).

Differentiable: the gradient is an `mpi_exchange` of the output's gradient in the opposite
direction (to `src`, from `dest`). Errors as for [`mpi_send`](@ref). Op: `MpiSendRecv` (CPU).
"""
mpi_exchange(a, dest::Integer, src::Integer, tag_::Integer=0; tag::Integer=tag_, name=nothing) =
    add_op("MpiSendRecv", Tensor[mpi_operand(a)]; dest=mpi_peer("mpi_exchange", "dest", dest),
           src=mpi_peer("mpi_exchange", "src", src), tag=mpi_tag("mpi_exchange", tag), name=name)

"""
    mpi_gather(u, deps=missing; root=0)

ADCME's `mpi_gather`: on rank `root`, the concatenation of every rank's `u` in rank order
(`MPI_Gather`), a vector of `mpi_size() * length(u)`; for `u` of higher rank, the
concatenation along the first dimension (`[mpi_size() * d1, d2, ...]`). The other ranks get
zeros of that shape (ADCME leaves their output unwritten). `u`: a tensor (Float64,
Float32, Int32 or Int64; rank 1 or more, the same shape on every rank) or a Julia array
(made Float64). `deps` is accepted for ADCME's signature and ignored (ADCME ignores it too).
Needs `mpi_init()` first (the output's shape holds `mpi_size()`).

Differentiable: the gradient of each rank's `u` is its slice of `root`'s output gradient
(`MPI_Scatter`, op `MpiScatter`). Collective: every rank runs it. Errors: `root` not a rank,
ranks that disagree (FailedPreconditionError). Op: `MpiGather` (CPU).
"""
function mpi_gather(u, deps=missing; root::Integer=0, name=nothing)
    mpi_initialized() || invalid("mpi_gather: MPI is not initialized (call mpi_init() first): the output's shape needs mpi_size()")
    return add_op("MpiGather", Tensor[mpi_operand(u)]; root=mpi_root("mpi_gather", root), ranks=mpi_size(), name=name)
end

"""
    mpi_halo_exchange(u, m, n; deps=missing, fill_value=0.0, tag=0)

ADCME's `mpi_halo_exchange`: the `m * n` ranks (all of the job's) form an `m`-by-`n` process
grid, rank `r` at grid row `I = r ÷ n`, column `J = r % n` (0-based, as ADCME), and each
holds the block `u` (a `k1`-by-`k2` matrix, the same size on every rank) of the global
`m*k1`-by-`n*k2` array: `u == U[I*k1 .+ (1:k1), J*k2 .+ (1:k2)]`. Returns the block framed by
one cell on each side, `(k1+2)`-by-`(k2+2)`:

- `out[2:end-1, 2:end-1] == u`;
- `out[1, 2:end-1]`: the last row of the block above (rank `r - n`), `out[end, 2:end-1]`: the
  first row of the block below (rank `r + n`), `out[2:end-1, 1]`: the last column of the
  block on the left (rank `r - 1`), `out[2:end-1, end]`: the first column of the block on the
  right (rank `r + 1`); each `fill_value` where the grid has no such neighbour (the global
  boundary), so `out` is the window of the global array padded with `fill_value`;
- the four corners are `0.0` whatever `fill_value` (ADCME's kernel sets them so).

ADCME takes square blocks; rectangular ones work here. `u`: a Float64 (or Float32, Int32,
Int64) tensor or a Julia matrix (made Float64). `tag` (0 to 32766) is the messages' tag.
`deps` is accepted for ADCME's signature and ignored: Oxiflow runs the MPI ops of a graph in
the order they were built on every rank.

Differentiable: the gradient of `u` is the interior of the output's gradient plus the frame
gradients the neighbours send back, added to the edge cells they came from (ADCME's
adjoint). Collective: every rank runs it. Errors when the graph runs: `m * n` not the number
of ranks (InvalidArgumentError), ranks with other block sizes or attributes
(FailedPreconditionError). Op: `MpiHaloExchange` (CPU).
"""
mpi_halo_exchange(u, m::Integer, n::Integer; deps=missing, fill_value::Real=0.0, tag::Integer=0, name=nothing) =
    mpi_halo("mpi_halo_exchange", 1, u, m, n, fill_value, tag, name)

"""
    mpi_halo_exchange2(u, m, n; deps=missing, fill_value=0.0, tag=0)

ADCME's `mpi_halo_exchange2` (its `HaloExchangeNeighborTwo` op): [`mpi_halo_exchange`](@ref)
with a frame two cells deep, for stencils that reach two cells (a fourth-order finite
difference). On the same `m`-by-`n` grid of `k1`-by-`k2` blocks (`k1, k2 >= 2`), returns
the `(k1+4)`-by-`(k2+4)` block framed by two cells on each side:

- `out[3:end-2, 3:end-2] == u`;
- `out[1:2, 3:end-2]`: the last two rows of the block above, in order (`out[1, 3:end-2]` is
  its row `k1 - 1`, `out[2, 3:end-2]` its row `k1`), `out[end-1:end, 3:end-2]`: the first two
  rows of the block below, `out[3:end-2, 1:2]`: the last two columns of the block on the
  left, `out[3:end-2, end-1:end]`: the first two columns of the block on the right; each
  `fill_value` where the grid has no such neighbour, so `out` is the window of the global
  array padded by two cells of `fill_value`;
- the four 2-by-2 corners are `0.0` whatever `fill_value` (ADCME's kernel).

`u`, `tag` and `deps` as for [`mpi_halo_exchange`](@ref); ADCME takes square blocks,
rectangular ones work here. Differentiable: the gradient of `u` is the interior of the
output's gradient plus the two-deep frame gradients the neighbours send back, added to the
edge rows and columns they came from. Collective: every rank runs it. Errors: a `u` that is
not a matrix of at least 2-by-2 (InvalidArgumentError when the op is built), `m * n` not the
number of ranks (InvalidArgumentError when the graph runs), ranks with other block sizes or
attributes (FailedPreconditionError). Op: `MpiHaloExchange` with `width = 2` (CPU).
"""
mpi_halo_exchange2(u, m::Integer, n::Integer; deps=missing, fill_value::Real=0.0, tag::Integer=0, name=nothing) =
    mpi_halo("mpi_halo_exchange2", 2, u, m, n, fill_value, tag, name)

# `MpiHaloExchange` with a frame `width` cells deep (1 or 2: ADCME's two functions)
function mpi_halo(fname, width, u, m, n, fill_value, tag, name)
    (m >= 1 && n >= 1) || invalid("$fname: the process grid m x n must have m, n >= 1, got $m x $n")
    attrs = width == 1 ? (;) : (; width=width)   # width 1 is the op's default: graphs as before
    return add_op("MpiHaloExchange", Tensor[mpi_operand(u)]; m=Int(m), n=Int(n), fill_value=Float64(fill_value),
                  tag=mpi_tag(fname, tag), name=name, attrs...)
end
