# ADCME's distributions (Oxiflow.Normal, ..., logpdf, rand), categorical, choice and the
# lowercase samplers. Oracles: closed-form densities written here in Julia; for the gamma
# family (whose constants need Γ) the unnormalized kernel's differences plus a quadrature of
# exp(logpdf) that must give 1; sample moments and Kolmogorov-Smirnov distances against
# closed-form CDFs; finite differences for gradients; the closed-form maximum likelihood
# estimate of a normal.
using Statistics

# the largest gap between the empirical CDF of xs and cdf
function ks(xs, cdf)
    v = sort(vec(xs)); n = length(v)
    return maximum(max(abs(cdf(v[i]) - (i - 1) / n), abs(cdf(v[i]) - i / n)) for i in 1:n)
end
const KS_CRIT = 1.95          # times 1/sqrt(n): the test's 0.1 % critical value

# The gradients of sum(logpdf(mk(θ), x)) in θ and x at (θ0, x0) against central differences.
function check_logpdf_grads(s, mk, θ0, x0)
    θ = Variable(θ0); x = Variable(x0)
    obj = sum(logpdf(mk(θ), x))
    init(s)
    gθ, gx = run(s, gradients(obj, [θ, x]))
    val(t, y) = run(s, sum(logpdf(mk(constant(t)), constant(y))))
    @test gθ ≈ fd_grad(t -> val(t, x0), θ0) rtol = 1e-6
    @test gx ≈ fd_grad(y -> val(θ0, y), x0) rtol = 1e-6
end

