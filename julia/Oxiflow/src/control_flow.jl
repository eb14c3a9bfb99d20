# Functional control flow: `cond` builds TF2's `If` op (crates/oxiflow-core/src/ops/functional.rs),
# whose branches are functions: graphs of their own, built here by calling the Julia branch
# functions while a function builder is open.
#
# While a builder is open, `get_default_graph()` is the branch's graph and `add_op` builds
# there; an input from the enclosing graph is captured (TF's `capture` in `func_graph.py`):
# it becomes a `Placeholder` of the branch, and the tensor itself an input of the `If` node.
# Builders nest (a `cond` inside a branch captures through each level).

# `cond` extends LinearAlgebra's (the condition number, which takes one or two arguments), so
# programs doing `using Oxiflow, LinearAlgebra` see one `cond` with both meanings.
import LinearAlgebra: cond
export cond

mutable struct FunctionBuilder
    graph::Graph
    outer::Graph
    # (node, index) of an enclosing-graph tensor => (that tensor, its placeholder here)
    captures::Dict{Tuple{Int64,Int32},Tuple{Tensor,Tensor}}
    order::Vector{Tuple{Int64,Int32}}
end

const FUNCTION_STACK = FunctionBuilder[]

# `t` as a tensor of the innermost open builder's graph (level `level` of the stack),
# capturing it through every level between its graph and that one.
function capture(t::Tensor, level::Int=length(FUNCTION_STACK))
    b = FUNCTION_STACK[level]
    getfield(t, :graph) === b.graph && return t
    outer_t = level == 1 ? t : capture(t, level - 1)
    getfield(outer_t, :graph) === b.outer ||
        invalid("a tensor from another graph ($(tensorname(t))) is used in a branch (was reset_default_graph called in between?)")
    key = (getfield(outer_t, :node), getfield(outer_t, :index))
    haskey(b.captures, key) && return b.captures[key][2]
    # an unknown dimension stays unknown in the branch (If and While take partial inputs)
    p = Tensor(b.graph, oxf_placeholder(b.graph, dtype_code(outer_t.dtype), engine_dims(outer_t), "capture"), 0)
    b.captures[key] = (outer_t, p)
    push!(b.order, key)
    return p
end

FunctionBuilder(outer::Graph) =
    FunctionBuilder(Graph(), outer, Dict{Tuple{Int64,Int32},Tuple{Tensor,Tensor}}(), Tuple{Int64,Int32}[])

# Runs `f(b)` with a new builder `b` over `outer` open (ops go into `b.graph`); returns `b`
# and what `f` returned. The builder is closed however `f` ends.
function with_builder(f, outer::Graph)
    b = FunctionBuilder(outer)
    push!(FUNCTION_STACK, b)
    try
        return b, f(b)
    finally
        pop!(FUNCTION_STACK)
    end
end

# A new placeholder in `b`'s graph, of dtype `T` and size `dims` (`nothing`: unknown), or of tensor `x`'s.
builder_placeholder(b::FunctionBuilder, T::Type, dims, name) =
    Tensor(b.graph, oxf_placeholder(b.graph, dtype_code(T), Int64[engine_dim(d) for d in dims], name), 0)
builder_placeholder(b::FunctionBuilder, x::Tensor, name) = builder_placeholder(b, x.dtype, size(x), name)

# The tensors the builders `bs` captured, in one list (the functional op's extra inputs),
# and for each builder its placeholders for them in that order (a plain placeholder where
# the builder did not use one), so every function takes the same inputs.
function shared_captures(bs::FunctionBuilder...)
    keys_ = unique(vcat((b.order for b in bs)...))
    outer = Tensor[first(b.captures[k][1] for b in bs if haskey(b.captures, k)) for k in keys_]
    ins = [Tensor[haskey(b.captures, k) ? b.captures[k][2] : builder_placeholder(b, x, "unused") for (k, x) in zip(keys_, outer)]
           for b in bs]
    return outer, ins
end

