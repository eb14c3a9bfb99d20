# TF1's initializer objects (tf.compat.v1.*_initializer, which ADCME re-exports from
# variable.jl) and ADCME's `xavier_init` and `seed!`. An initializer is a Julia object that
# makes the initial value of a variable of a given shape on the host; `get_variable` and
# `variable_scope(...; initializer=...)` take one.

using Random: MersenneTwister, AbstractRNG, GLOBAL_RNG

export constant_initializer, random_normal_initializer, random_uniform_initializer,
       truncated_normal_initializer, glorot_normal_initializer, glorot_uniform_initializer,
       uniform_unit_scaling_initializer, variance_scaling_initializer, xavier_init, seed!

"""
    Initializer

An initializer object (TF1's `tf.keras.initializers.Initializer`): `init(shape, T=Float64)`
(or `init(shape; dtype=T)`) returns a Julia `Array{T}` of size `shape` (TF's order of
dimensions). Made by [`constant_initializer`](@ref), [`random_normal_initializer`](@ref),
[`random_uniform_initializer`](@ref), [`truncated_normal_initializer`](@ref),
[`glorot_normal_initializer`](@ref), [`glorot_uniform_initializer`](@ref),
[`uniform_unit_scaling_initializer`](@ref) and [`variance_scaling_initializer`](@ref); passed
as `get_variable(name; initializer=init, shape=...)` or `variable_scope(f, name;
initializer=init)` (the default of the `get_variable`s inside).
"""
abstract type Initializer end

(init::Initializer)(shape, T::Type=Float64; dtype::Type=T) = initial_value(init, Tuple(Int(d) for d in shape), dtype)

# The generator of a random initializer: TF's seed rule (`op_seeds`) — a graph seed set by
# `set_random_seed` or an op seed makes the values reproducible; neither: Julia's global RNG.
function initializer_rng(seed)
    gs, s = op_seeds(seed)
    (gs, s) == (0, 0) && return GLOBAL_RNG
    return MersenneTwister(UInt32[mod(gs, 2^32), mod(s, 2^32)])
end

# TF's `_compute_fans`: (fan_in, fan_out) of a kernel shape; a convolution's receptive field
# multiplies both.
function compute_fans(dims::Tuple)
    length(dims) == 0 && return (1, 1)
    length(dims) == 1 && return (dims[1], dims[1])
    length(dims) == 2 && return (dims[1], dims[2])
    rf = prod(dims[1:end-2])
    return (dims[end-1] * rf, dims[end] * rf)
end

function check_float(T, who)
    T <: AbstractFloat || invalid("$who: needs a float dtype (Float32 or Float64), got $T")
end

# Normal values with `mean` and `stddev`, redrawn while more than two deviations away (TF's
# `TruncatedNormal`).
function truncated_normal(rng::AbstractRNG, dims, mean, stddev)
    z = randn(rng, Float64, dims)
    for i in eachindex(z)
        while abs(z[i]) > 2
            z[i] = randn(rng)
        end
    end
    return mean .+ stddev .* z
end

struct ConstantInitializer <: Initializer
    value::Any
end
"""
    constant_initializer(value=0)

Fills with `value` (TF1's `tf.constant_initializer`): a number, or an array of exactly the
variable's size (TF's `verify_shape`), else an `OxiflowError`.
"""
constant_initializer(value=0) = ConstantInitializer(value)
function initial_value(init::ConstantInitializer, dims, T)
    v = init.value
    v isa Number && return fill(T(v), dims...)
    size(v) == dims || invalid("constant_initializer: a value of size $(size(v)) for a variable of shape $dims")
    return T.(v)
end

struct RandomInitializer <: Initializer
    kind::Symbol      # :normal, :uniform, :truncated
    a::Float64        # mean or minval
    b::Float64        # stddev or maxval
    seed::Any
end
"""
    random_normal_initializer(mean=0.0, stddev=1.0; seed=nothing)
    random_uniform_initializer(minval=0.0, maxval=1.0; seed=nothing)
    truncated_normal_initializer(mean=0.0, stddev=1.0; seed=nothing)

Random initial values (TF1's `tf.random_normal_initializer`, `tf.random_uniform_initializer`
and `tf.truncated_normal_initializer`, with their defaults; a truncated normal redraws values
more than two standard deviations from the mean). `seed` is TF's op seed; with a graph seed
from `set_random_seed` or an op seed the values are reproducible, otherwise they come from
Julia's global RNG. Float dtypes only.
"""
random_normal_initializer(mean=0.0, stddev=1.0; seed=nothing) = RandomInitializer(:normal, mean, stddev, seed)
random_uniform_initializer(minval=0.0, maxval=1.0; seed=nothing) = RandomInitializer(:uniform, minval, maxval, seed)
truncated_normal_initializer(mean=0.0, stddev=1.0; seed=nothing) = RandomInitializer(:truncated, mean, stddev, seed)
@doc (@doc random_normal_initializer) random_uniform_initializer
@doc (@doc random_normal_initializer) truncated_normal_initializer
function initial_value(init::RandomInitializer, dims, T)
    check_float(T, "$(init.kind)_initializer")
    rng = initializer_rng(init.seed)
    v = init.kind === :normal ? init.a .+ init.b .* randn(rng, Float64, dims) :
        init.kind === :uniform ? init.a .+ (init.b - init.a) .* rand(rng, Float64, dims) :
        truncated_normal(rng, dims, init.a, init.b)
    return T.(reshape(v, dims))