@testset "distributions: closed-form log densities, normalization, gradients" begin
    reset_default_graph()
    s = Session()
    lp(d, x) = run(s, logpdf(d, x))
    xs = [-1.3, 0.2, 0.7, 2.5]
    @test lp(Oxiflow.Normal(0.5, 2.0), xs) ≈ @. -((xs - 0.5) / 2)^2 / 2 - log(2) - log(2π) / 2
    @test lp(Oxiflow.Normal(loc=0.5, scale=2.0), xs) ≈ lp(Oxiflow.Normal(0.5, 2.0), xs)
    @test lp(Oxiflow.Uniform(-1.0, 1.0), xs) == [-Inf, -log(2), -log(2), -Inf]
    @test lp(Oxiflow.Uniform(), [0.0, 1.0]) == [0.0, -Inf]          # [low, high)
    @test lp(Oxiflow.Exponential(2.0), xs) ≈ [-Inf; @. log(2) - 2 * xs[2:end]]
    @test lp(Oxiflow.Cauchy(0.5, 2.0), xs) ≈ @. -log(π * 2 * (1 + ((xs - 0.5) / 2)^2))
    @test lp(Oxiflow.Gumbel(0.5, 2.0), xs) ≈ @. -((xs - 0.5) / 2 + exp(-(xs - 0.5) / 2)) - log(2)
    @test lp(Oxiflow.HalfNormal(2.0), xs) ≈ [-Inf; @. log(sqrt(2 / π) / 2) - xs[2:end]^2 / 8]
    @test lp(Oxiflow.HalfCauchy(0.5, 2.0), xs) ≈ [-Inf, -Inf, @. log(2 / (π * 2 * (1 + ((xs[3:4] - 0.5) / 2)^2)))...]
    @test lp(Oxiflow.Kumaraswamy(2.0, 3.0), [0.3, 1.5]) ≈ [log(2 * 3 * 0.3 * (1 - 0.09)^2), -Inf]
    @test lp(Oxiflow.Pareto(3.0, 1.5), xs) ≈ [-Inf, -Inf, -Inf, log(3 * 1.5^3 / 2.5^4)]
    @test lp(Oxiflow.Bernoulli(probs=0.3), [0, 1, 1]) ≈ log.([0.7, 0.3, 0.3])
    @test lp(Oxiflow.Bernoulli(logits=[-1.0, 2.0]), [1.0, 0.0]) ≈ [log(1 / (1 + exp(1))), log(1 - 1 / (1 + exp(-2)))]
    # the gamma family where Γ has a closed form: Γ(3) = 2, Γ(1/2) = √π, Γ(5/2) = 3√π/4
    @test lp(Oxiflow.Gamma(3.0, 2.0), [0.5, 1.7]) ≈ @. log(2^3 * [0.5, 1.7]^2 * exp(-2 * [0.5, 1.7]) / 2)
    @test lp(Oxiflow.Chi2(3.0), [0.4]) ≈ [log(0.4^0.5 * exp(-0.2) / (2^1.5 * sqrt(π) / 2))]
    @test lp(Oxiflow.Chi(3.0), [1.2]) ≈ [log(sqrt(2 / π) * 1.2^2 * exp(-0.72))]
    @test lp(Oxiflow.Beta(2.0, 3.0), [0.25]) ≈ [log(12 * 0.25 * 0.75^2)]      # 1/B(2,3) = 12
    @test lp(Oxiflow.InverseGamma(3.0, 2.0), [0.8]) ≈ [log(2^3 / 2 * 0.8^-4 * exp(-2 / 0.8))]
    @test lp(Oxiflow.StudentT(1.0, 0.5, 2.0), xs) ≈ lp(Oxiflow.Cauchy(0.5, 2.0), xs)  # ν = 1 is Cauchy
    @test lp(Oxiflow.Gamma(2.0, 1.0), [-1.0, 0.0]) == [-Inf, -Inf]
    # other parameters: kernel differences and ∫ exp(logpdf) = 1 by the trapezoidal rule
    for (d, kern, lo, hi) in (
            (Oxiflow.Gamma(2.5, 1.5), x -> 1.5 * log(x) - 1.5x, 0.0, 60.0),
            (Oxiflow.Beta(2.5, 1.5), x -> 1.5 * log(x) + 0.5 * log(1 - x), 0.0, 1.0),
            (Oxiflow.Chi2(5.0), x -> 1.5 * log(x) - x / 2, 0.0, 150.0),
            (Oxiflow.Chi(3.5), x -> 2.5 * log(x) - x^2 / 2, 0.0, 20.0),
            (Oxiflow.InverseGamma(3.0, 2.0), x -> -4 * log(x) - 2 / x, 0.0, 400.0),
            (Oxiflow.StudentT(3.5, 0.5, 2.0), x -> -2.25 * log(1 + ((x - 0.5) / 2)^2 / 3.5), -3000.0, 3000.0),
            (Oxiflow.Kumaraswamy(2.0, 3.0), x -> log(x) + 2 * log(1 - x^2), 0.0, 1.0))
        a, b = 0.3 + lo / 1e4, 0.9 + lo / 1e4
        @test lp(d, [b])[1] - lp(d, [a])[1] ≈ kern(b) - kern(a) rtol = 1e-12
        grid = collect(range(lo, hi; length=400_001))[2:end-1]
        p = exp.(lp(d, grid))
        @test sum(p) * (grid[2] - grid[1]) ≈ 1 rtol = 2e-3
    end
    # multivariate normals against LinearAlgebra
    Σ = [2.0 0.5 0.1; 0.5 1.0 -0.3; 0.1 -0.3 1.5]; μ = [1.0, -1.0, 0.5]
    X = [0.3 0.2 -1.0; 1.5 -2.0 0.0]
    mvn(x) = -0.5 * dot(x - μ, Σ \ (x - μ)) - 0.5 * logdet(2π * Σ)
    @test lp(Oxiflow.MultivariateNormalFullCovariance(loc=μ, covariance_matrix=Σ), X) ≈ [mvn(X[1, :]), mvn(X[2, :])]
    @test lp(Oxiflow.MultivariateNormalFullCovariance(μ, Σ), X[1, :]) ≈ mvn(X[1, :])
    sd = [2.0, 0.5, 1.5]
    @test lp(Oxiflow.MultivariateNormalDiag(loc=μ, scale_diag=sd), X) ≈
        [sum(@. -((X[i, :] - μ) / sd)^2 / 2 - log(sd) - log(2π) / 2) for i in 1:2]
    @test lp(Oxiflow.MultivariateNormalDiag(loc=zeros(2)), [1.0 2.0]) ≈ [-2.5 - log(2π)]
    # gradients in x and in the parameters against central differences
    for (mk, θ0, x0) in (((θ) -> Oxiflow.Normal(θ[1], θ[2]), [0.3, 1.7], [0.9, -0.4]),
                         ((θ) -> Oxiflow.StudentT(θ[1], θ[2], θ[3]), [3.0, 0.3, 1.7], [0.9, -0.4]),
                         ((θ) -> Oxiflow.Gamma(θ[1], θ[2]), [2.5, 1.3], [0.9, 2.4]),
                         ((θ) -> Oxiflow.Beta(θ[1], θ[2]), [2.5, 1.3], [0.2, 0.7]),
                         ((θ) -> Oxiflow.MultivariateNormalFullCovariance(θ[1:2], θ[3] .* [1.0 0.0; 0.0 0.0] .+ θ[4] .* [0.0 0.0; 0.0 1.0] .+ [0.0 0.2; 0.2 0.0]), [0.3, -0.2, 1.5, 0.8], [0.9, -0.4]))
        check_logpdf_grads(s, mk, θ0, x0)
    end
    # Float32 parameters keep Float32
    d32 = Oxiflow.Normal(constant(0.0f0), 1.0f0)
    @test logpdf(d32, [0.5]).dtype == Float32 && rand(d32, 3).dtype == Float32
    @test run(s, logpdf(d32, Float32[0.5]))[1] ≈ -0.125 - log(2π) / 2 rtol = 1e-6
    # errors name the distribution and the parameter
    @test_throws OxiflowError Oxiflow.Normal(0.0)                       # scale missing
    @test_throws OxiflowError Oxiflow.Normal(0.0, 1.0; mean=0.0)
    @test_throws OxiflowError Oxiflow.Normal(0.0; loc=1.0, scale=1.0)   # loc twice
    @test_throws OxiflowError Oxiflow.Normal(constant(0.0), constant(1.0f0))
    @test_throws OxiflowError Oxiflow.Normal(constant(1), 1.0)
    @test_throws OxiflowError Oxiflow.Normal(0.0, 1.0; validate_args=true)
    @test_throws OxiflowError Oxiflow.Bernoulli(logits=0.0, probs=0.5)
    @test_throws OxiflowError Oxiflow.Bernoulli()
    @test_throws OxiflowError logpdf(d32, constant([0.5]))             # Float64 value, Float32 distribution
    @test_throws OxiflowError Oxiflow.MultivariateNormalFullCovariance(zeros(2), ones(2))
    @test_throws OxiflowError Oxiflow.MultivariateNormalFullCovariance(zeros(3), ones(2, 2))
    err = try Oxiflow.Gumbel(0.0, 1.0; rate=2.0) catch e; sprint(showerror, e) end
    @test occursin("Gumbel", err) && occursin("rate", err)
    @test occursin("Normal/log_prob", logpdf(Oxiflow.Normal(0.0, 1.0), 0.5).name)
