# Elementwise activations, comparisons, extrema, reductions and random tensors with ADCME's
# semantics (ADCME.jl src/ops.jl and src/random.jl). Ops: crates/oxiflow-core/src/ops/{nn,reduce,random}.rs.

export sigmoid, relu, relu6, leaky_relu, elu, selu, softplus, softsign, softmax, clip, if_else,
       mean, std, norm, normal, uniform, set_random_seed

# ---------------------------------------------------------------- elementwise

for (f, op) in ((:sign, "Sign"), (:tan, "Tan"))   # abs: complex.jl
    @eval Base.$f(a::Tensor) = add_op($op, [a])
end

"""
    sigmoid(x), relu(x), relu6(x), elu(x), selu(x), softplus(x), softsign(x)

Elementwise activations on a Float32/Float64 tensor (TF's `tf.math.sigmoid`, `tf.nn.relu`,
`tf.nn.relu6`, `tf.nn.elu`, `tf.nn.selu`, `tf.math.softplus`, `tf.nn.softsign`; ops `Sigmoid`,
`Relu`, ...). Each also accepts a Julia `Real` and returns a `Real` (ADCME's scalar methods).
Non-float tensors raise an `OxiflowError` naming the op.
"""
function sigmoid end
for (f, op) in ((:sigmoid, "Sigmoid"), (:relu, "Relu"), (:relu6, "Relu6"), (:elu, "Elu"),
                (:selu, "Selu"), (:softplus, "Softplus"), (:softsign, "Softsign"))
    @eval $f(a::Tensor) = add_op($op, [a])
end
sigmoid(x::Real) = x >= 0 ? 1 / (1 + exp(-x)) : exp(x) / (1 + exp(x))
relu(x::Real) = max(zero(x), x)
relu6(x::Real) = min(max(zero(x), x), oftype(float(x), 6))
elu(x::Real) = x > 0 ? float(x) : expm1(float(x))
const SELU_ALPHA = 1.6732632423543772848170429916717
const SELU_SCALE = 1.0507009873554804934193349852946
selu(x::Real) = x > 0 ? SELU_SCALE * x : SELU_SCALE * SELU_ALPHA * expm1(float(x))
softplus(x::Real) = max(float(x), 0) + log1p(exp(-abs(float(x))))
softsign(x::Real) = x / (1 + abs(x))
@doc (@doc sigmoid) relu
@doc (@doc sigmoid) relu6
@doc (@doc sigmoid) elu
@doc (@doc sigmoid) selu
@doc (@doc sigmoid) softplus
@doc (@doc sigmoid) softsign

"""
    leaky_relu(x, alpha=0.2)

`x` where `x > 0`, else `alpha * x` (`LeakyRelu`, TF's `tf.nn.leaky_relu`, default slope 0.2).
Accepts a tensor or a `Real`.
"""
leaky_relu(a::Tensor, alpha::Real=0.2) = add_op("LeakyRelu", [a]; alpha=Float64(alpha))
leaky_relu(x::Real, alpha::Real=0.2) = x > 0 ? x : alpha * x

"""
    softmax(x)

Softmax over the last axis (`Softmax`, TF's `tf.nn.softmax`): for a matrix, each row sums to 1.
Needs a float tensor of rank >= 1. A `Real` gives `1.0`.
"""
softmax(a::Tensor) = add_op("Softmax", [a])
softmax(x::Real) = one(float(x))

"""
    max(a, b), min(a, b)

Elementwise maximum / minimum of two tensors, or a tensor and a number or array, with
broadcasting (`Maximum`/`Minimum`, ADCME's `tf.maximum`/`tf.minimum`). The gradient goes to
`a` where `a >= b` (`a <= b` for `min`), as TF's.
"""
Base.max(a::Tensor, b::Tensor) = binary("Maximum", a, b)
Base.max(a::Tensor, b::Union{Number,AbstractArray}) = binary("Maximum", a, b)
Base.max(a::Union{Number,AbstractArray}, b::Tensor) = binary("Maximum", a, b)
Base.min(a::Tensor, b::Tensor) = binary("Minimum", a, b)
Base.min(a::Tensor, b::Union{Number,AbstractArray}) = binary("Minimum", a, b)
Base.min(a::Union{Number,AbstractArray}, b::Tensor) = binary("Minimum", a, b)

