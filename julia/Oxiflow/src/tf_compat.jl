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

tf_fill(value, dtype) = (shape; dtype=dtype, name=nothing) -> begin
    all(d -> d isa Integer && d >= 0, shape) || invalid("tf.zeros/tf.ones: the shape must be non-negative integers, got $(repr(shape))")
    filled_in(get_default_graph(), dtype, Int[d for d in shape], value; name=name)
end

const TF_DTYPES = (float32=Float32, float64=Float64, int32=Int32, int64=Int64, bool=Bool)

const TF_MATH = (
    exp=exp, log=log, sin=sin, cos=cos, tan=tan, tanh=tanh, sqrt=sqrt, abs=abs, sign=sign,
    square=(x -> add_op("Square", [as_tensor(x)])), negative=(x -> -as_tensor(x)),
    sigmoid=sigmoid, softplus=softplus, softmax=softmax, floor=floor,
    lgamma=lgamma, digamma=digamma, polygamma=polygamma, top_k=tf_top_k,
    erf=tf_special("Erf"), erfc=tf_special("Erfc"), erfinv=tf_special("Erfinv"), ndtri=tf_special("Ndtri"),
    bessel_i0e=tf_special("BesselI0e"), bessel_i1e=tf_special("BesselI1e"),
    floordiv=(a, b) -> fld(as_tensor(a), b), floormod=(a, b) -> mod(as_tensor(a), b), mod=(a, b) -> mod(as_tensor(a), b),
    add=(a, b) -> as_tensor(a) + b, subtract=(a, b) -> as_tensor(a) - b,
    multiply=(a, b) -> as_tensor(a) .* b, divide=(a, b) -> as_tensor(a) ./ b,
    pow=(a, b) -> as_tensor(a)^b, maximum=max, minimum=min,
    less=(a, b) -> as_tensor(a) < b, less_equal=(a, b) -> as_tensor(a) <= b,
    greater=(a, b) -> as_tensor(a) > b, greater_equal=(a, b) -> as_tensor(a) >= b,
    equal=(a, b) -> binary("Equal", a, b), not_equal=(a, b) -> !binary("Equal", a, b),
    logical_and=(a, b) -> as_tensor(a) & b, logical_or=(a, b) -> as_tensor(a) | b, logical_not=(a -> !as_tensor(a)),
    is_nan=(x -> isnan(as_tensor(x))), is_inf=(x -> isinf(as_tensor(x))), is_finite=(x -> isfinite(as_tensor(x))),
    reduce_sum=tf_reduce("Sum", "tf.reduce_sum"), reduce_mean=tf_reduce("Mean", "tf.reduce_mean"),
    reduce_max=tf_reduce("Max", "tf.reduce_max"), reduce_min=tf_reduce("Min", "tf.reduce_min"),
    reduce_prod=tf_reduce("Prod", "tf.reduce_prod"),
)

const TF_NN = merge((relu=relu, relu6=relu6, elu=elu, selu=selu, softplus=softplus, softsign=softsign,
               sigmoid=sigmoid, tanh=tanh, softmax=softmax, leaky_relu=leaky_relu,
               softmax_cross_entropy_with_logits=(; labels, logits) -> dense_softmax_xent(labels, logits),
               sparse_softmax_cross_entropy_with_logits=sparse_softmax_cross_entropy_with_logits, conv2d=tf_conv2d),
               TF_POOL_NN)

# Julia arrays become tensors first, as TF converts NumPy arrays (`inv(M)` of a Julia
# matrix would be Julia's own inverse, not a tensor).
const TF_LINALG = (inv=(A -> inv(as_tensor(A))), det=(A -> det(as_tensor(A))),
                   solve=(A, b) -> add_op("MatrixSolve", [as_tensor(A), as_tensor(b)]),
                   cholesky=cholesky_factor, triangular_solve=triangular_solve,
                   diag=(d -> diagm(as_tensor(d))), diag_part=(A -> diag(as_tensor(A))), trace=(A -> tr(as_tensor(A))),
                   matmul=matmul, einsum=einsum, adjoint=(A -> adjoint(as_tensor(A))), transpose=(A -> adjoint(as_tensor(A))),
                   svd=(A; full_matrices::Bool=false, compute_uv::Bool=true) -> (r = svd(as_tensor(A); full=full_matrices);
                                                                                compute_uv ? (r.S, r.U, r.V) : r.S))

# TF1's argument order, positional or by keyword: `tf.random_normal(shape, mean, stddev,
# dtype, seed)`, `tf.random_uniform(shape, minval, maxval, dtype, seed)`; mean, stddev and
# the bounds may be tensors.
tf_random_normal(shape, m=0.0, sd=1.0, dt=Float32, sd_=nothing; mean=m, stddev=sd, dtype=dt, seed=sd_, name=nothing) =
    normal(shape...; mean=mean, stddev=stddev, dtype=dtype, seed=seed)
