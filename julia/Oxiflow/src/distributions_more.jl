# TruncatedNormal, InverseGaussian, SinhArcsinh, Horseshoe, Poisson and VonMises: log
# densities (TF Probability's `log_prob` formulas, in the distribution's dtype) and draws (in
# Float64) for distributions.jl, as distributions_defs.jl does for the others.

# The standard normal CDF Φ(z) = erfc(-z/√2)/2, accurate where it is tiny (z ≪ 0).
ndtr(z) = 0.5 .* add_op("Erfc", Tensor[-z ./ sqrt(2)])
# Φ⁻¹(p) (TF's `Ndtri`), precise in the lower tail where 2p - 1 would round to -1.
ndtri(p) = add_op("Ndtri", Tensor[p])

# ---------------------------------------------------------------- TruncatedNormal

# Φ(β) - Φ(α), taken in the mirrored tail Φ(-α) - Φ(-β) where α > 0, so that two values
# near 1 are never subtracted.
function truncnorm_mass(α, β)
    upper = α > 0
    return if_else(upper, ndtr(-α) .- ndtr(-β), ndtr(β) .- ndtr(α))
end

logpdf(d::TruncatedNormal, x) = dist_logpdf(d, x) do x, loc, scale, low, high
    α, β = (low .- loc) ./ scale, (high .- loc) ./ scale
    masked_logp(x, (x >= low) & (x <= high), 0.0) do xs
        z = (xs .- loc) ./ scale
        -0.5 .* z .* z .- halflog2π(x.dtype) .- log(scale) .- log(truncnorm_mass(α, β))
    end
end
# x = loc + scale Φ⁻¹(Φ(α) + u (Φ(β) - Φ(α))), in the mirrored tail where α > 0; clamped to
# [low, high] against the last bit of rounding. Each branch sees α clamped to its own side of
# 0 (the same α where it is chosen), so that the other one never takes Φ⁻¹(1) = ∞, whose
# gradient would turn the select's zero into NaN.
function draw(d::TruncatedNormal, shape, batch, seed)
    loc, scale, low, high = f64s(d)
    α, β = (low .- loc) ./ scale, (high .- loc) ./ scale
    u = open_uniform([shape; batch], seed)
    upper = α > 0
    αl, αu = min(α, 0.0), max(α, 0.0)
    z_low = ndtri(ndtr(αl) .+ u .* (ndtr(β) .- ndtr(αl)))
    z_up = -ndtri(ndtr(-β) .+ u .* (ndtr(-αu) .- ndtr(-β)))
    x = loc .+ scale .* if_else(upper, z_up, z_low)
    return min(max(x, low), high)
end

# ---------------------------------------------------------------- InverseGaussian

logpdf(d::InverseGaussian, x) = dist_logpdf(d, x) do x, μ, λ
    masked_logp(x, x > 0, 1.0) do xs
        0.5 .* (log(λ) .- log(xs) .* 3) .- halflog2π(x.dtype) .- λ .* (xs .- μ) .^ 2 ./ (2 .* μ .* μ .* xs)
    end
end
# Michael, Schucany & Haas (1976): y = ν², x = μ + μ²y/(2λ) - μ/(2λ) √(4μλy + μ²y²); keep x
# with probability μ / (μ + x), else take μ²/x.
function draw(d::InverseGaussian, shape, batch, seed)
    μ, λ = f64s(d)
    ν = std_normal([shape; batch], seed)
    y = ν .* ν
    x = μ .+ μ .* μ .* y ./ (2 .* λ) .- μ ./ (2 .* λ) .* sqrt(4 .* μ .* λ .* y .+ μ .* μ .* y .* y)
    u = open_uniform([shape; batch], derived_seed(seed, 1))
    return if_else(u <= μ ./ (μ .+ x), x, μ .* μ ./ x)
end

# ---------------------------------------------------------------- SinhArcsinh

