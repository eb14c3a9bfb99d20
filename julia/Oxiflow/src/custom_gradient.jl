# Custom gradients: ADCME's `register(forward, backward)` and TF's `tf.custom_gradient`.
#
# As TF's `custom_gradient` in graph mode, the outputs pass through an `IdentityN` of
# (outputs..., inputs...) marked `_gradient_op_type`. The engine's backward pass stops at that
# node and `raw_gradients` (gradients.jl) calls the node's Julia builder with the gradients
# reaching its outputs; the gradients the builder returns go to the inputs, and the forward
# ops between them get none (the custom gradient replaces theirs).

const CUSTOM_GRADIENT_SERIAL = Ref(0)

# The outputs `ys` computed from the inputs `xs`, passed through a custom-gradient node whose
# gradient `grad(dys)` builds: `dys` has one entry per y (a tensor, or zeros for a float y
# that no gradient reached, or `nothing` for a non-float y); it returns the gradient of each
# x (a tensor, a Julia value converted to x's dtype, or `nothing`).
function custom_gradient_outputs(ys::Vector{Tensor}, xs::Vector{Tensor}, grad, who::AbstractString)
    isempty(ys) && invalid("$who: the forward function returned no tensors")
    CUSTOM_GRADIENT_SERIAL[] += 1
    out = add_op("IdentityN", vcat(ys, xs); _gradient_op_type="CustomGradient-$(CUSTOM_GRADIENT_SERIAL[])")
    g = getfield(out, :graph); node = getfield(out, :node)
    g.custom_grads[node] = (ys, xs, grad, who)
    return Tensor[Tensor(g, node, Int32(i - 1)) for i in 1:length(ys)]
end

# The gradients of the inputs of custom node `node` (called by `raw_gradients` when the
# engine's pass stops there): none for the forward outputs, the builder's for the xs.
function custom_input_grads(g::Graph, node::Int64, dys::Vector{Union{Tensor,Nothing}})
    entry = get(g.custom_grads, node, nothing)
    entry === nothing && unimplemented("gradients: $(oxf_node_name(g, node)) has a custom gradient whose Julia builder this graph does not hold")
    ys, xs, grad, who = entry
    m = length(ys)
    seeds = Union{Tensor,Nothing}[dy !== nothing ? dy : (y.dtype <: AbstractFloat ? zeros_like(y) : nothing) for (dy, y) in zip(dys[1:m], ys)]
    dxs = grad(seeds)
    length(dxs) == length(xs) || invalid("$who: the gradient function returned $(length(dxs)) gradients for $(length(xs)) inputs")
    supplied = Union{Nothing,Tuple{Int64,Int32}}[nothing for _ in 1:m]
    for (k, (dx, x)) in enumerate(zip(dxs, xs))
        push!(supplied, dx === nothing ? nothing : pair(checked_grad(dx, x, k, who)))
    end
    return supplied
end

# `dx` as the gradient of input `k`, `x`: a tensor of x's graph, dtype and (where known) shape.
function checked_grad(dx, x::Tensor, k::Integer, who)
    dx = dx isa Tensor ? dx : as_tensor(dx, x)
    getfield(dx, :graph) === getfield(x, :graph) || invalid("$who: the gradient for input $k belongs to another graph")
    (dx.dtype == x.dtype && shapes_compatible(size(dx), size(x))) ||
        invalid("$who: the gradient for input $k has dtype $(dx.dtype) and size $(size(dx)), but the input has dtype $(x.dtype) and size $(size(x))")
    return dx
end

# A gradient function's result as one entry per input: a tuple or a vector of tensors is a
# list, anything else (a tensor, a Julia array) the gradient of the only input.
function grad_list(r, n::Integer, who)
    list = (r isa Tuple || (r isa AbstractVector && !(eltype(r) <: Number))) ? collect(Any, r) : Any[r]
    length(list) == n || invalid("$who: the gradient function returned $(length(list)) gradients for $n inputs")
    return list
end

input_tensors(args) = Tensor[as_tensor(a) for a in args]

"""
    register(forward, backward; multiple=false) -> f

A function `f(args...)` that computes `forward(args...)` in the graph and differentiates it
with `backward` instead of through `forward`'s ops (ADCME's `register`, TF's
`tf.custom_gradient`). Arguments are converted to tensors (Julia arrays and numbers become
constants).

- `forward(x₁, …, xₙ)` builds and returns one tensor, or with `multiple=true` a tuple of `m`
  tensors.
- `backward(dy, y, x₁, …, xₙ)` (with `multiple=true`: `backward(dy…, y₁, …, yₘ, x₁, …, xₙ)`,
  one `dy` per float output) builds the gradient of each input from the gradient `dy`
  reaching each output: one tensor, or a tuple of `n`; `nothing` for an input that has none
  (a non-float one). A float output no gradient reached gets zeros.

`gradients` calls `backward` when it builds the gradient graph, in the scope
`gradients/IdentityN_grad` (colocated with the node under `colocate=true`). The result is
differentiable again (its `backward` ops have gradients), so Hessians work. Errors (an
`OxiflowError`): a gradient of the wrong count, dtype or size, naming the input; a
custom-gradient op inside a `while_loop` or `cond` body, whose gradient the engine builds
without Julia (UnimplementedError).

```julia
softplus = register(x -> log(1 + exp(x)), (dy, y, x) -> dy * (1 - 1 / exp(y)))
```
"""
function register(forward::Function, backward::Function; multiple::Bool=false)
    return function (args...)
        xs = input_tensors(args)
        out = forward(xs...)
        if !multiple && (out isa Tuple || (out isa AbstractVector && eltype(out) <: Tensor))
            invalid("register: forward returned $(length(out)) outputs; pass multiple=true")
        end
        ys = multiple ? Tensor[as_tensor(y) for y in out] : Tensor[as_tensor(out)]
        grad = function (dys)
            float_dys = [dy for (dy, y) in zip(dys, ys) if y.dtype <: AbstractFloat]
            r = multiple ? backward(float_dys..., ys..., xs...) : backward(float_dys[1], ys[1], xs...)
            return grad_list(r, length(xs), "register")
        end
        outs = custom_gradient_outputs(ys, xs, grad, "register")
        return multiple ? Tuple(outs) : outs[1]
    end
end

"""
    tf.custom_gradient(f) -> g

TF's `tf.custom_gradient`: `g(args...)` returns the `y` of `y, grad_fn = f(args...)`
(arguments converted to tensors), differentiated by `grad_fn(dy...)`, which gets one `dy`
per output of `y` (a tensor, or a tuple or vector of tensors) and returns the gradient of
each argument (one tensor, or a tuple; `nothing` for none). As [`register`](@ref), of which
this is TF's spelling.
"""
function tf_custom_gradient(f)
    return function (args...)
        xs = input_tensors(args)
        res = f(xs...)
        (res isa Tuple && length(res) == 2) || invalid("tf.custom_gradient: the function must return (y, grad_fn), got $(typeof(res))")
        y, grad_fn = res
        several = y isa Tuple || y isa AbstractVector{<:Tensor}
        ys = several ? Tensor[as_tensor(v) for v in y] : Tensor[as_tensor(y)]
        grad = dys -> grad_list(grad_fn(dys...), length(xs), "tf.custom_gradient")
        outs = custom_gradient_outputs(ys, xs, grad, "tf.custom_gradient")
        return several ? (y isa Tuple ? Tuple(outs) : outs) : outs[1]
    end
end