# Calls `f()` with a new builder open over `outer`; returns the builder and the branch's
# outputs as tensors of its graph, and whether `f` returned one value (not a tuple/vector).
function build_function(f, outer::Graph, what)
    b, (outs, single, tas) = with_builder(outer) do _
        out = f()
        single = !(out isa Union{Tuple,AbstractVector})
        vals = single ? (out,) : Tuple(out)
        isempty(vals) && invalid("cond: $what returned no values")
        function as_output(v)
            v isa Tensor && return capture(v)
            v isa TensorArray && return capture(v.data === nothing ?
                invalid("cond: $what returned a TensorArray nothing was written to (its element shape is unknown)") : v.data)
            v isa Union{Number,AbstractArray} && return constant(v)
            invalid("cond: $what returned a $(typeof(v)), not a tensor, TensorArray or value")
        end
        # which outputs are TensorArrays (their size and dtype), to return them as such
        Tensor[as_output(v) for v in vals], single, Any[v isa TensorArray ? (v.n, v.dtype) : nothing for v in vals]
    end
    return b, outs, single, tas
end

# The JSON of a `func` attribute: the branch graph's handle, inputs and outputs.
struct FuncAttr
    graph::Graph
    inputs::Vector{Tensor}
    outputs::Vector{Tensor}
end
pairs_json(ts) = "[" * join(("[$(getfield(t, :node)),$(getfield(t, :index))]" for t in ts), ",") * "]"
json_value(f::FuncAttr) = "{\"graph\":$(UInt(f.graph.ptr)),\"inputs\":$(pairs_json(f.inputs)),\"outputs\":$(pairs_json(f.outputs))}"

"""
    cond(pred, true_fn, false_fn; name=nothing)

`tf.cond`: the values `true_fn()` returns when the Bool scalar tensor `pred` is true when the
graph runs, else those of `false_fn()`, evaluating **only the taken branch** (TF2's `If` op).
Each function takes no arguments and returns a tensor, a number or array, or a tuple/vector
of them; both must return the same number of values with the same dtypes and shapes
(otherwise an `OxiflowError` naming `If` and the output). Tensors of the enclosing graph a
branch uses (placeholders, variables, any result) are passed into it. Differentiable: the
gradient is another `If` running the gradient of the taken branch (TF's `cond_v2`), and
gradients of gradients work. With a Julia `Bool` as `pred` the chosen function is simply
called. The branch runs as one step on its device; on a GPU (TF places `cond` there too) the
`If` reads `pred` on the host and runs each op of the branch on the GPU when it has a GPU
kernel for its dtypes, else on the host. Tensors with an unknown dimension (a batch fed at run time) may be used in
the branches; such a dimension stays unknown in them.
"""
cond(pred::Bool, true_fn::Function, false_fn::Function; name=nothing) = pred ? true_fn() : false_fn()
function cond(pred::Tensor, true_fn, false_fn; name=nothing)
    (pred.dtype == Bool && ndims(pred) == 0) || invalid("cond: pred must be a Bool scalar, got $(pred.dtype) of size $(size(pred))")
    outer = isempty(FUNCTION_STACK) ? getfield(pred, :graph) : FUNCTION_STACK[end].graph
    tb, tout, single, ttas = build_function(true_fn, outer, "true_fn")
    fb, fout, _, ftas = build_function(false_fn, outer, "false_fn")
    length(tout) == length(fout) ||
        invalid("cond: true_fn returned $(length(tout)) values, false_fn $(length(fout))")
    for (k, (a, b)) in enumerate(zip(ttas, ftas))
        a == b || invalid("cond: value $k is $(a === nothing ? "a tensor" : "a TensorArray of size $(a[1])") in true_fn and $(b === nothing ? "a tensor" : "a TensorArray of size $(b[1])") in false_fn")
    end
    # every captured tensor is an input of both branches
    outer_inputs, (tin, fin) = shared_captures(tb, fb)
    then_f = FuncAttr(tb.graph, tin, tout)
    else_f = FuncAttr(fb.graph, fin, fout)
    node = GC.@preserve then_f else_f add_op("If", Tensor[pred; outer_inputs]; name=name, then_branch=then_f, else_branch=else_f)
    g = getfield(node, :graph)
    outs = Any[(t = Tensor(g, getfield(node, :node), Int32(k - 1)); ttas[k] === nothing ? t : TensorArray(ttas[k]..., t))
               for k in 1:length(tout)]
    return single ? outs[1] : Tuple(outs)
end

# ---------------------------------------------------------------- TensorArray

export TensorArray, while_loop, pmap