# asinh, sinh and log cosh from Exp/Log, stable for either sign and large arguments
sas_asinh(x) = sign(x) .* log(abs(x) .+ sqrt(x .* x .+ 1))
sas_sinh(u) = 0.5 .* (exp(u) .- exp(-u))
sas_logcosh(u) = abs(u) .+ softplus(-2 .* abs(u)) .- log(2.0)
# TF Probability 0.8's (TF 1.15's) scale: c = 2 scale / F₀(2), F₀(z) = sinh(asinh(z) τ), so
# that P[Y - loc ≤ 2 scale] = P[Z ≤ 2] when skewness = 0. (Later TF Probability releases
# dropped the factor.)
sas_c(scale, τ) = 2 .* scale ./ sas_sinh(asinh(2.0) .* τ)

logpdf(d::SinhArcsinh, x) = dist_logpdf(d, x) do x, loc, scale, skew, τ
    c = sas_c(scale, τ)
    y = (x .- loc) ./ c
    w = sas_asinh(y) ./ τ .- skew          # z = sinh(w), dz/dy = cosh(w) / (τ √(1 + y²))
    z = sas_sinh(w)
    -0.5 .* z .* z .- halflog2π(x.dtype) .+ sas_logcosh(w) .- 0.5 .* log(1 .+ y .* y) .- log(τ) .- log(c)
end
function draw(d::SinhArcsinh, shape, batch, seed)
    loc, scale, skew, τ = f64s(d)
    z = std_normal([shape; batch], seed)
    return loc .+ sas_c(scale, τ) .* sas_sinh((sas_asinh(z) .+ skew) .* τ)
end

# ---------------------------------------------------------------- Horseshoe

# TF Probability's approximation of the normal / half-Cauchy marginal (the exact density
# needs the exponential integral E₁), with its constants: g = e^(-γ), b = √(2(1-g)/(g(2-g))),
# h∞ = (1-g)(g²-6g+12)/(3g(2-g)²b).
logpdf(d::Horseshoe, x) = dist_logpdf(d, x) do x, scale
    xx = (x ./ scale) .^ 2 ./ 2
    g, b, h_inf = 0.5614594835668851, 1.0420764938351215, 1.0801359952503342
    q = (20 / 47) .* xx .^ 1.0919284281983377
    h = 1 ./ (1 .+ xx .^ 1.5) .+ h_inf .* q ./ (1 .+ q)
    c = -0.5 * log(2 * π^3) .- log(g .* scale)
    -log(1 .+ (1 - g) / g .* exp(-xx ./ (1 - g))) .+ log(log(1 .+ g ./ xx .- (1 - g) ./ (h .+ b .* xx) .^ 2)) .+ c
end
# a normal times scale times a standard half-Cauchy draw (the local shrinkage)
function draw(d::Horseshoe, shape, batch, seed)
    scale, = f64s(d)
    λ = tan((π / 2) .* open_uniform([shape; batch], seed))
    return std_normal([shape; batch], derived_seed(seed, 1)) .* scale .* λ
end

# ---------------------------------------------------------------- Poisson

function check_dist(d::Poisson)
    r, l = d.params
    (r === missing) == (l === missing) && invalid("Poisson: give exactly one of rate and log_rate")
    return d
end
poisson_log_rate(d::Poisson) = ((r, l) = d.params; l !== missing ? l : log(r))
# x log λ - λ - log Γ(x + 1) for x ≥ 0, -Inf below: the log probability at whole numbers,
# and between them TF Probability's continuous interpolation (its default,
# `interpolate_nondiscrete=True`); 0 log 0 counts as 0, so a zero rate gives 0 at x = 0.
logpdf(d::Poisson, x) = dist_logpdf(d, x) do x, _, _
    lr = poisson_log_rate(d)
    masked_logp(x, x >= 0, 0.0) do xs
        if_else(xs > 0, xs .* lr, 0.0) .- exp(lr) .- lgamma(xs .+ 1)
    end
