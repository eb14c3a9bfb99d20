# 2-D convolution in three spellings, all on the engine's `Conv2D` op (NHWC input, HWIO
# filter; its gradients are `Conv2DBackpropInput` and `Conv2DBackpropFilter`):
# TF's `tf.nn.conv2d`, ADCME's `conv2d` (TF 1.15's `tf.contrib.layers.conv2d`) and ADCME's
# Keras-style `Conv2D` layer (`tf.keras.layers.Conv2D`). A Julia array `(samples, rows,
# cols, channels)` is an NHWC batch as it stands (ADCME's arrangement). ADCME's `Conv1D` and
# `Conv2DTranspose` layers are in conv_layers.jl.

export conv2d, Conv2D

# TF's strides: an Int, `(sh, sw)` or the four NHWC strides.
function conv_strides(s, fname)
    s isa Integer && return [1, Int(s), Int(s), 1]
    v = collect(Int, s)
    length(v) == 2 && return [1, v[1], v[2], 1]
    length(v) == 4 && return v
    invalid("$fname: strides must be an Int, 2 or 4 Ints, got $(repr(s))")
end

function kernel_hw(k, fname)
    k isa Integer && return (Int(k), Int(k))
    length(k) == 2 || invalid("$fname: kernel_size must be an Int or 2 Ints, got $(repr(k))")
    return (Int(k[1]), Int(k[2]))
end

function conv_padding(p, fname)
    P = uppercase(String(p))
    P in ("SAME", "VALID") || invalid("$fname: padding must be \"SAME\" or \"VALID\", got $(repr(p))")
    return P
end

# `Conv2D(x, f)` with TF's attrs.
function conv2d_op(x::Tensor, f::Tensor, strides, padding, fname; data_format="NHWC", dilations=nothing, name=nothing)
    attrs = (strides=conv_strides(strides, fname), padding=conv_padding(padding, fname), data_format=String(data_format))
    dilations === nothing || (attrs = merge(attrs, (dilations=conv_strides(dilations, fname),)))
    return add_op("Conv2D", [x, f]; name=name, attrs...)
end

"""
    tf.nn.conv2d(input, filter, strides, padding; data_format="NHWC", dilations=nothing, name=nothing)

TF's `tf.nn.conv2d`: `input` `[batch, height, width, in_channels]`, `filter` `[height,
width, in_channels, out_channels]` (tensors or Julia arrays, Float32 or Float64; a Julia
filter takes the input's dtype), `strides` an Int, `(sh, sw)` or `[1, sh, sw, 1]`, `padding`
`"SAME"` or `"VALID"`; the result is `[batch, out_height, out_width, out_channels]` with
`out = ceil(in / s)` (SAME) or `ceil((in - k + 1) / s)` (VALID). TF2's keyword `filters=`
and TF's other arguments as keywords (`strides=2, padding="SAME"`) are accepted too.
Errors (`OxiflowError`, naming the op): channels that do not match, a filter
larger than a VALID input, strides in the batch or channel dimension, `data_format` other
than NHWC and dilations other than 1 (UnimplementedError), an unknown height, width or
channel count (the batch may be unknown).
"""
function tf_conv2d(input, filter_=nothing, strides_=nothing, padding_=nothing; filter=filter_, filters=filter, strides=strides_, padding=padding_,
                   data_format="NHWC", dilations=nothing, name=nothing, use_cudnn_on_gpu=true)
    (filters === nothing || strides === nothing || padding === nothing) && invalid("tf.nn.conv2d: give filter, strides and padding")
    x = as_tensor(input)
    return conv2d_op(x, as_tensor(filters, x), strides, padding, "tf.nn.conv2d"; data_format=data_format, dilations=dilations, name=name)
end

# Glorot-uniform values for a convolution kernel (Keras' and `xavier_initializer`'s fans:
# receptive field times the channels in and out), drawn as TF's initializers are: from the
# graph seed of `set_random_seed` when one is set, else from Julia's global RNG.
function conv_kernel_init(T, kh, kw, c, oc)
    limit = sqrt(6 / (kh * kw * (c + oc)))
    return T.(limit .* (2 .* rand(initializer_rng(nothing), Float64, (kh, kw, c, oc)) .- 1))
end

# The input as a 4-D float tensor with known channels: `(x, T, channels)`.
function conv_input(inputs, who)
    x = convert_to_tensor(inputs)
    ndims(x) == 4 || invalid("$who: the input must be 4-D (samples, rows, cols, channels), got size $(size(x))")
    T = x.dtype
    T in (Float32, Float64) || invalid("$who: the input must be Float32 or Float64, got $T")
    c = size(x, 4)
    c === nothing && invalid("$who: the number of channels of $(x.name) (size $(size(x))) must be known to make its kernel")
    return x, T, c
end