# Comparisons give Bool tensors (TF's Less, LessEqual, Greater, GreaterEqual), as ADCME's
# `a > 0.5` through PyCall's rich comparisons.
for (f, op) in ((:<, "Less"), (:<=, "LessEqual"), (:>, "Greater"), (:>=, "GreaterEqual"))
    @eval begin
        Base.$f(a::Tensor, b::Tensor) = binary($op, a, b)
        Base.$f(a::Tensor, b::Number) = binary($op, a, b)
        Base.$f(a::Number, b::Tensor) = binary($op, a, b)
    end
    BROADCAST_OPS[eval(f)] = op
end

"""
    clip(x, lo, hi)

`x` clipped elementwise to `[lo, hi]` (ADCME's `clip`, TF 1.15's `tf.clip_by_value`):
`Maximum(Minimum(x, hi), lo)` under the name scope `clip_by_value`.
"""
function clip(x::Tensor, lo, hi)
    return name_scope("clip_by_value") do
        max(min(x, hi), lo)
    end
end

"""
    clamp(x::Tensor, lo, hi)

Julia's `clamp` on a tensor: [`clip`](@ref)`(x, lo, hi)`, the same shape and dtype as `x`
(Base's generic `clamp` compares with `>`, which on a tensor is an op, not a `Bool`).
"""
Base.clamp(x::Tensor, lo, hi) = clip(x, lo, hi)

"""
    if_else(cond, x, y)

`x` where the Bool tensor `cond` is true, else `y`, with broadcasting (`SelectV2`, TF's
`tf.where`, ADCME's `if_else`). `cond` may also be a Julia `Bool` array (made a constant,
as ADCME does). Numbers and arrays take the dtype of the other branch (two arrays keep
their own). With a Julia `Bool` scalar the branch is chosen when the graph is built: `x` or
`y` (a tensor, a value made a constant, or a function of no arguments, called). A non-Bool
condition raises an `OxiflowError`.
"""
function if_else(cond::Tensor, x, y)
    cond.dtype == Bool || invalid("if_else: the condition must be a Bool tensor, got $(cond.dtype)")
    (x isa Function || y isa Function) &&
        invalid("if_else: branches given as functions need a Julia Bool condition; with a tensor condition pass tensors or values")
    tx = x isa Tensor ? x : (y isa Tensor ? as_tensor(x, y) : as_tensor(x))
    ty = as_tensor(y, tx)
    return add_op("SelectV2", [cond, tx, ty])
end
if_else(cond::AbstractArray{Bool}, x, y) =
    if_else(x isa Tensor ? constant_in(getfield(x, :graph), collect(cond)) :
            y isa Tensor ? constant_in(getfield(y, :graph), collect(cond)) : constant(collect(cond)), x, y)
if_else(cond::Bool, x, y) = (b = cond ? x : y; b isa Function ? b() : as_tensor(b))

# `&` and `|` of Bool tensors (or a tensor and a Julia Bool) as `SelectV2`s.
function logical(f, a, b)
    ta, tb = a isa Tensor ? a : as_tensor(a, b), b isa Tensor ? b : as_tensor(b, a)
    (ta.dtype == Bool && tb.dtype == Bool) || invalid("$f: needs Bool operands, got $(ta.dtype) and $(tb.dtype)")
    return f == "&" ? if_else(ta, tb, false) : if_else(ta, true, tb)
end

"""
    a & b, a | b, !a

Logical and, or and not of Bool tensors (or a Bool tensor and a Julia `Bool`), with
broadcasting: TF's `tf.logical_and`, `tf.logical_or`, `tf.logical_not`, built here as
`SelectV2(a, b, false)`, `SelectV2(a, true, b)` and `SelectV2(a, false, true)`, which give
the same values. A non-Bool operand raises an `OxiflowError` naming the operator.
"""
Base.:&(a::Tensor, b::Union{Tensor,Bool}) = logical("&", a, b)
Base.:&(a::Bool, b::Tensor) = logical("&", a, b)
Base.:|(a::Tensor, b::Union{Tensor,Bool}) = logical("|", a, b)
Base.:|(a::Bool, b::Tensor) = logical("|", a, b)
function Base.:!(a::Tensor)
    a.dtype == Bool || invalid("!: needs a Bool tensor, got $(a.dtype)")
    return if_else(a, false, true)
