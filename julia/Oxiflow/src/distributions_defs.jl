# The log densities and the draws of each distribution of distributions.jl. `logpdf` works in
# the distribution's dtype; `draw(d, shape, batch, seed)` in Float64 (the caller casts back).
# Log densities: TF Probability's `log_prob` formulas; draws: inverse CDFs of uniforms, affine
# maps of normals, and ratios of gamma draws (Beta, StudentT), as TF Probability samples.

# `logpdf(d, x)` for a distribution whose parameters are `d.params`: `f(x, params...)`.
function dist_logpdf(f, d::ADCMEDistribution, x)
    dname = string(nameof(typeof(d)))
    xt = dist_value(d, x, dname)
    return in_scope(d, "log_prob") do
        f(xt, d.params...)
    end
end
# A batch-shaped tensor of ones times `p` (so a gamma draw sees every batch entry's α).
to_batch(p::Tensor, batch) = isempty(batch) || collect(size(p)) == batch ? p : p .* ones(Float64, batch...)

# ---------------------------------------------------------------- location-scale families

logpdf(d::Normal, x) = dist_logpdf(d, x) do x, loc, scale
    z = (x .- loc) ./ scale
    -0.5 .* z .* z .- log(scale) .- halflog2π(x.dtype)
end
draw(d::Normal, shape, batch, seed) = ((loc, scale) = f64s(d); loc .+ scale .* std_normal([shape; batch], seed))

logpdf(d::Uniform, x) = dist_logpdf(d, x) do x, low, high
    if_else((x >= low) & (x < high), -log(high .- low), -Inf)    # SelectV2 broadcasts all three
end
draw(d::Uniform, shape, batch, seed) = ((low, high) = f64s(d); low .+ (high .- low) .* open_uniform([shape; batch], seed))

logpdf(d::Cauchy, x) = dist_logpdf(d, x) do x, loc, scale
    z = (x .- loc) ./ scale
    -log(1 .+ z .* z) .- log(scale) .- x.dtype(log(π))
end
draw(d::Cauchy, shape, batch, seed) = ((loc, scale) = f64s(d); loc .+ scale .* tan(π .* (open_uniform([shape; batch], seed) .- 0.5)))

logpdf(d::Gumbel, x) = dist_logpdf(d, x) do x, loc, scale
    z = (x .- loc) ./ scale
    -(z .+ exp(-z)) .- log(scale)
end
draw(d::Gumbel, shape, batch, seed) = ((loc, scale) = f64s(d); loc .- scale .* log(-log(open_uniform([shape; batch], seed))))

logpdf(d::HalfNormal, x) = dist_logpdf(d, x) do x, scale
    masked_logp(xs -> x.dtype(0.5 * log(2 / π)) .- log(scale) .- 0.5 .* (xs ./ scale) .^ 2, x, x >= 0, 1.0)
end
draw(d::HalfNormal, shape, batch, seed) = f64s(d)[1] .* abs(std_normal([shape; batch], seed))

logpdf(d::HalfCauchy, x) = dist_logpdf(d, x) do x, loc, scale
    masked_logp(x, x >= loc, 0.0) do xs
        z = (xs .- loc) ./ scale
        x.dtype(log(2 / π)) .- log(scale) .- log(1 .+ z .* z)
    end
end
# inside `masked_logp`, `x >= loc` may put `x_safe = 0` below `loc`; the branch is discarded there
draw(d::HalfCauchy, shape, batch, seed) = ((loc, scale) = f64s(d); loc .+ scale .* tan((π / 2) .* open_uniform([shape; batch], seed)))

# ---------------------------------------------------------------- inverse-CDF families

logpdf(d::Exponential, x) = dist_logpdf(d, x) do x, rate
    masked_logp(xs -> log(rate) .- rate .* xs, x, x >= 0, 1.0)
end
draw(d::Exponential, shape, batch, seed) = -log(open_uniform([shape; batch], seed)) ./ f64s(d)[1]

logpdf(d::Kumaraswamy, x) = dist_logpdf(d, x) do x, a, b
    masked_logp(xs -> log(a) .+ log(b) .+ (a .- 1) .* log(xs) .+ (b .- 1) .* log(1 .- xs .^ a), x, (x >= 0) & (x <= 1), 0.5)
