# Dense API (math.jl, linalg.jl): values against Julia Base / LinearAlgebra / Statistics,
# gradients against central finite differences, each on the CPU only (Session(GPU=0)) and
# with the emulated GPU that runtests.jl enables (ops with GPU kernels are placed there).
using Statistics

const SESSIONS = (("CPU", () -> Session(GPU=0)), ("emulated GPU", () -> Session()))

jl_sigmoid(x) = 1 / (1 + exp(-x))
jl_softmax(X) = exp.(X) ./ sum(exp.(X); dims=2)

@testset "dense API: elementwise ops match Julia Base ($dev)" for (dev, mk) in SESSIONS
    reset_default_graph()
    A = [-2.5 -0.3 0.7; 1.2 7.5 -6.1]
    B = [0.5, -1.0, 2.0]'
    a = constant(A)
    s = mk()
    acts = ((abs, abs), (sign, sign), (tan, tan), (sigmoid, jl_sigmoid), (relu, x -> max(x, 0.0)),
            (relu6, x -> clamp(x, 0.0, 6.0)), (leaky_relu, x -> x > 0 ? x : 0.2x),
            (elu, x -> x > 0 ? x : exp(x) - 1), (selu, x -> x > 0 ? 1.0507009873554805x : 1.0507009873554805 * 1.6732632423543772 * (exp(x) - 1)),
            (softplus, x -> log(1 + exp(x))), (softsign, x -> x / (1 + abs(x))))
    for (f, jf) in acts
        @test run(s, f(a)) ≈ jf.(A)
        @test f(0.7) ≈ jf(0.7) && f(-0.7) ≈ jf(-0.7)    # the Real methods
    end
    @test run(s, leaky_relu(a, 0.5)) ≈ [x > 0 ? x : 0.5x for x in A]
    @test run(s, relu(constant(Float32.(A)))) ≈ Float32.(max.(A, 0))
    @test run(s, softmax(a)) ≈ jl_softmax(A)
    @test run(s, max(a, constant(B))) ≈ max.(A, B)
    @test run(s, min(a, 0.5)) ≈ min.(A, 0.5)
    @test run(s, max(1.0, a)) ≈ max.(1.0, A)
    for (f, jf) in ((<, <), (<=, <=), (>, >), (>=, >=))
        r = run(s, f(a, 0.7))
        @test eltype(r) == Bool && r == jf.(A, 0.7)
        @test run(s, f(a, constant(B))) == jf.(A, B)
    end
    @test run(s, a .>= 0.7) == (A .>= 0.7)
    # fused dot expressions whose Julia part Base hands over unevaluated
    @test run(s, a .* (2 .* B)) ≈ A .* (2 .* B)
    @test run(s, (B .+ 1) ./ a .- 1.0) ≈ (B .+ 1) ./ A .- 1.0
    @test run(s, clip(a, -1.0, 2.0)) ≈ clamp.(A, -1.0, 2.0)
    @test run(s, clamp(a, -1.0, 2.0)) ≈ clamp.(A, -1.0, 2.0)
    @test run(s, if_else(a > 0.0, a, 0.0)) ≈ ifelse.(A .> 0, A, 0.0)
    S = [2.0 1.0; 0.5 3.0]
    @test run(s, constant(S) + I) ≈ S + I
    @test run(s, constant(S) - 2I) ≈ S - 2I
    @test run(s, I - constant(S)) ≈ I - S
    @test run(s, I + constant(S)) ≈ I + S
    e = try; a + I; nothing; catch err; err; end
    @test e isa OxiflowError && occursin("square", e.msg) && occursin("(2, 3)", e.msg)
    e = try; relu(constant([1, 2])); nothing; catch err; err; end
    @test e isa OxiflowError && occursin("Relu", e.msg)
    if dev == "emulated GPU"
        r = relu(a)
        run(s, r)
        @test assigned_device(s, r) == GPU0
    end
end