"""
    TensorArray(n; dtype=Float64, clear_after_read=true, element_shape=nothing)

ADCME's `TensorArray` (TF's `tf.TensorArray` of fixed size `n`): `n` elements of one dtype
and shape, written with `write(ta, i, v)` (returns the new array) and read with
`read(ta, i)`, 1-based `i` (an integer or an Int scalar tensor); `stack(ta)` is the
`n×...` tensor of all elements, `unstack(ta, t)` writes the rows of `t`, `size(ta)` is
`n`. A loop variable of `while_loop`.

Oxiflow keeps the elements in one dense tensor of shape `[n, element_shape...]` (elements not
written are zeros): `write` is a `TensorScatterUpdate` of one row and `read` a `GatherV2`,
so both are differentiable. The element shape comes from `element_shape` or the first
`write`; a `TensorArray` entering `while_loop` without one gets it from the first element
the body writes to it (`while_loop` then calls `body` once more, to find it). A `cond`
branch may return a `TensorArray` (both branches then return one of the same size).

In a `while_loop` body, a `write` updates the array in place when nothing after it in the
body reads the old array (a `read(ta, i - 1)` before it is fine): O(element), TF's input
forwarding, so a loop of `n` steps writing one element each costs O(n) elements, not
O(n²). The gradient of such a loop keeps the elements each write overwrote, not a copy of
the array per iteration. Elsewhere (a `write` outside a loop, an old array read again after
the write or returned) each `write` copies the array.
`clear_after_read` is accepted for compatibility; elements may be read any number of times.
"""
struct TensorArray
    n::Int
    dtype::Type
    data::Union{Nothing,Tensor}
    # while_loop's first pass over a body whose TensorArray has no element shape yet: the
    # size of the first element written to it
    probe::Union{Nothing,Base.RefValue{Any}}
end
TensorArray(n::Int, dtype::Type, data::Union{Nothing,Tensor}) = TensorArray(n, dtype, data, nothing)
function TensorArray(n::Integer; dtype::Type=Float64, clear_after_read::Bool=true, element_shape=nothing)
    n >= 0 || invalid("TensorArray: size must be >= 0, got $n")
    element_shape === nothing && return TensorArray(Int(n), dtype, nothing)
    element_shape isa Union{AbstractVector,Tuple} && all(d -> d isa Integer && d >= 0, element_shape) ||
        invalid("TensorArray: element_shape must be a vector of sizes >= 0, got $(repr(element_shape))")
    return TensorArray(Int(n), dtype, filled_in(get_default_graph(), dtype, (n, element_shape...), 0))
end
TensorArray(n::Integer, dtype::Type; kwargs...) = TensorArray(n; dtype=dtype, kwargs...)

Base.size(ta::TensorArray) = ta.n
Base.length(ta::TensorArray) = ta.n

# 0-based Int64 scalar tensor of the 1-based position `i` (an Int or an Int scalar tensor),
# in the graph of `ta`'s elements.
function ta_index(ta::TensorArray, i, fname)
    if i isa Integer
        1 <= i <= ta.n || invalid("TensorArray $fname: index $i is out of bounds for a TensorArray of size $(ta.n)")
        return constant_in(getfield(ta.data, :graph), Int64(i - 1))
    end
    i isa Tensor && i.dtype in (Int32, Int64) && ndims(i) == 0 ||
        invalid("TensorArray $fname: the index must be an integer or an Int scalar tensor, got $(typeof(i))")
    return cast(i, Int64) - 1
end

"""`write(ta::TensorArray, i, v)`: `ta` with element `i` (1-based) set to `v` (ADCME); a `v` with an unknown dimension raises an `OxiflowError` (UnimplementedError)."""
function Base.write(ta::TensorArray, i, v)
    val = v isa Tensor ? v : constant(v; dtype=ta.dtype)
    val.dtype == ta.dtype || invalid("TensorArray write: a $(val.dtype) value into a $(ta.dtype) TensorArray")
    known_size(val, "TensorArray write")
    ta.probe !== nothing && ta.probe[] === nothing && (ta.probe[] = size(val))
    data = ta.data === nothing ? filled_in(getfield(val, :graph), ta.dtype, (ta.n, size(val)...), 0) : ta.data
    size(data)[2:end] == size(val) ||
        invalid("TensorArray write: element of size $(size(val)) into a TensorArray of elements of size $(size(data)[2:end])")
    idx = reshape(ta_index(TensorArray(ta.n, ta.dtype, data), i, "write"), [1, 1])
    row = reshape(val, [1, size(val)...])
    return TensorArray(ta.n, ta.dtype, add_op("TensorScatterUpdate", Tensor[data, idx, row]))