end

@testset "distributions: samples against moments and CDFs; reparameterized gradients" begin
    reset_default_graph()
    set_random_seed(11)
    s = Session()
    n = 40_000
    draw(d) = run(s, rand(d, n))
    crit = KS_CRIT / sqrt(n)
    for (d, cdf) in ((Oxiflow.Uniform(-1.0, 3.0), x -> (x + 1) / 4),
                     (Oxiflow.Exponential(2.0), x -> 1 - exp(-2x)),
                     (Oxiflow.Cauchy(0.5, 2.0), x -> 0.5 + atan((x - 0.5) / 2) / π),
                     (Oxiflow.Gumbel(0.5, 2.0), x -> exp(-exp(-(x - 0.5) / 2))),
                     (Oxiflow.HalfCauchy(0.5, 2.0), x -> 2 * atan((x - 0.5) / 2) / π),
                     (Oxiflow.Kumaraswamy(2.0, 3.0), x -> 1 - (1 - x^2)^3),
                     (Oxiflow.Pareto(3.0, 1.5), x -> 1 - (1.5 / x)^3))
        @test ks(draw(d), cdf) < crit
    end
    # moments: mean and variance within a few standard errors
    for (d, m, v) in ((Oxiflow.Normal(0.5, 2.0), 0.5, 4.0), (Oxiflow.HalfNormal(2.0), 2 * sqrt(2 / π), 4 * (1 - 2 / π)),
                      (Oxiflow.Gamma(2.5, 2.0), 1.25, 0.625), (Oxiflow.Gamma(0.4, 1.0), 0.4, 0.4),
                      (Oxiflow.Beta(2.0, 3.0), 0.4, 0.04), (Oxiflow.Chi2(5.0), 5.0, 10.0),
                      (Oxiflow.Chi(3.0), 2 * sqrt(2 / π), 3 - 8 / π), (Oxiflow.InverseGamma(8.0, 2.0), 2 / 7, 4 / (49 * 6)),
                      (Oxiflow.StudentT(6.0, 0.5, 2.0), 0.5, 4 * 6 / 4), (Oxiflow.Bernoulli(probs=0.3), 0.3, 0.21))
        x = draw(d)
        @test abs(mean(x) - m) < 5 * sqrt(v / n)
        @test var(x) ≈ v rtol = 0.08
    end
    @test eltype(draw(Oxiflow.Bernoulli(logits=0.0))) == Int32
    # shapes: sample shape, then batch, then event
    @test size(rand(Oxiflow.Normal([0.0, 1.0, 2.0], 1.0), (4, 5))) == (4, 5, 3)
    @test size(rand(Oxiflow.Normal(0.0, 1.0))) == ()
    @test size(rand(Oxiflow.Gamma([1.0 2.0], reshape([1.0, 2.0, 3.0], 3, 1)), 2)) == (2, 3, 2)
    @test_throws OxiflowError rand(Oxiflow.Gamma([1.0 2.0], [1.0, 2.0, 3.0]))
    @test size(rand(Oxiflow.MultivariateNormalDiag(loc=zeros(2, 3)), 4)) == (4, 2, 3)
    # full covariance: the sample covariance
    Σ = [2.0 0.6; 0.6 1.0]
    X = run(s, rand(Oxiflow.MultivariateNormalFullCovariance(loc=[1.0, -2.0], covariance_matrix=Σ), n))
    @test vec(mean(X; dims=1)) ≈ [1.0, -2.0] atol = 0.05
    @test cov(X) ≈ Σ rtol = 0.05
    # a Beta's two gamma draws use different seeds even with one op seed
    @test std(run(s, rand(Oxiflow.Beta(2.0, 2.0), 1000; seed=3))) > 0.1
    # reparameterization: d/dμ and d/dσ of a sum of draws, from the draws of the same run
    μ, σ = Variable(0.5), Variable(2.0)
    x = rand(Oxiflow.Normal(μ, σ), 100)
    init(s)
    xv, gμ, gσ = run(s, [x, gradients(sum(x), μ), gradients(sum(x), σ)])
    @test gμ ≈ 100 && gσ ≈ sum((xv .- 0.5) ./ 2.0)
    # a gamma draw has no gradient in its concentration: an error, not a silent zero
    α = Variable(2.0)
    @test_throws OxiflowError gradients(sum(rand(Oxiflow.Gamma(α, 1.0), 3)), α)
    @test_throws OxiflowError rand(Oxiflow.Normal(0.0, 1.0), (2, -1))
