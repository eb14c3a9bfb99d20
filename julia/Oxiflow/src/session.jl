# Sessions: running graphs, variables, profiles, devices.

"""
    Session(; soft, log_device_placement, CPU, GPU, inter, intra, emulated_gpus, gpu_options, fusion, config)

A session over the default graph (ADCME's `Session`, TF1's `tf.Session(config=ConfigProto(...))`):
`soft` (or `allow_soft_placement`) lets an impossible device request fall back to a
supported device; `log_device_placement` prints TF's `Device mapping:` block, one line
`name: (Op): device` per placed node and, at each run, `Executing op <Op> in device <d>`
lines; `CPU`/`GPU` set `device_count` (how many logical CPU devices to create / at most
how many GPUs to use); `inter` is the number of worker threads that run ops concurrently
(`inter_op_parallelism_threads`; ADCME passes `intra` here by mistake, Oxiflow does not)
and `intra` the threads one op may use (`intra_op_parallelism_threads`: `MatMul` and the
linear-algebra kernels run on that many threads; 0 or unset: every core, TF's default);
`emulated_gpus` overrides
`ENV["OXIFLOW_EMULATED_GPUS"]`; `gpu_options` is a [`GPUOptions`](@ref) (or a named tuple
of its fields: `allow_growth`, `per_process_gpu_memory_fraction`, `visible_device_list`).
`fusion=false` turns off the fusion of elementwise CPU ops (on by default, and off for
every session when `ENV["OXIFLOW_FUSION"] = "0"` is set before the first run): connected
`Sin`, `Mul`, `Tanh`, `AddN`... of one shape on one CPU run as one `_FusedElementwise` step,
with the same results bit for bit; so does a dense layer's `MatMul` + bias `Add` (+ `Tanh`,
`Relu` or `Sigmoid`), as one `_FusedMatMul` step. Profiles show those steps, their
`fused_ops` naming the ops they replaced. Placement, gradients and the placement log see
the original ops.
`config` takes a `tf.ConfigProto(...)` instead of the keywords.

Keywords not given take the process-wide defaults set by `set_soft_device_placement`,
`set_log_device_placement`, `set_visible_devices`, `set_memory_growth`, `set_memory_fraction` and
`set_logical_device_configuration` (TF1's defaults when none was called).

Errors: an invalid `CUDA_VISIBLE_DEVICES` or `visible_device_list` entry, a memory fraction
outside (0, 1]. Variables live in the session and keep their values between runs; a
variable placed on a GPU counts in that GPU's memory (`memory_info`) until its value is
replaced or the session is freed.
"""
mutable struct Session
    ptr::Ptr{Cvoid}
    graph::Graph
    function Session(; soft=nothing, allow_soft_placement=nothing, log_device_placement=nothing,
                     CPU=nothing, GPU=nothing, inter=nothing, intra=nothing, emulated_gpus=nothing,
                     gpu_options=nothing, fusion=nothing, config=nothing)
        opts = config === nothing ? Pair{String,Any}[] : config_pairs(config)
        s_ = allow_soft_placement === nothing ? soft : allow_soft_placement
        s_ === nothing || push!(opts, "allow_soft_placement" => Bool(s_))
        log_device_placement === nothing || push!(opts, "log_device_placement" => Bool(log_device_placement))
        CPU === nothing || push!(opts, "CPU" => Int(CPU))
        GPU === nothing || push!(opts, "GPU" => Int(GPU))
        inter === nothing || push!(opts, "inter_op_threads" => Int(inter))
        intra === nothing || push!(opts, "intra_op_threads" => Int(intra))
        emulated_gpus === nothing || push!(opts, "emulated_gpus" => Int(emulated_gpus))
        gpu_options === nothing || push!(opts, "gpu_options" => gpu_options_dict(gpu_options))
        fusion === nothing || push!(opts, "fusion" => Bool(fusion))
        g = get_default_graph()
        s = new(oxf_session_new(g, isempty(opts) ? "{}" : attrs_json(opts)), g)
        finalizer(s) do x
            x.ptr == C_NULL || oxf_session_free(x.ptr)
            x.ptr = C_NULL
        end
        print_log(s)
        LAST_SESSION[] = s
        STORAGE["session"] = s
        return s
    end
