# ADCME's fully connected networks (ADCME.jl src/layers.jl): `fc`/`ae` from a weight vector θ
# or from variables made under a scope, `fc_num`/`ae_num`, `fc_init`/`ae_init`, `dense` (TF's
# `tf.contrib.layers.fully_connected`) and the activations they take by name (ADCME's
# `swish`, `hard_swish`, ... in src/ops.jl). All are composites of the engine's ops (`MatMul`,
# `AddV2`, `StridedSlice`, `Reshape`, the activation), so gradients of any order come from
# those ops' gradients, and a layer's product, bias and activation fuse into one
# `_FusedMatMul` where the engine's fusion pass applies.

export ae, fc, fcx, ae_num, fc_num, ae_init, fc_init, dense, ae_to_code, fc_to_code,
       swish, hard_swish, hard_sigmoid, concat_relu, concat_elu, concat_hard_swish

"""
    swish(x), hard_swish(x), hard_sigmoid(x), concat_relu(x), concat_elu(x), concat_hard_swish(x)

ADCME's activations (src/ops.jl), elementwise on float tensors:
`swish(x) = x .* sigmoid(x)`; `hard_swish(x) = x .* sigmoid(100x)` (ADCME's definition, a
smooth stand-in for `x .* (x .> 0)`, not Keras' `x * relu6(x + 3) / 6`);
`hard_sigmoid(x) = min(1, max(0, x + 0.5))`; the `concat_` forms apply `relu`, `elu` or
`hard_swish` to `[x -x]`, so a `n×k` input gives `n×2k`. ADCME writes `x * sigmoid(x)`,
which its `*` makes a matrix product for matrices, so that its `swish` fails in a layer: a
bug not copied. The `concat_` forms double a layer's width: use them with [`dense`](@ref) or
the scope form of [`fc`](@ref), whose weights take any input width, not with a weight
vector θ.
"""
swish(x::Tensor) = x .* sigmoid(x)
hard_swish(x::Tensor) = x .* sigmoid(100 * x)
hard_sigmoid(x::Tensor) = min(max(x + 0.5, 0), 1)
concat_relu(x::Tensor) = relu([x -x])
concat_elu(x::Tensor) = elu([x -x])
concat_hard_swish(x::Tensor) = hard_swish([x -x])
@doc (@doc swish) hard_swish
@doc (@doc swish) hard_sigmoid
@doc (@doc swish) concat_relu
@doc (@doc swish) concat_elu
@doc (@doc swish) concat_hard_swish

# ADCME's `_string2fn` (its `fourier` is left out: it repeats the same sin and cos columns)
const ACTIVATIONS = Dict{String,Function}(
    "relu" => relu, "tanh" => tanh, "sigmoid" => sigmoid, "leakyrelu" => leaky_relu,
    "leaky_relu" => leaky_relu, "relu6" => relu6, "softmax" => softmax, "softplus" => softplus,
    "selu" => selu, "elu" => elu, "concat_elu" => concat_elu, "concat_relu" => concat_relu,
    "hard_sigmoid" => hard_sigmoid, "swish" => swish, "hard_swish" => hard_swish,
    "concat_hard_swish" => concat_hard_swish, "sin" => sin)

"""
    activation_function(a) -> Function

ADCME's `get_activation_function`: `nothing` gives the identity, a function itself, a name
(any case) one of `ACTIVATIONS`; an unknown name raises an `OxiflowError` listing the names.
"""
function activation_function(a)
    a === nothing && return identity
    a isa Function && return a
    a isa AbstractString || invalid("activation must be a name, a function or nothing, got $(repr(a))")
    f = get(ACTIVATIONS, lowercase(a), nothing)
    f === nothing && invalid("Activation function $a is not supported, available activation functions: $(join(sort(collect(keys(ACTIVATIONS))), ", ")).")
    return f
end

