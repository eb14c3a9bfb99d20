# ADCME's normalizing flows. Oracles: each flow's inverse (backward ∘ forward = identity),
# its log-determinant against log|det J| of a central-difference Jacobian of the row map,
# and the closed-form maximum likelihood (the sample mean and covariance) for ADCME's
# LinearFlow example.
using Random, Statistics

@testset "flows: inverses and log-determinants against finite-difference Jacobians" begin
    reset_default_graph()
    Random.seed!(5)
    d, n = 4, 3
    X = 0.4 .* randn(n, d)
    xp = placeholder(Float64; shape=[n, d])
    nets = [h -> hcat(sum(tanh(h); dims=2), 0.5 .* sum(h; dims=2)) for _ in 1:d-1]
    flows = [LinearFlow(d), AffineFlow(d), AffineConstantFlow(d), AffineConstantFlow(d; shift=false),
             AffineHalfFlow(d, true, h -> 0.3 .* tanh(h), h -> h .^ 2), AffineHalfFlow(3, false, h -> 0.2 .* h[:, 1:1] .* h[:, 2:2], missing),
             SlowMAF(d, false, nets), Invertible1x1Conv(d), TanhFlow(d), AffineScalarFlow(d, 0.5, -2.0),
             Oxiflow.Exp(d), Oxiflow.Sigmoid(d), Oxiflow.Softplus(d), PowerTransform(d, 0.5), Permute(d, [2, 4, 1, 3]),
             InvertFlow(TanhFlow(d)), MAF(d, true, [6]), IAF(d, false, [5, 5]; activation="tanh")]
    s = Session()
    for fo in flows
        k = fo.dim
        xk = k == d ? xp : placeholder(Float64; shape=[n, k])
        x0 = fo isa InvertFlow ? 0.5 .* tanh.(X[:, 1:k]) : X[:, 1:k]       # inside (-1, 1) for atanh
        z, ld = Oxiflow.forward(fo, xk)
        xb, ldb = Oxiflow.backward(fo, z)
        init(s)
        zv, ldv, xbv, ldbv = run(s, [z, ld .+ 0 .* z[:, 1], xb, ldb .+ 0 .* z[:, 1]], xk => x0)
        @test xbv ≈ x0 rtol = 1e-10 atol = 1e-12
        @test ldv .+ ldbv ≈ zeros(n) atol = 1e-10
        for r in 1:n
            rowmap(v) = (xx = copy(x0); xx[r, :] = v; run(s, z, xk => xx)[r, :])
            J = fd_jacobian(rowmap, x0[r, :])
            @test ldv[r] ≈ logabsdet(J)[1] rtol = 1e-6 atol = 1e-8
        end
    end
    # the MADE's autoregressive property: output i does not move when inputs i.. move
    xa = placeholder(Float64; shape=[n, d])
    st = autoregressive_network(xa, [7, 7, 2], "made_test")
    init(s)
    base = run(s, st, xa => X)
    for i in 1:d
        Xi = copy(X); Xi[:, i:end] .+= 1.0
        moved = run(s, st, xa => Xi)
        @test moved[:, 1:i, :] ≈ base[:, 1:i, :] rtol = 1e-14
        i < d && @test !isapprox(moved[:, i+1, :], base[:, i+1, :])
    end
    @test size(st) == (n, d, 2)
    @test_throws OxiflowError LinearFlow(2, 3, ones(2, 2))
    @test_throws OxiflowError Permute(3, [1, 1, 2])
    @test_throws OxiflowError Permute(3, [1, 2, 4])
    # ADCME's 0-based permutation (passed on to TF Probability) and Julia's 1-based one
    X = [1.0 2.0 3.0; 4.0 5.0 6.0]
    for p in (Permute(3, [2, 0, 1]), Permute(3, [3, 1, 2]))
        @test p.permutation == [3, 1, 2]
        z, ld = Oxiflow.forward(p, X)
        @test run(Session(), z) == X[:, [3, 1, 2]]
    end
    @test_throws OxiflowError Oxiflow.forward(AffineHalfFlow(3, false, h -> 0.2 .* h, missing), X[:, 1:3])   # s of the wrong width
    @test_throws OxiflowError SlowMAF(3, true, nets)
end