@testset "dense API: reductions match Base and Statistics ($dev)" for (dev, mk) in SESSIONS
    reset_default_graph()
    X = reshape([0.3, 1.7, -0.4, 2.2, 0.9, -1.1, 1.3, 0.6, -0.2, 1.4, 0.8, -0.7], 3, 4)
    x = constant(X)
    s = mk()
    for (f, jf) in ((sum, sum), (prod, prod), (maximum, maximum), (minimum, minimum), (mean, mean))
        @test run(s, f(x)) ≈ jf(X)
        @test run(s, f(x; dims=1)) ≈ vec(jf(X; dims=1))
        @test run(s, f(x; dims=2)) ≈ vec(jf(X; dims=2))
        @test run(s, f(x; dims=(1, 2))) ≈ jf(X)
    end
    @test size(run(s, maximum(constant(rand(10, 2)); dims=1))) == (2,)    # ADCME's example
    @test run(s, std(x)) ≈ std(X; corrected=false)
    @test run(s, std(x; dims=1)) ≈ vec(std(X; dims=1, corrected=false))
    @test run(s, std(x; dims=2, corrected=true)) ≈ vec(std(X; dims=2))
    for p in (1, 2, 3, Inf)
        @test run(s, norm(x, p)) ≈ norm(X, p)
    end
    @test run(s, argmax(x)) == [argmax(X[:, j]) for j in 1:4]
    @test run(s, argmin(x; dims=2)) == [argmin(X[i, :]) for i in 1:3]
    @test run(s, argmax(constant([1.0, 5.0, 3.0]))) == 2
    @test eltype(run(s, argmax(x))) == Int64
    e = try; sum(x; dims=3); nothing; catch err; err; end
    @test e isa OxiflowError && occursin("dims 3", e.msg) && occursin("(3, 4)", e.msg)
end

