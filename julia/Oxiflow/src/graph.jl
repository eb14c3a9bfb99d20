# Graphs, tensors and the values that create them.

"""
    Graph()

A dataflow graph owned by the engine. Oxiflow keeps one default graph (`get_default_graph()`);
`reset_default_graph()` replaces it.
"""
mutable struct Graph
    ptr::Ptr{Cvoid}
    # The gradient builders of this graph's custom-gradient nodes (`register`,
    # `tf.custom_gradient`), by node id: dys -> the gradient of each of the node's inputs.
    custom_grads::Dict{Int64,Any}
    function Graph()
        g = new(oxf_graph_new(), Dict{Int64,Any}())
        finalizer(g) do x
            x.ptr == C_NULL || oxf_graph_free(x.ptr)
            x.ptr = C_NULL
        end
        return g
    end
end

Base.unsafe_convert(::Type{Ptr{Cvoid}}, g::Graph) = g.ptr

const DEFAULT_GRAPH = Ref{Graph}()

"""The graph new ops go into."""
get_default_graph() = isempty(FUNCTION_STACK) ? DEFAULT_GRAPH[] : FUNCTION_STACK[end].graph

"""
    reset_default_graph()

Starts a new, empty default graph (ADCME's `reset_default_graph`, TF's
`tf.compat.v1.reset_default_graph`) and empties `Oxiflow.STORAGE`, as ADCME does. Tensors and
sessions of the old graph stay valid but cannot be combined with new tensors.
"""
function reset_default_graph()
    DEFAULT_GRAPH[] = Graph()
    empty!(STORAGE)
    return nothing
end

"""
    Tensor

One output of a graph node (TF's `tf.Tensor`; a node without outputs, such as `init`'s
`NoOp`, is also held as a `Tensor` and fetches as `nothing`). Properties, as in TF/ADCME:
`t.name` (`"Sin:0"`), `t.device` (requested device, canonical, `""` when unplaced),
`t.op` (an [`Operation`]), `t.node_def`, `t.dtype` (a Julia type), `t.shape` (a tuple, the
static shape as `size(t)` gives it: `nothing` for an unknown dimension, TF's `None`/`?`).
"""
struct Tensor
    graph::Graph
    node::Int64
    index::Int32
end

"""
    Operation

A graph node (TF's `tf.Operation`): `op.name`, `op.type`, `op.device`, `op.node_def`,
`op.inputs` (input tensor names), `op.colocation_groups`.
"""
struct Operation
    graph::Graph
    node::Int64
end

"""
    NodeDef(name, op, device, input, attr)

The read-only view of a node that device functions receive (TF's `NodeDef`): `name`,
`op` (op type such as `"VariableV2"`), `device` (set so far by inner scopes), `input`
(input tensor names), `attr` (attribute values as strings).

A TF1 device function receives an `Operation` and reads `op.type`, `op.name`, `op.device`
or `op.node_def.op`; a `NodeDef` answers those too (`type` is `op`, `node_def` is the
`NodeDef` itself, `inputs` is `input`), so `op -> op.node_def.op == "Sin" ? "/gpu:1" :
"/cpu:0"` and seed 000's `isinstance(op, tf.NodeDef) ? op : op.node_def` both work.
"""
struct NodeDef
    name::String
    op::String
    device::String
    input::Vector{String}
    attr::Dict{String,String}
end

function Base.getproperty(n::NodeDef, s::Symbol)
    s === :type && return getfield(n, :op)
    s === :node_def && return n
    s === :inputs && return getfield(n, :input)
    return getfield(n, s)
end
Base.propertynames(::NodeDef) = (:name, :op, :device, :input, :attr, :type, :node_def, :inputs)

splitlines(s::AbstractString) = isempty(s) ? String[] : String.(split(s, '\n'))

function Base.getproperty(o::Operation, s::Symbol)
    g = getfield(o, :graph); n = getfield(o, :node)
    s === :name && return oxf_node_name(g, n)
    s === :type && return oxf_node_op(g, n)
    s === :device && return oxf_node_device(g, n)
    s === :inputs && return splitlines(oxf_node_inputs(g, n))
    s === :colocation_groups && return splitlines(oxf_node_colocation(g, n))
    s === :node_def && return NodeDef(oxf_node_name(g, n), oxf_node_op(g, n), oxf_node_device(g, n),
                                      splitlines(oxf_node_inputs(g, n)), Dict{String,String}())
    return getfield(o, s)