@testset "NormalizingFlowModel: ADCME's LinearFlow example is the Gaussian MLE" begin
    reset_default_graph()
    Random.seed!(8)
    Σ = [2.0 1.0; 1.0 2.0]; μ = [2.0, 3.0]
    x = μ' .+ randn(2000, 2) * cholesky(Σ).U
    flows = [LinearFlow(2)]
    model = NormalizingFlowModel(Oxiflow.MultivariateNormalDiag(loc=zeros(2)), flows)
    zs, prior_logpdf, logdet = model(x)
    loss = -sum(prior_logpdf + logdet)
    sess = Session(); init(sess)
    BFGS!(sess, loss, 500)
    A, b = run(sess, [flows[1].A, flows[1].b])
    @test vec(b) ≈ vec(mean(x; dims=1)) rtol = 1e-6
    @test A * A' ≈ cov(x; corrected=false) rtol = 1e-5
    @test size(run(sess, rand(model, 7)[end])) == (7, 2)
    shown = sprint(show, model)
    @test occursin("MultivariateNormalDiag", shown) && occursin("LinearFlow (dim = 2)", shown)
    # training a RealNVP-style chain by Adam lowers the negative log likelihood
    reset_default_graph()
    Random.seed!(9)
    data = hcat(cos.(range(0, π; length=64)), sin.(range(0, π; length=64))) .+ 0.05 .* randn(64, 2)
    fl = [AffineHalfFlow(2, isodd(i), h -> ae(h, [8, 1], "s$i"), h -> ae(h, [8, 1], "t$i")) for i in 1:4]
    m = NormalizingFlowModel(Oxiflow.MultivariateNormalDiag(loc=zeros(2)), fl)
    _, lp, ld = m(data)
    nll = -sum(lp + ld)
    opt = minimize(AdamOptimizer(0.01), nll)
    sess = Session(); init(sess)
    l0 = run(sess, nll)
    for _ in 1:200
        run(sess, opt)
    end
    @test run(sess, nll) < l0 - 20
end

@testset "ActNorm: data-dependent initialization on the first run, then trained variables" begin
    reset_default_graph()
    Random.seed!(11)
    n, d = 6, 3
    X1 = randn(n, d) .* [0.5 2.0 3.0] .+ [1.0 -2.0 0.3]
    X2 = randn(n, d)
    xp = placeholder(Float64; shape=[n, d])
    an = ActNorm(d)
    z, ld = Oxiflow.forward(an, xp)
    xb, ldb = Oxiflow.backward(an, z)
    sess = Session(); init(sess)
    @test run(sess, an.initialized) == 1
    zv, ldv, xbv, ldbv = run(sess, [z, ld, xb, ldb], xp => X1)
    # Julia's oracle: s = -log(std), t = -mean(x .* exp(s)), std uncorrected
    s1 = -log.(std(X1; dims=1, corrected=false)); t1 = -mean(X1 .* exp.(s1); dims=1)
    @test zv ≈ X1 .* exp.(s1) .+ t1 rtol = 1e-12
    @test mean(zv; dims=1) ≈ zeros(1, d) atol = 1e-12
    @test std(zv; dims=1, corrected=false) ≈ ones(1, d) rtol = 1e-12
    @test ldv ≈ fill(sum(s1), n) rtol = 1e-12
    @test xbv ≈ X1 rtol = 1e-12
    @test ldbv ≈ -ldv rtol = 1e-12
    @test run(sess, an.initialized) == 0
    @test run(sess, an.s) ≈ s1 rtol = 1e-12
    @test run(sess, an.t) ≈ t1 rtol = 1e-12
    # later runs use the stored values, whatever the batch
    @test run(sess, z, xp => X2) ≈ X2 .* exp.(s1) .+ t1 rtol = 1e-12
    # and they train: d(sum z)/ds = sum over rows of x .* exp(s), a finite-difference check
    g = gradients(sum(z), an.s)
    gv = run(sess, g, xp => X2)
    @test gv ≈ sum(X2 .* exp.(s1); dims=1) rtol = 1e-12
    @test run(sess, gradients(sum(z), xp), xp => X2) ≈ repeat(exp.(s1), n) rtol = 1e-12
    # ADCME's own test: the model's inverse and log-determinants
    reset_default_graph()
    model = NormalizingFlowModel(Oxiflow.MultivariateNormalDiag(loc=zeros(d)), [ActNorm(d)])
    zs, _, J = model(X1)
    xs, iJ = Oxiflow.backward(model, zs[end])
    sess = Session(); init(sess)
    xv, Jv, iJv = run(sess, [xs[end], J, iJ])
    @test xv ≈ X1 rtol = 1e-12
    @test Jv ≈ -iJv rtol = 1e-12
    @test_throws OxiflowError Oxiflow.forward(ActNorm(2), X1)
