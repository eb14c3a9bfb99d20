# The `tf.*` functions ADCME programs call directly ("you can always use tf.<function_name>",
# ADCME's docs) that have an Oxiflow equivalent, with TF's conventions: 0-based axes
# (negative from the end), row-major shapes as tuples or vectors, `keepdims`, TF's default
# dtypes (`tf.zeros`, `tf.random.normal`: float32). `tf.device`, `tf.config` and the other
# entries of device.jl are looked up first; anything in neither raises an error naming it.

"""
    Oxiflow.DTYPE

ADCME's `DTYPE` table from a Julia element type to TF's dtype. In Oxiflow a dtype *is* the
Julia type (`tf.float64 === Float64`), so `DTYPE[T] === T` for `Float32`, `Float64`, `Int32`,
`Int64` and `Bool`, and code such as `cast(x, DTYPE[Float32])` runs unchanged. Not exported.
"""
const DTYPE = Dict{Type,Type}(Float64 => Float64, Float32 => Float32, Int64 => Int64, Int32 => Int32, Bool => Bool)

# TF's `axis` argument (nothing: every axis; an Int or a vector; negative from the end).
tf_axes(t::Tensor, axis, fname) = axis === nothing ? collect(0:ndims(t)-1) :
    Int[axis0(t, a, fname) for a in (axis isa Integer ? [axis] : axis)]

# `axis` (and `perm`) positional or as keywords, as TF accepts both.
tf_reduce(op, fname) = (t, ax=nothing; axis=ax, keepdims::Bool=false, keep_dims::Bool=keepdims, name=nothing) -> begin
    x = as_tensor(t)
    add_op(op, [x]; axis=tf_axes(x, axis, fname), keep_dims=keep_dims, name=name)
end

function tf_transpose(t, pm=nothing; perm=pm, name=nothing)
    x = as_tensor(t)
    p = perm === nothing ? collect(ndims(x)-1:-1:0) : Int[axis0(x, a, "tf.transpose") for a in perm]
    return add_op("Transpose", [x]; perm=p, name=name)
end

tf_fill(value, dtype) = (shape; dtype=dtype, name=nothing) ->
    constant(fill(convert(dtype, value), Tuple(Int[d for d in shape])...); name=name)

const TF_DTYPES = (float32=Float32, float64=Float64, int32=Int32, int64=Int64, bool=Bool)

const TF_MATH = (
    exp=exp, log=log, sin=sin, cos=cos, tan=tan, tanh=tanh, sqrt=sqrt, abs=abs, sign=sign,
    square=(x -> add_op("Square", [as_tensor(x)])), negative=(x -> -as_tensor(x)),
    sigmoid=sigmoid, softplus=softplus, softmax=softmax, floor=floor,
    floordiv=(a, b) -> fld(as_tensor(a), b), floormod=(a, b) -> mod(as_tensor(a), b), mod=(a, b) -> mod(as_tensor(a), b),
    add=(a, b) -> as_tensor(a) + b, subtract=(a, b) -> as_tensor(a) - b,
    multiply=(a, b) -> as_tensor(a) .* b, divide=(a, b) -> as_tensor(a) ./ b,
    pow=(a, b) -> as_tensor(a)^b, maximum=max, minimum=min,
    less=(a, b) -> as_tensor(a) < b, less_equal=(a, b) -> as_tensor(a) <= b,
    greater=(a, b) -> as_tensor(a) > b, greater_equal=(a, b) -> as_tensor(a) >= b,
    equal=(a, b) -> binary("Equal", a, b),
    reduce_sum=tf_reduce("Sum", "tf.reduce_sum"), reduce_mean=tf_reduce("Mean", "tf.reduce_mean"),
    reduce_max=tf_reduce("Max", "tf.reduce_max"), reduce_min=tf_reduce("Min", "tf.reduce_min"),
    reduce_prod=tf_reduce("Prod", "tf.reduce_prod"),
)

const TF_NN = (relu=relu, relu6=relu6, elu=elu, selu=selu, softplus=softplus, softsign=softsign,
               sigmoid=sigmoid, tanh=tanh, softmax=softmax, leaky_relu=leaky_relu,
               softmax_cross_entropy_with_logits=(; labels, logits) -> dense_softmax_xent(labels, logits),
               sparse_softmax_cross_entropy_with_logits=sparse_softmax_cross_entropy_with_logits)