"""
    conv2d(inputs, num_outputs, kernel_size, stride=1, padding="SAME"; activation=nothing, bias=false, scope=nothing)

ADCME's `conv2d` (TF 1.15's `tf.contrib.layers.conv2d`): `activation(conv(inputs, W) + b)`
for an NHWC `inputs`, with `W` `[kh, kw, in_channels, num_outputs]` (Glorot uniform) and, when
`bias` is true (ADCME's default is none), `b` `[num_outputs]` (zeros), made by `get_variable`
as `<scope>/weights` and `<scope>/biases`. `<scope>` is TF's default `Conv`, `Conv_1`, ...,
or `scope`. `kernel_size` and `stride` are an Int or two; `activation` as in [`fc`](@ref).
Errors as `tf.nn.conv2d`, and an input that is not a 4-D float tensor.
"""
function conv2d(inputs, num_outputs::Integer, kernel_size, stride=1, padding="SAME"; activation=nothing, bias::Bool=false, scope=nothing)
    act = activation_function(activation)
    x, T, c = conv_input(inputs, "conv2d")
    num_outputs >= 1 || invalid("conv2d: num_outputs must be positive, got $num_outputs")
    kh, kw = kernel_hw(kernel_size, "conv2d")
    name = scope === nothing ? unique_scope_name("Conv") : String(scope)
    return variable_scope(name; reuse=nothing) do
        W = get_variable("weights"; initializer=conv_kernel_init(T, kh, kw, c, Int(num_outputs)))
        y = conv2d_op(x, W, stride, padding, "conv2d")
        bias && (y = y + get_variable("biases"; initializer=zeros(T, Int(num_outputs))))
        act(y)
    end
end

"""
    Conv2D(filters, kernel_size, strides=1, activation=nothing; padding="valid", use_bias=true, name=nothing)

ADCME's `Conv2D` (TF 1.15's `tf.keras.layers.Conv2D`): a callable layer; `layer(x)` of an
NHWC Float32 or Float64 tensor or Julia array is `activation(conv(x, kernel) + bias)`. The
variables are made at the first call: `<name>/kernel` (`[kh, kw, channels, filters]`, Glorot
uniform) and `<name>/bias` (`filters`, zeros), in the input's dtype; later calls reuse them
and must give the same channel count and dtype. Keras' defaults: `padding="valid"`, names
`conv2d`, `conv2d_1`, ... Errors as [`conv2d`](@ref).
"""
mutable struct Conv2D
    filters::Int
    kernel_size::Tuple{Int,Int}
    strides::Vector{Int}
    activation::Function
    padding::String
    use_bias::Bool
    name::String
    kernel::Union{Nothing,Tensor}
    bias::Union{Nothing,Tensor}
end

function Conv2D(filters::Integer, kernel_size, strides=1, activation=nothing; padding="valid", use_bias::Bool=true, name=nothing)
    filters >= 1 || invalid("Conv2D: filters must be positive, got $filters")
    return Conv2D(Int(filters), kernel_hw(kernel_size, "Conv2D"), conv_strides(strides, "Conv2D"), activation_function(activation),
                  conv_padding(padding, "Conv2D"), use_bias, name === nothing ? unique_layer_name("conv2d") : String(name), nothing, nothing)
end

# A convolution layer's kernel, made with its bias at the first call (`init()` gives the
# kernel's value) and after that checked against the input's channel count `c` (the kernel's
# dimension `axis`) and dtype `T`, as Keras does (its error text).
function layer_kernel!(o, x::Tensor, T, c, axis, init)
    if o.kernel === nothing
        o.kernel = Variable(init(); name="$(o.name)/kernel")
        o.use_bias && (o.bias = Variable(zeros(T, o.filters); name="$(o.name)/bias"))
    end
    K = o.kernel
    check_layer_graph(o.name, K)
    (size(K, axis) == c && K.dtype == T) ||
        invalid("Input 0 of layer $(o.name) is incompatible with the layer: expected axis -1 of input shape to have value $(size(K, axis)) ($(K.dtype)) but received input with shape $(size(x)) ($T)")
    return K
end
# `activation(y + bias)`
layer_output(o, y) = o.activation(o.use_bias ? y + o.bias : y)

function (o::Conv2D)(inputs)
    x, T, c = conv_input(inputs, "layer $(o.name)")
    K = layer_kernel!(o, x, T, c, 3, () -> conv_kernel_init(T, o.kernel_size..., c, o.filters))
    return layer_output(o, conv2d_op(x, K, o.strides, o.padding, "layer $(o.name)"))
end

Base.show(io::IO, o::Conv2D) = print(io, "<Conv2D $(o.name): $(o.filters) filters $(o.kernel_size[1])×$(o.kernel_size[2]), strides $(o.strides[2:3]), padding $(o.padding), activation $(o.activation)>")