end

"""`read(ta::TensorArray, i)`: element `i` (1-based) of `ta` (ADCME)."""
function Base.read(ta::TensorArray, i)
    if ta.data === nothing && ta.probe !== nothing && ta.probe[] !== nothing
        # while_loop's first pass: an element of the size written so far (the pass is discarded)
        return constant(zeros(ta.dtype, ta.probe[]...))
    end
    ta.data === nothing && invalid("TensorArray read: nothing was written to this TensorArray (its element shape is unknown)")
    return add_op("GatherV2", Tensor[ta.data, ta_index(ta, i, "read")])
end

"""`stack(ta::TensorArray)`: all elements as one tensor of size `(n, element size...)` (ADCME)."""
function stack(ta::TensorArray)
    ta.data === nothing && invalid("TensorArray stack: nothing was written to this TensorArray (its element shape is unknown)")
    return ta.data
end

"""`unstack(ta::TensorArray, t)`: a TensorArray holding the rows `t[i, ...]` of `t` (TF's `TensorArray.unstack`); a `t` with an unknown dimension raises an `OxiflowError` (UnimplementedError)."""
function unstack(ta::TensorArray, t)
    x = t isa Tensor ? t : constant(t; dtype=ta.dtype)
    known_size(x, "TensorArray unstack")
    (ndims(x) >= 1 && size(x, 1) == ta.n) || invalid("TensorArray unstack: a tensor of size $(size(x)) into a TensorArray of size $(ta.n)")
    return TensorArray(ta.n, ta.dtype, cast(x, ta.dtype))
end

# ---------------------------------------------------------------- while_loop

# Loop variable `k` as a tensor (a TensorArray as its data, a Julia value as a constant).
function loop_tensor(v, k)
    if v isa TensorArray
        v.data === nothing && invalid("while_loop: TensorArray loop variable $k has no element shape yet; write an element before the loop, give element_shape, or write it in body")
        return v.data
    end
    v isa Tensor && return v
    v isa Union{Number,AbstractArray} && return constant(v)
    invalid("while_loop: loop variable $k is a $(typeof(v)), not a tensor, TensorArray or value")
end
# `vars` with each TensorArray that has no element shape yet made one of zeros, of the size
# of the first element `body` writes to it: found by calling `body` once in a builder that is
# then discarded (TF's TensorArray learns its element shape from the first write too).
function shape_tensor_arrays(body, vars)
    outer = isempty(FUNCTION_STACK) ? get_default_graph() : FUNCTION_STACK[end].graph
    for v in vars
        v isa Tensor && isempty(FUNCTION_STACK) && (outer = getfield(v, :graph); break)
    end
    probes = Dict{Int,Base.RefValue{Any}}()
    with_builder(outer) do b
        args = Any[]
        for (k, v) in enumerate(vars)
            if v isa TensorArray && v.data === nothing
                probes[k] = Ref{Any}(nothing)
                push!(args, TensorArray(v.n, v.dtype, nothing, probes[k]))
            else
                push!(args, as_loop_var(v, builder_placeholder(b, loop_tensor(v, k), "probe")))
            end
        end
        body(args...)
    end
    out = copy(vars)
    for (k, r) in probes
        r[] === nothing && invalid("while_loop: TensorArray loop variable $k has no element shape and body writes nothing to it; write an element before the loop or give element_shape")
        out[k] = TensorArray(vars[k].n, vars[k].dtype, constant_in(outer, zeros(vars[k].dtype, vars[k].n, r[]...)))
    end
    return out
end

# `t` in the form of loop variable `like` (a TensorArray again where `like` was one).
as_loop_var(like, t::Tensor) = like isa TensorArray ? TensorArray(like.n, like.dtype, t) : t