end

"""The most recently created `Session` (ADCME keeps it as `STORAGE["session"]`)."""
const LAST_SESSION = Ref{Any}(nothing)

"""
    Oxiflow.STORAGE

ADCME's module-level `STORAGE` dictionary: `Session()` stores itself as
`STORAGE["session"]`; `reset_default_graph()` empties it. Programs may keep their own
entries. Not exported (ADCME does not export it either).
"""
const STORAGE = Dict{String,Any}()

"""
    Oxiflow.run_metadata

ADCME's module-level `run_metadata`: `nothing` until [`run_profile`](@ref) records a step,
then that step's profile (what [`save_profile`](@ref) writes). Not exported.
"""
run_metadata = nothing

# Where session logs (log_device_placement) go: stdout, or a buffer while get_placement runs.
const LOG_SINK = Ref{Union{Nothing,IOBuffer}}(nothing)

function Base.unsafe_convert(::Type{Ptr{Cvoid}}, s::Session)
    s.ptr == C_NULL && invalid("the session was closed (close(sess)); create a new Session()")
    return s.ptr
end

"""
    close(sess)

Frees the session's engine state now (its variables' values, cached plans, worker threads
and device memory), as TF's `Session.close()`, instead of when the garbage collector finds
it. Closing twice is a no-op; running or querying a closed session raises an
`OxiflowError` (InvalidArgumentError) saying it was closed.
"""
function Base.close(sess::Session)
    sess.ptr == C_NULL && return nothing
    p = sess.ptr
    sess.ptr = C_NULL
    oxf_session_free(p)
    return nothing
end

function print_log(s::Session)
    text = oxf_session_take_log(s)
    isempty(text) || print(LOG_SINK[] === nothing ? stdout : LOG_SINK[], text)
    return nothing
end

"""
    init(sess)

Runs a new `init` op (TF's `global_variables_initializer()`): every variable gets its
initial value again (ADCME's `init`).
"""
function init(sess::Session)
    run(sess, global_variables_initializer(sess.graph))
    return nothing
end

"""
    global_variables_initializer(graph=get_default_graph()) -> Tensor

A new `init` op (a `NoOp` whose control inputs are every variable's initializer, TF's
`tf.compat.v1.global_variables_initializer()`, ADCME's `global_variables_initializer`):
`run(sess, global_variables_initializer())` gives every variable of `graph` its initial
value. Variables created after the call are not covered by it.
"""
function global_variables_initializer(graph::Graph=get_default_graph())
    return Tensor(graph, oxf_global_variables_initializer(graph), 0)
end

# Flattens fetches (a tensor, or nested vectors/tuples of them) into leaves.
collect_leaves!(leaves, t::Tensor) = (push!(leaves, t); nothing)
collect_leaves!(leaves, v::Union{AbstractVector,Tuple}) = (foreach(x -> collect_leaves!(leaves, x), v); nothing)
collect_leaves!(leaves, x) = invalid("run: cannot fetch a $(typeof(x)); fetch tensors or vectors/tuples of tensors")

rebuild(t::Tensor, vals, k) = (vals[k[] += 1])
rebuild(v::AbstractVector, vals, k) = [rebuild(x, vals, k) for x in v]
rebuild(v::Tuple, vals, k) = Tuple(rebuild(x, vals, k) for x in v)

"""
    feed_value(x)

What `run` hands the engine for a fed value `x`: a number as a 0-dimensional array; an
`Array`, a strided view (`view(A, 1:2:5, :)`, reversed ranges included), a `transpose`/real
`adjoint` or a `PermutedDimsArray` of one as is (the engine copies it during the run: one
`memcpy` when dense, contiguous runs or cache-sized tiles otherwise); any other
`AbstractArray` (a `BitArray`, a range, an indexed view) through `collect`. Errors
(`OxiflowError`, InvalidArgumentError): neither a number nor an array, or an element type
without a TF dtype (Float32, Float64, Int32, Int64, Bool, ComplexF32, ComplexF64).
"""
function feed_value(x)
    a = x isa Number ? fill(x) : x isa AbstractArray ? (readable_in_place(x) ? x : collect(x)) :
        invalid("run: cannot feed a $(typeof(x)); feed numbers or arrays")
    dtype_code(eltype(a))   # unsupported element types fail here, naming the type
    return a
