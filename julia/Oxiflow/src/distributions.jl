# ADCME's probability distributions: its wrappers of TF Probability's `tfp.distributions`
# (`ADCME.Normal(μ, σ)`, `logpdf(dist, x)`, `rand(dist, n)`), its samplers `categorical` and
# `choice`, and the lowercase samplers (`exponential(shape...; rate)`, ...). Everything is
# built from graph ops: a log density is an elementwise formula (differentiable in `x` and in
# the parameters), a sample a transform of `RandomStandardNormal`, `RandomUniform` or
# `RandomGamma` draws (reparameterized: differentiable in the parameters, except a gamma
# draw in its concentration). As in ADCME, the distribution types are not exported: write
# `Oxiflow.Normal`. Formulas: the densities of TF Probability's distributions of the same
# names (and their parameter names).

export logpdf, categorical, choice

"""
    ADCMEDistribution

The supertype of Oxiflow's distributions, ADCME's `ADCMEDistribution`: `Normal(loc, scale)`,
`Uniform(low=0, high=1)`, `Exponential(rate)`, `Cauchy(loc, scale)`, `Gumbel(loc, scale)`,
`HalfNormal(scale)`, `HalfCauchy(loc, scale)`, `Kumaraswamy(concentration1=1,
concentration0=1)`, `Pareto(concentration, scale=1)`, `Bernoulli(; logits or probs)`,
`Gamma(concentration, rate)`, `Beta(concentration1, concentration0)`, `Chi2(df)`, `Chi(df)`,
`InverseGamma(concentration, scale)`, `StudentT(df, loc, scale)`, `TruncatedNormal(loc,
scale, low, high)`, `InverseGaussian(loc, concentration)`, `SinhArcsinh(loc, scale,
skewness=0, tailweight=1)`, `Horseshoe(scale)`, `Poisson(; rate or log_rate)`,
`VonMises(loc, concentration)`, `Binomial(total_count; logits or probs)`, `Empirical(samples)`,
`MultivariateNormalDiag(; loc, scale_diag)` and `MultivariateNormalFullCovariance(; loc,
covariance_matrix)`, all in `Oxiflow.` (not exported, as in ADCME).

Parameters are given by position in that order or by TF Probability's keyword names; each
is a number, a Julia array or a float tensor, and they broadcast against each other (TF's
rules, aligned from the last dimension) into the distribution's batch shape. Their dtype is
that of the tensors among them (Float32 or Float64, which must agree), else Float64 (Float32
if a Julia value is Float32). The keyword `name` sets the name scope of the ops;
`validate_args=true` is not supported (an `OxiflowError`). A missing or unknown parameter
or a non-float tensor raises an `OxiflowError` naming it.

Use [`logpdf`](@ref)`(dist, x)` and `rand(dist, shape...)`. The parameterizations are TF
Probability 0.8's (TF 1.15's): `SinhArcsinh` scales by `2 / sinh(asinh(2) tailweight)`, which
later releases dropped; `Horseshoe`'s log density is TF Probability's approximation of the
exact one (which needs the exponential integral); `Poisson`'s log density interpolates
between whole numbers (`-Inf` below 0), its draws are whole numbers of the rate's dtype.
`VonMises` draws lie in `[-π, π)` (above a concentration of 1e6 they are the normal
approximation `N(loc, 1/concentration)`, as NumPy's); their gradient reaches `loc` but not
the concentration (an error, as for a gamma draw's). `Binomial`'s log probability is TF Probability's (through
`lgamma`, so defined between whole numbers too; `-Inf` outside `[0, total_count]`), its draws
whole numbers of its dtype (`RandomBinomial`, CPU only, no gradient). `Empirical(samples)`
(TF Probability's, scalar events) is the uniform distribution over the entries of the last
dimension of `samples` (the batch is the other dimensions): `logpdf` is the log of the
fraction of samples equal to `x` (`-Inf` for a value not among them), draws pick samples
uniformly (no gradient reaches `samples` through the choice; the picked values are the
samples').
"""
abstract type ADCMEDistribution end

