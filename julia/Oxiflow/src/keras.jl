# ADCME's Keras-style layers (ADCME.jl src/layers.jl, which wraps `tf.keras.layers`):
# `Dense`, `dropout`, `BatchNormalization`, `Resnet1D`, and the training switch they read,
# `Oxiflow.options.training.training` (ADCME's `ADCME.options`, src/options.jl). A layer is a
# callable object that makes its variables at its first call, when the input's width and
# dtype are known, and reuses them at every later call, as Keras layers do. All are built from
# the engine's ops (`MatMul`, `AddV2`, `RandomUniform`, `SelectV2`, batch normalization's),
# so gradients come from those ops' gradients.

export Dense, dropout, BatchNormalization, ResnetBlock, Resnet1D

# A layer's variables belong to the graph of its first call.
function check_layer_graph(name, v::Tensor)
    getfield(v, :graph) === get_default_graph() ||
        invalid("layer $name was built in an earlier graph (before reset_default_graph); make a new layer")
end

"""
    Dense(units, activation=nothing; use_bias=true, name=nothing)

ADCME's `Dense` (TF 1.15's `tf.keras.layers.Dense`): a callable layer; `layer(x)` of an
`n×k` Float32 or Float64 tensor or Julia matrix is `activation(x * kernel + bias)`, `n×units`.
The variables are made at the first call: `<name>/kernel` (`k×units`, Glorot uniform, as
Keras) and `<name>/bias` (`units`, zeros), in the input's dtype; later calls reuse them and
must give the same width and dtype. The name is Keras' default, `dense`, `dense_1`, ...
counted per graph. `activation` as in [`fc`](@ref) (a name, a function or `nothing`).
Errors (`OxiflowError`, with Keras' wording): an input that is not a matrix, an unknown or
different width, an integer dtype.
"""
mutable struct Dense
    units::Int
    activation::Function
    use_bias::Bool
    name::String
    kernel::Union{Nothing,Tensor}
    bias::Union{Nothing,Tensor}
end

function Dense(units::Integer, activation=nothing; use_bias::Bool=true, name=nothing)
    units >= 1 || invalid("Dense: units must be positive, got $units")
    return Dense(Int(units), activation_function(activation), use_bias,
                 name === nothing ? unique_layer_name("dense") : String(name), nothing, nothing)
end

function (o::Dense)(inputs)
    x = convert_to_tensor(inputs)
    ndims(x) == 2 || invalid("Input 0 of layer $(o.name) is incompatible with the layer: expected a matrix (samples × features), found shape $(size(x))")
    T, k = x.dtype, size(x, 2)
    T in (Float32, Float64) || invalid("layer $(o.name): the input must be Float32 or Float64, got $T")
    k === nothing && invalid("layer $(o.name): the last dimension of the input (shape $(size(x))) must be known to make its kernel")
    if o.kernel === nothing
        o.kernel = Variable(default_initial_value(T, (k, o.units)); name="$(o.name)/kernel")
        o.use_bias && (o.bias = Variable(zeros(T, o.units); name="$(o.name)/bias"))
    end
    W = o.kernel
    check_layer_graph(o.name, W)
    (size(W, 1) == k && W.dtype == T) ||
        invalid("Input 0 of layer $(o.name) is incompatible with the layer: expected axis -1 of input shape to have value $(size(W, 1)) ($(W.dtype)) but received input with shape $(size(x)) ($T)")
    return o.activation(o.use_bias ? x * W + o.bias : x * W)
end

Base.show(io::IO, o::Dense) = print(io, "<Dense $(o.name): $(o.units) units, activation $(o.activation)>")

"""
    dropout(x, rate, training=nothing; seed=nothing)

ADCME's `dropout` (TF 1.15's `tf.keras.layers.Dropout(rate)(x, training)`): when `training`
is true, each entry of `x` is zeroed with probability `rate` and the others are scaled by
`1/(1 - rate)` (TF's `nn.dropout`: kept where a `RandomUniform` draw is `>= rate`); when
false, `x` itself. `training` is a Bool, a scalar Bool tensor (chosen at run time,
`SelectV2`) or `nothing` for `Oxiflow.options.training.training`. `x` is a
Float32/Float64 tensor or Julia array of fully known shape (the draw needs it). Errors
(`OxiflowError`): `rate` outside [0, 1), an integer `x`, an unknown dimension.
"""
function dropout(x, rate::Real, training=nothing; seed=nothing)
    t = convert_to_tensor(x)
    T = t.dtype
    T in (Float32, Float64) || invalid("dropout: x must be Float32 or Float64, got $T")
    0 <= rate < 1 || invalid("dropout: rate must be in [0, 1), got $rate")
    flag = training === nothing ? options.training.training : training
    (flag isa Bool || (flag isa Tensor && flag.dtype == Bool && ndims(flag) == 0)) ||
        invalid("dropout: training must be a Bool or a scalar Bool tensor, got $(repr(flag))")
    (flag === false || rate == 0) && return t
    is_fully_defined(t) || unimplemented("dropout: $(t.name) has the unknown shape $(size(t)); the random mask needs every size")
    dropped = name_scope("dropout") do
        keep = uniform(size(t)...; dtype=T, seed=seed) >= rate
        t .* cast(keep, T) * convert(T, 1 / (1 - rate))
    end
    return flag === true ? dropped : if_else(flag, dropped, t)