end

# Arrays whose elements the engine can read through `pointer` and `strides` (in elements)
# during the call: dense arrays, strided views and reshapes of them, and transposes and
# permutations of those.
# The engine checks every element against the root `Array`'s memory (`tensor_view`), so
# arrays on other storage are collected.
readable_in_place(x::StridedArray) = isbitstype(eltype(x)) && root_array(x) isa Array
readable_in_place(x::PermutedDimsArray) = readable_in_place(parent(x))
readable_in_place(x::Union{Transpose,Adjoint{<:Real}}) = readable_in_place(parent(x))
readable_in_place(x) = false

function execute(sess::Session, fetches, feeds, trace::Bool)
    sess.ptr == C_NULL && invalid("run: the session was closed (close(sess)); create a new Session()")
    leaves = Tensor[]
    collect_leaves!(leaves, fetches)
    for t in leaves
        getfield(t, :graph) === sess.graph || invalid("run: $(t.name) belongs to another graph than the session's")
    end
    is_op = [oxf_node_num_outputs(sess.graph, getfield(t, :node)) == 0 for t in leaves]
    fetch_list = [pair(t) for (t, op) in zip(leaves, is_op) if !op]
    targets = Int64[getfield(t, :node) for (t, op) in zip(leaves, is_op) if op]
    fkeys = Tuple{Int64,Int32}[]; fvals = Any[]
    for (t, v) in feeds
        t isa Tensor || invalid("run: feed keys must be tensors, got $(typeof(t))")
        getfield(t, :graph) === sess.graph || invalid("run: feed key $(t.name) belongs to another graph than the session's")
        push!(fkeys, pair(t)); push!(fvals, feed_value(v))
    end
    res = oxf_session_run(sess, fkeys, fvals, fetch_list, targets, trace)
    local values, profile
    try
        fetched = Any[]
        for k in 0:length(fetch_list)-1
            push!(fetched, fetch_value(res, k))
        end
        j = 0
        values = Any[op ? nothing : fetched[j += 1] for op in is_op]
        profile = trace ? Profile(oxf_result_trace_json(res), oxf_result_trace_events(res)) : nothing
    finally
        oxf_result_free(res)
        print_log(sess)
    end
    return rebuild(fetches, values, Ref(0)), profile
end

# Arrays of at least this many bytes are handed over by the engine instead of copied.
const HANDOVER_MIN_BYTES = 1 << 16

# Fetched value `k` of run result `res`: a number for a scalar, else an `Array`. A large
# array is the engine's own buffer when nothing else shares it (`oxf_result_take`), owned
# by Julia's GC from then on; others are copied. The branches give each dtype a
# statically typed path.
function fetch_value(res, k)
    dt, dims = oxf_result_type(res, k)
    return dt == 2 ? fetch_as(res, k, Float64, dims) : dt == 1 ? fetch_as(res, k, Float32, dims) :
           dt == 9 ? fetch_as(res, k, Int64, dims) : dt == 3 ? fetch_as(res, k, Int32, dims) :
           fetch_as(res, k, julia_type(dt), dims)
end

function fetch_as(res, k, ::Type{T}, dims::Vector{Int64}) where {T}
    isempty(dims) && return oxf_result_copy!(res, k, Array{T,0}(undef))[]
    sz = Tuple(Int.(dims))
    if prod(sz) * sizeof(T) >= HANDOVER_MIN_BYTES
        p = oxf_result_take(res, k)
        p == C_NULL || return unsafe_wrap(Array, Ptr{T}(p), sz; own=true)
    end
    return oxf_result_copy!(res, k, Array{T}(undef, sz))
