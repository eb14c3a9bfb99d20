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

"""`stop_gradient(o)`: ADCME's deprecated name of [`independent`](@ref) (TF's `tf.stop_gradient`)."""
stop_gradient(o) = independent(o)

"""
    is_variable(o)

ADCME's `is_variable`: whether `o` is a trainable variable (a `VariableV2` tensor in
`TRAINABLE_VARIABLES`; ADCME tests `o.trainable`). A variable made with `trainable=false`,
a constant, a computed tensor or a Julia value gives `false`.
"""
is_variable(o::Tensor) = is_variable_op(o) && o in collection_tensors(getfield(o, :graph), TRAINABLE_VARIABLES)
is_variable(o) = false

"""
    group_assign(vars, values)

ADCME's `group_assign`: one [`assign`](@ref) per pair, `assign(vars[i], values[i])`,
returned as a vector of `Assign` tensors (running the vector runs them all; wrap it in
[`group`](@ref) for a single op). `values` holds tensors or Julia values (converted to each
variable's dtype). Lengths must match; each pair follows `assign`'s rules (a `Variable`, the
same shape).
"""
function group_assign(vars::AbstractVector, values)
    length(vars) == length(values) ||
        invalid("group_assign: $(length(vars)) variables but $(length(values)) values")
    return Tensor[assign(v, x) for (v, x) in zip(vars, values)]
end

"""`tensorname(o)`: the name of tensor `o` (`"Sin:0"`; ADCME's `tensorname`, the inverse of [`tensor`](@ref))."""
tensorname(o::Tensor) = o.name

"""
    tensor(name)

The tensor of the default graph named `name` (`"Sin:0"`, or `"Sin"` for output 0), as
ADCME's `tensor(name)` (TF's `get_tensor_by_name`). An `OxiflowError` if there is none.
"""
function tensor(name::AbstractString)
    g = get_default_graph()
    m = match(r"^(.*):(\d+)$", name)
    node_name, idx_text = m === nothing ? (name, "0") : (m.captures[1], m.captures[2])
    node = oxf_node_by_name(g, node_name)
    # an index too large for an Int is past every op's outputs too
    idx = something(tryparse(Int, idx_text), typemax(Int))
    idx < max(oxf_node_num_outputs(g, node), 1) || invalid("tensor: the op '$node_name' has no output $idx_text")
    return Tensor(g, node, idx)
end

"""
    tensor(v::AbstractVector; dtype=Float64, sparse=false)
    tensor(M::AbstractMatrix; dtype=Float64, sparse=false)

ADCME's `tensor` of a Julia array whose entries mix numbers and scalar tensors
(`tensor([1; v; 0])`, `tensor([1 v; v 1])`): a vector or matrix tensor of `dtype` holding
them, differentiable with respect to the tensor entries (`Pack` of the entries, `Cast` where a
tensor's dtype differs). `sparse` is accepted for ADCME's signature and changes nothing
here (ADCME uses it to skip zero entries when filling a variable). A non-scalar tensor entry
raises an `OxiflowError`.
"""
function tensor(v::AbstractVector; dtype::Type=Float64, sparse::Bool=false)
    isempty(v) && return constant(zeros(dtype, 0))
    return stack(Tensor[scalar_entry(x, dtype) for x in v])
end
function tensor(M::AbstractMatrix; dtype::Type=Float64, sparse::Bool=false)
    size(M, 1) > 0 && size(M, 2) > 0 || return constant(zeros(dtype, size(M)...))
    return stack(Tensor[tensor(M[i, :]; dtype=dtype) for i in 1:size(M, 1)])
end
# `[1; v; 0]` with a tensor `v` is already a tensor in Oxiflow (vcat builds it): returned as is.
tensor(t::Tensor; dtype=nothing, sparse::Bool=false) = dtype === nothing ? t : cast(t, dtype)
function scalar_entry(x, dtype)
    if x isa Tensor
        ndims(x) == 0 || invalid("tensor: entries must be numbers or scalar tensors, got $(x.name) of shape $(size(x))")
        return cast(x, dtype)
    end
    return constant(x; dtype=dtype)
end

# ------------------------------------------------------------------ variable scopes

"""`AUTO_REUSE`: `variable_scope(...; reuse=AUTO_REUSE)` creates or reuses (TF's `tf.AUTO_REUSE`)."""
const AUTO_REUSE = :AUTO_REUSE

const VARSCOPES = Tuple{String,Any}[]          # (name, reuse) of the open variable scopes
const SCOPE_INITIALIZERS = Any[]               # their `initializer`s (`nothing`: inherited)
const GET_VARIABLES = WeakKeyDict{Graph,Dict{String,Tensor}}()

# The scope names that prefix `get_variable` names (unnamed scopes, pushed to set reuse only, add none).
scope_prefix() = [n for (n, _) in VARSCOPES if !isempty(n)]

function current_reuse()
    for (_, r) in Iterators.reverse(VARSCOPES)
        r === nothing || return r
    end
    return false
end

