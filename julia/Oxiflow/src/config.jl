# Device configuration: TF1's `ConfigProto`/`GPUOptions` for `Session(config=...)`, TF2's
# process-wide `tf.config` calls (soft placement, placement logging, visible devices, memory
# growth, memory fraction, logical devices), the device lists, and memory statistics of GPUs (emulated
# GPUs account their memory like real ones).

export GPUOptions, ConfigProto, PhysicalDevice, LogicalDevice, LogicalDeviceConfiguration,
       set_soft_device_placement, get_soft_device_placement, set_log_device_placement,
       set_memory_growth, get_memory_growth, set_memory_fraction, list_logical_devices,
       set_logical_device_configuration, get_logical_device_configuration, memory_info,
       get_memory_info, session_threads, set_visible_devices, get_visible_devices

"""
    GPUOptions(; allow_growth=false, per_process_gpu_memory_fraction=0.0, visible_device_list="")

TF1's `GPUOptions` (mutable, as `config.gpu_options.allow_growth = true` needs):
`allow_growth` reserves GPU memory on demand instead of all at once;
`per_process_gpu_memory_fraction` (0 < f ≤ 1; 0 = TF's default, all memory but a system
reserve) bounds each GPU's memory; `visible_device_list` (`"1,0"`) picks and orders the
GPUs `CUDA_VISIBLE_DEVICES` shows.
"""
mutable struct GPUOptions
    allow_growth::Bool
    per_process_gpu_memory_fraction::Float64
    visible_device_list::String
end
GPUOptions(; allow_growth::Bool=false, per_process_gpu_memory_fraction::Real=0.0, visible_device_list::AbstractString="") =
    GPUOptions(allow_growth, Float64(per_process_gpu_memory_fraction), String(visible_device_list))

"""
    ConfigProto(; allow_soft_placement=false, log_device_placement=false, device_count=Dict(),
                  inter_op_parallelism_threads=0, intra_op_parallelism_threads=0, gpu_options=GPUOptions())

TF1's `tf.ConfigProto` for `Session(config=...)` / `tf.Session(config=...)`; mutable, so
`config.gpu_options.allow_growth = true` works as in Python. `device_count` maps `"CPU"`
/ `"GPU"` to counts; thread counts of 0 mean the default.
"""
mutable struct ConfigProto
    allow_soft_placement::Bool
    log_device_placement::Bool
    device_count::Dict{String,Int}
    inter_op_parallelism_threads::Int
    intra_op_parallelism_threads::Int
    gpu_options::GPUOptions
end
ConfigProto(; allow_soft_placement::Bool=false, log_device_placement::Bool=false, device_count=Dict{String,Int}(),
            inter_op_parallelism_threads::Integer=0, intra_op_parallelism_threads::Integer=0, gpu_options::GPUOptions=GPUOptions()) =
    ConfigProto(allow_soft_placement, log_device_placement, Dict{String,Int}(String(k) => Int(v) for (k, v) in device_count),
                inter_op_parallelism_threads, intra_op_parallelism_threads, gpu_options)

json_value(d::AbstractDict) = "{" * join(("\"$k\":" * json_value(v) for (k, v) in d), ",") * "}"

function gpu_options_dict(g::GPUOptions)
    d = Dict{String,Any}("allow_growth" => g.allow_growth, "per_process_gpu_memory_fraction" => g.per_process_gpu_memory_fraction)
    isempty(g.visible_device_list) || (d["visible_device_list"] = g.visible_device_list)
    return d
end
gpu_options_dict(g::Union{NamedTuple,AbstractDict}) = Dict{String,Any}(string(k) => v for (k, v) in pairs(g))
gpu_options_dict(g) = invalid("gpu_options must be a GPUOptions or a named tuple of its fields, got $(typeof(g))")