end
Base.propertynames(::Operation) = (:name, :type, :device, :inputs, :colocation_groups, :node_def)

function Base.getproperty(t::Tensor, s::Symbol)
    g = getfield(t, :graph); n = getfield(t, :node); i = getfield(t, :index)
    if s === :name
        return oxf_node_num_outputs(g, n) == 0 ? oxf_node_name(g, n) : string(oxf_node_name(g, n), ":", i)
    end
    s === :device && return oxf_node_device(g, n)
    s === :op && return Operation(g, n)
    s === :node_def && return Operation(g, n).node_def
    s === :dtype && return julia_type(first(oxf_output_type(g, n, i)))
    s === :shape && return static_shape(last(oxf_output_type(g, n, i)))
    return getfield(t, s)
end
Base.propertynames(::Tensor) = (:name, :device, :op, :node_def, :dtype, :shape, :graph, :node, :index)

# Tensor `==` is identity (ADCME: TF1 tensors compare by object identity).
Base.:(==)(a::Tensor, b::Tensor) = getfield(a, :graph) === getfield(b, :graph) && getfield(a, :node) == getfield(b, :node) && getfield(a, :index) == getfield(b, :index)
Base.hash(t::Tensor, h::UInt) = hash((getfield(t, :node), getfield(t, :index)), hash(getfield(t, :graph), h))

const DTYPE_CODES = Dict{DataType,Int32}(Float32 => 1, Float64 => 2, Int32 => 3, Int64 => 9, Bool => 10,
                                         ComplexF32 => 8, ComplexF64 => 18)
const CODE_TYPES = Dict{Int32,DataType}(v => k for (k, v) in DTYPE_CODES)

"""TF `DataType` code of a Julia element type; an `OxiflowError` for unsupported types."""
function dtype_code(T::Type)
    haskey(DTYPE_CODES, T) || invalid("Oxiflow tensors hold Float32, Float64, Int32, Int64, Bool, ComplexF32 or ComplexF64, not $T")
    return DTYPE_CODES[T]
end
julia_type(code::Integer) = CODE_TYPES[Int32(code)]

# The engine reports an unknown dimension as -1; Julia sees `nothing` (ADCME's and TF's `None`).
static_shape(dims::AbstractVector{<:Integer}) = Tuple(d < 0 ? nothing : Int(d) for d in dims)

"""
    size(t), size(t, i)

The static shape (Julia order: a `2×3` tensor has size `(2, 3)`), as a tuple of `Int`s, with
`nothing` for a dimension that is unknown until the graph runs (a `placeholder` declared
`shape=[nothing, 10]` has size `(nothing, 10)`, and so has `tanh(x * W)` for a `10×10` `W`);
`size(t, i)` is one entry (`nothing` when unknown; 1 beyond the rank, as for arrays).
`ndims(t)` is always known. `length(t)` is the element count; for a tensor with an unknown
dimension it raises an `OxiflowError` (InvalidArgumentError) saying so.
"""
Base.size(t::Tensor) = t.shape
Base.size(t::Tensor, i::Integer) = (s = t.shape; i <= length(s) ? s[i] : 1)
function Base.length(t::Tensor)
    s = t.shape
    any(d -> d === nothing, s) &&
        invalid("length: $(t.name) has size $(s), with an unknown dimension, so its number of elements is only known when the graph runs")
    return prod(s)
end
Base.ndims(t::Tensor) = length(t.shape)

"""`is_fully_defined(t)`: whether every dimension of `t`'s static shape is known (TF's `TensorShape.is_fully_defined`)."""
is_fully_defined(t::Tensor) = all(d -> d !== nothing, size(t))

"""
    known_size(t, fname) -> Tuple of Ints

`size(t)` when every dimension is known; else an `OxiflowError` (UnimplementedError) saying
that `fname` does not accept a tensor with an unknown dimension yet, naming `t` and its size.
For the functions that compute on sizes in Julia.
"""
function known_size(t::Tensor, fname)
    s = size(t)
    any(d -> d === nothing, s) &&
        unimplemented("$fname: $(t.name) has size $(s) with an unknown dimension (nothing), which $fname does not accept yet; give the placeholder's full shape")
    return s