end

@testset "distributions: maximum likelihood through logpdf" begin
    # the MLE of a normal is the sample mean and the (1/n) standard deviation
    reset_default_graph()
    data = [2.1, 3.4, 1.9, 2.8, 3.9, 2.2, 3.0, 2.6]
    μ, ρ = Variable(0.0), Variable(0.0)
    loss = -sum(logpdf(Oxiflow.Normal(μ, exp(ρ)), data))
    s = Session(); init(s)
    BFGS!(s, loss, 200)
    @test run(s, μ) ≈ mean(data) rtol = 1e-6
    @test exp(run(s, ρ)) ≈ std(data; corrected=false) rtol = 1e-6
end

@testset "categorical, choice and the lowercase samplers" begin
    reset_default_graph()
    set_random_seed(5)
    s = Session()
    l = [0.0, 1.0, -0.5, 2.0]
    c = run(s, categorical(20_000; logits=l))
    @test eltype(c) == Int64 && all(1 .<= c .<= 4)
    p = exp.(l) ./ sum(exp.(l))
    freq = [count(==(k), c) for k in 1:4] ./ 20_000
    @test all(abs.(freq .- p) .< 5 .* sqrt.(p .* (1 .- p) ./ 20_000))
    cm = run(s, categorical(7; logits=[0.0 0.0 30.0; 30.0 0.0 0.0]))
    @test cm == [fill(3, 1, 7); fill(1, 1, 7)]
    c2 = run(s, categorical(200))
    @test length(c2) == 200 && all(1 .<= c2 .<= 200)
    @test size(run(s, categorical(5))) == (5,)
    # choice without replacement: distinct rows of the input
    A = [1.0 10.0; 2.0 20.0; 3.0 30.0; 4.0 40.0; 5.0 50.0]
    r = run(s, choice(A, 3))
    @test size(r) == (3, 2) && length(unique(r[:, 1])) == 3 && r[:, 2] == 10 .* r[:, 1] && all(v -> v in 1.0:5.0, r[:, 1])
    @test sort(run(s, choice(collect(1.0:5.0), 5))) == collect(1.0:5.0)
    rr = run(s, choice(collect(1.0:3.0), 3000; replace=true))
    @test all(v -> v in 1.0:3.0, rr) && all(abs(count(==(k), rr) / 3000 - 1 / 3) < 0.05 for k in 1.0:3.0)
    @test_throws OxiflowError choice(A, 6)
    # the lowercase samplers: shape, dtype, support
    e = exponential(300, 2; rate=2.0)
    @test size(e) == (300, 2) && e.dtype == Float64 && all(run(s, e) .>= 0)
    @test size(gamma(; concentration=2.0, rate=1.0)) == ()
    bs = run(s, bernoulli(100; probs=0.5, dtype=Float32))
    @test eltype(bs) == Float32 && all(v -> v == 0 || v == 1, bs)
    @test all(0 .< run(s, beta(50; concentration1=2.0, concentration0=3.0)) .< 1)