end
draw(d::Kumaraswamy, shape, batch, seed) = ((a, b) = f64s(d); (1 .- open_uniform([shape; batch], seed) .^ (1 ./ b)) .^ (1 ./ a))

logpdf(d::Pareto, x) = dist_logpdf(d, x) do x, α, m
    masked_logp(xs -> log(α) .+ α .* log(m) .- (α .+ 1) .* log(xs), x, x >= m, 1.0)
end
draw(d::Pareto, shape, batch, seed) = ((α, m) = f64s(d); m .* open_uniform([shape; batch], seed) .^ (-1 ./ α))

# ---------------------------------------------------------------- Bernoulli

function check_dist(d::Bernoulli)
    l, p = d.params
    (l === missing) == (p === missing) && invalid("Bernoulli: give exactly one of logits and probs")
    return d
end
# the log-odds, from `logits` or from `probs`
bernoulli_logits(d::Bernoulli) = ((l, p) = d.params; l !== missing ? l : log(p) .- log(1 .- p))
logpdf(d::Bernoulli, x) = dist_logpdf(d, x) do x, _, _
    l = bernoulli_logits(d)
    x .* l .- softplus(l)                      # log σ(l) for x = 1, log(1 - σ(l)) for x = 0
end
function draw(d::Bernoulli, shape, batch, seed)
    l, p = d.params
    prob = p !== missing ? f64(p) : sigmoid(f64(bernoulli_logits(d)))
    return cast(open_uniform([shape; batch], seed) < prob, Int32)
end

# ---------------------------------------------------------------- the gamma family

inside_pos(x) = x > 0
logpdf(d::Gamma, x) = dist_logpdf(d, x) do x, α, β
    masked_logp(xs -> α .* log(β) .+ (α .- 1) .* log(xs) .- β .* xs .- lgamma(α), x, inside_pos(x), 1.0)
end
draw(d::Gamma, shape, batch, seed) = ((α, β) = f64s(d); std_gamma(to_batch(α, batch), shape, seed) ./ β)

logpdf(d::Beta, x) = dist_logpdf(d, x) do x, a, b
    masked_logp(x, (x > 0) & (x < 1), 0.5) do xs
        (a .- 1) .* log(xs) .+ (b .- 1) .* log(1 .- xs) .+ lgamma(a .+ b) .- lgamma(a) .- lgamma(b)
    end
end
function draw(d::Beta, shape, batch, seed)
    a, b = f64s(d)
    ga, gb = std_gamma(to_batch(a, batch), shape, seed), std_gamma(to_batch(b, batch), shape, derived_seed(seed, 1))
    return ga ./ (ga .+ gb)
end

logpdf(d::Chi2, x) = dist_logpdf(d, x) do x, k
    h = 0.5 .* k
    masked_logp(xs -> (h .- 1) .* log(xs) .- 0.5 .* xs .- h .* x.dtype(log(2)) .- lgamma(h), x, inside_pos(x), 1.0)
end
draw(d::Chi2, shape, batch, seed) = 2 .* std_gamma(to_batch(0.5 .* f64s(d)[1], batch), shape, seed)

logpdf(d::Chi, x) = dist_logpdf(d, x) do x, k
    h = 0.5 .* k
    masked_logp(xs -> (1 .- h) .* x.dtype(log(2)) .- lgamma(h) .+ (k .- 1) .* log(xs) .- 0.5 .* xs .* xs, x, inside_pos(x), 1.0)
end
draw(d::Chi, shape, batch, seed) = sqrt(2 .* std_gamma(to_batch(0.5 .* f64s(d)[1], batch), shape, seed))

logpdf(d::InverseGamma, x) = dist_logpdf(d, x) do x, α, β
    masked_logp(xs -> α .* log(β) .- lgamma(α) .- (α .+ 1) .* log(xs) .- β ./ xs, x, inside_pos(x), 1.0)
end
draw(d::InverseGamma, shape, batch, seed) = ((α, β) = f64s(d); β ./ std_gamma(to_batch(α, batch), shape, seed))

