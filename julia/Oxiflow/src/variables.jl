# Graph utilities of ADCME: variable scopes and get_variable, control dependencies, bind,
# group, assign, independent (stop gradient), tensor lookup by name, GPU queries.

"""
    control_dependencies(f, ops)

Runs `f()` so that every op it creates runs after `ops` (a tensor, an op, or a vector of
them), as TF's `tf.control_dependencies(ops)` (ADCME's do-block form). Blocks nest: inner
ops depend on the ops of every enclosing block. Returns what `f` returns.
"""
function control_dependencies(f::Function, ops)
    deps = ops isa Tensor ? Tensor[ops] : Tensor[t for t in ops]
    g = get_default_graph()
    for t in deps
        getfield(t, :graph) === g || invalid("control_dependencies: $(t.name) belongs to another graph")
    end
    oxf_push_control_dependencies(g, Int64[getfield(t, :node) for t in deps])
    try
        return f()
    finally
        oxf_pop_control_dependencies(g)
    end
end
control_dependencies(f::Function, op::Tensor, ops::Tensor...) = control_dependencies(f, Tensor[op, ops...])

"""
    bind(op, ops...)

ADCME's `bind`: an `Identity` of `op` created under `control_dependencies(ops)`, so the
returned tensor is computed only after `ops` ran (e.g. an `assign` or an update op).
"""
Base.bind(op::Tensor, ops::Tensor...) = control_dependencies(() -> add_op("Identity", [op]), collect(Tensor, ops))

"""
    group(ops...; name="group_deps")

TF's `tf.group`: a `NoOp` that runs after all `ops` (tensors or vectors of tensors);
running it runs them. ADCME's `group`.
"""
function group(ops...; name::AbstractString="group_deps")
    deps = Tensor[]
    for o in ops
        o isa Tensor ? push!(deps, o) : append!(deps, o)
    end
    return control_dependencies(() -> add_op("NoOp", Tensor[]; name=name), deps)
end

is_variable_op(t::Tensor) = oxf_node_op(getfield(t, :graph), getfield(t, :node)) == "VariableV2"

"""
    assign(v, x)

TF1's `tf.assign(v, x)` (op `Assign`): running it stores `x` (a tensor or a Julia value,
converted to `v`'s dtype) in variable `v` and returns the value. `v` must be a `Variable`;
shapes must match exactly (an `OxiflowError` naming both otherwise).
"""
function assign(v::Tensor, x)
    is_variable_op(v) || invalid("assign: $(v.name) is a $(v.op.type) tensor, not a Variable")
    return add_op("Assign", [v, as_tensor(x, v)])
end

"""
    independent(o)

ADCME's `independent` (TF's `tf.stop_gradient`): the value of `o` through a `StopGradient`
op, through which no gradient flows (`gradients` treat it as a constant).
"""
independent(o::Tensor) = add_op("StopGradient", [o])
independent(o) = independent(constant(o))

"""
    tensor(name)

The tensor of the default graph named `name` (`"Sin:0"`, or `"Sin"` for output 0), as
ADCME's `tensor(name)` (TF's `get_tensor_by_name`). An `OxiflowError` if there is none.
"""
function tensor(name::AbstractString)
    g = get_default_graph()
    m = match(r"^(.*):(\d+)$", name)
    node_name, idx = m === nothing ? (name, 0) : (m.captures[1], parse(Int, m.captures[2]))
    node = oxf_node_by_name(g, node_name)
    idx < max(oxf_node_num_outputs(g, node), 1) || invalid("tensor: the op '$node_name' has no output $idx")
    return Tensor(g, node, idx)
end

# ------------------------------------------------------------------ variable scopes

"""`AUTO_REUSE`: `variable_scope(...; reuse=AUTO_REUSE)` creates or reuses (TF's `tf.AUTO_REUSE`)."""
const AUTO_REUSE = :AUTO_REUSE

const VARSCOPES = Tuple{String,Any}[]          # (name, reuse) of the open variable scopes
const GET_VARIABLES = WeakKeyDict{Graph,Dict{String,Tensor}}()

function current_reuse()
    for (_, r) in Iterators.reverse(VARSCOPES)
        r === nothing || return r
    end
    return false
end

"""
    variable_scope(f, name; reuse=AUTO_REUSE)

Runs `f()` inside TF's `tf.variable_scope(name)`: `get_variable(v)` inside names the variable
`name/v` and, by `reuse`, creates it (`false`), reuses an existing one (`true`) or does
whichever applies (`AUTO_REUSE`, ADCME's default); `nothing` inherits the enclosing scope's
setting. Ops created inside get the name scope `name/` too.
"""
function variable_scope(f::Function, name::AbstractString; reuse=AUTO_REUSE)
    reuse === nothing || reuse isa Bool || reuse === AUTO_REUSE || invalid("variable_scope: reuse must be true, false, nothing or AUTO_REUSE")
    push!(VARSCOPES, (String(name), reuse))
    try
        return name_scope(f, name)
    finally
        pop!(VARSCOPES)
    end
end

"""TF's default initializer of `get_variable`: Glorot uniform for floats, zeros otherwise."""
function default_initial_value(T::Type, shape)
    dims = Tuple(Int(d) for d in shape)
    T <: AbstractFloat || return zeros(T, dims...)
    fan_in, fan_out = length(dims) == 0 ? (1, 1) : length(dims) == 1 ? (dims[1], dims[1]) :
        (prod(dims[1:end-1]), dims[end])
    limit = sqrt(6 / (fan_in + fan_out))
    return T.(limit .* (2 .* rand(dims...) .- 1))