end

@testset "TruncatedNormal, InverseGaussian, SinhArcsinh, Horseshoe, Poisson" begin
    reset_default_graph()
    set_random_seed(5)
    s = Session()
    lp(d, x) = run(s, logpdf(d, x))
    n = 40_000
    draw(d) = run(s, rand(d, n))
    φ(z) = exp(-z^2 / 2) / sqrt(2π)
    # Φ(1) - Φ(-1) and 1 - Φ(3), the tabulated normal masses
    m1, t3 = 0.6826894921370859, 0.0013498980316300946
    @test lp(Oxiflow.TruncatedNormal(0.0, 1.0, -1.0, 1.0), [0.0, 0.5, 1.5]) ≈ [log(φ(0.0) / m1), log(φ(0.5) / m1), -Inf]
    @test lp(Oxiflow.TruncatedNormal(0.0, 1.0, 3.0, 40.0), [3.5]) ≈ [log(φ(3.5) / t3)] rtol = 1e-12
    @test lp(Oxiflow.InverseGaussian(1.5, 2.0), [0.7, -1.0]) ≈ [0.5 * log(2.0 / (2π * 0.7^3)) - 2.0 * (0.7 - 1.5)^2 / (2 * 1.5^2 * 0.7), -Inf]
    # SinhArcsinh with no skew and tail weight 1 is the normal
    xs = [-1.3, 0.2, 2.5]
    @test lp(Oxiflow.SinhArcsinh(0.5, 2.0), xs) ≈ lp(Oxiflow.Normal(0.5, 2.0), xs) rtol = 1e-12
    @test lp(Oxiflow.Poisson(3.0), [0.0, 2.0, 2.5, -1.0]) ≈ [-3.0, 2 * log(3.0) - 3.0 - log(2), 2.5 * log(3.0) - 3.0 - log(15 * sqrt(π) / 8), -Inf]
    @test lp(Oxiflow.Poisson(log_rate=log(3.0)), [2.0]) ≈ lp(Oxiflow.Poisson(rate=3.0), [2.0])
    @test lp(Oxiflow.Poisson(0.0), [0.0, 1.0]) == [0.0, -Inf]
    # every density integrates to 1 (the trapezoidal rule)
    for (d, lo, hi) in ((Oxiflow.TruncatedNormal(0.5, 2.0, -1.0, 3.0), -1.0, 3.0),
                        (Oxiflow.InverseGaussian(1.5, 2.0), 0.0, 80.0),
                        (Oxiflow.SinhArcsinh(0.5, 2.0, 0.7, 1.6), -400.0, 400.0),
                        (Oxiflow.SinhArcsinh(-1.0, 0.5, -0.4, 0.6), -40.0, 40.0))
        grid = collect(range(lo, hi; length=400_001))[2:end-1]
        @test sum(exp.(lp(d, grid))) * (grid[2] - grid[1]) ≈ 1 rtol = 2e-3
    end
    # Horseshoe: TF Probability's approximation against the exact marginal, a quadrature over
    # the half-Cauchy local scale λ of N(x; 0, (σλ)²)
    hs(x, σ) = (t = range(0, π / 2; length=200_001)[2:end-1]; λ = tan.(t);
                sum(@. exp(-x^2 / (2 * σ^2 * λ^2)) / (sqrt(2π) * σ * λ) * 2 / π) * step(t))
    for x in (0.3, 1.0, 4.0)
        @test exp(lp(Oxiflow.Horseshoe(1.5), [x])[1]) ≈ hs(x, 1.5) rtol = 1e-2
    end
    # samples: moments, bounds and the quantile SinhArcsinh's scale is chosen to keep
    tn = draw(Oxiflow.TruncatedNormal(0.0, 1.0, -1.0, 1.0))
    @test all(abs.(tn) .<= 1) && abs(mean(tn)) < 5 * sqrt(0.3 / n)
    @test var(tn) ≈ 1 - 2 * φ(1.0) / m1 rtol = 0.03
    tail = draw(Oxiflow.TruncatedNormal(0.0, 1.0, 3.0, 40.0))
    λ3 = φ(3.0) / t3
    @test all(tail .>= 3) && abs(mean(tail) - λ3) < 5 * sqrt((1 + 3λ3 - λ3^2) / n)
    # far tails: draws inside the bounds, and a finite reparameterized gradient in loc
    μt = Variable(0.0)
    for (lo, hi) in ((10.0, 12.0), (-12.0, -10.0))
        xt = rand(Oxiflow.TruncatedNormal(μt, 1.0, lo, hi), 50)
        init(s)
        xv, gv = run(s, [xt, gradients(sum(xt), μt)])
        @test all(lo .<= xv .<= hi) && isfinite(gv)
    end
    ig = draw(Oxiflow.InverseGaussian(1.5, 2.0))
    @test all(ig .> 0) && abs(mean(ig) - 1.5) < 5 * sqrt(1.5^3 / 2.0 / n)
    @test var(ig) ≈ 1.5^3 / 2.0 rtol = 0.1
    sa = draw(Oxiflow.SinhArcsinh(0.5, 2.0, 0.0, 1.7))
    @test abs(mean(sa .- 0.5 .<= 4.0) - 0.9772498680518208) < 5 * sqrt(0.023 / n)
    @test abs(median(draw(Oxiflow.SinhArcsinh(0.5, 2.0, 0.6, 1.7))) - (0.5 + 2 * 2 / sinh(asinh(2) * 1.7) * sinh(0.6 * 1.7))) < 0.05
    h1 = run(s, rand(Oxiflow.Horseshoe(1.0), 1000; seed=9)); h2 = run(s, rand(Oxiflow.Horseshoe(2.5), 1000; seed=9))
    @test h2 ≈ 2.5 .* h1 && abs(median(h1)) < 0.15
    po = draw(Oxiflow.Poisson(3.5))
    @test all(po .== round.(po)) && abs(mean(po) - 3.5) < 5 * sqrt(3.5 / n)
    @test var(po) ≈ 3.5 rtol = 0.05
    @test run(s, rand(Oxiflow.Poisson([0.0, 250.0]), 2))[:, 1] == [0.0, 0.0]
    # gradients of the log densities in x and in the parameters
    for (mk, θ0, x0) in (((θ) -> Oxiflow.TruncatedNormal(θ[1], θ[2], θ[3], θ[4]), [0.3, 1.7, -1.0, 2.0], [0.9, -0.4]),
                         ((θ) -> Oxiflow.TruncatedNormal(θ[1], θ[2], θ[3], θ[4]), [0.3, 0.7, 1.5, 4.0], [1.9, 2.4]),
                         ((θ) -> Oxiflow.InverseGaussian(θ[1], θ[2]), [1.5, 2.0], [0.7, 2.2]),
                         ((θ) -> Oxiflow.SinhArcsinh(θ[1], θ[2], θ[3], θ[4]), [0.3, 1.7, 0.4, 1.3], [0.9, -2.4]),
                         ((θ) -> Oxiflow.Horseshoe(θ[1]), [1.3], [0.9, -2.4]),
                         ((θ) -> Oxiflow.Poisson(θ[1]), [2.5], [0.5, 3.0]))
        check_logpdf_grads(s, mk, θ0, x0)
    end
    # ADCME's lowercase samplers
    @test all(abs.(run(s, truncatednormal(5, 3; loc=0.0, scale=1.0, low=-0.5, high=0.5))) .<= 0.5)
    @test size(run(s, inversegaussian(4; loc=1.0, concentration=1.0))) == (4,)
    @test size(run(s, sinharcsinh(2, 2; skewness=1.0, tailweight=1.0, loc=0.0, scale=1.0))) == (2, 2)
    @test size(run(s, horseshoe(3; scale=1.0))) == (3,)
    @test eltype(run(s, poisson(3; rate=1.0, dtype=Int64))) == Int64
    @test_throws OxiflowError Oxiflow.Poisson(rate=1.0, log_rate=0.0)
    @test_throws OxiflowError Oxiflow.TruncatedNormal(0.0, 1.0, -1.0)
    e = try; run(s, rand(Oxiflow.Poisson(-1.0), 2)); nothing; catch err; err; end
    @test e isa OxiflowError && occursin("RandomPoissonV2", e.msg) && occursin("-1", e.msg)