end

"""
    isnan(x), isinf(x), isfinite(x)

Element by element on a float tensor `x`: a Bool tensor of `x`'s shape, true where the
element is NaN, infinite (either sign) or neither (TF's `IsNan`, `IsInf`, `IsFinite`:
`tf.math.is_nan`, `is_inf`, `is_finite`; `isnan.(x)` is the same). No gradient (Bool outputs). A
tensor of another dtype raises an `OxiflowError` naming the op.
"""
Base.isnan(x::Tensor) = add_op("IsNan", [x])
Base.isinf(x::Tensor) = add_op("IsInf", [x])
Base.isfinite(x::Tensor) = add_op("IsFinite", [x])

# A + I, I - A, ... with LinearAlgebra's UniformScaling: a dense identity of the tensor's
# dtype (ADCME ops.jl:990-1002); square matrices only.
function identity_like(A::Tensor, J::UniformScaling, what)
    known_size(A, "$what with UniformScaling")
    (ndims(A) == 2 && size(A, 1) == size(A, 2)) ||
        invalid("$what: UniformScaling needs a square matrix, got a tensor of shape $(size(A))")
    return constant_in(getfield(A, :graph), Matrix{A.dtype}(J, size(A, 1), size(A, 2)))
end
Base.:+(A::Tensor, J::UniformScaling) = A + identity_like(A, J, "+")
Base.:+(J::UniformScaling, A::Tensor) = identity_like(A, J, "+") + A
Base.:-(A::Tensor, J::UniformScaling) = A - identity_like(A, J, "-")
Base.:-(J::UniformScaling, A::Tensor) = identity_like(A, J, "-") - A

# ---------------------------------------------------------------- reductions

# 0-based axes from ADCME's 1-based `dims` (an Int or a collection, negative from the end;
# `nothing`: all axes).
reduce_axes(t::Tensor, dims, what) = dims === nothing ? collect(0:ndims(t)-1) : axes0(t, dims, what)

function reduction(op, t::Tensor, dims, what)
    axes = reduce_axes(t, dims, what)
    return add_op(op, [t]; axis=axes, keep_dims=false)
end

"""
    sum(t; dims), prod(t; dims), maximum(t; dims), minimum(t; dims), mean(t; dims)

Reductions over all axes (a scalar) or over the 1-based `dims` (an Int or a collection;
negative counts from the end, `dims=-1` is the last); reduced dimensions are dropped (ADCME: `maximum(A; dims=1)` of a 10×2 tensor is a length-2
vector). Ops `Sum`, `Prod`, `Max`, `Min`, `Mean` (TF's `tf.reduce_*`). `mean` needs a float
tensor. The gradient of `maximum`/`minimum` is shared equally among tied elements (TF's).
Unknown dimensions (a batch fed at run time) are fine: `sum(x; dims=1)` of an `n×10` batch
is a length-10 vector, `mean(x)` divides by the fed element count.
"""
Base.sum(t::Tensor; dims=nothing) = reduction("Sum", t, dims, "sum")
Base.prod(t::Tensor; dims=nothing) = reduction("Prod", t, dims, "prod")
Base.maximum(t::Tensor; dims=nothing) = reduction("Max", t, dims, "maximum")
Base.minimum(t::Tensor; dims=nothing) = reduction("Min", t, dims, "minimum")
Statistics.mean(t::Tensor; dims=nothing) = reduction("Mean", t, dims, "mean")
@doc (@doc sum(::Tensor)) mean

"""
    std(t; dims=nothing, corrected=false)

Standard deviation over all axes or `dims` (reduced dims dropped). ADCME's `std` is TF's
`tf.math.reduce_std`, the *uncorrected* (population) deviation, hence `corrected=false` by
default; `corrected=true` divides by `n - 1` like `Statistics.std`. Over an unknown
dimension (`nothing`) `n` is counted when the graph runs (a `Sum` of `ones_like(t)`), and a
single element gives `NaN`, as `Statistics.std` of one number does; over known dimensions
`n < 2` raises an `OxiflowError`. A composite of `Mean`, `Sub`, `Square`, `Sqrt`.
"""
function Statistics.std(t::Tensor; dims=nothing, corrected::Bool=false)
    axes = reduce_axes(t, dims, "std")
    m = add_op("Mean", [t]; axis=axes, keep_dims=true)
    v = reduction("Mean", (t - m)^2, dims, "std")
    if corrected && any(a -> size(t, a + 1) === nothing, axes)
        n = reduction("Sum", ones_like(t), dims, "std")
        v = v * n / (n - 1)
    elseif corrected
        n = prod(size(t, a + 1) for a in axes)
        n > 1 || invalid("std: corrected=true needs at least 2 elements, got $n")
        v = v * (n / (n - 1))
    end
    return sqrt(v)