# name, parameter names, defaults (`nothing`: required; `missing`: optional, see the type).
const DISTRIBUTIONS = (
    (:Normal, (:loc, :scale), (nothing, nothing)),
    (:Uniform, (:low, :high), (0.0, 1.0)),
    (:Exponential, (:rate,), (nothing,)),
    (:Cauchy, (:loc, :scale), (nothing, nothing)),
    (:Gumbel, (:loc, :scale), (nothing, nothing)),
    (:HalfNormal, (:scale,), (nothing,)),
    (:HalfCauchy, (:loc, :scale), (nothing, nothing)),
    (:Kumaraswamy, (:concentration1, :concentration0), (1.0, 1.0)),
    (:Pareto, (:concentration, :scale), (nothing, 1.0)),
    (:Bernoulli, (:logits, :probs), (missing, missing)),
    (:Gamma, (:concentration, :rate), (nothing, nothing)),
    (:Beta, (:concentration1, :concentration0), (nothing, nothing)),
    (:Chi2, (:df,), (nothing,)),
    (:Chi, (:df,), (nothing,)),
    (:InverseGamma, (:concentration, :scale), (nothing, nothing)),
    (:StudentT, (:df, :loc, :scale), (nothing, nothing, nothing)),
    (:TruncatedNormal, (:loc, :scale, :low, :high), (nothing, nothing, nothing, nothing)),
    (:InverseGaussian, (:loc, :concentration), (nothing, nothing)),
    (:SinhArcsinh, (:loc, :scale, :skewness, :tailweight), (nothing, nothing, 0.0, 1.0)),
    (:Horseshoe, (:scale,), (nothing,)),
    (:Poisson, (:rate, :log_rate), (missing, missing)),
    (:Binomial, (:total_count, :logits, :probs), (nothing, missing, missing)),
    (:Empirical, (:samples,), (nothing,)),
    (:VonMises, (:loc, :concentration), (nothing, nothing)),
    (:MultivariateNormalDiag, (:loc, :scale_diag), (missing, missing)),
    (:MultivariateNormalFullCovariance, (:loc, :covariance_matrix), (missing, nothing)),
)

for (D, names, defaults) in DISTRIBUTIONS
    doc = """
        Oxiflow.$D($(join(names, ", ")))

    TF Probability's `$D` (ADCME's `ADCME.$D`); see [`ADCMEDistribution`](@ref).
    """
    @eval begin
        struct $D <: ADCMEDistribution
            params::Vector{Union{Tensor,Missing}}
            name::String
            # the only inner constructor, so that `$D(a, b)` always means the parameters
            $D(ps::Vector{Union{Tensor,Missing}}, name::String, ::Val{:made}) = new(ps, name)
        end
        $D(args...; kwargs...) = check_dist($D(dist_params($(string(D)), $names, $defaults, args, kwargs)..., Val(:made)))
        @doc $doc $D
    end
end

# Checks of one distribution's parameters beyond their dtypes, when it is made.
check_dist(d::ADCMEDistribution) = d

# The parameters as tensors of one float dtype, and the name scope.
function dist_params(dname, names, defaults, args, kwargs)
    length(args) <= length(names) ||
        invalid("$dname: takes at most $(length(names)) parameters ($(join(names, ", "))), got $(length(args))")
    vals = Any[i <= length(args) ? args[i] : defaults[i] for i in 1:length(names)]
    scope = dname
    for (k, v) in kwargs
        if k == :name
            scope = string(v)
        elseif k == :validate_args
            v == false || invalid("$dname: validate_args=true is not supported")
        elseif k == :allow_nan_stats
            continue
        else
            i = findfirst(n -> n == k, names)
            i === nothing && invalid("$dname: unknown parameter $k (its parameters: $(join(names, ", ")))")
            i <= length(args) && invalid("$dname: the parameter $k is given twice")
            vals[i] = v
        end
    end
    for (n, v) in zip(names, vals)
        v === nothing && invalid("$dname: the parameter $n is required")
    end
    given = [v for v in vals if v !== missing]
    isempty(given) && invalid("$dname: give at least one of $(join(names, ", "))")
    ts = [v for v in given if v isa Tensor]
    for t in ts
        t.dtype in (Float32, Float64) || invalid("$dname: parameters must be Float32 or Float64, got a $(t.dtype) tensor")
    end
    T = !isempty(ts) ? ts[1].dtype : any(v -> eltype(v) == Float32, given) ? Float32 : Float64
    all(t -> t.dtype == T, ts) || invalid("$dname: parameters of different dtypes ($(join(unique([t.dtype for t in ts]), ", "))); cast one")
    for v in given
        v isa Tensor || eltype(v) <: Real || invalid("$dname: a parameter must be a number, a real array or a float tensor, got $(typeof(v))")
    end
    ps = Union{Tensor,Missing}[v === missing ? missing : v isa Tensor ? v : constant(T.(v)) for v in vals]
    return ps, scope