end

"""`engine_dim(d)`: a size as the engine takes it, `-1` for an unknown one (`nothing`)."""
engine_dim(d) = d === nothing ? Int64(-1) : Int64(d)
"""The static shape as the engine takes it (`-1` for an unknown dimension), row by row as `size`."""
engine_dims(t::Tensor) = Int64[engine_dim(d) for d in size(t)]
Base.eltype(t::Tensor) = t.dtype
"""`get_dtype(t)`: the Julia element type of a tensor (ADCME)."""
get_dtype(t::Tensor) = t.dtype

# Arrays cross the ABI column-major; Julia's scalar becomes a rank-0 tensor.
as_array(x::Number) = fill(x)
as_array(x::AbstractArray) = collect(x)
# an Array as it is: every caller hands it to the engine, which copies it
as_array(x::Array) = x

"""
    value_of_dtype(value, dtype, fname)

`value` (a number or an array) as an `Array` of element type `dtype` (`nothing`: its own
eltype, or the promoted type of its entries for an array such as `Any[1, 2.5]`), as ADCME's
`dtype` keyword converts values (`Variable(1.0; dtype=Float32)`). A value that is not a
number or array of numbers (a string), an element type Oxiflow has no tensors of
(`Float16`, `Complex{Int64}`) without a `dtype` to convert it to, a value that does not convert
exactly (1.5 to `Int64`) or an unsupported `dtype` raises an `OxiflowError` naming `fname`.
"""
function value_of_dtype(value, dtype, fname)
    value isa Union{Number,AbstractArray} ||
        invalid("$fname: the value must be a number or an array of numbers, got $(repr(value)) ($(typeof(value)))")
    a = as_array(value)
    if !isconcretetype(eltype(a)) && !isempty(a) && all(x -> x isa Real, a)
        # an array of mixed numbers (`Any[1, 2.5]`) takes their promoted type, as NumPy's
        # `asarray` does for TF
        a = convert(Array{mapreduce(typeof, promote_type, a)}, a)
    end
    # π and ℯ are Float64 values, as PyCall hands them to TF
    dtype === nothing && eltype(a) <: AbstractIrrational && (a = convert(Array{Float64}, a))
    haskey(DTYPE_CODES, eltype(a)) || (dtype !== nothing && eltype(a) <: Number) ||
        invalid("$fname: Oxiflow tensors hold Float32, Float64, Int32, Int64, Bool, ComplexF32 or ComplexF64, not $(eltype(a)) (the value $(summary(value)))")
    dtype === nothing && return a
    dtype isa Type && haskey(DTYPE_CODES, dtype) ||
        invalid("$fname: dtype must be one of Float32, Float64, Int32, Int64, Bool, ComplexF32, ComplexF64, got $(repr(dtype))")
    eltype(a) === dtype && return a
    try
        return convert(Array{dtype}, a)
    catch e
        e isa InexactError || rethrow()
        invalid("$fname: the value $(repr(value)) ($(eltype(a))) cannot be converted to $dtype without losing precision")
    end
end

"""
    constant(value; dtype=eltype(value), name=nothing)

A `Const` node holding `value` (a number or an array; `Int` stays `Int64`, `1.0` is
`Float64`: ADCME's rule that the dtype follows the Julia eltype). `dtype` converts the value
(`constant(1; dtype=Float32)`; an inexact conversion is an `OxiflowError`). A `Tensor` is
returned unchanged (or `cast` when `dtype` differs).
"""
function constant(value; dtype=nothing, name=nothing)
    value isa Tensor && return (dtype === nothing || dtype == value.dtype) ? value : cast(value, dtype)
    return constant_in(get_default_graph(), value; dtype=dtype, name=name)
end

# `constant` of a number or array in graph `g`: helper constants go into the graph of the
# tensor they combine with (TF builds an op in its inputs' graph), so `t + 1.0` works for a
# `t` built before `reset_default_graph()`.
function constant_in(g::Graph, value; dtype=nothing, name=nothing)
    value isa Tensor && return value
    a = value_of_dtype(value, dtype, "constant")
    node = oxf_const(g, dtype_code(eltype(a)), Int64[size(a)...], a, name)
    return Tensor(g, node, 0)
end