end

"""
    get_variable(name; initializer=nothing, shape=nothing, dtype=Float64, trainable=true)
    get_variable(value; name=nothing, scope="")
    get_variable(T::Type; shape, name=nothing, scope="")

TF1's `tf.get_variable` under the open [`variable_scope`](@ref)s: the variable is named
`scope/name` exactly. When it exists (created by `get_variable`) and reuse is `true` or
`AUTO_REUSE` it is returned; when it exists and reuse is `false`, or does not exist and
reuse is `true`, an `OxiflowError` with TF's message. `initializer` is a Julia value
(number or array); without it, `shape` and `dtype` give TF's default initializer (Glorot
uniform for floats, zeros otherwise). The second and third forms are ADCME's: a variable
from a value or a type, reused by name under `variable_scope(scope)` (unnamed ones get a
random `unnamed_...` name).
"""
function get_variable(name::AbstractString; initializer=nothing, shape=nothing, dtype=nothing, trainable::Bool=true)
    g = get_default_graph()
    store = get!(() -> Dict{String,Tensor}(), GET_VARIABLES, g)
    full = join(vcat([n for (n, _) in VARSCOPES], [String(name)]), "/")
    reuse = current_reuse()
    if haskey(store, full)
        reuse === false && invalid("Variable $full already exists, disallowed. Did you mean to set reuse=true or reuse=AUTO_REUSE in VarScope?")
        v = store[full]
        shape === nothing || Tuple(shape) == v.shape || invalid("Trying to share variable $full, but specified shape $(Tuple(shape)) and found shape $(v.shape).")
        return v
    end
    reuse === true && invalid("Variable $full does not exist, or was not created with get_variable(). Did you mean to set reuse=AUTO_REUSE in VarScope?")
    value = if initializer === nothing
        shape === nothing && invalid("get_variable: give an initializer or a shape for the new variable $full")
        default_initial_value(dtype === nothing ? Float64 : dtype, shape)
    else
        initializer isa Tensor && invalid("get_variable: initializing from a Tensor is not supported yet; pass a Julia value")
        a = as_array(initializer)
        dtype === nothing ? a : convert(Array{dtype}, a)
    end
    shape === nothing || size(value) == Tuple(shape) || invalid("get_variable: initializer of size $(size(value)) does not have shape $(Tuple(shape))")
    v = Variable(value; name=full * "/", trainable=trainable)
    store[full] = v
    return v
end

random_name() = "unnamed_" * String(rand(['a':'z'; 'A':'Z'; '0':'9'], 10))

function get_variable(o::Union{Number,AbstractArray}; name=nothing, scope::AbstractString="", trainable::Bool=true)
    nm = name === nothing ? random_name() : String(name)
    isempty(scope) && return get_variable(nm; initializer=o, trainable=trainable)
    return variable_scope(() -> get_variable(nm; initializer=o, trainable=trainable), scope; reuse=AUTO_REUSE)
end

function get_variable(T::Type; shape, name=nothing, scope::AbstractString="", trainable::Bool=true)
    nm = name === nothing ? random_name() : String(name)
    isempty(scope) && return get_variable(nm; shape=shape, dtype=T, trainable=trainable)
    return variable_scope(() -> get_variable(nm; shape=shape, dtype=T, trainable=trainable), scope; reuse=AUTO_REUSE)
end

# ------------------------------------------------------------------ GPU queries

gpu_devices() = filter(d -> d.type == "GPU", list_devices())

"""
    gpu_info()

Prints what ADCME's `gpu_info` prints: the compiler, the CUDA driver version and the
number of GPUs. Oxiflow compiles kernels with NVRTC at run time (no NVCC) and uses the CUDA
driver directly (no runtime library); without a driver it says why (`cuda_status()`).
Emulated GPUs are counted separately. Returns `nothing`.
"""
function gpu_info()
    gpus = gpu_devices()
    cuda = count(d -> d.kind == "cuda", gpus)
    println("- NVCC: not used (Oxiflow compiles GPU kernels with NVRTC at run time)")
    st = cuda_status()
    println("- CUDA driver version: ", st.driver == "present" ? st.driver_info : "none ($(st.driver_info))")
    println("- CUDA runtime version: not used (Oxiflow calls the driver API)")
    println("- Total number of GPUs: $cuda")
    emu = length(gpus) - cuda
    emu > 0 && println("- Emulated GPUs (host memory, GPU placement rules): $emu")
    cuda == 0 && println("No CUDA GPU found: ops run on the CPU (and on emulated GPUs where enabled).")
    return nothing
end

"""
    get_gpu()

ADCME's `get_gpu`: `(NVCC, LIB, INC, TOOLKIT, CUDNN)` paths of the CUDA toolchain used to
build GPU custom operators, or `nothing` when there is none (always, in this build: Oxiflow
has no CUDA backend yet and needs no NVCC).
"""
function get_gpu()
    any(d -> d.kind == "cuda", gpu_devices()) || return nothing
    return (NVCC="", LIB="", INC="", TOOLKIT="", CUDNN="")
end