logpdf(d::StudentT, x) = dist_logpdf(d, x) do x, ν, loc, scale
    z = (x .- loc) ./ scale
    lgamma(0.5 .* (ν .+ 1)) .- lgamma(0.5 .* ν) .- 0.5 .* log(ν .* x.dtype(π)) .- log(scale) .-
        0.5 .* (ν .+ 1) .* log(1 .+ z .* z ./ ν)
end
function draw(d::StudentT, shape, batch, seed)
    ν, loc, scale = f64s(d)
    chi2 = 2 .* std_gamma(to_batch(0.5 .* ν, batch), shape, seed)
    return loc .+ scale .* std_normal([shape; batch], derived_seed(seed, 1)) ./ sqrt(chi2 ./ ν)
end

# ---------------------------------------------------------------- multivariate normals

# MultivariateNormalDiag: the event is the last dimension; a missing loc is a scalar 0, a
# missing scale_diag a scalar 1 (the given one sets the event size).
function mvn_diag_params(d::MultivariateNormalDiag, f=identity)
    loc, sd = d.params
    T = f === f64 ? Float64 : dist_dtype(d)
    return (loc === missing ? constant(zero(T)) : f(loc)), (sd === missing ? constant(one(T)) : f(sd))
end
function logpdf(d::MultivariateNormalDiag, x)
    xt = dist_value(d, x, "MultivariateNormalDiag")
    return in_scope(d, "log_prob") do
        loc, sd = mvn_diag_params(d)
        z = (xt .- loc) ./ sd
        lp = -0.5 .* z .* z .- log(sd) .- halflog2π(xt.dtype)
        sum(lp; dims=ndims(lp))
    end
end
draw(d::MultivariateNormalDiag, shape, batch, seed) = ((loc, sd) = mvn_diag_params(d, f64); loc .+ sd .* std_normal([shape; batch], seed))

# MultivariateNormalFullCovariance: one `k×k` covariance (no batch of them), its Cholesky
# factor `L`; `loc` (`k` or `batch..×k`, zeros when missing).
function check_dist(d::MultivariateNormalFullCovariance)
    loc, Σ = d.params
    (ndims(Σ) == 2 && size(Σ, 1) == size(Σ, 2) && size(Σ, 1) !== nothing) ||
        invalid("MultivariateNormalFullCovariance: covariance_matrix must be one k×k matrix of known size, got size $(size(Σ))")
    k = size(Σ, 1)
    loc === missing || (ndims(loc) >= 1 && size(loc, ndims(loc)) in (k, nothing)) ||
        invalid("MultivariateNormalFullCovariance: loc of size $(size(loc)) for a $(k)×$(k) covariance_matrix")
    return d
end
function mvn_full_factor(d::MultivariateNormalFullCovariance, f=identity)
    loc, Σ = d.params
    return (loc === missing ? missing : f(loc)), cholesky_factor(f(Σ)), size(Σ, 1)
end
function logpdf(d::MultivariateNormalFullCovariance, x)
    xt = dist_value(d, x, "MultivariateNormalFullCovariance")
    return in_scope(d, "log_prob") do
        loc, L, k = mvn_full_factor(d)
        r = loc === missing ? xt : xt .- loc
        rs = size(r)
        (rs[end] == k && all(s -> s !== nothing, rs)) ||
            invalid("MultivariateNormalFullCovariance: logpdf needs values of known size (..., $k), got $(rs)")
        z = triangular_solve(L, reshape(r, :, k)'; lower=true)           # k × m
        lp = -0.5 .* sum(z .* z; dims=1) .- sum(log(diag(L))) .- k * halflog2π(xt.dtype)
        length(rs) == 1 ? reshape(lp, ()) : reshape(lp, rs[1:end-1]...)
    end
end
function dist_batch(d::MultivariateNormalFullCovariance)
    loc, _, k = mvn_full_factor(d)
    loc === missing && return [k]
    any(s -> s === nothing, size(loc)) && invalid("MultivariateNormalFullCovariance: sampling needs loc of known shape, got $(size(loc))")
    return collect(Int, size(loc))
end
function draw(d::MultivariateNormalFullCovariance, shape, batch, seed)
    loc, L, k = mvn_full_factor(d, f64)
    dims = [shape; batch[1:end-1]; k]
    y = reshape(reshape(std_normal(dims, seed), :, k) * L', dims...)
    return loc === missing ? y : y .+ loc
end