# A tensor of size `dims` (Julia order) whose elements are all `value` as a `T`: for a float
# `T` a scalar `Const` and a `BroadcastTo`, so the graph holds one element whatever the size
# (TF's `tf.fill`), and a size too large to allocate fails when the graph runs, as an
# OutOfMemory error naming the op, instead of while the graph is built. Other dtypes get a
# full `Const`: `BroadcastTo` has GPU kernels for floats only, and a `Const` goes anywhere.
function filled_in(g::Graph, T::Type, dims, value; name=nothing)
    (isempty(dims) || !(T <: AbstractFloat)) && return constant_in(g, fill(convert(T, value), Tuple(Int[d for d in dims])...); name=name)
    c = constant_in(g, convert(T, value))
    return add_op("BroadcastTo", [c]; shape=Int64[d for d in dims], name=name)
end

"""
    placeholder(T::Type; shape=[], name=nothing)
    placeholder(value; dtype=eltype(value), name=nothing)

A `Placeholder` of element type `T` and static `shape` (default scalar) that must be fed in
`run`; or, given a value, a `PlaceholderWithDefault` whose default is `value` (ADCME's
`placeholder(o)`), converted to `dtype` when given. `placeholder(T; dtype=T)` is accepted.

`shape` (a vector or tuple, Julia order) may mark dimensions unknown with `nothing`
(ADCME's `placeholder(Float64, shape=[nothing, 10])`, TF1's `None`) or `-1`: such a
placeholder accepts a feed of any size in those dimensions (the others must match), so one
graph and one session run batches of any size; `size(x) == (nothing, 10)`. What works on
such tensors and what raises is in the user guide (docs/user-guide/shapes.md, "Unknown
dimensions"). A shape that is not a vector or tuple of sizes (`shape=nothing`, an unknown
rank) or a negative size other than `-1` raises an `OxiflowError` (InvalidArgumentError).
"""
function placeholder(T::Type; shape=Int[], name=nothing, dtype=nothing)
    dtype === nothing || dtype === T || invalid("placeholder: element type $T and dtype=$(repr(dtype)) disagree")
    g = get_default_graph()
    return Tensor(g, oxf_placeholder(g, dtype_code(T), placeholder_dims(shape), name), 0)
end

# A user's placeholder shape as the engine takes it: `nothing` and -1 (unknown) become -1.
function placeholder_dims(shape)
    shape isa Union{AbstractVector,Tuple} ||
        invalid("placeholder: shape must be a vector or tuple of sizes (nothing or -1 for an unknown one), got $(repr(shape)); a tensor of unknown rank is not supported")
    for d in shape
        (d === nothing || (d isa Integer && !(d isa Bool) && d >= -1)) ||
            invalid("placeholder: shape $(repr(shape)) has the entry $(repr(d)); give sizes >= 0, or nothing or -1 for an unknown size")
    end
    return Int64[engine_dim(d) for d in shape]
end
placeholder(value::Union{Number,AbstractArray}; name=nothing, dtype=nothing) =
    add_op("PlaceholderWithDefault", [constant(value; dtype=dtype)]; name=name)

"""
    Variable(initial_value; name=nothing, trainable=true, dtype=eltype(initial_value))

A TF1 variable (`VariableV2` node, op type `"VariableV2"`) holding a copy of
`initial_value` (dtype follows its eltype, or `dtype` converts it:
`Variable(1.0; dtype=Float32)`, ADCME's keyword), with `<name>/Assign` (its initializer) and
`<name>/read` (the snapshot other ops read, colocated with it). In `GLOBAL_VARIABLES` and,
when `trainable`, `TRAINABLE_VARIABLES`. Its value is set by `init(sess)`.
"""
function Variable(initial_value; name=nothing, trainable::Bool=true, dtype=nothing)
    initial_value isa Tensor && invalid("Variable: initialising from a Tensor is not supported yet; pass a Julia value")
    a = value_of_dtype(initial_value, dtype, "Variable")
    g = get_default_graph()
    return Tensor(g, oxf_variable(g, dtype_code(eltype(a)), Int64[size(a)...], a, name, trainable), 0)
end