end

"""
    norm(t, p=2)

The `p`-norm of all elements (ADCME's `norm` is `tf.norm`, which treats a matrix as a
vector, like `LinearAlgebra.norm`): `sqrt(sum(t^2))` for 2, `sum(abs(t))` for 1,
`maximum(abs(t))` for `Inf`, `sum(abs(t)^p)^(1/p)` otherwise. A composite.
"""
function LinearAlgebra.norm(t::Tensor, p::Real=2)
    p == 2 && return sqrt(sum(t^2))
    p == 1 && return sum(abs(t))
    p == Inf && return maximum(abs(t))
    p > 0 || invalid("norm: p must be positive, got $p")
    return sum(abs(t)^p)^(1 / p)
end

"""
    argmax(t; dims=1), argmin(t; dims=1)

1-based Int64 indices of the first maximum / minimum along `dims` (one axis, negative from
the end; ADCME's `tf.argmax(...) + 1`, TF's default axis 0). The axis is dropped: a vector gives a scalar,
a matrix with `dims=1` gives one index per column. Not differentiable.
"""
Base.argmax(t::Tensor; dims::Integer=1) = add_op("ArgMax", [t]; axis=dim0(t, dims, "argmax")) + 1
Base.argmin(t::Tensor; dims::Integer=1) = add_op("ArgMin", [t]; axis=dim0(t, dims, "argmin")) + 1

# ---------------------------------------------------------------- random

# Graph-level seeds (TF's `tf.set_random_seed`) and how many seeded random ops each graph
# has; weak keys so that replaced graphs are freed. Created at run time, not precompiled.
const SEED_TABLES = Ref{Any}(nothing)
function seed_tables()
    SEED_TABLES[] === nothing && (SEED_TABLES[] = (WeakKeyDict{Graph,Int}(), WeakKeyDict{Graph,Int}()))
    return SEED_TABLES[]::Tuple{WeakKeyDict{Graph,Int},WeakKeyDict{Graph,Int}}
end
const DEFAULT_GRAPH_SEED = 87654321   # TF's, used when only an op seed is given

"""
    set_random_seed(seed)

Sets the default graph's random seed (TF1's `tf.set_random_seed`): random ops created
afterwards get seeds derived from it and from their creation order, so rebuilding the same
graph and running it in a new `Session` reproduces the same values. Successive runs of a
random op in one session give fresh values. `reset_default_graph()` clears the seed.
"""
function set_random_seed(seed::Integer)
    g = get_default_graph()
    seeds, counts = seed_tables()
    seeds[g] = Int(seed)
    counts[g] = 0
    return nothing
end

# TF's random_seed.get_seed: (graph seed, op seed) -> the ops' (seed, seed2) attrs.
function op_seeds(seed)
    g = get_default_graph()
    seeds, counts = seed_tables()
    gs = get(seeds, g, nothing)
    if gs !== nothing
        n = get(counts, g, 0) + 1
        counts[g] = n
        return (gs, seed === nothing ? n : Int(seed))
    end
    seed === nothing && return (0, 0)
    return (DEFAULT_GRAPH_SEED, Int(seed))
end

random_shape(dims) = Int[d for d in (length(dims) == 1 && dims[1] isa Union{Tuple,AbstractVector} ? dims[1] : dims)]

