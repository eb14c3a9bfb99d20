# Device scopes (`@cpu`, `@gpu`, `@pywith tf.device(...)`), device functions, colocation,
# name scopes, and the small `tf` object that lets ADCME/TF code run as written.

"""Mirror of C `OxNodeDef`, the node a device function receives."""
struct OxNodeDef
    name::Cstring
    op::Cstring
    device::Cstring
    inputs::Ptr{Cstring}
    n_inputs::Int32
    attr_keys::Ptr{Cstring}
    attr_values::Ptr{Cstring}
    n_attrs::Int32
end

function NodeDef(c::OxNodeDef)
    inputs = String[unsafe_string(unsafe_load(c.inputs, k)) for k in 1:c.n_inputs]
    attrs = Dict{String,String}(unsafe_string(unsafe_load(c.attr_keys, k)) => unsafe_string(unsafe_load(c.attr_values, k)) for k in 1:c.n_attrs)
    return NodeDef(unsafe_string(c.name), unsafe_string(c.op), unsafe_string(c.device), inputs, attrs)
end

# Device functions by id, and each thread's last callback result (kept alive until the
# engine has copied it, which it does before the callback's thread calls again). Threads
# may build graphs at once: a spin lock (it never yields, which a C callback must not)
# guards both tables.
const DEVICE_FNS = Dict{Int,Any}()
const NEXT_DEVICE_FN = Ref(0)
const CALLBACK_RESULTS = Dict{Int,String}()
const DEVICE_FN_LOCK = Threads.SpinLock()
const DEVICE_FN_TRAMPOLINE = Ref{Ptr{Cvoid}}(C_NULL)

function with_device_fns(f)
    lock(DEVICE_FN_LOCK)
    try
        return f()
    finally
        unlock(DEVICE_FN_LOCK)
    end
end

# Stores `s` as this thread's callback result and points `out` at it.
function store_result!(out::Ptr{Cstring}, s::String)
    with_device_fns(() -> CALLBACK_RESULTS[Threads.threadid()] = s)
    unsafe_store!(out, Base.unsafe_convert(Cstring, s))
end

# Called by the engine for each node created under a device function: returns 0 and a
# device string, or 1 and an error message (a Julia exception never unwinds into Rust).
function _device_fn_trampoline(ud::Ptr{Cvoid}, nd::Ptr{OxNodeDef}, out::Ptr{Cstring})::Int32
    status = Int32(0)
    try
        f = with_device_fns(() -> DEVICE_FNS[Int(ud)])
        r = f(NodeDef(unsafe_load(nd)))
        if r isa AbstractString
            store_result!(out, String(r))
        elseif r === nothing
            store_result!(out, "")
        else
            invalid("it returned $(repr(r)) of type $(typeof(r)); a device function must return a device string such as \"/device:GPU:0\"")
        end
    catch e
        store_result!(out, replace(sprint(showerror, e), '\0' => ' '))
        status = Int32(1)
    end
    return status
end

"""A context manager for `@pywith`: `__enter__` pushes a scope, `__exit__` pops it."""
abstract type Context end

"""
    DeviceContext

What `tf.device(x)` returns: `x` is a device string (`"/gpu:0"`, `"/device:CPU:0"`,
`"GPU:1"`, full names), a device function (node -> device string; it receives a
[`NodeDef`] and its result replaces the device), or `nothing` (outer scopes stop applying).
"""
mutable struct DeviceContext <: Context
    spec::Any
    graph::Graph
    fn_id::Int
end

"""
    tf.device(spec_or_function)

TF's `tf.device`: a context for `@pywith`. Inner strings override only the fields they
set (`/job:worker` inside `/gpu:0` gives `/job:worker/device:GPU:0`). A malformed string
raises an `OxiflowError` quoting it when the scope is entered.
"""
tf_device(spec) = DeviceContext(spec, get_default_graph(), 0)

function __enter__(c::DeviceContext)
    s = c.spec
    if s isa AbstractString
        oxf_push_device(c.graph, s)
    elseif s === nothing
        oxf_push_device_reset(c.graph)
    elseif s isa Function
        c.fn_id = with_device_fns() do
            id = NEXT_DEVICE_FN[] += 1
            DEVICE_FNS[id] = s
            id
        end
        oxf_push_device_fn(c.graph, DEVICE_FN_TRAMPOLINE[], Ptr{Cvoid}(c.fn_id))
    else
        invalid("tf.device expects a device string, a function or nothing, got $(typeof(s))")
    end
    return c
end

function __exit__(c::DeviceContext)
    oxf_pop_device(c.graph)
    c.fn_id == 0 || with_device_fns(() -> delete!(DEVICE_FNS, c.fn_id))
    return nothing
end

"""Context of `tf.colocate_with(t)`: ops created inside go where `t`'s op goes."""
struct ColocationContext <: Context
    target::Tensor
    ignore_existing::Bool
end
__enter__(c::ColocationContext) = oxf_push_colocation(getfield(c.target, :graph), getfield(c.target, :node), c.ignore_existing)
__exit__(c::ColocationContext) = oxf_pop_colocation(getfield(c.target, :graph))

"""Context of `tf.name_scope(name)`."""
struct NameScopeContext <: Context
    name::String
    graph::Graph
end
__enter__(c::NameScopeContext) = oxf_push_name_scope(c.graph, c.name)
__exit__(c::NameScopeContext) = oxf_pop_name_scope(c.graph)

