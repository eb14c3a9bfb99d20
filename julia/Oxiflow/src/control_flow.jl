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
    p = Tensor(b.graph, oxf_placeholder(b.graph, dtype_code(outer_t.dtype), Int64[size(outer_t)...], "capture"), 0)
    b.captures[key] = (outer_t, p)
    push!(b.order, key)
    return p
end

# Calls `f()` with a new builder open over `outer`; returns the builder and the branch's
# outputs as tensors of its graph, and whether `f` returned one value (not a tuple/vector).
function build_function(f, outer::Graph, what)
    b = FunctionBuilder(Graph(), outer, Dict{Tuple{Int64,Int32},Tuple{Tensor,Tensor}}(), Tuple{Int64,Int32}[])
    push!(FUNCTION_STACK, b)
    try
        out = f()
        single = !(out isa Union{Tuple,AbstractVector})
        vals = single ? (out,) : Tuple(out)
        isempty(vals) && invalid("cond: $what returned no values")
        outs = Tensor[v isa Tensor ? capture(v) :
                      (v isa Union{Number,AbstractArray} ? constant(v) : invalid("cond: $what returned a $(typeof(v)), not a tensor or value"))
                      for v in vals]
        return b, outs, single
    finally
        pop!(FUNCTION_STACK)
    end
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
called. The branches run on the CPU, as one step (`If` has no GPU kernel: on a GPU it needs
soft placement).
"""
cond(pred::Bool, true_fn::Function, false_fn::Function; name=nothing) = pred ? true_fn() : false_fn()
function cond(pred::Tensor, true_fn, false_fn; name=nothing)
    (pred.dtype == Bool && ndims(pred) == 0) || invalid("cond: pred must be a Bool scalar, got $(pred.dtype) of size $(size(pred))")
    outer = isempty(FUNCTION_STACK) ? getfield(pred, :graph) : FUNCTION_STACK[end].graph
    tb, tout, single = build_function(true_fn, outer, "true_fn")
    fb, fout, _ = build_function(false_fn, outer, "false_fn")
    length(tout) == length(fout) ||
        invalid("cond: true_fn returned $(length(tout)) values, false_fn $(length(fout))")
    # every captured tensor is an input of both branches (unused ones as plain placeholders)
    keys_ = unique(vcat(tb.order, fb.order))
    outer_inputs = Tensor[(haskey(tb.captures, k) ? tb.captures[k] : fb.captures[k])[1] for k in keys_]
    branch_inputs(b) = Tensor[haskey(b.captures, k) ? b.captures[k][2] :
                              Tensor(b.graph, oxf_placeholder(b.graph, dtype_code(x.dtype), Int64[size(x)...], "unused"), 0)
                              for (k, x) in zip(keys_, outer_inputs)]
    then_f = FuncAttr(tb.graph, branch_inputs(tb), tout)
    else_f = FuncAttr(fb.graph, branch_inputs(fb), fout)
    node = GC.@preserve then_f else_f add_op("If", Tensor[pred; outer_inputs]; name=name, then_branch=then_f, else_branch=else_f)
    g = getfield(node, :graph)
    outs = [Tensor(g, getfield(node, :node), Int32(k - 1)) for k in 1:length(tout)]
    return single ? outs[1] : Tuple(outs)
end