end

feeds_of(pairs, feed_dict) = feed_dict === nothing ? pairs : vcat(collect(pairs), collect(feed_dict))

"""
    run(sess, fetches, feeds...; feed_dict=nothing)
    run(sess, fetches, feed_dict::AbstractDict)

Computes `fetches` (a tensor, or nested vectors/tuples of tensors; ops such as
`init`'s fetch `nothing`) with `feeds` given as `x => value` pairs or as
`feed_dict=Dict(x => value)` (or that `Dict` in third place, as TF's `sess.run(fetches,
feed_dict)`). Scalars come back as Julia numbers, tensors as arrays of the same size. A fed
value must match the placeholder's dtype and shape exactly, except in the placeholder's
unknown dimensions (`shape=[nothing, 10]`), which take any size: the same session runs
batches of any size, each result sized by its feed, with no new placement or plan. A value
of another dtype or of another size in a known dimension raises an `OxiflowError` naming
the placeholder and both shapes.
"""
function Base.run(sess::Session, fetches, feeds::Pair...; feed_dict=nothing)
    return first(execute(sess, fetches, feeds_of(feeds, feed_dict), false))
end
Base.run(sess::Session, fetches, feed_dict::AbstractDict) = first(execute(sess, fetches, collect(feed_dict), false))

"""One traced step: TF timeline JSON and the engine's event list."""
struct Profile
    json::String
    events::Vector{NamedTuple{(:kind, :name, :op, :device, :from, :start_ns, :end_ns, :bytes),Tuple{Symbol,String,String,String,String,Int64,Int64,Int64}}}
end


"""
    run_profile(sess, fetches, feeds...; feed_dict=nothing)

`run` that also records the step's timeline (every node and copy with device, thread,
start and end). Feeds work as pairs or `feed_dict` (ADCME records nothing with pairs; not
copied). The last profile is kept for `save_profile`.
"""
function run_profile(sess::Session, fetches, feeds::Pair...; feed_dict=nothing)
    values, profile = execute(sess, fetches, feeds_of(feeds, feed_dict), true)
    global run_metadata = profile
    return values
end

function last_profile()
    p = run_metadata
    p === nothing && invalid("no profile recorded yet: call run_profile(sess, fetches) first")
    return p
end

"""
    save_profile(filename="default_timeline.json")

Writes the last `run_profile` step as TF's timeline JSON (Chrome trace format: one
`Compute` and one `Tensors` process per device, `X` events per op, flow arrows for
cross-device tensors; open it in chrome://tracing or https://ui.perfetto.dev), or, when
`filename` ends in `.html`, as one self-contained HTML page: a lane per device, kernels
coloured by op type, copies with arrows between devices, hover text, and the
`profile_summary` tables on top.

With `all_ranks=true` (a program run on several MPI ranks) every rank must call it: the
ranks' last profiles are sent to rank 0, which writes one timeline holding them all, each
rank's processes named `rank <r>: ...` (its devices, and its `MPI rank <r> of <n>` process
of collectives with their `negotiate` and `transfer` phases), on the ranks' common wall
clock; the other ranks write nothing. An `OxiflowError` on every rank when a rank has no
profile (naming the ranks), or when MPI is not running.
"""
function save_profile(filename::AbstractString="default_timeline.json"; all_ranks::Bool=false)
    if all_ranks
        json = gather_rank_timelines()
        json === nothing && return nothing
    else
        json = last_profile().json
    end
    if endswith(lowercase(filename), ".html")
        html = oxf_timeline_html(json)
        open(io -> write(io, html), filename, "w")
        @info "Timeline saved in $filename: open it in any web browser"
    else
        open(io -> write(io, json), filename, "w")
        @info "Timeline information saved in $filename\n- Open Chrome and navigate to chrome://tracing\n- Load the timeline file"
    end
    return nothing
end