end

dist_dtype(d::ADCMEDistribution) = first(p for p in d.params if p !== missing).dtype
in_scope(f, d::ADCMEDistribution, what) = name_scope(f, "$(d.name)/$what")

# The batch shape: the parameters' shapes broadcast from the last dimension (TF's rules).
function batch_shape(d::ADCMEDistribution, dname, ps=d.params)
    out = Int[]
    for p in ps
        p === missing && continue
        s = size(p)
        any(x -> x === nothing, s) && invalid("$dname: sampling needs parameters of known shape, got $(s)")
        n = max(length(out), length(s))
        a = vcat(ones(Int, n - length(out)), out); b = vcat(ones(Int, n - length(s)), collect(Int, s))
        for i in 1:n
            (a[i] == b[i] || a[i] == 1 || b[i] == 1) ||
                invalid("$dname: parameters of shapes $(Tuple(out)) and $(s) do not broadcast")
        end
        out = [a[i] == 1 ? b[i] : a[i] for i in 1:n]      # a size-1 dimension takes the other's (also 0)
    end
    return out
end

# `x` as a tensor of the distribution's dtype (integer and Bool values are cast).
function dist_value(d::ADCMEDistribution, x, dname)
    T = dist_dtype(d)
    t = x isa Tensor ? x : constant(T.(x))
    t.dtype == T && return t
    t.dtype <: AbstractFloat && invalid("$dname: logpdf of a $(t.dtype) value under a $T distribution; cast one")
    return cast(t, T)
end

# Standard draws in Float64 (so that a Float32 distribution's uniforms are never exactly 0):
# normals, and uniforms strictly inside (0, 1): `RandomUniform` gives multiples of 2^-53 in
# [0, 1), and adding 2^-55 moves 0 to 2^-55 while the largest, 1 - 2^-53, rounds back to itself.
function std_normal(shape, seed)
    s1, s2 = op_seeds(seed)
    return add_op("RandomStandardNormal", Tensor[]; shape=shape, dtype=Float64, seed=s1, seed2=s2)
end
function open_uniform(shape, seed)
    s1, s2 = op_seeds(seed)
    return add_op("RandomUniform", Tensor[]; shape=shape, dtype=Float64, seed=s1, seed2=s2) + 2.0^-55
end
# A second op-level seed for a second draw of one sample (`nothing` stays `nothing`: each op
# then gets its own seed), so that two draws of one `seed` are not the same stream.
derived_seed(seed, salt) = seed === nothing ? nothing : Int(hash((Int(seed), salt)) % UInt(2^31 - 1))
# Gamma(α, 1) draws of shape (shape..., size(α)...) (`RandomGamma`, CPU only, as TF's).
function std_gamma(alpha::Tensor, shape, seed)
    s1, s2 = op_seeds(seed)
    return add_op("RandomGamma", Tensor[alpha]; shape=shape, seed=s1, seed2=s2)
end