end

@testset "NeuralCouplingFlow: rational-quadratic splines against their knots and finite differences" begin
    reset_default_graph()
    Random.seed!(12)
    dim, K, B = 4, 5, 3
    W1 = Variable(0.5 .* randn(dim ÷ 2, (3K - 1) * dim ÷ 2)); W2 = constant(0.5 .* randn(dim ÷ 2, (3K - 1) * dim ÷ 2))
    fo = NeuralCouplingFlow(dim, h -> 2.0 .* tanh(h * W1), h -> sin(h * W2), K, B)
    # inside, outside and at the ends of [-B, B]
    X = [1.5 .* randn(3, dim); 3.5 -4.0 0.2 1.0; -3.0 2.999 -2.5 0.0]
    n = size(X, 1)
    xp = placeholder(Float64; shape=[n, dim])
    z, ld = Oxiflow.forward(fo, xp)
    xb, ldb = Oxiflow.backward(fo, z)
    s = Session(); init(s)
    zv, ldv, xbv, ldbv = run(s, [z, ld, xb, ldb], xp => X)
    @test size(ldv) == (n,)
    @test xbv ≈ X rtol = 1e-12 atol = 1e-12
    @test ldv .+ ldbv ≈ zeros(n) atol = 1e-12
    for r in 1:n
        rowmap(v) = (xx = copy(X); xx[r, :] = v; run(s, z, xp => xx)[r, :])
        @test ldv[r] ≈ logabsdet(fd_jacobian(rowmap, X[r, :]))[1] rtol = 1e-6 atol = 1e-6
    end
    # outside [-B, B] each spline is the identity: a row entirely outside maps to itself
    @test run(s, z, xp => [X[1:n-1, :]; 3.2 -5.0 4.0 -3.1])[n, :] == [3.2, -5.0, 4.0, -3.1]
    # the flow trains: d(sum z + sum log_det)/dW1 against central differences
    loss = sum(z) + sum(ld)
    g = run(s, gradients(loss, W1), xp => X)
    W0 = run(s, W1)
    for idx in [(1, 1), (2, 7), (1, 3K - 1)]
        Wp = copy(W0); Wp[idx...] += 1e-6; Wm = copy(W0); Wm[idx...] -= 1e-6
        fd = (run(s, loss, xp => X, W1 => Wp) - run(s, loss, xp => X, W1 => Wm)) / 2e-6
        @test g[idx...] ≈ fd rtol = 1e-5 atol = 1e-7
    end

    # the knots, from Julia: with a constant network, upper values at the x knots map to the
    # y knots (-B + cumulative widths/heights, 2B·softmax) with slopes 1 at ±B and
    # softplus(d) inside
    reset_default_graph()
    P = randn(1, 3K - 1)
    softmax_j(v) = exp.(v) ./ sum(exp.(v))
    xk = -B .+ cumsum([0; 2B .* softmax_j(P[1:K])])
    yk = -B .+ cumsum([0; 2B .* softmax_j(P[K+1:2K])])
    slopes = [1; log1p.(exp.(P[2K+1:end])); 1]
    fk = NeuralCouplingFlow(2, h -> ones_like(h) * constant(P), h -> 0.1 .* h * ones(1, 3K - 1), K, B)
    xq = placeholder(Float64; shape=[K + 1, 2])
    zk, _ = Oxiflow.forward(fk, xq)
    s = Session()
    Xk = hcat(zeros(K + 1), xk)
    @test run(s, zk, xq => Xk)[:, 2] ≈ yk rtol = 1e-12 atol = 1e-12
    for k in 1:K+1
        up(v) = (xx = copy(Xk); xx[k, 2] = v[1]; [run(s, zk, xq => xx)[k, 2]])
        # one-sided second-order differences, inside the spline's range
        hs = k == K + 1 ? -1e-6 : 1e-6
        fd = (-3 * yk[k] + 4 * up([xk[k] + hs])[1] - up([xk[k] + 2hs])[1]) / (2hs)
        @test fd ≈ slopes[k] rtol = 1e-6
    end
    # errors
    @test_throws OxiflowError NeuralCouplingFlow(3, identity, identity)
    @test_throws OxiflowError NeuralCouplingFlow(2, identity, identity, 1)
    e = try; Oxiflow.forward(NeuralCouplingFlow(2, h -> h, h -> h, 4), ones(2, 2)); nothing; catch err; err; end
    @test e isa OxiflowError && occursin("f1 must return batch × 11", e.msg)
end