"""
    normal(dims...; mean=0.0, stddev=1.0, dtype=Float64, seed=nothing)

Normally distributed tensor of shape `dims` (ADCME's `normal`, TF's `tf.random.normal`;
Float64 by default). `std` is accepted for `stddev`. `RandomStandardNormal * stddev + mean`
under the name scope `random_normal`; `mean` and `stddev` may be tensors of `dtype` that
broadcast to `dims` (TF's reparameterization, `μ + σ ε`, differentiates in both). See
[`set_random_seed`](@ref) for reproducibility; `seed` is TF's op-level seed.
"""
function normal(dims...; mean=0.0, stddev=1.0, std=nothing, dtype::Type=Float64, seed=nothing)
    std === nothing || (stddev = std)
    s1, s2 = op_seeds(seed)
    return name_scope("random_normal") do
        r = add_op("RandomStandardNormal", Tensor[]; shape=random_shape(dims), dtype=dtype, seed=s1, seed2=s2)
        r * random_param(stddev, dtype, "normal: stddev") + random_param(mean, dtype, "normal: mean")
    end
end

# A parameter of a random op: a tensor as it is (of `dtype`), a number as a constant.
function random_param(v, dtype, what)
    v isa Tensor || return constant(convert(dtype, v))
    v.dtype == dtype || invalid("$what is a $(v.dtype) tensor for a $dtype sample")
    return v
end

"""
    uniform(dims...; minval=0.0, maxval=1.0, dtype=Float64, seed=nothing)

Uniformly distributed tensor in `[minval, maxval)` of shape `dims` (ADCME's `uniform`, TF's
`tf.random.uniform`; Float64 by default; `lo`/`hi` are accepted too). `RandomUniform *
(maxval - minval) + minval` under the name scope `random_uniform`; the bounds may be tensors
of `dtype`.
"""
function uniform(dims...; minval=0.0, maxval=1.0, lo=nothing, hi=nothing, dtype::Type=Float64, seed=nothing)
    lo === nothing || (minval = lo)
    hi === nothing || (maxval = hi)
    s1, s2 = op_seeds(seed)
    return name_scope("random_uniform") do
        r = add_op("RandomUniform", Tensor[]; shape=random_shape(dims), dtype=dtype, seed=s1, seed2=s2)
        if minval isa Tensor || maxval isa Tensor
            lo_t = random_param(minval, dtype, "uniform: minval")
            r * (random_param(maxval, dtype, "uniform: maxval") - lo_t) + lo_t
        else
            r * constant(convert(dtype, maxval - minval)) + constant(convert(dtype, minval))
        end
    end
end

# ---------------------------------------------------------------- floor, floor division, modulo
# Ops: Floor, FloorDiv, FloorMod (crates/oxiflow-core/src/ops/math.rs).

"""
    floor(x)

Elementwise floor of a Float32/Float64 tensor (`Floor`, TF's `tf.floor`, ADCME's `floor`).
No gradient flows through it (TF's `_FloorGrad` returns `None`), so a path through `floor`
contributes nothing to `gradients`.
"""
Base.floor(a::Tensor) = add_op("Floor", [a])

for (A, B) in ((:Tensor, :Tensor), (:Tensor, :(Union{Number,AbstractArray})), (:(Union{Number,AbstractArray}), :Tensor))
    @eval begin
        Base.rem(a::$A, b::$B) = binary("FloorMod", a, b)
        Base.mod(a::$A, b::$B) = binary("FloorMod", a, b)
        Base.fld(a::$A, b::$B) = binary("FloorDiv", a, b)
        Base.div(a::$A, b::$B, ::RoundingMode{:Down}) = binary("FloorDiv", a, b)
    end
end

const FLOORMOD_DOC = """
    a % b, mod(a, b)

Elementwise remainder of the floor division of `a` by `b`, with broadcasting (`FloorMod`,
TF's `tf.math.floormod`, Python's `%`): the result has the sign of `b` and `|r| < |b|`, so
`-7 % 3 == 2` and `7 % -3 == -2` (for floats TF's `fmod(a, b)`, plus `b` when that is
nonzero and of the other sign). ADCME's `%` on tensors is this Python `%`, i.e. Julia's
`mod`, *not* Julia's `%` on numbers (`rem`, which truncates); on tensors `%`, `rem` and
`mod` are all `FloorMod`. Tensors, numbers and arrays mix (a number or array takes the
tensor's dtype); Float32, Float64, Int32, Int64. An integer division by zero is an
`OxiflowError` when the graph runs ("Integer division by zero", naming the op and node).
Gradient (TF's `_FloorModGrad`): `dy` for `a`, `-dy * fld(a, b)` for `b`.
"""
@doc FLOORMOD_DOC Base.mod(::Tensor, ::Tensor)
@doc FLOORMOD_DOC Base.rem(::Tensor, ::Tensor)