# The initializer of the innermost open variable scope that sets one (`nothing`: none does).
function current_initializer()
    for init in Iterators.reverse(SCOPE_INITIALIZERS)
        init === nothing || return init
    end
    return nothing
end

"""
    variable_scope(f, name; reuse=AUTO_REUSE, initializer=nothing)

Runs `f()` inside TF's `tf.variable_scope(name)`: `get_variable(v)` inside names the variable
`name/v` and, by `reuse`, creates it (`false`), reuses an existing one (`true`) or does
whichever applies (`AUTO_REUSE`, ADCME's default); `nothing` inherits the enclosing scope's
setting. `initializer` (an [`Initializer`](@ref) such as `glorot_normal_initializer()`) is
the default initializer of the `get_variable`s inside that give none (TF's
`variable_scope(..., initializer=...)`); `nothing` inherits the enclosing scope's. Ops
created inside get the name scope `name/` too.
"""
function variable_scope(f::Function, name::AbstractString; reuse=AUTO_REUSE, initializer=nothing)
    reuse === nothing || reuse isa Bool || reuse === AUTO_REUSE || invalid("variable_scope: reuse must be true, false, nothing or AUTO_REUSE")
    initializer === nothing || initializer isa Initializer ||
        invalid("variable_scope: initializer must be an initializer object such as glorot_uniform_initializer(), got $(repr(initializer))")
    push!(VARSCOPES, (String(name), reuse))
    push!(SCOPE_INITIALIZERS, initializer)
    full = join(scope_prefix(), "/")
    counts = scope_counts()
    isempty(name) || (counts[full] = get(counts, full, 0) + 1)
    try
        # an empty name (ADCME's `variable_scope("")`) sets reuse only: no name prefix
        return isempty(name) ? f() : name_scope(f, name)
    finally
        pop!(VARSCOPES)
        pop!(SCOPE_INITIALIZERS)
        # TF's close_variable_subscopes: the scopes opened inside are forgotten, so a layer
        # built again under this scope gets its default names (and variables) again
        isempty(name) || for k in collect(keys(counts))
            startswith(k, full * "/") && delete!(counts, k)
        end
    end
end

# How often each variable scope (full name) was opened, per graph: TF's
# `_VariableScopeStore.variable_scopes_count`, which unique default scope names come from.
const SCOPE_COUNTS = WeakKeyDict{Graph,Dict{String,Int}}()
scope_counts() = get!(() -> Dict{String,Int}(), SCOPE_COUNTS, get_default_graph())

"""
    unique_scope_name(base) -> String

TF's `_get_unique_variable_scope(base)`: `base` when no scope of that name was opened under
the open variable scopes, else `base_1`, `base_2`, ... (the first not opened). The default
scope names of layers (`fully_connected`, `fully_connected_1`, ...) in [`dense`](@ref).
"""
function unique_scope_name(base::AbstractString)
    counts = scope_counts()
    full = join(vcat(scope_prefix(), [String(base)]), "/")
    get(counts, full, 0) == 0 && return String(base)
    i = 1
    while get(counts, "$(full)_$i", 0) > 0
        i += 1
    end
    return "$(base)_$i"
end

"""TF's default initializer of `get_variable`: Glorot uniform for floats, zeros otherwise."""
function default_initial_value(T::Type, shape)
    T <: AbstractFloat || return zeros(T, Tuple(Int(d) for d in shape)...)
    return glorot_uniform_initializer()(shape, T)
end

"""
    get_variable(name; initializer=nothing, shape=nothing, dtype=Float64, trainable=true)
    get_variable(value; name=nothing, scope="")
    get_variable(T::Type; shape, name=nothing, scope="")

TF1's `tf.get_variable` under the open [`variable_scope`](@ref)s: the variable is named
`scope/name` exactly. When it exists (created by `get_variable`) and reuse is `true` or
`AUTO_REUSE` it is returned; when it exists and reuse is `false`, or does not exist and
reuse is `true`, an `OxiflowError` with TF's message (also when a reused variable's shape or
dtype differs from the one asked for). `initializer` is a Julia value (number or array,
converted to `dtype` when given) or an [`Initializer`](@ref) object, which needs `shape`;
without it, the enclosing `variable_scope`'s initializer, else TF's default (Glorot uniform
for floats, zeros otherwise), makes a value of `shape` and `dtype`. The second and third forms are
ADCME's (`get_variable(o; name, scope)`, variable.jl): a variable from a value or a type,
created or reused by name under `variable_scope(scope)` with `AUTO_REUSE` whatever scope is
open around it, so a second call with the same name returns the same variable (unnamed
ones get a random `unnamed_...` name).
"""
function get_variable(name::AbstractString; initializer=nothing, shape=nothing, dtype=nothing, trainable::Bool=true)
    g = get_default_graph()
    store = get!(() -> Dict{String,Tensor}(), GET_VARIABLES, g)
    full = join(vcat(scope_prefix(), [String(name)]), "/")
    reuse = current_reuse()
    if haskey(store, full)
        reuse === false && invalid("Variable $full already exists, disallowed. Did you mean to set reuse=true or reuse=AUTO_REUSE in VarScope?")
        v = store[full]
        shape === nothing || Tuple(shape) == v.shape || invalid("Trying to share variable $full, but specified shape $(Tuple(shape)) and found shape $(v.shape).")
        dtype === nothing || dtype == v.dtype || invalid("Trying to share variable $full, but specified dtype $dtype and found dtype $(v.dtype).")
        return v
    end
    reuse === true && invalid("Variable $full does not exist, or was not created with get_variable(). Did you mean to set reuse=AUTO_REUSE in VarScope?")
    dtype === nothing || dtype isa Type || invalid("get_variable: dtype must be a type such as Float32, got $(repr(dtype))")
    init = initializer === nothing ? current_initializer() : initializer
    value = if init === nothing || init isa Initializer
        shape === nothing && invalid(init === nothing ? "get_variable: give an initializer or a shape for the new variable $full" :
                                     "get_variable: the initializer object $(nameof(typeof(init))) needs a shape for the new variable $full")
        T = dtype === nothing ? Float64 : dtype
        init === nothing ? default_initial_value(T, shape) : init(shape, T)
    else
        initializer isa Tensor && invalid("get_variable: initializing from a Tensor is not supported yet; pass a Julia value")
        value_of_dtype(initializer, dtype, "get_variable")
    end
    shape === nothing || size(value) == Tuple(shape) || invalid("get_variable: initializer of size $(size(value)) does not have shape $(Tuple(shape))")
    v = Variable(value; name=full * "/", trainable=trainable)
    store[full] = v
    return v