tf_random_uniform(shape, lo=0.0, hi=1.0, dt=Float32, sd_=nothing; minval=lo, maxval=hi, dtype=dt, seed=sd_, name=nothing) =
    uniform(shape...; minval=minval, maxval=maxval === nothing ? 1.0 : maxval, dtype=dtype, seed=seed)
const TF_RANDOM = (normal=tf_random_normal, uniform=tf_random_uniform,
                   set_random_seed=set_random_seed, set_seed=set_random_seed)

const TF_TRAIN = (GradientDescentOptimizer=GradientDescentOptimizer, MomentumOptimizer=MomentumOptimizer,
                  AdamOptimizer=AdamOptimizer, RMSPropOptimizer=RMSPropOptimizer, AdagradOptimizer=AdagradOptimizer,
                  AdadeltaOptimizer=AdadeltaOptimizer, AdagradDAOptimizer=AdagradDAOptimizer)

# TF1's names at the root of `tf`, which ADCME's docs and examples call (`tf.random_normal`,
# `tf.gather`, `tf.placeholder`, ...): 0-based indices and axes, row-major shapes, as TF.
function tf_index_tensor(i, fname)
    i isa Tensor && return i
    eltype(i) <: Integer || invalid("$fname: indices must be integers (0-based, as TF), got $(repr(i))")
    return constant(Int64.(i))
end

function tf_gather(params, indices, ax=0; axis=ax, name=nothing)
    p = as_tensor(params)
    return add_op("GatherV2", [p, tf_index_tensor(indices, "tf.gather")]; axis=axis0(p, axis, "tf.gather"), name=name)
end

# `tf.slice(t, begin, size)`: 0-based `begin`, `size[k] == -1` to the end of dimension k.
function tf_slice(t, b, sz; name=nothing)
    x = as_tensor(t)
    n = ndims(x)
    (b isa AbstractVector{<:Integer} && sz isa AbstractVector{<:Integer}) ||
        unimplemented("tf.slice: begin and size must be integer vectors (tensors of them are not supported yet), got $(typeof(b)) and $(typeof(sz))")
    (length(b) == n && length(sz) == n) ||
        invalid("tf.slice: begin $(repr(b)) and size $(repr(sz)) need $n entries for a tensor of size $(size(x))")
    em = 0
    for k in 1:n
        sz[k] == -1 && (em |= 1 << (k - 1))
        sz[k] >= -1 && b[k] >= 0 || invalid("tf.slice: begin $(repr(b)) and size $(repr(sz)) must be >= 0 (size -1: to the end)")
        d = size(x, k)       # TF raises where a strided slice would cut the slice short
        d === nothing || b[k] + max(sz[k], 0) <= d ||
            invalid("tf.slice: begin $(repr(b)) and size $(repr(sz)) go past dimension $(k - 1) of a tensor of size $(size(x))")
    end
    e = Int[sz[k] == -1 ? 0 : b[k] + sz[k] for k in 1:n]
    r = strided_slice_op(x, collect(Int, b), e, ones(Int, n), 0, em, 0)
    # an unknown dimension is checked when the graph runs: a strided slice would silently cut
    # a slice that goes past the fed size short, where TF raises
    any(k -> size(x, k) === nothing && sz[k] != -1, 1:n) || return r
    return add_op("EnsureShape", [r]; shape=Int64[sz[k] == -1 ? engine_dim(nothing) : sz[k] for k in 1:n])
end

function tf_split(value, num_or_size_splits, ax=0; axis=ax, name=nothing)
    x = as_tensor(value)
    return split(x, num_or_size_splits; dims=axis0(x, axis, "tf.split") + 1)
end

function tf_tile(t, multiples; name=nothing)
    x = as_tensor(t)
    length(multiples) == ndims(x) ||
        invalid("tf.tile: multiples $(repr(multiples)) needs $(ndims(x)) entries for a tensor of size $(size(x))")
    return add_op("Tile", [x]; multiples=collect(Int, multiples), name=name)
end

tf_reverse(t, axis; name=nothing) = (x = as_tensor(t);
    add_op("ReverseV2", [x]; axis=Int[axis0(x, a, "tf.reverse") for a in (axis isa Integer ? [axis] : axis)], name=name))

tf_pad(t, paddings; mode="CONSTANT", constant_values=0, name=nothing) =
    pad(as_tensor(t), paddings isa AbstractMatrix ? paddings : Int[p[j] for p in paddings, j in 1:2]; mode=mode, constant_values=constant_values)

