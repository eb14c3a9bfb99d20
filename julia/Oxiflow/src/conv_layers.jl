# ADCME's Keras-style `Conv1D` and `Conv2DTranspose` layers (TF 1.15's
# `tf.keras.layers.Conv1D` and `Conv2DTranspose`), on the engine's `Conv2D` and
# `Conv2DBackpropInput` ops: a 1-D convolution is a 2-D one over a single row, and a
# transposed convolution is the gradient of a convolution with respect to its input.

export Conv1D, Conv2DTranspose

"""
    Conv1D(filters, kernel_size, strides=1, activation=nothing; padding="valid", use_bias=true, name=nothing)

ADCME's `Conv1D` (TF 1.15's `tf.keras.layers.Conv1D`): a callable layer; `layer(x)` of a
`(samples, steps, channels)` Float32 or Float64 tensor or Julia array is
`activation(conv1d(x, kernel) + bias)`, of size `(samples, out_steps, filters)` with
`out_steps = ceil((steps - kernel_size + 1) / strides)` (`"valid"`), `ceil(steps / strides)`
(`"same"`), or for `"causal"` (the input padded with `kernel_size - 1` zeros in front, so
that output `t` sees steps up to `t` only) `ceil(steps / strides)`. The variables are made
at the first call, in the input's dtype: `<name>/kernel` (`[kernel_size, channels,
filters]`, Glorot uniform) and `<name>/bias` (`filters`, zeros); later calls reuse them.
Keras' names `conv1d`, `conv1d_1`, ... Built as a `Conv2D` over one row. Errors (an
`OxiflowError`): an input that is not 3-D or not float, unknown steps or channels, a
channel count or dtype that differs from the first call's, and those of [`conv2d`](@ref).
"""
mutable struct Conv1D
    filters::Int
    kernel_size::Int
    strides::Int
    activation::Function
    padding::String
    use_bias::Bool
    name::String
    kernel::Union{Nothing,Tensor}
    bias::Union{Nothing,Tensor}
end

function Conv1D(filters::Integer, kernel_size, strides=1, activation=nothing; padding="valid", use_bias::Bool=true, name=nothing)
    filters >= 1 || invalid("Conv1D: filters must be positive, got $filters")
    k = kernel_size isa Integer ? Int(kernel_size) : (length(kernel_size) == 1 ? Int(kernel_size[1]) :
        invalid("Conv1D: kernel_size must be an Int, got $(repr(kernel_size))"))
    st = strides isa Integer ? Int(strides) : (length(strides) == 1 ? Int(strides[1]) :
        invalid("Conv1D: strides must be an Int, got $(repr(strides))"))
    (k >= 1 && st >= 1) || invalid("Conv1D: kernel_size and strides must be positive, got $k and $st")
    P = lowercase(String(padding))
    P in ("valid", "same", "causal") || invalid("Conv1D: padding must be \"valid\", \"same\" or \"causal\", got $(repr(padding))")
    return Conv1D(Int(filters), k, st, activation_function(activation), P, use_bias,
                  name === nothing ? unique_layer_name("conv1d") : String(name), nothing, nothing)
end

function (o::Conv1D)(inputs)
    x = convert_to_tensor(inputs)
    who = "layer $(o.name)"
    ndims(x) == 3 || invalid("$who: the input must be 3-D (samples, steps, channels), got size $(size(x))")
    T = x.dtype
    T in (Float32, Float64) || invalid("$who: the input must be Float32 or Float64, got $T")
    c = size(x, 3)
    (c === nothing || size(x, 2) === nothing) && invalid("$who: the steps and channels of $(x.name) (size $(size(x))) must be known")
    K = layer_kernel!(o, x, T, c, 2, () -> dropdims(conv_kernel_init(T, 1, o.kernel_size, c, o.filters); dims=1))
    o.padding == "causal" && (x = pad(x, [0 0; o.kernel_size-1 0; 0 0]))
    x4 = add_op("ExpandDims", [x]; dim=1)                       # (samples, 1, steps, channels)
    K4 = add_op("ExpandDims", [K]; dim=0)                       # (1, kernel_size, channels, filters)
    y4 = conv2d_op(x4, K4, [1, 1, o.strides, 1], o.padding == "same" ? "SAME" : "VALID", who)
    return layer_output(o, add_op("Squeeze", [y4]; squeeze_dims=[1]))