const TF_LINALG = (inv=inv, det=det, solve=(A, b) -> add_op("MatrixSolve", [as_tensor(A), as_tensor(b)]),
                   diag=diagm, diag_part=diag, trace=tr, matmul=matmul, einsum=einsum,
                   adjoint=adjoint, transpose=adjoint,
                   svd=(A; full_matrices::Bool=false, compute_uv::Bool=true) -> (r = svd(as_tensor(A); full=full_matrices);
                                                                                compute_uv ? (r.S, r.U, r.V) : r.S))

const TF_RANDOM = (normal=(shape; mean=0.0, stddev=1.0, dtype=Float32, seed=nothing) -> normal(shape...; mean=mean, stddev=stddev, dtype=dtype, seed=seed),
                   uniform=(shape; minval=0.0, maxval=1.0, dtype=Float32, seed=nothing) -> uniform(shape...; minval=minval, maxval=maxval, dtype=dtype, seed=seed))

const TF_TRAIN = (GradientDescentOptimizer=GradientDescentOptimizer, MomentumOptimizer=MomentumOptimizer,
                  AdamOptimizer=AdamOptimizer, RMSPropOptimizer=RMSPropOptimizer, AdagradOptimizer=AdagradOptimizer,
                  AdadeltaOptimizer=AdadeltaOptimizer, AdagradDAOptimizer=AdagradDAOptimizer)

"""
The `tf.*` names beyond device.jl's: TF's dtypes, `tf.reshape` (row-major, TF's), `tf.transpose`,
`tf.reduce_*` (0-based `axis`, `keepdims`), `tf.expand_dims`, `tf.squeeze`, `tf.concat`,
`tf.stack`, `tf.unstack`, `tf.cast`, `tf.identity`, `tf.stop_gradient`, `tf.where`,
`tf.zeros`/`tf.ones` (float32 by default), `tf.zeros_like`/`tf.ones_like`, elementwise math
and comparisons, `tf.einsum`, `tf.gradients`, `tf.math`, `tf.nn`, `tf.linalg`, `tf.random`
(float32 by default, as TF), `tf.train` (the TF1 optimizers).
"""
const TF_EXTRA = merge(TF_DTYPES, TF_MATH, (
    math=TF_MATH, nn=TF_NN, linalg=TF_LINALG, random=TF_RANDOM, train=TF_TRAIN,
    reshape=(t, shape; name=nothing) -> reshape(as_tensor(t), Tuple(Int[d for d in shape])),
    transpose=tf_transpose,
    expand_dims=(t, ax=nothing; axis=ax, name=nothing) -> add_op("ExpandDims", [as_tensor(t)]; dim=Int(axis), name=name),
    squeeze=(t, ax=nothing; axis=ax, name=nothing) -> (x = as_tensor(t); axis === nothing ? add_op("Squeeze", [x]) :
              add_op("Squeeze", [x]; squeeze_dims=tf_axes(x, axis, "tf.squeeze"))),
    concat=(values, ax=0; axis=ax, name=nothing) -> concat(collect(values), axis),
    stack=(values, ax=0; axis=ax, name=nothing) -> stack(Tensor[as_tensor(v) for v in values], axis),
    unstack=(t, ax=0; axis=ax, name=nothing) -> unstack(as_tensor(t), axis),
    cast=(t, dtype; name=nothing) -> cast(as_tensor(t), dtype),
    identity=(t; name=nothing) -> add_op("Identity", [as_tensor(t)]; name=name),
    stop_gradient=independent, where=if_else,
    cond=(pred, true_fn, false_fn; name=nothing) -> cond(pred, true_fn, false_fn; name=name),
    while_loop=while_loop, map_fn=(f, elems; dtype=nothing, name=nothing) -> map(f, elems),
    TensorArray=(args...; dtype=Float32, size=0, clear_after_read::Bool=true, element_shape=nothing) ->
        TensorArray(size; dtype=dtype, clear_after_read=clear_after_read, element_shape=element_shape),
    zeros=tf_fill(0, Float32), ones=tf_fill(1, Float32), zeros_like=zeros_like, ones_like=ones_like,
    convert_to_tensor=(x; dtype=nothing) -> convert_to_tensor(x; dtype=dtype),
    einsum=einsum, matmul=matmul,
    gradients=(ys, xs; grad_ys=nothing, colocate_gradients_with_ops::Bool=false) ->
        xs isa Tensor ? Any[gradients(ys, xs; grad_ys=grad_ys, colocate=colocate_gradients_with_ops)] :
                        gradients(ys, collect(xs); grad_ys=grad_ys, colocate=colocate_gradients_with_ops),
))