end

random_name() = "unnamed_" * String(rand(['a':'z'; 'A':'Z'; '0':'9'], 10))

# ADCME's forms always run under `variable_scope(scope)` with AUTO_REUSE (`scope = ""` too),
# so calling them twice with one name returns the same variable.
function get_variable(o::Union{Number,AbstractArray}; name=nothing, scope::AbstractString="", trainable::Bool=true, dtype=nothing)
    nm = name === nothing ? random_name() : String(name)
    return variable_scope(() -> get_variable(nm; initializer=o, trainable=trainable, dtype=dtype), scope; reuse=AUTO_REUSE)
end

function get_variable(T::Type; shape, name=nothing, scope::AbstractString="", trainable::Bool=true)
    nm = name === nothing ? random_name() : String(name)
    return variable_scope(() -> get_variable(nm; shape=shape, dtype=T, trainable=trainable), scope; reuse=AUTO_REUSE)
end
get_variable(T::Type, shape; kw...) = get_variable(T; shape=shape, kw...)

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

# The path a shared library resolves to when it loads (`""` when it does not).
function loaded_library_path(names)
    for n in names
        h = Libdl.dlopen_e(n)
        h == C_NULL && continue
        try
            return Libdl.dlpath(h)
        finally
            Libdl.dlclose(h)
        end
    end
    return ""
end

"""
    get_gpu() -> NamedTuple (NVCC, LIB, INC, TOOLKIT, CUDNN)

ADCME's `get_gpu` returns the paths of the CUDA toolchain it builds GPU custom operators
with. Oxiflow needs no toolchain at build time, so each field says what Oxiflow uses, or is
`""` where nothing applies:

- `NVCC`: `""`: kernels are compiled at run time by NVRTC, never by `nvcc`;
- `LIB`: the CUDA driver library (`libcuda.so.1`) this process loads, `""` without a driver;
- `INC`: `""`: the kernels in `kernels/` include no CUDA headers;
- `TOOLKIT`: the NVRTC library used to compile the kernels (`ENV["OXIFLOW_NVRTC_LIB"]` when
  set, else `libnvrtc.so` as the loader finds it), `""` when none loads;
- `CUDNN`: `""`: Oxiflow does not use cuDNN.
"""
function get_gpu()
    lib = loaded_library_path(("libcuda.so.1", "libcuda.so"))
    nvrtc = get(ENV, "OXIFLOW_NVRTC_LIB", "")
    toolkit = isempty(nvrtc) ? loaded_library_path(("libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so")) : nvrtc
    return (NVCC="", LIB=lib, INC="", TOOLKIT=toolkit, CUDNN="")
end

"""
    use_gpu(i=nothing)

ADCME's `use_gpu`: with `i ≥ 1`, makes only GPUs `0..i-1` visible (`ENV["CUDA_VISIBLE_DEVICES"]`
= `"0,1,..."`), with `i == 0` none (`""`); sessions created afterwards see those GPUs. Returns
the names of the GPUs visible now (`"/device:GPU:0"`, ...; emulated GPUs included). A
negative `i` is an `OxiflowError`.
"""
function use_gpu(i::Union{Nothing,Integer}=nothing)
    if i !== nothing
        i >= 0 || invalid("use_gpu: the number of GPUs must be ≥ 0, got $i")
        ENV["CUDA_VISIBLE_DEVICES"] = join(0:i-1, ",")
    end
    return list_physical_devices("GPU")
end