"""
    logpdf(dist::ADCMEDistribution, x) -> Tensor

ADCME's `logpdf` (TF Probability's `log_prob`): the log density (log probability for
`Bernoulli`) of `dist` at `x`, elementwise with broadcasting against the batch shape; for the
multivariate normals the last dimension of `x` is the event (`k` values) and is summed over.
`x` is a number, an array or a tensor of the distribution's dtype (integer values are cast).
Outside the support (`x < 0` for `Exponential`, `x ∉ [low, high)` for `Uniform`, ...) it is
`-Inf`. Differentiable in `x` and in the parameters.
"""
function logpdf end

"""
    rand(dist::ADCMEDistribution[, shape]; seed=nothing) -> Tensor

ADCME's `rand(dist, shape)` (TF Probability's `sample(shape)`): draws of size
`(shape..., batch..., event...)`, where `shape` is missing (one draw), an integer, a tuple or
vector of integers, or several integers. The draws are reparameterized, so gradients flow to
the parameters, except a gamma draw's (`Gamma`, `Beta`, `Chi2`, `Chi`, `InverseGamma`,
`StudentT`) to its concentration or degrees of freedom: that gradient raises an error, as no
gradient of `RandomGamma` is defined here; those distributions also sample on the CPU only
(`RandomGamma` has no GPU kernel, as in TF). `Bernoulli` gives Int32 zeros and ones;
`Poisson` whole numbers of its dtype (`RandomPoissonV2`, CPU only, no gradient). `seed`
is TF's op-level seed (see [`set_random_seed`](@ref)).
"""
Base.rand(d::ADCMEDistribution; seed=nothing) = sample_dist(d, Int[], seed)
Base.rand(d::ADCMEDistribution, n::Integer; seed=nothing) = sample_dist(d, [Int(n)], seed)
Base.rand(d::ADCMEDistribution, shape::Union{Tuple,AbstractVector}; seed=nothing) = sample_dist(d, collect(Int, shape), seed)
Base.rand(d::ADCMEDistribution, shape::Dims; seed=nothing) = sample_dist(d, collect(Int, shape), seed)   # before Random's
Base.rand(d::ADCMEDistribution, n::Integer, dims::Integer...; seed=nothing) = sample_dist(d, Int[n, dims...], seed)

# The draws: each type's `draw(d, shape, batch, seed)` works in Float64; cast to the dtype.
function sample_dist(d::ADCMEDistribution, shape::Vector{Int}, seed)
    all(>=(0), shape) || invalid("$(typeof(d)): sample shape $(Tuple(shape)) has a negative dimension")
    T = dist_dtype(d)
    return in_scope(d, "sample") do
        out = draw(d, shape, dist_batch(d), seed)
        out.dtype == T || out.dtype == Int32 ? out : cast(out, T)
    end
end
dist_batch(d::ADCMEDistribution) = batch_shape(d, string(nameof(typeof(d))))
# TF Probability's Empirical: the last dimension of `samples` holds the samples
function dist_batch(d::Empirical)
    s = size(d.params[1])
    all(x -> x !== nothing, s) || invalid("Empirical: sampling needs samples of known shape, got $(s)")
    return collect(Int, s[1:end-1])
end
f64(p::Tensor) = cast(p, Float64)     # `cast` returns a Float64 tensor as it is
f64s(d::ADCMEDistribution) = [p === missing ? missing : f64(p) for p in d.params]

# A mask-safe log density: `f(x_safe)` where `inside`, `-Inf` elsewhere; `x_safe` takes
# `inside_value` outside, so that neither branch's gradient is NaN there.
function masked_logp(f, x::Tensor, inside::Tensor, inside_value)
    xs = if_else(inside, x, inside_value)
    return if_else(inside, f(xs), -Inf)
end
halflog2π(T) = T(0.5 * log(2π))

include("distributions_defs.jl")
include("distributions_more.jl")

# ---------------------------------------------------------------- ADCME's samplers