"""
    while_loop(condition, body, loop_vars; parallel_iterations=10, back_prop=true,
               maximum_iterations=nothing, name=nothing)

ADCME's and TF's `while_loop` (TF2's functional `While` op): starting from `loop_vars` (a
vector or tuple of tensors, numbers, arrays or `TensorArray`s), while `condition(vars...)`
(a Bool scalar tensor) is true and fewer than `maximum_iterations` (a Julia integer; a
negative one runs no iteration, as in TF) iterations ran, replaces
the variables with `body(vars...)`; returns their final values as a tuple (one value when
`loop_vars` is a single tensor). `body` returns as many values as there are loop variables,
each with the dtype and shape of its variable (an `OxiflowError` names `While` and the
variable otherwise). `condition` and `body` may use any tensor of the enclosing graph; they
may not create or assign variables.

Differentiable with respect to the initial values and the tensors the loop uses: the
gradient runs the loop again, keeping each iteration's values, then the body's gradient
backwards (`WhileGrad`). Second derivatives work (`WhileGradGrad`, the reverse of the
gradient's two sweeps); a third derivative is an error naming `WhileGradGrad`.
`back_prop=false` stops gradients at the outputs; `parallel_iterations` is accepted and
ignored (iterations run one after another). The loop runs as one step on its device; on a
GPU (TF places the loop there, under `@gpu` or with no device asked for) its control runs on
the host and each op of `condition` and `body` on the GPU when it has a GPU kernel for its
dtypes (Int32 counters stay on the host); `run_profile` records each iteration's ops inside it
(`<loop>/body/<op>`, with the iteration). Loop variables and used tensors may
have unknown dimensions (a batch fed at run time); a loop variable whose size changes from
one iteration to the next is an error naming it when the loop runs.
"""
function while_loop(condition, body, loop_vars; parallel_iterations::Integer=10, back_prop::Bool=true,
                    maximum_iterations=nothing, name=nothing)
    single = loop_vars isa Union{Tensor,TensorArray}
    vars0 = single ? Any[loop_vars] : collect(Any, loop_vars)
    isempty(vars0) && invalid("while_loop: no loop variables")
    any(v -> v isa TensorArray && v.data === nothing, vars0) && (vars0 = shape_tensor_arrays(body, vars0))
    flat0 = Tensor[loop_tensor(v, k) for (k, v) in enumerate(vars0)]
    isempty(FUNCTION_STACK) || (flat0 = Tensor[capture(t) for t in flat0])
    outer = isempty(FUNCTION_STACK) ? getfield(flat0[1], :graph) : FUNCTION_STACK[end].graph
    for t in flat0
        getfield(t, :graph) === outer || invalid("while_loop: loop variables come from different graphs (was reset_default_graph called in between?)")
    end
    # builds `f(vars...)` in a new function graph whose first inputs are the loop variables;
    # `finish(b, out)` turns its result into tensors of that graph while the builder is open
    function build(f, finish)
        b, (ps, outs) = with_builder(outer) do b
            ps = Tensor[builder_placeholder(b, t, "loop_var") for t in flat0]
            ps, finish(f((as_loop_var(v, p) for (v, p) in zip(vars0, ps))...))
        end
        return b, ps, outs
    end
    cb, cps, cout = build(condition, c -> Tensor[c isa Bool ? constant(c) : (c isa Tensor ? capture(c) :
        invalid("while_loop: condition returned a $(typeof(c)), not a Bool scalar tensor"))])
    bb, bps, bout = build(body, r -> begin
        rs = r isa Union{Tuple,AbstractVector} ? collect(Any, r) : Any[r]
        length(rs) == length(vars0) || invalid("while_loop: body returned $(length(rs)) values for $(length(vars0)) loop variables")
        Tensor[v isa TensorArray ? capture(loop_tensor(v, k)) :
               (v isa Tensor ? capture(v) : constant(v; dtype=flat0[k].dtype)) for (k, v) in enumerate(rs)]
    end)
    # captured tensors become loop variables that body passes through
    caps, (ccap, bcap) = shared_captures(cb, bb)
    cond_f = FuncAttr(cb.graph, [cps; ccap], cout)
    body_f = FuncAttr(bb.graph, [bps; bcap], [bout; bcap])
    maximum_iterations === nothing || (maximum_iterations isa Integer && !(maximum_iterations isa Bool)) ||
        invalid("while_loop: maximum_iterations must be a Julia integer, got $(repr(maximum_iterations))")
    # TF ands `i < maximum_iterations` into the condition: a negative limit runs no iteration
    attrs = maximum_iterations === nothing ? () : ((:maximum_iterations, max(Int(maximum_iterations), 0)),)
    node = GC.@preserve cond_f body_f add_op("While", Tensor[flat0; caps]; name=name, cond=cond_f, body=body_f, attrs...)
    g = getfield(node, :graph)
    outs = Any[as_loop_var(v, (t = Tensor(g, getfield(node, :node), Int32(k - 1)); back_prop ? t : independent(t)))
               for (k, v) in enumerate(vars0)]
    return single ? outs[1] : Tuple(outs)