function config_pairs(c::ConfigProto)
    p = Pair{String,Any}["allow_soft_placement" => c.allow_soft_placement, "log_device_placement" => c.log_device_placement,
                         "gpu_options" => gpu_options_dict(c.gpu_options)]
    for (k, v) in c.device_count
        k in ("CPU", "GPU") || invalid("ConfigProto.device_count: unknown device type \"$k\" (CPU or GPU)")
        push!(p, k => v)
    end
    c.inter_op_parallelism_threads > 0 && push!(p, "inter_op_threads" => c.inter_op_parallelism_threads)
    c.intra_op_parallelism_threads > 0 && push!(p, "intra_op_threads" => c.intra_op_parallelism_threads)
    return p
end
config_pairs(c) = invalid("Session(config=...) expects a ConfigProto, got $(typeof(c))")

"""A physical device as `tf.config.list_physical_devices` returns it (`/physical_device:GPU:0`)."""
struct PhysicalDevice
    name::String
    device_type::String
end

"""A logical device as `tf.config.list_logical_devices` returns it (`/device:GPU:0`)."""
struct LogicalDevice
    name::String
    device_type::String
end

Base.show(io::IO, d::PhysicalDevice) = print(io, "PhysicalDevice(name='", d.name, "', device_type='", d.device_type, "')")
Base.show(io::IO, d::LogicalDevice) = print(io, "LogicalDevice(name='", d.name, "', device_type='", d.device_type, "')")

"""
    LogicalDeviceConfiguration(; memory_limit=nothing)

One logical device for `set_logical_device_configuration`: a GPU entry needs `memory_limit`
(MiB), a CPU entry must not have one (TF's `tf.config.LogicalDeviceConfiguration`).
"""
struct LogicalDeviceConfiguration
    memory_limit::Union{Nothing,Int}
end
LogicalDeviceConfiguration(; memory_limit=nothing, experimental_priority=nothing) =
    LogicalDeviceConfiguration(memory_limit === nothing ? nothing : Int(memory_limit))

device_name(d::Union{PhysicalDevice,LogicalDevice}) = d.name
device_name(d::AbstractString) = String(d)
device_name(d) = invalid("expected a PhysicalDevice or a device name, got $(typeof(d))")

"""`set_soft_device_placement(on)`: sessions created from now on default to `allow_soft_placement=on` (TF2's `tf.config.set_soft_device_placement`)."""
set_soft_device_placement(on::Bool) = oxf_set_soft_device_placement(on)

"""`get_soft_device_placement()`: the current process-wide soft-placement default."""
get_soft_device_placement() = oxf_device_policy().soft

"""`set_log_device_placement(on)`: sessions created from now on log placement and op executions (TF2's `tf.debugging.set_log_device_placement`)."""
set_log_device_placement(on::Bool) = oxf_set_log_device_placement(on)

"""
    list_physical_devices_tf(device_type=nothing)

TF2's `tf.config.list_physical_devices`: `PhysicalDevice`s, CPU:0 then the GPUs that
`CUDA_VISIBLE_DEVICES` shows (emulated GPUs count), optionally only one type. An invalid
`CUDA_VISIBLE_DEVICES` entry is an `OxiflowError`. (The exported `list_physical_devices` is
ADCME's, returning names.)
"""
function list_physical_devices_tf(device_type=nothing)
    ds = physical_devices_from(oxf_list_physical_devices())
    return device_type === nothing ? ds : filter(d -> d.device_type == uppercase(String(device_type)), ds)
end

# The C ABI's physical-device records as `PhysicalDevice`s.
physical_devices_from(records) = [PhysicalDevice(d.name, d.device_type) for d in records]

"""
    set_visible_devices(devices, device_type=nothing)

TF2's `tf.config.set_visible_devices`: the physical devices (a `PhysicalDevice`, a name such
as `"/physical_device:GPU:1"`, or a vector of them; `[]` for none) the runtime will use.
With `device_type` (`"GPU"`, `"CPU"`) only that type's visibility changes; without it
`devices` is the whole list. Sessions created afterwards get the visible GPUs as `GPU:0`,
`GPU:1`, ... in physical order (TF's `visible_device_list`), or no GPU. Emulated GPUs count
as physical GPUs. Errors (`OxiflowError`, TF's texts): an unknown device or one not of
`device_type` (`Unrecognized device`), hiding the CPU (`No CPU devices are available in
this process`), a change after the first session (`Visible devices cannot be modified after
being initialized`).
"""
function set_visible_devices(devices, device_type=nothing)
    ds = devices isa AbstractVector ? devices : [devices]
    names = String[device_name(d) for d in ds]
    return oxf_set_visible_devices(join(names, "\n"), device_type === nothing ? nothing : String(device_type))