end

@testset "VonMises and the scaled Bessel functions" begin
    reset_default_graph()
    set_random_seed(7)
    s = Session()
    # I₀(κ) = (1/π) ∫₀^π e^{κ cos t} dt (the midpoint rule is spectrally accurate here)
    besseli0(κ) = (m = 20_000; sum(exp(κ * cos((k - 0.5) * π / m)) for k in 1:m) / m)
    for κ in (0.3, 2.0, 12.0)
        @test run(s, tf.math.bessel_i0e(κ)) ≈ exp(-κ) * besseli0(κ) rtol = 1e-12
    end
    # I₁ = I₀': a finite difference of the quadrature
    @test run(s, tf.math.bessel_i1e(2.0)) ≈ exp(-2.0) * (besseli0(2.0 + 1e-5) - besseli0(2.0 - 1e-5)) / 2e-5 rtol = 1e-8
    xs = [-2.0, 0.3, 1.0, 3.1]
    d = Oxiflow.VonMises(0.5, 2.0)
    @test run(s, logpdf(d, xs)) ≈ @. 2.0 * cos(xs - 0.5) - log(2π * besseli0(2.0))
    # the density integrates to 1 over one period, and is periodic
    grid = collect(range(-π, π; length=20_001))[1:end-1]
    @test sum(exp.(run(s, logpdf(d, grid)))) * (2π / 20_000) ≈ 1 rtol = 1e-10
    @test run(s, logpdf(d, [0.7 + 2π]))[1] ≈ run(s, logpdf(d, [0.7]))[1] rtol = 1e-12
    # draws: in [-π, π), E[cos(x - μ)] = I₁(κ)/I₀(κ), and a KS test against the CDF
    n = 40_000
    for (μ, κ) in ((0.5, 2.0), (3.0, 0.4), (-2.0, 30.0), (1.0, 0.0))
        x = run(s, rand(Oxiflow.VonMises(μ, κ), n))
        @test all(-π .<= x .< π)
        A = κ == 0 ? 0.0 : run(s, tf.math.bessel_i1e(κ) / tf.math.bessel_i0e(κ))
        @test abs(mean(cos.(x .- μ)) - A) < 5 * sqrt(0.5 / n)
        pdf = exp.(run(s, logpdf(Oxiflow.VonMises(μ, κ), grid)))
        cdf = cumsum(pdf) .* (2π / 20_000)
        @test ks(x, t -> cdf[clamp(round(Int, (t + π) / (2π) * 20_000), 1, 20_000)]) < KS_CRIT / sqrt(n) + 1e-3
    end
    # the gradient reaches loc, not the concentration (an error)
    μ, κ = Variable(0.5), Variable(2.0)
    x = rand(Oxiflow.VonMises(μ, 2.0), 10)
    init(s)
    @test run(s, gradients(sum(x), μ)) ≈ 10
    @test_throws OxiflowError gradients(sum(rand(Oxiflow.VonMises(0.0, κ), 3)), κ)
    # logpdf gradients against finite differences
    check_logpdf_grads(s, θ -> Oxiflow.VonMises(θ[1], θ[2]), [0.5, 2.0], [0.9, -2.4])
    @test size(run(s, vonmises(3, 2; loc=1.0, concentration=1.0))) == (3, 2)
    e = try; run(s, rand(Oxiflow.VonMises(0.0, -1.0), 2)); nothing; catch err; err; end
    @test e isa OxiflowError && occursin("_RandomVonMises", e.msg)
    # very large concentrations (a normal approximation above 1e6; it looped forever)
    x = run(s, rand(Oxiflow.VonMises(0.5, 1e8), 20_000))
    @test abs(mean(x) - 0.5) < 5 / sqrt(1e8 * 20_000)
    @test var(x) ≈ 1e-8 rtol = 0.05
    @test run(s, rand(Oxiflow.VonMises(0.5, 1e300), 5)) == fill(0.5, 5)