# Every rank's last timeline JSON on rank 0 (rank order), through one broadcast of its length
# and one of its bytes per rank; `nothing` on the other ranks. A rank without a profile sends
# length -1, and then every rank raises the same error.
function gather_rank_timelines()
    r, n = mpi_rank(), mpi_size()
    mine = run_metadata === nothing ? nothing : run_metadata.json
    jsons = String[]
    missing_ranks = Int[]
    for q in 0:n-1
        len = [q == r ? (mine === nothing ? -1 : sizeof(mine)) : 0]
        mpi_sync!(len, q)
        if len[1] < 0
            push!(missing_ranks, q)
            continue
        end
        words = zeros(Int64, cld(len[1], 8))
        q == r && GC.@preserve mine words unsafe_copyto!(Ptr{UInt8}(pointer(words)), pointer(mine), len[1])
        mpi_sync!(words, q)
        r == 0 && push!(jsons, GC.@preserve words unsafe_string(Ptr{UInt8}(pointer(words)), len[1]))
    end
    isempty(missing_ranks) || invalid("save_profile(all_ranks=true): no profile recorded yet on rank(s) $(join(missing_ranks, ", ")): call run_profile(sess, fetches) on every rank first")
    r == 0 || return nothing
    return oxf_timeline_merge("[" * join(jsons, ",") * "]")
end

"""
    profile_events()

The last profile's events: named tuples `(kind, name, op, device, from, start_ns, end_ns,
bytes)`; `kind` is `:op` for kernels (`name` the node) and `:copy` for cross-device
copies (`name` the tensor, `from` its source device, `device` the destination).
"""
profile_events() = last_profile().events

"""`profile_copies()`: `(count, bytes)` of the cross-device copies in the last profile."""
function profile_copies()
    cs = filter(e -> e.kind === :copy, profile_events())
    return (count=length(cs), bytes=sum(Int64[e.bytes for e in cs]))
end

"""
    assigned_device(sess, t)

Full name of the device the placer chose for `t`'s op in `sess`
(`/job:localhost/replica:0/task:0/device:GPU:0`), placing it first if no run used it yet.
`t.device` stays the requested device, as in TF. An `OxiflowError` when `t` belongs to
another graph than the session's.
"""
function assigned_device(sess::Session, t::Tensor)
    getfield(t, :graph) === sess.graph || invalid("assigned_device: $(t.name) belongs to another graph than the session's")
    return oxf_session_assigned_device(sess, getfield(t, :node))
end

"""
    list_devices(; kwargs...)

The devices a `Session(; kwargs...)` would have: named tuples `(name, type, kind,
description, memory_limit)`, `kind` being `"cpu"`, `"emulated"` (a GPU emulated in host
memory) or `"cuda"`, `memory_limit` the bytes a GPU's tensors may take (0 for CPUs).
"""
function list_devices(; emulated_gpus=nothing)
    opts = emulated_gpus === nothing ? "{}" : "{\"emulated_gpus\":$(Int(emulated_gpus))}"
    return oxf_list_devices(opts)
end

"""
    list_physical_devices(kind="all")

Short names of the devices (`"/device:CPU:0"`, `"/device:GPU:0"`), all or only `"CPU"`/`"GPU"`
ones (ADCME's `list_physical_devices`).
"""
function list_physical_devices(kind::AbstractString="all")
    ds = list_devices()
    k = uppercase(kind)
    return [d.name[findfirst("/device:", d.name)[1]:end] for d in ds if k == "ALL" || d.type == k]
end

"""`has_gpu()`: whether a GPU (real, or emulated through `OXIFLOW_EMULATED_GPUS`) is present."""
has_gpu() = any(d -> d.type == "GPU", list_devices())

"""
    use_emulated_gpus(n)

Sessions created from now on get `n` emulated GPUs (`/device:GPU:0..n-1`: host memory, CPU
kernels, GPU placement rules); sets `ENV["OXIFLOW_EMULATED_GPUS"]`.
"""
function use_emulated_gpus(n::Integer)
    n >= 0 || invalid("use_emulated_gpus: n must be ≥ 0")
    ENV["OXIFLOW_EMULATED_GPUS"] = string(n)
    return nothing
end