@testset "dense API: linear algebra matches LinearAlgebra ($dev)" for (dev, mk) in SESSIONS
    reset_default_graph()
    A = [4.0 1.0 0.5; 1.0 3.0 -1.0; 0.2 0.4 5.0]
    b = [1.0, -2.0, 0.5]
    Bm = [1.0 0.0; 2.0 1.0; -1.0 3.0]
    a = constant(A)
    s = mk()
    @test run(s, a \ constant(b)) ≈ A \ b
    @test run(s, a \ b) ≈ A \ b
    @test run(s, a \ constant(Bm)) ≈ A \ Bm
    @test run(s, inv(a)) ≈ inv(A)
    @test run(s, det(a)) ≈ det(A)
    @test run(s, tr(a)) ≈ tr(A)
    @test run(s, diag(a)) ≈ diag(A)
    @test run(s, diag(constant(Bm))) ≈ diag(Bm)
    @test run(s, diagm(constant(b))) ≈ diagm(b)
    @test run(s, diagm(0 => constant(b))) ≈ diagm(0 => b)
    @test run(s, dot(constant(b), constant(2b))) ≈ dot(b, 2b)
    @test run(s, inv(constant(Float32.(A)))) ≈ Float32.(inv(A))
    Over = [1.0 2.0; 3.0 4.0; 5.0 7.0; -1.0 0.5]; y = [1.0, 0.0, 2.0, 1.0]
    @test run(s, constant(Over) \ constant(y)) ≈ Over \ y
    Under = [1.0 2.0 3.0; -1.0 0.5 2.0]; z = [1.0, 2.0]
    @test run(s, constant(Under) \ constant(z)) ≈ Under \ z    # minimum-norm solution, as Julia's
    X = randn(2, 3, 4); Y = randn(2, 4, 5)
    P = run(s, batch_matmul(constant(X), constant(Y)))
    @test size(P) == (2, 3, 5) && all(P[k, :, :] ≈ X[k, :, :] * Y[k, :, :] for k in 1:2)
    Q = run(s, batch_matmul(constant(X), constant(X); adj_y=true))
    @test all(Q[k, :, :] ≈ X[k, :, :] * X[k, :, :]' for k in 1:2)
    # errors: sizes at graph construction, singular matrices when run
    e = try; a \ constant([1.0, 2.0]); nothing; catch err; err; end
    @test e isa OxiflowError && occursin("(3, 3)", e.msg) && occursin("(2,)", e.msg)
    sing = inv(constant([1.0 2.0; 2.0 4.0]))
    e = try; run(s, sing); nothing; catch err; err; end
    @test e isa OxiflowError && occursin("MatrixInverse", e.msg) && occursin("not invertible", e.msg) && occursin("[2,2]", e.msg)
    @test run(s, det(a)) ≈ det(A)    # the session stays usable
    # singular matrices with a zero pivot column: det is 0 (as Julia's), not 0/0
    for Z in ([0.0 0.0; 0.0 0.0], [0.0 1.0; 0.0 1.0], zeros(3, 3), [1.0 2.0; 2.0 4.0])
        @test run(s, det(constant(Z))) == det(Z)
    end
    @test run(s, det(constant(Float32[0 1; 0 1]))) == 0.0f0
    if dev == "emulated GPU"
        i = inv(a); d = diag(a)
        run(s, [i, d])
        @test assigned_device(s, i) == CPU0    # no GPU kernel: MatrixInverse stays on the CPU
        @test assigned_device(s, d) == GPU0
    end
end

@testset "dense API: triangular solves and Cholesky match LinearAlgebra ($dev)" for (dev, mk) in SESSIONS
    reset_default_graph()
    M = [2.0 0.3 -0.7; 0.5 1.5 0.2; -0.4 0.9 3.0]    # full: each solve must read one triangle
    A = M * M' + 3I
    b = [1.0, -2.0, 0.5]; B = [1.0 0.0; 2.0 1.0; -1.0 3.0]
    s = mk()
    L = run(s, cholesky_factor(constant(A)))
    @test L ≈ cholesky(Symmetric(A, :L)).L && istril(L)
    @test run(s, tf.linalg.cholesky(A)) ≈ L
    @test run(s, cholesky_factor(constant(Float32.(A)))) ≈ Float32.(L)
    @test run(s, triangular_solve(constant(M), b)) ≈ LowerTriangular(M) \ b
    @test run(s, triangular_solve(constant(M), B; lower=false)) ≈ UpperTriangular(M) \ B
    @test run(s, triangular_solve(constant(M), B; adjoint=true)) ≈ LowerTriangular(M)' \ B
    @test run(s, triangular_solve(M, constant(b); lower=false, adjoint=true)) ≈ UpperTriangular(M)' \ b
    @test run(s, tf.linalg.triangular_solve(constant(M), B; lower=false)) ≈ UpperTriangular(M) \ B
    l = cholesky_factor(constant(A))
    @test run(s, triangular_solve(l, triangular_solve(l, b); adjoint=true)) ≈ A \ b
    # errors: sizes when built, an indefinite or singular matrix when run
    e = try; triangular_solve(constant(M), [1.0, 2.0]); nothing; catch err; err; end
    @test e isa OxiflowError && occursin("MatrixTriangularSolve", e.msg) && occursin("[3,3]", e.msg) && occursin("[2,1]", e.msg)
    e = try; run(s, cholesky_factor(constant([1.0 2.0; 2.0 1.0]))); nothing; catch err; err; end
    @test e isa OxiflowError && occursin("Cholesky", e.msg) && occursin("not successful", e.msg) && occursin("[2,2]", e.msg)
    e = try; run(s, triangular_solve(constant([1.0 0.0; 1.0 0.0]), [1.0, 1.0])); nothing; catch err; err; end
    @test e isa OxiflowError && occursin("MatrixTriangularSolve", e.msg) && occursin("not invertible", e.msg)
    @test run(s, l) ≈ L    # the session stays usable
    # gradients, against central differences of the same function in Julia
    jf(X) = sum((LowerTriangular(X) \ B) .* B) + sum((UpperTriangular(X)' \ b) .^ 2) +
            sum(cholesky(Symmetric(X * X' + 3I, :L)).L .* M)
    x = Variable(M)
    loss = sum(triangular_solve(x, B) .* B) + sum(triangular_solve(x, b; lower=false, adjoint=true)^2) +
           sum(cholesky_factor(x * x' + 3I) .* M)
    g = gradients(loss, x)
    init(s)
    @test run(s, loss) ≈ jf(M)
    @test run(s, g) ≈ fd_grad(jf, M) rtol = 1e-6
    if dev == "emulated GPU"
        @test assigned_device(s, l) == CPU0    # no GPU kernel: the factorization stays on the CPU
    end
end

@testset "dense API: gradients match finite differences ($dev)" for (dev, mk) in SESSIONS
    reset_default_graph()
    X0 = [0.4 -0.9 1.3; 0.7 0.2 -1.6; -0.5 1.1 0.8]
    W = [0.3 -1.2 0.5; 0.9 0.1 -0.4; 1.5 0.6 -0.8]
    bv = [1.0, -0.5, 2.0]
    jf(X) = sum(jl_sigmoid.(X)) + sum(log.(1 .+ exp.(X))) + sum(jl_softmax(X) .* W) + det(X + 3I) +
            sum(inv(X + 4I) * W) + sum(((X + 5I) \ bv) .^ 2) + norm(X) + std(X; corrected=false) +
            sum(maximum(X; dims=1)) + sum(tanh.(X) .* max.(X, 0.1)) + tr(X * W) + sum(abs.(X) .* W) +
            sum(selu.(X) .+ elu.(X) .+ softsign.(X)) + sum(prod(X .+ 2; dims=2)) + sum(clamp.(X, -1.0, 1.0) .* W)
    x = Variable(X0)
    loss = sum(sigmoid(x)) + sum(softplus(x)) + sum(softmax(x) .* W) + det(x + 3I) +
           sum(inv(x + 4I) * W) + sum(((x + 5I) \ bv)^2) + norm(x) + std(x) +
           sum(maximum(x; dims=1)) + sum(tanh(x) .* max(x, 0.1)) + tr(x * W) + sum(abs(x) .* W) +
           sum(selu(x) + elu(x) + softsign(x)) + sum(prod(x + 2; dims=2)) + sum(clip(x, -1.0, 1.0) .* W)
    g = gradients(loss, x)
    s = mk(); init(s)
    @test run(s, loss) ≈ jf(X0)
    @test run(s, g) ≈ fd_grad(jf, X0) rtol = 1e-6
    # least squares (both shapes) and a batch product
    O0 = [1.0 2.0; 3.0 4.5; 5.0 7.0; -1.0 0.5]; yo = [1.0, 0.0, 2.0, 1.0]
    U0 = [1.0 2.0 3.0; -1.0 0.5 2.0]; yu = [1.0, 2.0]
    o = Variable(O0); u = Variable(U0)
    lo = sum((o \ yo)^2); lu = sum((u \ yu)^2)
    go = gradients(lo, o); gu = gradients(lu, u)
    init(s)
    @test run(s, go) ≈ fd_grad(M -> sum((M \ yo) .^ 2), O0) rtol = 1e-6
    @test run(s, gu) ≈ fd_grad(M -> sum((M \ yu) .^ 2), U0) rtol = 1e-6
end

@testset "dense API: random tensors are seeded and fresh per run" begin
    reset_default_graph()
    set_random_seed(1234)
    x = normal(3, 4; mean=2.0, std=0.5)
    u = uniform(1000; minval=-1.0, maxval=3.0)
    @test x.dtype == Float64 && size(x) == (3, 4)
    s = Session()
    x1 = run(s, x); x2 = run(s, x)
    @test x1 != x2
    @test run(Session(), x) == x1
    uv = run(s, u)
    @test all(-1.0 .<= uv .< 3.0) && abs(mean(uv) - 1.0) < 0.25
    # the same program in a fresh graph with the same graph seed repeats
    reset_default_graph()
    set_random_seed(1234)
    x_again = normal(3, 4; mean=2.0, std=0.5)
    @test run(Session(), x_again) == x1
    # no seed: different sessions differ; dtype and shape options
    reset_default_graph()
    n = normal(10000)
    v1 = run(Session(), n)
    @test v1 != run(Session(), n)
    @test abs(mean(v1)) < 0.06 && abs(std(v1) - 1) < 0.05
    @test normal(2, 2; dtype=Float32).dtype == Float32
    @test size(uniform((2, 5))) == (2, 5)
    t = uniform(3; seed=7)    # an op seed alone (TF: with the default graph seed) repeats too
    @test run(Session(), t) == run(Session(), t)
end