end

"""
    get_visible_devices(device_type=nothing)

TF2's `tf.config.get_visible_devices`: the visible `PhysicalDevice`s (all of them until
`set_visible_devices` is called), in TF's order, optionally only one type.
"""
get_visible_devices(device_type=nothing) =
    physical_devices_from(oxf_get_visible_devices(device_type === nothing ? nothing : String(device_type)))

"""
    get_device_details(device)

TF2's `tf.config.experimental.get_device_details`: a `Dict` with a GPU's `"device_name"`
and its `"uuid"` (`GPU-...`, what `CUDA_VISIBLE_DEVICES` accepts); empty for the CPU.
"""
function get_device_details(device)
    name = device_name(device)
    for d in oxf_list_physical_devices()
        d.name == name || continue
        return d.device_type == "GPU" ? Dict{String,Any}("device_name" => "Oxiflow emulated GPU", "uuid" => d.uuid) : Dict{String,Any}()
    end
    invalid("Unrecognized device: $name")
end

"""
    list_logical_devices(device_type=nothing)

TF2's `tf.config.list_logical_devices`: the devices sessions get now (`/device:CPU:0`,
`/device:GPU:k`, after logical-device splits). Initializes the runtime: physical-device
settings are refused afterwards.
"""
function list_logical_devices(device_type=nothing)
    ds = [LogicalDevice(d.name[findfirst("/device:", d.name)[1]:end], d.type) for d in oxf_list_logical_devices()]
    return device_type === nothing ? ds : filter(d -> d.device_type == uppercase(String(device_type)), ds)
end

"""
    set_memory_growth(device, on)

TF2's `tf.config.experimental.set_memory_growth`: a GPU's memory is reserved on demand
(in doubling regions from 2 MiB) instead of all at once. Errors, as TF's: not a GPU,
virtual devices configured on it, the runtime already initialized (a session was created).
"""
set_memory_growth(device, on::Bool) = oxf_set_memory_growth(device_name(device), on)

"""`get_memory_growth(device)`: whether memory growth is set for this physical GPU."""
get_memory_growth(device) = oxf_get_memory_growth(device_name(device))

"""
    set_memory_fraction(f)

Every GPU's memory limit becomes `f` (0 < f ≤ 1) of its memory (TF 2.0's
`tf.config.gpu.set_per_process_memory_fraction`, TF1's `per_process_gpu_memory_fraction`).
Refused once the runtime is initialized.
"""
set_memory_fraction(f::Real) = oxf_set_memory_fraction(f)

"""
    set_logical_device_configuration(device, configs)

TF2's `tf.config.set_logical_device_configuration`: splits `CPU:0` into `length(configs)`
logical CPUs, or a GPU into one virtual GPU per entry, each with its `memory_limit` (MiB).
"""
function set_logical_device_configuration(device, configs::AbstractVector)
    limits = Int64[c.memory_limit === nothing ? -1 : c.memory_limit for c in configs]
    return oxf_set_logical_device_configuration(device_name(device), limits)
end

"""`get_logical_device_configuration(device)`: the `LogicalDeviceConfiguration`s set for it (empty when none)."""
function get_logical_device_configuration(device)
    return LogicalDeviceConfiguration[LogicalDeviceConfiguration(m) for m in oxf_get_logical_device_configuration(device_name(device))]
end

"""
    memory_info(sess, device)

Memory of one of `sess`'s GPUs (`"/device:GPU:0"`, `"GPU:0"` or the full name), in bytes:
`(current, peak, limit, reserved)`. `limit` follows the memory fraction or the logical
device's limit; `reserved` grows with use under memory growth and is the whole limit
otherwise. A run that needs more than `limit` fails with a `ResourceExhaustedError` naming
the device, the request and the bytes in use; the session stays usable.
"""
function memory_info(sess::Session, device::AbstractString)
    return oxf_session_memory_stats(sess, device)