"""
    dense(inputs, units; activation=nothing)

TF 1.15's `tf.contrib.layers.fully_connected(inputs, units, activation_fn=activation)`, as
ADCME's `dense`: `activation(inputs * W + b)` for an `n×k` (Float32 or Float64) tensor or
Julia matrix `inputs`, with variables `W` (`k×units`, TF's default Glorot-uniform
initializer) and `b` (`units`, zeros) made by `get_variable` as `<scope>/weights` and
`<scope>/biases`. `<scope>` is TF's default name, `fully_connected`, `fully_connected_1`, ...
(unique under the open variable scopes, counted again each time an enclosing
`variable_scope` is opened, so a network built twice under one named scope with `AUTO_REUSE`
shares its variables, as in TF). `activation` as in [`fc`](@ref). Errors (`OxiflowError`): an
input that is not a Float32 or Float64 matrix, or whose number of columns is unknown.
"""
function dense(inputs, units::Integer; activation=nothing)
    act = activation_function(activation)
    x = convert_to_tensor(inputs)
    ndims(x) == 2 || invalid("dense: the inputs must be a matrix (samples × features), got size $(size(x))")
    k = size(x, 2)
    k === nothing && invalid("dense: the number of columns of $(x.name) (size $(size(x))) must be known to make its weights")
    units >= 1 || invalid("dense: units must be positive, got $units")
    T = eltype(x)
    T in (Float32, Float64) || invalid("dense: the inputs must be Float32 or Float64, got $T")
    scope = unique_scope_name("fully_connected")
    return variable_scope(scope; reuse=nothing) do
        W = get_variable("weights"; shape=(k, Int(units)), dtype=T)
        b = get_variable("biases"; initializer=zeros(T, Int(units)))
        act(x * W + b)
    end
end

"""
    ae_num(dims), fc_num(dims)

The number of weights and biases of a fully connected network with layer widths `dims`
(input width first, output width last): `sum(m * n + n)` over consecutive widths `(m, n)`,
as ADCME's `ae_num`. Errors (`OxiflowError`): fewer than two widths, or one below 1.
"""
function ae_num(dims::AbstractVector{<:Integer})
    length(dims) >= 2 || invalid("ae_num: give at least the input and output widths, got $(collect(dims))")
    all(>=(1), dims) || invalid("ae_num: layer widths must be positive, got $(collect(dims))")
    return sum(dims[i] * dims[i+1] + dims[i+1] for i in 1:length(dims)-1)
end

"""
    ae_init(dims; T=Float64, method="xavier"), fc_init(dims; ...)

A weight vector for [`fc`](@ref)`(x, dims[2:end], θ)` as ADCME's `ae_init`: for each layer
`(m, n)` the `m*n` weights (read by `fc` row by row as an `m×n` matrix), then `n` zero
biases. Weights are drawn from Julia's global RNG: `"xavier"` N(0, 1/m), `"xavier_normal"`
N(0, 2/(m+n)), `"he"` N(0, 2/m) (variances), `"xavier_uniform"` U(-a, a) with
`a = sqrt(6/(m+n))` (Glorot's uniform; ADCME's draws from [0, a), a bug not copied). `T` is
Float64 or Float32. Errors (`OxiflowError`): an unknown method, or bad `dims` (see [`ae_num`](@ref)).
"""
function ae_init(dims::AbstractVector{<:Integer}; T::Type=Float64, method::AbstractString="xavier")
    T in (Float32, Float64) || invalid("ae_init: T must be Float32 or Float64, got $T")
    method in ("xavier", "xavier_normal", "xavier_uniform", "he") ||
        invalid("ae_init: method $(repr(method)) not understood; use \"xavier\", \"xavier_normal\", \"xavier_uniform\" or \"he\"")
    W = zeros(T, ae_num(dims))
    offset = 0
    for i in 1:length(dims)-1
        m, n = dims[i], dims[i+1]
        r = offset+1:offset+m*n
        W[r] = method == "xavier" ? randn(m * n) * sqrt(1 / m) :
               method == "xavier_normal" ? randn(m * n) * sqrt(2 / (m + n)) :
               method == "he" ? randn(m * n) * sqrt(2 / m) :
               (2 .* rand(m * n) .- 1) .* sqrt(6 / (m + n))
        offset += m * n + n
    end
    return W