# JSON text of an attribute dictionary (values: Bool, Integer, Real, String, DataType, Vector{Int}).
json_value(x::Bool) = x ? "true" : "false"
json_value(x::Integer) = string(x)
json_value(x::AbstractFloat) = isfinite(x) ? repr(Float64(x)) : invalid("attribute value $x is not finite")
json_value(x::AbstractString) = "\"" * escape_string(x) * "\""
json_value(x::DataType) = json_value(string(x))
json_value(x::Union{AbstractVector,Tuple}) = "[" * join((json_value(v) for v in x), ",") * "]"
attrs_json(attrs) = isempty(attrs) ? nothing : "{" * join(("\"$k\":" * json_value(v) for (k, v) in attrs), ",") * "}"

"""
    add_op(op_type, inputs; name=nothing, attrs...)

Adds a node of TF op type `op_type` (e.g. `"MatMul"`) to the graph of its inputs and
returns its output 0. Attributes go as keywords (`transpose_a=true`, `axis=[0]`,
`DstT=Float32`). Errors (shape, dtype, unknown op) are `OxiflowError`s naming the op.
"""
function add_op(op_type::AbstractString, inputs::Vector{Tensor}; name=nothing, attrs...)
    if !isempty(FUNCTION_STACK)
        # building a branch (control_flow.jl): the op goes into the branch's graph, and
        # inputs of enclosing graphs are captured
        g = FUNCTION_STACK[end].graph
        inputs = Tensor[capture(t) for t in inputs]
    else
        g = isempty(inputs) ? get_default_graph() : getfield(inputs[1], :graph)
    end
    for t in inputs
        getfield(t, :graph) === g || invalid("$op_type: inputs come from different graphs (was reset_default_graph called in between?)")
    end
    node = oxf_add_op(g, op_type, Int64[getfield(t, :node) for t in inputs], Int32[getfield(t, :index) for t in inputs],
                      attrs_json(attrs), name)
    return Tensor(g, node, 0)
end

"""
    add_op(op_type, inputs::NamedTuple; name=nothing, attrs...)

`add_op` with the inputs given by the names the op declares (TF's input names:
`(var=v, m=m, v=vs, beta1_power=..., grad=g)` for `ApplyAdam`), put in the op's order by
the engine's declaration (`oxf_op_inputs`). An `OxiflowError` (InvalidArgumentError) names
the op and the missing or unknown inputs, and the op's names, when they differ.
"""
function add_op(op_type::AbstractString, inputs::NamedTuple; name=nothing, attrs...)
    names = oxf_op_inputs(op_type)
    given = String.(collect(keys(inputs)))
    if sort(given) != sort(names)
        missing_ = setdiff(names, given); unknown = setdiff(given, names)
        invalid("$op_type takes the inputs ($(join(names, ", "))); " *
                (isempty(missing_) ? "" : "missing: $(join(missing_, ", ")); ") *
                (isempty(unknown) ? "" : "unknown: $(join(unknown, ", "))"))
    end
    return add_op(op_type, Tensor[inputs[Symbol(n)] for n in names]; name=name, attrs...)
end

"""
    get_collection(name=TRAINABLE_VARIABLES)

Members of a graph collection (`TRAINABLE_VARIABLES`, `GLOBAL_VARIABLES`, `UPDATE_OPS`,
as strings like TF's `GraphKeys`); any other string is a regex over the names of trainable
variables (ADCME's `get_collection`).
"""
function get_collection(name::AbstractString=TRAINABLE_VARIABLES)
    g = get_default_graph()
    name in (TRAINABLE_VARIABLES, GLOBAL_VARIABLES, UPDATE_OPS) && return collection_tensors(g, name)
    re = Regex(name)
    return unique(filter(v -> occursin(re, v.name), get_collection(TRAINABLE_VARIABLES)))
end

"""The tensors of collection `name` in graph `g`."""
collection_tensors(g::Graph, name::AbstractString) =
    Tensor[Tensor(g, node, index) for (node, index) in oxf_collection(g, name)]

"""`add_to_collection(name, t)`: adds tensor `t` to graph collection `name`."""
add_to_collection(name::AbstractString, t::Tensor) = oxf_add_to_collection(getfield(t, :graph), name, getfield(t, :node), getfield(t, :index))

const GLOBAL_VARIABLES = "variables"
const TRAINABLE_VARIABLES = "trainable_variables"
const UPDATE_OPS = "update_ops"