end

# ---------------------------------------------------------------- map

"""
    map(f, t::Tensor; dtype=nothing)
    map(f, ts::Vector{Tensor}; dtype=nothing)

ADCME's `map` (TF's `tf.map_fn`): `f` applied to each slice `t[i, ...]` along the first
dimension, the results stacked into a tensor whose first dimension is `size(t, 1)`. With a
vector of tensors (equal first dimensions) `f` gets a vector of their slices. `f` returns a
tensor (or a number) of the same size for every slice; `dtype` is accepted for ADCME's
programs (the result's dtype is what `f` returns). Built as a `while_loop` over the slices
with a `TensorArray`, so it is differentiable; `f` may use other tensors of the graph.
The tensors need every dimension known (the loop runs `size(t, 1)` times); an unknown one
raises an `OxiflowError` (UnimplementedError).
"""
function Base.map(f::Function, t::Tensor; dtype=nothing)
    ndims(t) >= 1 || invalid("map: needs a tensor of rank >= 1, got a scalar")
    return map_slices(f, Tensor[t], false)
end
function Base.map(f::Function, ts::AbstractVector{<:Tensor}; dtype=nothing)
    isempty(ts) && invalid("map: no tensors")
    n = size(ts[1], 1)
    all(t -> ndims(t) >= 1 && size(t, 1) == n, ts) ||
        invalid("map: the tensors' first dimensions differ: $(join((size(t) for t in ts), ", "))")
    return map_slices(f, Vector{Tensor}(ts), true)
end

"""
    pmap(f, t::Tensor)
    pmap(f, ts::Vector{Tensor})

ADCME's `pmap`: [`map`](@ref) for an `f` whose iterations do not depend on each other (ADCME
builds it as `tf.map_fn` with parallel iterations); the result is `map`'s. Oxiflow's
`while_loop` runs the iterations one after another, and the ops of one iteration in
parallel on the executor's pool.
"""
pmap(f::Function, t::Union{Tensor,AbstractVector{<:Tensor}}) = map(f, t)

"""
    pmap(f, r, x)

ADCME's three-argument `pmap`: `f` gets, for each `k`, the vector `[r[k], x[k, ...]]` (with a
vector of tensors `x`, `[r[k], x₁[k, ...], x₂[k, ...], ...]`), `r` an integer range or vector
(an Int64 tensor of its values) or an Int tensor. `pmap(f, r, Tensor[])` maps over `r` alone.
"""
function pmap(f::Function, r::Union{AbstractVector{<:Integer},Tensor}, x::Union{Tensor,AbstractVector{<:Tensor}})
    ipt = r isa Tensor ? r : constant(collect(Int64, r))
    x isa Tensor && return map(f, Tensor[ipt, x])
    isempty(x) && return map(f, ipt)
    return map(f, Tensor[ipt; x])
end

function map_slices(f, ts::Vector{Tensor}, many::Bool)
    foreach(t -> known_size(t, "map"), ts)
    n = size(ts[1], 1)
    slice(i) = [add_op("GatherV2", Tensor[t, i]) for t in ts]
    call(xs) = (r = many ? f(xs) : f(xs[1]); r isa Tensor ? r : constant(r))
    # the size and dtype of f's result, from a throwaway build on placeholders of a slice
    outer = isempty(FUNCTION_STACK) ? getfield(ts[1], :graph) : FUNCTION_STACK[end].graph
    _, probe = with_builder(b -> call([builder_placeholder(b, t.dtype, size(t)[2:end], "slice") for t in ts]), outer)
    n == 0 && invalid("map: the tensors have no slices (first dimension 0)")
    ta = TensorArray(n; dtype=probe.dtype, element_shape=size(probe))
    _, out = while_loop((i, ta) -> i < n, (i, ta) -> (i + 1, write(ta, i + 1, call(slice(i)))), [constant(0), ta])
    return stack(out)
end