end

"""`get_memory_info(device)`: TF2's `tf.config.experimental.get_memory_info`, `Dict("current" => bytes, "peak" => bytes)` for the most recent session."""
function get_memory_info(device::AbstractString)
    s = LAST_SESSION[]
    s === nothing && invalid("get_memory_info: no session created yet")
    m = memory_info(s, device)
    return Dict("current" => m.current, "peak" => m.peak)
end

"""`session_threads(sess)`: `(inter, intra)`, the worker threads running ops concurrently and the threads one op (a `MatMul`, a linear solve) may use; unset counts are resolved (every core)."""
function session_threads(sess::Session)
    inter, intra = oxf_session_threads(sess)
    return (inter=inter, intra=intra)
end

"""`reset_device_configuration()`: forgets every process-wide `tf.config` setting and the initialized state (tests, notebooks)."""
reset_device_configuration() = oxf_reset_device_configuration()

function set_per_process_memory_growth(on::Bool=true)
    for d in list_physical_devices_tf("GPU")
        set_memory_growth(d, on)
    end
end

const TF_CONFIG = (
    set_soft_device_placement=set_soft_device_placement,
    get_soft_device_placement=get_soft_device_placement,
    list_physical_devices=list_physical_devices_tf,
    list_logical_devices=list_logical_devices,
    set_visible_devices=set_visible_devices,
    get_visible_devices=get_visible_devices,
    set_logical_device_configuration=set_logical_device_configuration,
    get_logical_device_configuration=get_logical_device_configuration,
    LogicalDeviceConfiguration=LogicalDeviceConfiguration,
    experimental=(set_memory_growth=set_memory_growth, get_memory_growth=get_memory_growth,
                  get_memory_info=get_memory_info, list_physical_devices=list_physical_devices_tf,
                  set_visible_devices=set_visible_devices, get_visible_devices=get_visible_devices,
                  get_device_details=get_device_details,
                  set_virtual_device_configuration=set_logical_device_configuration,
                  VirtualDeviceConfiguration=LogicalDeviceConfiguration),
    gpu=(set_per_process_memory_fraction=set_memory_fraction, set_per_process_memory_growth=set_per_process_memory_growth),
)

const TF_DEBUGGING = (set_log_device_placement=set_log_device_placement,)

"""
    explain_placement(sess, t)
    explain_placement(t)           # in the most recent session (a new one if none)

Why `t`'s op is on its device in `sess`, as text (placing it first if no run used it):
the device, what was requested and where the request came from, and the rule that
decided: `own request` (a device scope, a device function or `colocate_with`),
`colocation group` (with whom, why, and how the group was placed), `kernel availability`
(no GPU kernel for its dtypes), `soft placement` (an impossible request relaxed),
`generator` (no inputs, one output: follows its consumers), `default`, `earlier run`.
"""
explain_placement(sess::Session, t::Tensor) = oxf_session_explain_placement(sess, getfield(t, :node))
function explain_placement(t::Tensor)
    s = LAST_SESSION[]
    (s === nothing || s.ptr == C_NULL || s.graph !== getfield(t, :graph)) && (s = Session())
    return explain_placement(s, t)
end

"""`placement_report(sess)`: `explain_placement` for every node placed so far in `sess`, in creation order."""
placement_report(sess::Session) = oxf_session_placement_report(sess)

"""
    get_placement() -> Vector{String}

ADCME's `get_placement`: creates a `Session(log_device_placement=true)` over the default
graph, runs `init` in it, and returns the lines that log printed instead of printing them:
`Device mapping:`, one `name: (Op): device` line per node placed for the initializer, and
the `Executing op ...` lines. Use `placement_report(sess)` or `explain_placement` to see
where the ops of a particular run went and why.
"""
function get_placement()
    buf = IOBuffer()
    LOG_SINK[] = buf
    try
        init(Session(log_device_placement=true))
    finally
        LOG_SINK[] = nothing
    end
    return String.(split(String(take!(buf)), '\n'; keepempty=false))
end

export explain_placement, placement_report, get_placement