# `tf.shape(t)`: the Int32 (or `out_type` Int64) vector of `t`'s dimensions: a constant
# when they are all known, else TF's `Shape` op, whose value is the fed size (`tf.shape(x)[1]`
# of a batch, e.g. `tf.cast(tf.shape(x)[1], tf.float64)` to divide by the batch size).
function tf_shape(t; out_type=Int32, name=nothing)
    x = as_tensor(t)
    out_type in (Int32, Int64) || invalid("tf.shape: out_type must be Int32 or Int64, got $out_type")
    is_fully_defined(x) && return constant(out_type[d for d in size(x)])
    return add_op("Shape", [x]; out_type=out_type, name=name)
end

function tf_norm(t, o="euclidean"; ord=o, axis=nothing, keepdims::Bool=false, name=nothing)
    (axis === nothing && !keepdims) || unimplemented("tf.norm: axis and keepdims are not supported yet (norm over all elements only)")
    p = ord in ("euclidean", "fro") ? 2 : ord
    p isa Real || invalid("tf.norm: ord $(repr(ord)) is not supported (\"euclidean\", \"fro\" or a positive number)")
    return norm(as_tensor(t), p)
end

function tf_placeholder(dtype, sh=nothing; shape=sh, name=nothing)
    shape === nothing && invalid("tf.placeholder: shape=None (a tensor of unknown rank) is not supported; give the shape, with nothing for an unknown size")
    return placeholder(dtype; shape=collect(Any, shape), name=name)
end

tf_hessians(ys, xs) = xs isa Tensor ? Any[hessian(as_tensor(ys), xs)] : Any[hessian(as_tensor(ys), x) for x in xs]

tf_scatter_nd(indices, updates, shape; name=nothing) =
    add_op("ScatterNd", [tf_index_tensor(indices, "tf.scatter_nd"), as_tensor(updates)]; shape=collect(Int, shape), name=name)

# `tf.gradients(ys, xs)`: TF's, the gradient of sum(ys) shaped like each x (not ADCME's
# Jacobian for a vector ys), or of sum(ys .* grad_ys) with grad_ys the seed (the result stays
# differentiable in grad_ys); a list of ys adds their gradients, as TF does.
function tf_gradients(ys, xs; grad_ys=nothing, colocate_gradients_with_ops::Bool=false, name=nothing)
    ylist = ys isa Tensor ? Tensor[ys] : Tensor[as_tensor(y) for y in ys]
    gys = grad_ys === nothing ? Any[nothing for _ in ylist] : ys isa Tensor ? Any[grad_ys] : collect(Any, grad_ys)
    length(gys) == length(ylist) || invalid("tf.gradients: $(length(gys)) grad_ys for $(length(ylist)) ys")
    xlist = xs isa Tensor ? Tensor[xs] : collect(xs)
    acc = Any[nothing for _ in xlist]
    for (y, gy) in zip(ylist, gys)
        seed = gy === nothing ? (ndims(y) == 0 ? nothing : ones_like(y)) : as_tensor(gy, y)
        gs = gradients(y, xlist; grad_ys=seed, colocate=colocate_gradients_with_ops)
        acc = Any[a === nothing ? g : g === nothing ? a : a + g for (a, g) in zip(acc, gs)]
    end
    return acc
end

# `tf.print(args...)`: strings and tensors (Julia values become constants) joined by `sep`,
# written to stderr when the returned op runs (bind it: `x = bind(x, tf.print(...))`).
function tf_print(args...; summarize::Integer=3, sep::AbstractString=" ", output_stream=nothing, name=nothing)
    output_stream === nothing || output_stream in ("stderr", :stderr) || output_stream === stderr ||
        unimplemented("tf.print: output_stream $(repr(output_stream)) is not supported (standard error only)")
    pieces = Any[a isa AbstractString ? a : convert_to_tensor(a) for a in args]
    k = findfirst(p -> p isa Tensor, pieces)
    return print_node(k === nothing ? constant(0) : pieces[k], pieces; sep=sep, summarize=summarize, name=name)
end

# TF1's `tf.Print(input, data, message)`: `input`, printing `message` then each of `data`.
function tf_Print(input, data=Any[], message=""; summarize::Integer=3, first_n=-1, name=nothing)
    first_n == -1 || unimplemented("tf.Print: first_n is not supported (every run prints)")
    return print_node(as_tensor(input), collect(Any, data); prefix=message, summarize=summarize, name=name)
end

# `tf.compat.v1.logging`: Oxiflow has no TF log, so the verbosity is accepted and ignored.
const TF_LOGGING = (set_verbosity=(level -> nothing), DEBUG=10, INFO=20, WARN=30, WARNING=30, ERROR=40, FATAL=50)