end

struct VarianceScalingInitializer <: Initializer
    scale::Float64
    mode::String          # fan_in, fan_out, fan_avg
    distribution::String  # truncated_normal, untruncated_normal, uniform
    seed::Any
end
"""
    variance_scaling_initializer(scale=1.0; mode="fan_in", distribution="truncated_normal", seed=nothing)
    glorot_uniform_initializer(; seed=nothing), glorot_normal_initializer(; seed=nothing)

TF1's `tf.variance_scaling_initializer`: values of variance `scale / n`, `n` the fan in, the
fan out or their mean (`mode`; TF's `_compute_fans`: a matrix `[in, out]`, a convolution
kernel `[..., in, out]` times its receptive field); `distribution` `"truncated_normal"`
(also `"normal"`, TF1's alias; standard deviation `sqrt(scale / n) / 0.8796...`, the
truncation's correction), `"untruncated_normal"` or `"uniform"` (limit `sqrt(3 scale / n)`).
The Glorot (Xavier) initializers are `scale = 1`, `mode = "fan_avg"` with a uniform or a
truncated normal distribution; `glorot_uniform_initializer` is `get_variable`'s default.
ADCME maps `variance_scaling_initializer` to `uniform_unit_scaling_initializer`; here it is
TF's.
"""
function variance_scaling_initializer(scale=1.0; mode="fan_in", distribution="truncated_normal", seed=nothing)
    scale > 0 || invalid("variance_scaling_initializer: scale must be positive, got $scale")
    mode in ("fan_in", "fan_out", "fan_avg") || invalid("variance_scaling_initializer: mode must be \"fan_in\", \"fan_out\" or \"fan_avg\", got $(repr(mode))")
    d = distribution == "normal" ? "truncated_normal" : String(distribution)
    d in ("truncated_normal", "untruncated_normal", "uniform") ||
        invalid("variance_scaling_initializer: distribution must be \"truncated_normal\", \"untruncated_normal\" or \"uniform\", got $(repr(distribution))")
    return VarianceScalingInitializer(scale, mode, d, seed)
end
glorot_uniform_initializer(; seed=nothing) = VarianceScalingInitializer(1.0, "fan_avg", "uniform", seed)
glorot_normal_initializer(; seed=nothing) = VarianceScalingInitializer(1.0, "fan_avg", "truncated_normal", seed)
@doc (@doc variance_scaling_initializer) glorot_uniform_initializer
@doc (@doc variance_scaling_initializer) glorot_normal_initializer
function initial_value(init::VarianceScalingInitializer, dims, T)
    check_float(T, "variance_scaling_initializer")
    fan_in, fan_out = compute_fans(dims)
    n = max(1.0, init.mode == "fan_in" ? fan_in : init.mode == "fan_out" ? fan_out : (fan_in + fan_out) / 2)
    rng = initializer_rng(init.seed)
    v = if init.distribution == "uniform"
        limit = sqrt(3 * init.scale / n)
        limit .* (2 .* rand(rng, Float64, dims) .- 1)
    elseif init.distribution == "untruncated_normal"
        sqrt(init.scale / n) .* randn(rng, Float64, dims)
    else
        truncated_normal(rng, dims, 0.0, sqrt(init.scale / n) / 0.87962566103423978)
    end
    return T.(reshape(v, dims))
end

struct UniformUnitScalingInitializer <: Initializer
    factor::Float64
    seed::Any
end
"""
    uniform_unit_scaling_initializer(factor=1.0; seed=nothing)

TF1's `tf.uniform_unit_scaling_initializer`: uniform in `[-limit, limit]`, `limit =
factor * sqrt(3 / input_size)`, `input_size` the product of every dimension but the last.
"""
uniform_unit_scaling_initializer(factor=1.0; seed=nothing) = UniformUnitScalingInitializer(factor, seed)
function initial_value(init::UniformUnitScalingInitializer, dims, T)
    check_float(T, "uniform_unit_scaling_initializer")
    input_size = length(dims) <= 1 ? 1.0 : Float64(prod(dims[1:end-1]))
    limit = init.factor * sqrt(3 / input_size)
    return T.(reshape(limit .* (2 .* rand(initializer_rng(init.seed), Float64, dims) .- 1), dims))
end

"""
    xavier_init(size, dtype=Float64)

ADCME's `xavier_init`: a Julia array of `size` drawn from a normal distribution with standard
deviation `sqrt(2 / size[1])`, for a weight matrix `[in, out]`.
"""
function xavier_init(size, dtype=Float64)
    return dtype.(randn(size...) .* sqrt(2 / size[1]))
end

"""`seed!(k)`: ADCME's name for [`set_random_seed`](@ref)`(k)`, TF's graph-level seed."""
seed!(k::Integer) = set_random_seed(k)