@doc """
    fld(a, b), div(a, b, RoundDown)

Elementwise floor of `a / b` with broadcasting (`FloorDiv`, TF's `tf.math.floordiv`,
Python's `//`): `fld(-7, 3) == -3`. Float32, Float64, Int32, Int64; an integer division by
zero is an `OxiflowError` when the graph runs. Not differentiable (TF's
`NotDifferentiable("FloorDiv")`): no gradient flows through it.
""" Base.fld(::Tensor, ::Tensor)

# dotted forms (a .% 2, mod.(a, b), fld.(a, b)): the number takes the tensor's dtype
BROADCAST_OPS[rem] = "FloorMod"
BROADCAST_OPS[mod] = "FloorMod"
BROADCAST_OPS[fld] = "FloorDiv"

# ---------------------------------------------------------------- rolling windows

export rollsum, rollmean, rollvar, rollstd

# A Julia vector becomes a Float64 constant (ADCME converts to Float64).
roll_input(u) = u isa Tensor ? u : constant(float.(u))

# The length of `u` after checking that `u` is a float vector of known length at least `m > 1`.
function check_window(u::Tensor, m::Int, fname)
    ndims(u) == 1 || invalid("$fname: needs a vector, got a tensor of size $(size(u))")
    u.dtype <: AbstractFloat || invalid("$fname: needs a Float32 or Float64 vector, got $(u.dtype)")
    n = size(u, 1)
    n === nothing && invalid("$fname: the vector's length is unknown; rolling windows need it (set_shape)")
    m > 1 || invalid("$fname: the window must be longer than 1, got $m")
    n >= m || invalid("$fname: the window ($m) is longer than the vector ($n)")
    return n
end

# The sums of the `m` consecutive entries of the vector `u` (length n >= m), `n - m + 1` of
# them: one `Conv2D` of `u` as a 1×n image with a 1×m filter of ones (VALID), so the graph
# has one op whatever `m` is, and the gradient is the convolution's.
function window_sums(u::Tensor, m::Int, fname)
    n = check_window(u, m, fname)
    x = reshape(u, (1, 1, n, 1))
    f = constant(ones(u.dtype, 1, m, 1, 1))
    return reshape(conv2d_op(x, f, 1, "VALID", fname), (n - m + 1,))
end

"""
    rollsum(u, m), rollmean(u, m), rollvar(u, m), rollstd(u, m)

Rolling statistics of a Float32/Float64 vector `u` of length `n` over windows of `m > 1`
consecutive entries (ADCME's rolling functions), a vector of length `n - m + 1`:
`rollsum` `o_k = Σ_{i=k}^{k+m-1} u_i`, `rollmean` `o_k / m`, `rollvar` the unbiased variance
`Σ (u_i - mean_k)^2 / (m - 1)` and `rollstd` its square root. `u` may be a Julia vector. An
`OxiflowError` names the function for a window of 1 or longer than `u`, a `u` that is not a
float vector or of unknown length. Differentiable (`rollstd` not where a window is constant).

The windows' sums are one `Conv2D` with a filter of ones (CPU only); `rollvar` sums the
squares of `u` minus its overall mean, `(Σc² - (Σc)²/m) / (m-1)`, which keeps the
cancellation small for data far from zero.
"""
rollsum(u, m::Integer) = window_sums(roll_input(u), Int(m), "rollsum")
rollmean(u, m::Integer) = window_sums(roll_input(u), Int(m), "rollmean") / Int(m)
function rollvar(u, m::Integer)
    u = roll_input(u)
    check_window(u, Int(m), "rollvar")
    c = u - mean(u)
    s, s2 = window_sums(c, Int(m), "rollvar"), window_sums(c .* c, Int(m), "rollvar")
    # rounding must not take a constant window's variance below zero (rollstd's square root)
    return max((s2 - s .* s / Int(m)) / (Int(m) - 1), zero(u.dtype))
end
rollstd(u, m::Integer) = sqrt(rollvar(u, m))
@doc (@doc rollsum) rollmean
@doc (@doc rollsum) rollvar
@doc (@doc rollsum) rollstd