end

"""
    fc(x, dims, θ; activation="tanh"), ae(x, dims, θ; activation="tanh")
    fc(x, dims, scope="default"; activation="tanh"), ae(...)

ADCME's fully connected network. `x` is an `n×k` tensor or Julia array (a vector counts as
one column, and then a one-column output is returned as a vector); `dims` are the widths of
the hidden layers and the output. Each layer is `x * W + b`, followed by `activation` on
all but the last: a name (`"tanh"`, `"relu"`, `"sigmoid"`, `"leaky_relu"`, `"relu6"`,
`"softplus"`, `"selu"`, `"elu"`, `"softmax"`, `"swish"`, `"hard_swish"`, `"hard_sigmoid"`,
`"sin"`, the `"concat_"` forms of [`swish`](@ref)), a function, or `nothing`.

- With a weight vector `θ` (a tensor, e.g. a `Variable`, or a Julia vector, of
  `ae_num([k; dims])` elements, dtype that of `x`): layer `(m, n)` takes the next `m*n`
  elements as `W`, row by row (ADCME's `reshape(θ[...], (m, n))`), then `n` for `b`.
- With a scope name: each layer is [`dense`](@ref) under `variable_scope(scope)` with
  `AUTO_REUSE`, so calling `fc` again with the same scope reuses the same variables.

Returns an `n×dims[end]` tensor. Errors (`OxiflowError`): a `θ` whose length is not
`ae_num([k; dims])` (ADCME's "the weights and configuration does not match. Required ...
but given ..."; for a `θ` of unknown length, a placeholder, when the graph runs, naming the
node `fc_weights_of_length_<n>`), a `θ` of another dtype than `x`, an unknown number of
columns, an unknown activation.
"""
function ae(x, dims::AbstractVector{<:Integer}, θ::Union{Tensor,AbstractVector{<:Real}}; activation="tanh")
    act = activation_function(activation)
    x, vector_in = fc_input(x)
    θ = θ isa Tensor ? θ : constant(θ; dtype=eltype(x))
    ndims(θ) == 1 || invalid("fc: θ must be a vector, got size $(size(θ))")
    eltype(θ) == eltype(x) || invalid("fc: θ ($(eltype(θ))) and x ($(eltype(x))) must have the same dtype")
    widths = [size(x, 2); collect(Int, dims)]
    need = ae_num(widths)
    size(θ, 1) === nothing || size(θ, 1) == need ||
        invalid("fc: the weights and configuration does not match. Required $need but given $(size(θ, 1)) (layer widths $widths).")
    # a θ of unknown length (a placeholder) is checked when the graph runs: a Reshape to
    # its required length fails, naming the node, rather than the layers reading only part
    size(θ, 1) === nothing && (θ = add_op("Reshape", [θ]; name=unique_layer_name("fc_weights_of_length_$need"), shape=[need]))
    net, offset = x, 0
    for i in 1:length(widths)-1
        m, n = widths[i], widths[i+1]
        W = reshape(θ[offset+1:offset+m*n], (m, n))
        net = net * W + θ[offset+m*n+1:offset+m*n+n]
        i < length(widths) - 1 && (net = act(net))
        offset += m * n + n
    end
    return fc_output(net, vector_in)
end

function ae(x, dims::AbstractVector{<:Integer}, scope::AbstractString="default"; activation="tanh")
    activation_function(activation)           # an unknown name fails before any layer is made
    isempty(dims) && invalid("fc: give at least the output width")
    x, vector_in = fc_input(x)
    net = variable_scope(scope; reuse=AUTO_REUSE) do
        net = x
        for (i, n) in enumerate(dims)
            net = dense(net, n; activation=i < length(dims) ? activation : nothing)
        end
        net
    end
    return fc_output(net, vector_in)
end