end

@testset "Binomial: log probabilities from Julia's binomial coefficients, draws' moments" begin
    reset_default_graph()
    set_random_seed(11)
    s = Session()
    lp(d, x) = run(s, logpdf(d, x))
    pmf(n, p, k) = log(binomial(n, k) * p^k * (1 - p)^(n - k))
    ks = [0.0, 3.0, 7.0, 10.0]
    @test lp(Oxiflow.Binomial(10.0; probs=0.3), [ks; 11.0; -1.0]) ≈ [[pmf(10, 0.3, Int(k)) for k in ks]; -Inf; -Inf] rtol = 1e-12
    σ(l) = 1 / (1 + exp(-l))
    @test lp(Oxiflow.Binomial(10.0; logits=-0.4), ks) ≈ [pmf(10, σ(-0.4), Int(k)) for k in ks] rtol = 1e-12
    # the masses over 0..n sum to 1; the ends with p = 0 and 1
    @test sum(exp.(lp(Oxiflow.Binomial(25.0; probs=0.62), collect(0.0:25.0)))) ≈ 1 rtol = 1e-12
    @test lp(Oxiflow.Binomial(4.0; probs=0.0), [0.0, 1.0]) == [0.0, -Inf]
    @test lp(Oxiflow.Binomial(4.0; probs=1.0), [4.0, 3.0]) == [0.0, -Inf]
    # draws: whole numbers in [0, n] with the mean n p and variance n p (1 - p), per batch entry
    n = 40_000
    x = run(s, rand(Oxiflow.Binomial([10.0, 300.0]; probs=[0.3, 0.9]), n))
    @test size(x) == (n, 2) && all(x .== round.(x)) && all(0 .<= x[:, 1] .<= 10) && all(0 .<= x[:, 2] .<= 300)
    for (j, (c, p)) in enumerate(((10, 0.3), (300, 0.9)))
        v = c * p * (1 - p)
        @test abs(mean(x[:, j]) - c * p) < 5 * sqrt(v / n)
        @test var(x[:, j]) ≈ v rtol = 0.05
    end
    @test eltype(run(s, rand(Oxiflow.Binomial(Float32(5); probs=0.5f0), 3))) == Float32
    # gradients of the log probability in the probabilities and in x
    check_logpdf_grads(s, θ -> Oxiflow.Binomial(12.0; probs=θ[1]), [0.35], [2.0, 7.0])
    check_logpdf_grads(s, θ -> Oxiflow.Binomial(12.0; logits=θ[1]), [0.8], [2.0, 7.0])
    @test_throws OxiflowError Oxiflow.Binomial(3.0)
    @test_throws OxiflowError Oxiflow.Binomial(3.0; probs=0.5, logits=0.0)
    e = try; run(s, rand(Oxiflow.Binomial(2.5; probs=0.5), 2)); nothing; catch err; err; end
    @test e isa OxiflowError && occursin("RandomBinomial", e.msg) && occursin("whole numbers", e.msg)
