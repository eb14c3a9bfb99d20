# 2-D pooling (TF's `tf.nn.max_pool`, `tf.nn.avg_pool` and TF 1.15's
# `tf.layers.max_pooling2d`, `tf.layers.average_pooling2d`) as composites: each of the `kh×kw`
# window offsets is one strided slice of the (padded) NHWC input, and the slices are combined
# by `Maximum` or by `Add` and a division by each window's count. Gradients are those of the
# slices and of `Maximum` (a tie goes to the first window element in row-major order, as TF's
# `MaxPoolGrad` gives it to the first maximum).

# An Int, two Ints or TF's four NHWC values (1 in the batch and channel places) as (h, w).
function pool_hw(v, what, fname)
    v isa Integer && return (Int(v), Int(v))
    a = collect(Int, v)
    length(a) == 2 && return (a[1], a[2])
    length(a) == 4 && a[1] == 1 && a[4] == 1 && return (a[2], a[3])
    invalid("$fname: $what must be an Int, 2 Ints or [1, h, w, 1], got $(repr(v))")
end

# `x` (NHWC) with `before`/`after` rows and columns of `value` around it (`pad`, which
# takes an unknown batch and an infinite fill).
pool_border(x::Tensor, (pt, pb), (pl, pr), value) =
    pt + pb + pl + pr == 0 ? x : pad(x, [0 0; pt pb; pl pr; 0 0]; constant_values=value)

# The pooled size and the padding before and after along one dimension (TF's rules).
function pool_geometry(n, k, s, same, fname)
    if same
        out = cld(n, s)
        total = max((out - 1) * s + k - n, 0)
        return out, (total ÷ 2, total - total ÷ 2)
    end
    n >= k || invalid("$fname: a window of $k does not fit an input of $n (VALID padding)")
    return (n - k) ÷ s + 1, (0, 0)
end

"""
    pool2d(kind, value, ksize, strides, padding, fname; data_format="NHWC", name=nothing)

`kind` `:max` or `:avg`; what these call:

    tf.nn.max_pool(value, ksize, strides, padding; data_format="NHWC", name=nothing)
    tf.nn.avg_pool(value, ksize, strides, padding; ...)
    tf.layers.max_pooling2d(inputs, pool_size, strides; padding="valid", data_format="channels_last", name=nothing)
    tf.layers.average_pooling2d(inputs, pool_size, strides; ...)

TF's 2-D pooling of an NHWC Float32/Float64 tensor or array: the maximum or the mean of each
`kh × kw` window, moved by the strides (an Int, two Ints or TF's `[1, h, w, 1]`). The output
is `ceil(in / s)` (`"SAME"`: windows hanging over the border ignore the outside, and the mean
divides by the elements inside) or `(in - k) ÷ s + 1` (`"VALID"`). Built from one strided
slice per window offset (`kh·kw` of them) and `Maximum` or `Add`, so gradients are exact
(a tie goes to the first maximum, as TF's). The batch may be unknown; height and width must
be known. Errors (an `OxiflowError`): a non-4-D or non-float input, NCHW, a window larger
than a VALID input, a bad padding name.
"""
function pool2d(kind::Symbol, value, ksize, strides, padding, fname; data_format="NHWC", name=nothing)
    x = as_tensor(value)
    ndims(x) == 4 || invalid("$fname: the input must be 4-D NHWC, got size $(size(x))")
    x.dtype in (Float32, Float64) || invalid("$fname: the input must be Float32 or Float64, got $(x.dtype)")
    uppercase(String(data_format)) in ("NHWC", "CHANNELS_LAST") || invalid("$fname: only NHWC (channels_last) is supported, got $data_format")
    (kh, kw), (sh, sw) = pool_hw(ksize, "ksize", fname), pool_hw(strides, "strides", fname)
    (kh >= 1 && kw >= 1 && sh >= 1 && sw >= 1) || invalid("$fname: window and strides must be positive, got ($kh, $kw) and ($sh, $sw)")
    P = uppercase(String(padding))
    P in ("SAME", "VALID") || invalid("$fname: padding must be \"SAME\" or \"VALID\", got $(repr(padding))")
    h, w = size(x, 2), size(x, 3)
    (h === nothing || w === nothing) && invalid("$fname: the height and width must be known, got size $(size(x))")
    (oh, padh), (ow, padw) = pool_geometry(h, kh, sh, P == "SAME", fname), pool_geometry(w, kw, sw, P == "SAME", fname)
    return name_scope(something(name, kind === :max ? "MaxPool" : "AvgPool")) do
        xp = pool_border(x, padh, padw, kind === :max ? -floatmax(x.dtype) : 0)
        windows = [xp[:, i:sh:i+(oh-1)*sh, j:sw:j+(ow-1)*sw, :] for i in 1:kh for j in 1:kw]
        kind === :max && return reduce(max, windows)
        # the number of input elements (not padding) in each window
        inrange(o, k, s, (b, _), n) = count(t -> 1 <= (o - 1) * s + t - b <= n, 1:k)
        counts = [inrange(a, kh, sh, padh, h) * inrange(c, kw, sw, padw, w) for a in 1:oh, c in 1:ow]
        return reduce(+, windows) ./ reshape(x.dtype.(counts), 1, oh, ow, 1)
    end
end


const TF_POOL_NN = (
    max_pool=(value, ksize, strides, padding; data_format="NHWC", name=nothing) ->
        pool2d(:max, value, ksize, strides, padding, "tf.nn.max_pool"; data_format=data_format, name=name),
    avg_pool=(value, ksize, strides, padding; data_format="NHWC", name=nothing) ->
        pool2d(:avg, value, ksize, strides, padding, "tf.nn.avg_pool"; data_format=data_format, name=name),
)
const TF_LAYERS = (
    max_pooling2d=(inputs, pool_size, strides; padding="valid", data_format="channels_last", name=nothing) ->
        pool2d(:max, inputs, pool_size, strides, padding, "tf.layers.max_pooling2d"; data_format=data_format, name=name),
    average_pooling2d=(inputs, pool_size, strides; padding="valid", data_format="channels_last", name=nothing) ->
        pool2d(:avg, inputs, pool_size, strides, padding, "tf.layers.average_pooling2d"; data_format=data_format, name=name),
)