# `x` as a float matrix, and whether it was a vector (ADCME reshapes it to one column)
function fc_input(x)
    x = convert_to_tensor(x)
    eltype(x) in (Float32, Float64) || invalid("fc: x must be Float32 or Float64, got $(eltype(x))")
    vector_in = ndims(x) == 1
    vector_in && (x = reshape(x, :, 1))
    ndims(x) == 2 || invalid("fc: x must be a vector or a matrix (samples × features), got size $(size(x))")
    size(x, 2) === nothing && invalid("fc: the number of columns of $(x.name) (size $(size(x))) must be known")
    return x, vector_in
end

fc_output(net, vector_in) = vector_in && size(net, 2) == 1 ? squeeze(net; dims=2) : net

const fc = ae
const fc_num = ae_num
const fc_init = ae_init

"""
    fcx(x, dims, θ; activation="tanh") -> (y, dy)

ADCME's `fcx`: the network `y = fc(x, dims, θ)` (`m×dims[end]` for an `m×n` float matrix
`x`, a tensor or Julia array) and its sensitivity per sample, `dy[i, k, j] = ∂y[i, k]/∂x[i, j]`
(`m × dims[end] × n`; sample `i`'s output depends on sample `i`'s input only). ADCME
computes both in a compiled plugin; here `dy[:, k, :]` is `gradients(sum(y[:, k]), x)`, one
backward pass per output column, stacked, so `dy` is differentiable too (in `θ` and `x`).
Errors (`OxiflowError`): as [`fc`](@ref); `x` must be a matrix of known size.
"""
function fcx(x, dims::AbstractVector{<:Integer}, θ::Union{Tensor,AbstractVector{<:Real}}; activation="tanh")
    xt = convert_to_tensor(x)
    ndims(xt) == 2 || invalid("fcx: x must be a matrix (samples × features), got size $(size(xt))")
    known_size(xt, "fcx")
    y = ae(xt, dims, θ; activation=activation)
    cols = Tensor[]
    for k in 1:dims[end]
        g = gradients(sum(y[:, k]), xt)
        push!(cols, g === nothing ? zeros_like(xt) : g)
    end
    return y, stack(cols; dims=2)
end

"""
    ae_to_code(file, scope="default"; activation="tanh"), fc_to_code(...)

ADCME's `ae_to_code`: Julia source text that, evaluated (`eval(Meta.parse(s))`), defines
`nn<scope>(x)`, the network `fc(x, dims, scope)` whose variables were saved to the .mat file
`file` by [`save`](@ref), with no graph: `x * W + b` per layer and `activation` between
layers, on a Julia matrix (samples × features) or a tensor. The weights are read from
`file` when the text is evaluated ([`Oxiflow.matread`](@ref)). Errors (`OxiflowError`): no
`<scope>/fully_connected/weights:0` in `file`, or a `file` that is not a .mat file.
"""
function ae_to_code(file::AbstractString, scope::AbstractString="default"; activation::AbstractString="tanh")
    d = matread(file)
    key(i, what) = mat_name("$scope/fully_connected$(i == 0 ? "" : "_$i")/$what:0")
    haskey(d, key(0, "weights")) || invalid("ae_to_code: $file has no weights of a network in scope '$scope' (no $(key(0, "weights")))")
    body = IOBuffer()
    i = 0
    while haskey(d, key(i, "weights"))
        i > 0 && println(body, "    net = net isa Array ? $activation.(net) : $activation(net)")
        println(body, "    W$i = aedict$scope[$(repr(key(i, "weights")))]")
        println(body, "    b$i = vec(collect(aedict$scope[$(repr(key(i, "biases")))]))")
        println(body, "    net = net isa Array ? net * W$i .+ b$i' : net * W$i + b$i")
        i += 1
    end
    return "let aedict$scope = Oxiflow.matread($(repr(String(file))))\n  global nn$scope\n  function nn$scope(net)\n" *
           String(take!(body)) * "    return net\n  end\nend\n"
end
const fc_to_code = ae_to_code