end

@testset "Empirical: fractions of the samples, uniform picks per batch entry" begin
    reset_default_graph()
    set_random_seed(13)
    s = Session()
    d = Oxiflow.Empirical([1.0, 2.0, 2.0, 5.0])
    @test run(s, logpdf(d, [1.0, 2.0, 3.0, 5.0])) ≈ [log(1 / 4), log(2 / 4), -Inf, log(1 / 4)]
    # a batch of two rows of samples: x broadcasts against the batch
    S = [1.0 2.0 3.0; 10.0 10.0 20.0]
    d2 = Oxiflow.Empirical(S)
    @test run(s, logpdf(d2, [2.0, 10.0])) ≈ [log(1 / 3), log(2 / 3)]
    @test run(s, logpdf(d2, [1.0 10.0; 3.0 20.0])) ≈ [log(1 / 3) log(2 / 3); log(1 / 3) log(1 / 3)]
    n = 30_000
    x = run(s, rand(d, n))
    @test sort(unique(x)) == [1.0, 2.0, 5.0]
    for (v, p) in ((1.0, 0.25), (2.0, 0.5), (5.0, 0.25))
        @test abs(mean(x .== v) - p) < 5 * sqrt(p * (1 - p) / n)
    end
    y = run(s, rand(d2, n))
    @test size(y) == (n, 2) && all(v -> v in S[1, :], y[:, 1]) && all(v -> v in S[2, :], y[:, 2])
    @test abs(mean(y[:, 2] .== 10.0) - 2 / 3) < 5 * sqrt(2 / 9 / n)
    @test size(run(s, rand(d2, (2, 3)))) == (2, 3, 2)
    @test_throws OxiflowError Oxiflow.Empirical(2.0)
    @test_throws OxiflowError Oxiflow.Empirical(zeros(0))
end