"""
    @pywith ctx begin ... end

Runs the block inside the context `ctx` (`tf.device(...)`, `tf.colocate_with(op)`,
`tf.name_scope(name)`), leaving it even when the block throws, like PyCall's `@pywith`.
The block runs in the caller's scope (`global a = ...` works as in ADCME's docs).
"""
macro pywith(ctx, body)
    quote
        local c = $(esc(ctx))
        __enter__(c)
        try
            $(esc(body))
        finally
            __exit__(c)
        end
    end
end

function device_macro(kind::String, id, expr)
    quote
        local c = tf_device(string($kind, $(esc(id))))
        __enter__(c)
        try
            $(esc(expr))
        finally
            __exit__(c)
        end
    end
end

"""
    @cpu [id] begin ... end

Places the ops created in the block on `/device:CPU:id` (default 0), as ADCME's `@cpu`
(`@pywith tf.device("/cpu:id")`). `id` may be any expression (ADCME needs a literal).
"""
macro cpu(id, expr)
    device_macro("/cpu:", id, expr)
end
macro cpu(expr)
    device_macro("/cpu:", 0, expr)
end

"""
    @gpu [id] begin ... end

Places the ops created in the block on `/device:GPU:id` (default 0), as ADCME's `@gpu`.
"""
macro gpu(id, expr)
    device_macro("/gpu:", id, expr)
end
macro gpu(expr)
    device_macro("/gpu:", 0, expr)
end

"""
    colocate_with(f, t::Tensor; ignore_existing=false)

Runs `f()` with every op it creates colocated with `t`'s op (TF's `colocate_with`): same
device, `loc:@name` recorded; outer device scopes do not apply inside.
"""
colocate_with(f::Function, t::Tensor; ignore_existing::Bool=false) = with_context(f, ColocationContext(t, ignore_existing))

"""`name_scope(f, name)`: runs `f()` with node names prefixed by a unique `name/`."""
name_scope(f::Function, name::AbstractString) = with_context(f, NameScopeContext(String(name), get_default_graph()))

"""`with_context(f, ctx)`: `f()` inside context `ctx`, left even when `f` throws."""
function with_context(f::Function, c::Context)
    __enter__(c)
    try
        return f()
    finally
        __exit__(c)
    end
end

# tf.constant(value; shape, name, dtype): a flat value with a shape fills row-major, as TF does.
function tf_constant(value; shape=nothing, name=nothing, dtype=nothing)
    v = value
    if shape !== nothing
        flat = vec(collect(as_array(value)))
        n = prod(shape)
        length(flat) == n || invalid("tf.constant: $(length(flat)) values do not fill shape $(shape)")
        v = length(shape) <= 1 ? reshape(flat, shape...) : permutedims(reshape(flat, reverse(shape)...), length(shape):-1:1)
    end
    return constant(v; name=name, dtype=dtype)
end

const GRAPH_KEYS = (UPDATE_OPS=UPDATE_OPS, GLOBAL_VARIABLES=GLOBAL_VARIABLES, TRAINABLE_VARIABLES=TRAINABLE_VARIABLES)

"""
    tf

A stand-in for ADCME's `tf` module so TF-style code runs as written: `tf.device`,
`tf.colocate_with`, `tf.name_scope`, `tf.NodeDef`, `tf.GraphKeys`, `tf.constant`,
`tf.matmul`, `tf.add_n`, `tf.Session`, `tf.ConfigProto`, `tf.GPUOptions`, `tf.config.*`
(`set_soft_device_placement`, `list_physical_devices`, `list_logical_devices`,
`set_logical_device_configuration`, `experimental.set_memory_growth`,
`experimental.get_memory_info`, `gpu.set_per_process_memory_fraction`, ...),
`tf.debugging.set_log_device_placement`, and the graph functions of tf_compat.jl (dtypes such
as `tf.float64`, `tf.reshape`, `tf.reduce_sum`, `tf.math`, `tf.nn`, `tf.linalg`,
`tf.random`, `tf.train`, ...). Anything else raises an error listing what exists.
"""
struct TFModule end
const tf = TFModule()

function Base.getproperty(::TFModule, s::Symbol)
    s === :device && return tf_device
    s === :colocate_with && return (t; ignore_existing=false) -> ColocationContext(t, ignore_existing)
    s === :name_scope && return name -> NameScopeContext(String(name), get_default_graph())
    s === :NodeDef && return NodeDef
    s === :GraphKeys && return GRAPH_KEYS
    s === :constant && return tf_constant
    s === :matmul && return matmul
    s === :add_n && return add_n
    s === :config && return TF_CONFIG
    s === :debugging && return TF_DEBUGGING
    s === :ConfigProto && return ConfigProto
    s === :GPUOptions && return GPUOptions
    s === :Session && return Session
    haskey(TF_EXTRA, s) && return getfield(TF_EXTRA, s)
    invalid("Oxiflow's `tf` object has no `tf.$s`; it offers: " * join(sort(string.(collect(propertynames(tf)))), ", "))
end
Base.propertynames(::TFModule) = (:device, :colocate_with, :name_scope, :NodeDef, :GraphKeys, :constant, :matmul, :add_n,
                                  :config, :debugging, :ConfigProto, :GPUOptions, :Session, keys(TF_EXTRA)...)

"""
    pybuiltin(name)

The few Python builtins ADCME code uses: `pybuiltin("isinstance")(x, T)` is `x isa T`
(so `isinstance(op, tf.NodeDef)` works in device functions), `pybuiltin("str")` is `string`.
"""
function pybuiltin(name::AbstractString)
    name == "isinstance" && return (x, T) -> x isa T
    name == "str" && return string
    invalid("pybuiltin(\"$name\") is not available in Oxiflow (only isinstance and str)")
end