const TF_V1 = (
    random_normal=TF_RANDOM.normal, random_uniform=TF_RANDOM.uniform, set_random_seed=set_random_seed,
    gather=tf_gather, gather_nd=(params, indices; name=nothing) -> add_op("GatherNd", [as_tensor(params), tf_index_tensor(indices, "tf.gather_nd")]; name=name),
    scatter_nd=tf_scatter_nd, slice=tf_slice, split=tf_split, tile=tf_tile, reverse=tf_reverse, pad=tf_pad,
    shape=tf_shape, norm=tf_norm, hessians=tf_hessians, trace=TF_LINALG.trace,
    matrix_solve=TF_LINALG.solve, matrix_inverse=TF_LINALG.inv, matrix_determinant=TF_LINALG.det,
    cholesky=cholesky_factor, matrix_triangular_solve=triangular_solve,
    matrix_transpose=TF_LINALG.transpose, matrix_diag=TF_LINALG.diag, matrix_diag_part=TF_LINALG.diag_part,
    placeholder=tf_placeholder, placeholder_with_default=(value, shape=nothing; name=nothing) -> placeholder(value; name=name),
    Variable=Variable, Tensor=Tensor, get_variable=get_variable, variable_scope=variable_scope, AUTO_REUSE=AUTO_REUSE,
    global_variables_initializer=global_variables_initializer, assign=assign,
    sort=tf_sort, argsort=tf_argsort, constant_initializer=constant_initializer,
    random_normal_initializer=random_normal_initializer, random_uniform_initializer=random_uniform_initializer,
    truncated_normal_initializer=truncated_normal_initializer, glorot_normal_initializer=glorot_normal_initializer,
    glorot_uniform_initializer=glorot_uniform_initializer, uniform_unit_scaling_initializer=uniform_unit_scaling_initializer,
    variance_scaling_initializer=variance_scaling_initializer,
    trainable_variables=() -> get_collection(TRAINABLE_VARIABLES), global_variables=() -> get_collection(GLOBAL_VARIABLES),
    group=(ops...; name="group_deps") -> group(ops...; name=name),
    get_default_graph=get_default_graph, reset_default_graph=reset_default_graph,
    logging=TF_LOGGING, print=tf_print, Print=tf_Print,
)

"""
The `tf.*` names beyond device.jl's: TF's dtypes, `tf.reshape` (row-major, TF's), `tf.transpose`,
`tf.reduce_*` (0-based `axis`, `keepdims`), `tf.expand_dims`, `tf.squeeze`, `tf.concat`,
`tf.stack`, `tf.unstack`, `tf.cast`, `tf.identity`, `tf.stop_gradient`, `tf.where`,
`tf.zeros`/`tf.ones` (float32 by default), `tf.zeros_like`/`tf.ones_like`, elementwise math
and comparisons, `tf.einsum`, `tf.gradients`, `tf.custom_gradient`, `tf.summary` (`scalar`, `histogram`, `merge`, `merge_all`, `FileWriter`), `tf.math`, `tf.nn`, `tf.linalg`, `tf.random`
(float32 by default, as TF), `tf.train` (the TF1 optimizers), and TF1's root names: `tf.random_normal`,
`tf.random_uniform`, `tf.set_random_seed`, `tf.gather` / `tf.gather_nd` / `tf.scatter_nd`
(0-based indices), `tf.slice`, `tf.split`, `tf.tile`, `tf.reverse`, `tf.pad`, `tf.shape` (the
`Shape` op where a dimension is unknown), `tf.norm` (over all elements), `tf.hessians`, `tf.matrix_*`,
`tf.placeholder`, `tf.Variable`, `tf.get_variable`, `tf.variable_scope`,
`tf.global_variables_initializer`, `tf.trainable_variables`, `tf.assign`, `tf.group`,
`tf.sort`/`tf.argsort` (0-based `axis` and positions, `direction`), `tf.math.top_k` (0-based
positions), `tf.math.lgamma`/`digamma`/`polygamma`, `tf.math.erf`/`erfc`/`erfinv`/`ndtri`,
`tf.math.bessel_i0e`/`bessel_i1e`, the `tf.*_initializer` objects, `tf.get_default_graph`; `tf.compat.v1` is `tf` itself (its `logging.set_verbosity` is accepted
and ignored: Oxiflow has no TF log).
"""
const TF_EXTRA = merge(TF_DTYPES, TF_MATH, TF_V1, (
    math=TF_MATH, nn=TF_NN, linalg=TF_LINALG, random=TF_RANDOM, train=TF_TRAIN, layers=TF_LAYERS,
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
    einsum=einsum, compat=(v1=tf,),
    gradients=tf_gradients, custom_gradient=tf_custom_gradient, summary=TF_SUMMARY,
))