end
function draw(d::Poisson, shape, batch, seed)
    r, l = d.params
    rate = r !== missing ? f64(r) : exp(f64(l))
    s1, s2 = op_seeds(seed)
    return add_op("RandomPoissonV2", Tensor[to_batch(rate, batch)]; shape=shape, seed=s1, seed2=s2)
end

# ---------------------------------------------------------------- VonMises

# κ (cos(x - μ) - 1) - log(2π I₀e(κ)): TF Probability's log density, with I₀ scaled by e^{-κ}
# so that a large concentration does not overflow; x anywhere (the density is periodic).
logpdf(d::VonMises, x) = dist_logpdf(d, x) do x, loc, κ
    κ .* (cos(x .- loc) .- 1) .- log(add_op("BesselI0e", Tensor[κ])) .- x.dtype(log(2π))
end
# loc plus a centred draw (`_RandomVonMises`), wrapped into [-π, π) as TF Probability wraps
# its draws
function draw(d::VonMises, shape, batch, seed)
    loc, κ = f64s(d)
    s1, s2 = op_seeds(seed)
    x = loc .+ add_op("_RandomVonMises", Tensor[to_batch(κ, batch)]; shape=shape, seed=s1, seed2=s2)
    return x .- (2π) .* floor((x .+ π) ./ (2π))
end

# ---------------------------------------------------------------- Binomial

function check_dist(d::Binomial)
    _, l, p = d.params
    (l === missing) == (p === missing) && invalid("Binomial: give exactly one of logits and probs")
    return d
end
# log C(n, k) + k log p + (n - k) log(1 - p) for 0 <= k <= n (TF Probability's `log_prob`,
# which extends it to non-whole k through lgamma), -Inf outside; with logits
# k l - n softplus(l), exact for extreme probabilities
logpdf(d::Binomial, x) = dist_logpdf(d, x) do x, _, _, _
    n, l, p = d.params
    masked_logp(x, (x >= 0) & (x <= n), 0.0) do xs
        comb = lgamma(n .+ 1) .- lgamma(xs .+ 1) .- lgamma(n .- xs .+ 1)
        l !== missing ? comb .+ xs .* l .- n .* softplus(l) :
            comb .+ if_else(xs > 0, xs .* log(p), 0.0) .+ if_else(n .- xs > 0, (n .- xs) .* log(1 .- p), 0.0)
    end
end
function draw(d::Binomial, shape, batch, seed)
    n, l, p = d.params
    prob = p !== missing ? f64(p) : sigmoid(f64(l))
    s1, s2 = op_seeds(seed)
    return add_op("RandomBinomial", Tensor[to_batch(f64(n), batch), to_batch(prob, batch)]; shape=shape, seed=s1, seed2=s2)
end

# ---------------------------------------------------------------- Empirical

function check_dist(d::Empirical)
    s = size(d.params[1])
    length(s) >= 1 || invalid("Empirical: samples must have at least one dimension (the samples), got a scalar")
    s[end] === nothing || s[end] > 0 || invalid("Empirical: samples must not be empty, got size $(s)")
    return d
end
# log(the fraction of the samples equal to x), per batch entry (TF Probability's `log_prob`
# with event_ndims = 0): x gets a trailing axis against the samples' last one
logpdf(d::Empirical, x) = dist_logpdf(d, x) do x, samples
    hits = cast(add_op("Equal", Tensor[reshape(x, (size(x)..., 1)), samples]), x.dtype)
    log(mean(hits; dims=ndims(hits)))
end
# draw k of entry b is samples[b, i] for a uniform i: the samples flattened to one vector,
# indexed by b n + i
function draw(d::Empirical, shape, batch, seed)
    samples = f64(d.params[1])
    n = size(samples)[end]
    nb = prod(batch)
    i = floor(open_uniform([shape; nb], seed) .* n)              # [0, n), as Float64
    flat = cast(i, Int64) .+ constant(collect(Int64, 0:nb-1) .* n)
    picked = add_op("GatherV2", Tensor[reshape(samples, (nb * n,)), flat])
    return reshape(picked, ([shape; batch]...,))
end