"""
    categorical(n; logits=nothing, dtype=Float64, seed=nothing) -> Tensor{Int64}

ADCME's `categorical` (TF's `tf.random.categorical` plus one): `n` draws of 1-based class
numbers. `logits` (a vector of `c` or a `b×c` matrix, numbers or a float tensor) are the
unnormalized log probabilities of the `c` classes (each row one distribution); the result
is a vector of `n` (vector `logits`) or a `b×n` matrix. Without `logits`, `n` draws from `n`
equally likely classes, as ADCME. Drawn by the Gumbel-max trick: the argmax over classes of
`logits + G` with `G` standard Gumbel noise, which is exactly categorical; it materializes
`b×n×c` noise values. Not differentiable. An `OxiflowError` names logits that are not a
vector or matrix of known size.
"""
function categorical(n::Integer; logits=nothing, dtype::Type=Float64, seed=nothing)
    n >= 0 || invalid("categorical: the number of draws must be non-negative, got $n")
    l = logits === nothing ? constant(ones(dtype, n)) : logits isa Tensor ? logits : constant(float.(logits))
    (ndims(l) in (1, 2) && all(s -> s !== nothing, size(l))) ||
        invalid("categorical: logits must be a vector or a matrix of known size, got size $(size(l))")
    vec_in = ndims(l) == 1
    b, c = vec_in ? (1, size(l, 1)) : size(l)
    c >= 1 || invalid("categorical: logits need at least one class, got size $(size(l))")
    return name_scope("categorical") do
        g = -log(-log(open_uniform([b, n, c], seed)))
        scores = reshape(f64(l), b, 1, c) .+ g
        out = argmax(scores; dims=3)                        # b × n, 1-based
        vec_in ? reshape(out, n) : out
    end
end

"""
    choice(inputs, n_samples; replace=false, seed=nothing) -> Tensor

ADCME's `choice`: `n_samples` rows (entries of a vector) of `inputs` (an array or a tensor of
known first dimension `N`), drawn uniformly: without replacement (a random subset in random
order, the top `n_samples` of `N` uniform draws, as ADCME) or with it (`categorical` over `N`
equal classes). Without replacement `n_samples ≤ N` is required (an `OxiflowError`
otherwise). Gradients flow to `inputs` through the gather.
"""
function choice(inputs, n_samples::Integer; replace::Bool=false, seed=nothing)
    t = inputs isa Tensor ? inputs : constant(inputs)
    N = size(t, 1)
    N === nothing && invalid("choice: the first dimension of inputs must be known, got size $(size(t))")
    rest = ntuple(_ -> Colon(), ndims(t) - 1)
    replace && return t[categorical(n_samples; logits=zeros(N), seed=seed), rest...]
    n_samples <= N || invalid("choice: cannot draw $n_samples of $N rows without replacement")
    _, idx = topk(open_uniform([N], seed), n_samples)
    return t[idx, rest...]
end

# ADCME's lowercase samplers: `exponential(shape...; rate=…, dtype=Float64)` draws of the
# distribution with those parameters, cast to `dtype`; without a shape, one draw (a scalar).
for (D, f) in ((:Exponential, :exponential), (:Cauchy, :cauchy), (:Gumbel, :gumbel),
               (:HalfNormal, :halfnormal), (:HalfCauchy, :halfcauchy), (:Kumaraswamy, :kumaraswamy),
               (:Pareto, :pareto), (:Bernoulli, :bernoulli), (:Gamma, :gamma), (:Beta, :beta),
               (:Chi2, :chi2), (:Chi, :chi), (:InverseGamma, :inversegamma), (:StudentT, :studentt),
               (:TruncatedNormal, :truncatednormal), (:InverseGaussian, :inversegaussian),
               (:SinhArcsinh, :sinharcsinh), (:Horseshoe, :horseshoe), (:Poisson, :poisson),
               (:VonMises, :vonmises))
    doc = """
        $f(shape...; dtype=Float64, seed=nothing, params...)

    ADCME's `$f`: `rand(Oxiflow.$D(; params...), shape...)` cast to `dtype` (a scalar without
    `shape`); see [`ADCMEDistribution`](@ref) for the parameters.
    """
    @eval begin
        export $f
        function $f(shape::Integer...; dtype::Type=Float64, seed=nothing, kwargs...)
            return cast(rand($D(; kwargs...), collect(Int, shape); seed=seed), dtype)
        end
        @doc $doc $f
    end
end