end

"""
    BatchNormalization(dims=-1; momentum=0.99, epsilon=1e-3, center=true, scale=true)

ADCME's `BatchNormalization` (TF's `tf.keras.layers.BatchNormalization`): a callable layer,
`layer(x, training=Oxiflow.options.training.training)`, that normalizes each feature along
the 1-based dimension `dims` (-1: the last) with [`batch_normalization`](@ref), under the
name `batch_normalization`, `batch_normalization_1`, ...; its variables are made at the
first call and shared by later calls. ADCME casts Float64 inputs to Float32 and back around
Keras' layer; Oxiflow computes in the input's dtype.
"""
struct BatchNormalization
    dims::Int
    name::String
    kwargs::Dict{Symbol,Any}
end

BatchNormalization(dims::Integer=-1; kwargs...) =
    BatchNormalization(Int(dims), unique_layer_name("batch_normalization"), Dict{Symbol,Any}(kwargs))

(o::BatchNormalization)(x, training=options.training.training) =
    batch_normalization(convert_to_tensor(x); axis=o.dims, training=training, name=o.name, reuse=AUTO_REUSE, o.kwargs...)

Base.show(io::IO, o::BatchNormalization) = print(io, "<BatchNormalization $(o.name): normalization dim $(o.dims)>")

"""
    ResnetBlock(features; dropout_probability=0.0, use_batch_norm, activation="relu")

One residual block of [`Resnet1D`](@ref) (ADCME's, after bayesiains/nsf's `resnet.py`):
`x + L2(dropout(act(bn2(L1(act(bn1(x)))))))` with `L1`, `L2` [`Dense`](@ref) layers of
`features` units and the batch normalizations only when `use_batch_norm`. Callable.
"""
struct ResnetBlock
    use_batch_norm::Bool
    activation::Function
    linear_layers::Vector{Dense}
    bn_layers::Vector{BatchNormalization}
    dropout_probability::Float64
end

function ResnetBlock(features::Integer; dropout_probability::Real=0.0, use_batch_norm::Bool, activation="relu")
    bns = use_batch_norm ? [BatchNormalization(), BatchNormalization()] : BatchNormalization[]
    return ResnetBlock(use_batch_norm, activation_function(activation), [Dense(features), Dense(features)], bns,
                       Float64(dropout_probability))
end

function (res::ResnetBlock)(input)
    x = input
    res.use_batch_norm && (x = res.bn_layers[1](x))
    x = res.linear_layers[1](res.activation(x))
    res.use_batch_norm && (x = res.bn_layers[2](x))
    x = dropout(res.activation(x), res.dropout_probability, options.training.training)
    return res.linear_layers[2](x) + input
end

"""
    Resnet1D(out_features, hidden_features=20; num_blocks=2, activation="relu",
             dropout_probability=0.0, use_batch_norm=false, name=missing)

ADCME's 1-D residual network: a [`Dense`](@ref) layer to `hidden_features`, `num_blocks`
[`ResnetBlock`](@ref)s, a `Dense` layer to `out_features` (no activation: logits).
`resnet(x)` of an `n×k` input gives `n×out_features`, the same variables at every call. With
a `name`, the network is kept in `Oxiflow.STORAGE[name]` and a later call with that name
returns it, as ADCME does. ADCME's blocks ignore `activation` and always use ReLU; here the
blocks use `activation`.
"""
struct Resnet1D
    initial_layer::Dense
    blocks::Vector{ResnetBlock}
    final_layer::Dense
end

function Resnet1D(out_features::Integer, hidden_features::Integer=20; num_blocks::Integer=2, activation="relu",
                  dropout_probability::Real=0.0, use_batch_norm::Bool=false, name=missing)
    ismissing(name) || !haskey(STORAGE, name) || return STORAGE[name]
    initial = Dense(hidden_features)
    blocks = [ResnetBlock(hidden_features; dropout_probability=dropout_probability, use_batch_norm=use_batch_norm,
                          activation=activation) for _ in 1:num_blocks]
    res = Resnet1D(initial, blocks, Dense(out_features))
    ismissing(name) || (STORAGE[name] = res)
    return res
end

function (res::Resnet1D)(x)
    y = res.initial_layer(x)
    for b in res.blocks
        y = b(y)
    end
    return res.final_layer(y)
end

Base.show(io::IO, res::Resnet1D) =
    print(io, "<Resnet1D: $(res.initial_layer.units) hidden features, $(length(res.blocks)) blocks, $(res.final_layer.units) outputs>")