end

Base.show(io::IO, o::Conv1D) = print(io, "<Conv1D $(o.name): $(o.filters) filters of width $(o.kernel_size), strides $(o.strides), padding $(o.padding), activation $(o.activation)>")

"""
    Conv2DTranspose(filters, kernel_size, strides=1, activation=nothing; padding="valid", use_bias=true, name=nothing)

ADCME's `Conv2DTranspose` (TF 1.15's `tf.keras.layers.Conv2DTranspose`, a "deconvolution"):
a callable layer; `layer(x)` of an NHWC `(samples, rows, cols, channels)` Float32 or Float64
tensor or array is `activation(conv2d_transpose(x, kernel) + bias)`, of size `(samples,
out_rows, out_cols, filters)` with `out = in * stride` (`"same"`) or `(in - 1) * stride +
kernel` (`"valid"`). The transpose of `Conv2D` with the same kernel, strides and padding:
`sum(conv2d_transpose(x) .* z) == sum(x .* conv2d(z))` for every `z` of the output's size
(op `Conv2DBackpropInput`, whose first input, a zero tensor of the output's size, gives only
the shape). The variables, made at the first call: `<name>/kernel` (`[kh, kw, filters,
channels]`, Glorot uniform) and `<name>/bias` (`filters`, zeros). Keras' names
`conv2d_transpose`, ...; Keras' `output_padding` is not supported. Errors as [`Conv2D`](@ref).
"""
mutable struct Conv2DTranspose
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

function Conv2DTranspose(filters::Integer, kernel_size, strides=1, activation=nothing; padding="valid", use_bias::Bool=true, name=nothing)
    filters >= 1 || invalid("Conv2DTranspose: filters must be positive, got $filters")
    return Conv2DTranspose(Int(filters), kernel_hw(kernel_size, "Conv2DTranspose"), conv_strides(strides, "Conv2DTranspose"),
                           activation_function(activation), conv_padding(padding, "Conv2DTranspose"), use_bias,
                           name === nothing ? unique_layer_name("conv2d_transpose") : String(name), nothing, nothing)
end

function (o::Conv2DTranspose)(inputs)
    x, T, c = conv_input(inputs, "layer $(o.name)")
    (size(x, 2) === nothing || size(x, 3) === nothing) && invalid("layer $(o.name): the rows and columns of $(x.name) (size $(size(x))) must be known")
    K = layer_kernel!(o, x, T, c, 4, () -> conv_kernel_init(T, o.kernel_size..., o.filters, c))
    (kh, kw), (sh, sw) = o.kernel_size, (o.strides[2], o.strides[3])
    out(n, k, s) = o.padding == "SAME" ? n * s : (n - 1) * s + k
    oh, ow = out(size(x, 2), kh, sh), out(size(x, 3), kw, sw)
    # a zero tensor of the output's size (the batch may be unknown): the op reads its shape
    shape_of_y = x[:, 1:1, 1:1, 1:1] .* zeros(T, 1, oh, ow, o.filters)
    return layer_output(o, add_op("Conv2DBackpropInput", [shape_of_y, K, x]; strides=o.strides, padding=o.padding, data_format="NHWC"))
end

Base.show(io::IO, o::Conv2DTranspose) = print(io, "<Conv2DTranspose $(o.name): $(o.filters) filters $(o.kernel_size[1])×$(o.kernel_size[2]), strides $(o.strides[2:3]), padding $(o.padding), activation $(o.activation)>")
