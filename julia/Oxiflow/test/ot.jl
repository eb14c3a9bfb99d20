# ADCME's sinkhorn (and its greenkhorn method), empirical_sinkhorn and ot_dist. Oracles: the
# conditions that define the entropic transport plan (its marginals are a and b, and
# log P + M/reg splits into a row term plus a column term), POT's iterations written out
# here for the stopping point, and
# finite differences of the regularized objective <P, M> + reg Σ P (log P - 1), whose
# derivative in M is P (the gradient sinkhorn gives, as ADCME's).

# POT's sinkhorn_knopp in plain Julia: the plan and the number of iterations
function sinkhorn_ref(a, b, M, reg; iter=1000, tol=1e-9)
    m, n = size(M); u = fill(1 / m, m); v = fill(1 / n, n)
    K = exp.(-M / reg); err = 1.0; cpt = 0
    while err > tol && cpt < iter
        v = b ./ (K' * u); u = a ./ (K * v)
        cpt % 10 == 0 && (err = norm(vec(sum(u .* K .* v'; dims=1)) - b))
        cpt += 1
    end
    return u .* K .* v', cpt
end
regularized(P, M, reg) = sum(P .* M) + reg * sum(P .* (log.(P) .- 1))

# POT's greenkhorn in plain Julia, with the plan kept as a matrix and updated in place:
# the plan and the number of updates
function greenkhorn_ref(a, b, M, reg; iter=1000, tol=1e-9)
    m, n = size(M); K = exp.(-M / reg)
    u = fill(1 / m, m); v = fill(1 / n, n); G = u .* K .* v'
    for k in 1:iter
        r = vec(sum(G; dims=2)) - a; c = vec(sum(G; dims=1)) - b
        (v1, i1), (v2, i2) = findmax(abs.(r)), findmax(abs.(c))
        if v1 > v2
            u[i1] = a[i1] / sum(K[i1, :] .* v); G[i1, :] = u[i1] .* K[i1, :] .* v
        else
            v[i2] = b[i2] / sum(K[:, i2] .* u); G[:, i2] = u .* K[:, i2] .* v[i2]
        end
        max(v1, v2) <= tol && return G, k
    end
    return G, iter
end

@testset "sinkhorn: the entropic plan, its loss and ADCME's gradient" begin
    reset_default_graph()
    a = [0.2, 0.5, 0.3]; b = [0.4, 0.1, 0.25, 0.25]
    M = [abs(i - j) + 0.1 * i for i in 1:3, j in 1:4]
    s = Session()
    P, l = sinkhorn(a, b, M; reg=0.5, tol=1e-12, returnall=true)
    Pv, lv = run(s, [P, l])
    @test vec(sum(Pv; dims=2)) ≈ a rtol = 1e-10
    @test vec(sum(Pv; dims=1)) ≈ b rtol = 1e-10
    R = log.(Pv) .+ M ./ 0.5               # f_i + g_j: every 2x2 minor's cross difference is 0
    @test maximum(abs(R[i, j] - R[i, 1] - R[1, j] + R[1, 1]) for i in 1:3, j in 1:4) < 1e-12
    @test lv ≈ sum(Pv .* M) rtol = 1e-14
    # ADCME's stopping rule: the same plan as POT's loop after the same iterations
    @test run(s, sinkhorn(a, b, M; reg=0.5, iter=7, returnall=true)[1]) ≈ sinkhorn_ref(a, b, M, 0.5; iter=7)[1] rtol = 1e-12
    @test run(s, sinkhorn(a, b, M; reg=0.5)) ≈ sum(sinkhorn_ref(a, b, M, 0.5)[1] .* M) rtol = 1e-12
    # ∂loss/∂M = P, scaled by the gradient reaching the loss, and a finite difference of
    # the regularized objective (envelope theorem)
    Mv = Variable(M)
    lm = sinkhorn(a, b, Mv; reg=0.5, tol=1e-13)
    init(s)
    @test run(s, gradients(3 * lm, Mv)) ≈ 3 .* Pv rtol = 1e-9
    W(Mx) = regularized(sinkhorn_ref(a, b, Mx, 0.5; tol=1e-13)[1], Mx, 0.5)
    @test run(s, gradients(lm, Mv)) ≈ fd_grad(W, M) rtol = 1e-5
    @test gradients(sum(sinkhorn(a, b, Mv; returnall=true)[1]), Mv) === nothing   # P is held fixed
    # Float32 costs
    @test run(s, sinkhorn(a, b, Float32.(M) |> constant; reg=0.5)) ≈ lv rtol = 1e-5
    # a tiny reg underflows K: the loop stops at its last finite iterate, no NaN
    @test isfinite(run(s, sinkhorn(a, b, 100 .* M; reg=1e-3)))
    # errors
    @test_throws OxiflowError sinkhorn([0.5, 0.6, 0.1], b, M)
    @test_throws OxiflowError sinkhorn(a, b, M; method="greenhorn")
end

@testset "sinkhorn's greenkhorn: one row or column per iteration, the same entropic plan" begin
    reset_default_graph()
    a = [0.2, 0.5, 0.3]; b = [0.4, 0.1, 0.25, 0.25]
    M = [abs(i - j) + 0.1 * i for i in 1:3, j in 1:4]
    s = Session()
    # the iterates of the reference after 1, 2 and 9 updates (rows and columns both taken)
    for k in (1, 2, 9)
        @test run(s, sinkhorn(a, b, M; reg=0.5, iter=k, method="greenkhorn", returnall=true)[1]) ≈ greenkhorn_ref(a, b, M, 0.5; iter=k)[1] rtol = 1e-12
    end
    # converged, it is Sinkhorn's plan (the entropic plan is unique)
    P, l = run(s, collect(sinkhorn(a, b, M; reg=0.5, tol=1e-13, iter=100_000, method="greenkhorn", returnall=true)))
    @test greenkhorn_ref(a, b, M, 0.5; tol=1e-13, iter=100_000)[2] < 100_000
    @test P ≈ sinkhorn_ref(a, b, M, 0.5; tol=1e-14)[1] rtol = 1e-9
    @test vec(sum(P; dims=2)) ≈ a rtol = 1e-11
    @test l ≈ sum(P .* M) rtol = 1e-14
    # ∂loss/∂M = P, as sinkhorn's
    Mv = Variable(M); init(s)
    @test run(s, gradients(2 * sinkhorn(a, b, Mv; reg=0.5, tol=1e-13, iter=100_000, method="greenkhorn"), Mv)) ≈ 2 .* P rtol = 1e-12
    @test run(s, empirical_sinkhorn([0.0, 1.0, 2.5], [0.5, 2.0]; method="greenkhorn", tol=1e-12, iter=10_000)) ≈
          run(s, empirical_sinkhorn([0.0, 1.0, 2.5], [0.5, 2.0]; tol=1e-12)) rtol = 1e-8
    @test_throws OxiflowError sinkhorn(a, b, M[:, 1:3])
end

@testset "ot_dist, empirical_sinkhorn: distances and gradients in the samples" begin
    reset_default_graph()
    x0 = [0.1 0.5; 1.2 -0.3; 0.7 0.8; -0.4 0.2; 0.9 1.5]; y = [0.0 0.0; 1.0 1.0; 0.5 -0.5; 1.5 0.2]
    D = [norm(x0[i, :] - y[j, :], p) for i in 1:5, j in 1:4, p in (1, 2, 3)]
    for (k, p) in enumerate((1, 2, 3))
        @test ot_dist(x0, y, p) ≈ D[:, :, k]
        @test run(Session(), ot_dist(constant(x0), y, p)) ≈ D[:, :, k] rtol = 1e-12
    end
    x = Variable(x0)
    le = empirical_sinkhorn(x, y; reg=0.3, tol=1e-13)
    s = Session(); init(s)
    @test run(s, le) ≈ sum(sinkhorn_ref(fill(0.2, 5), fill(0.25, 4), D[:, :, 2], 0.3; tol=1e-13)[1] .* D[:, :, 2]) rtol = 1e-10
    W(X) = (Mx = ot_dist(X, y, 2); regularized(sinkhorn_ref(fill(0.2, 5), fill(0.25, 4), Mx, 0.3; tol=1e-13)[1], Mx, 0.3))
    @test run(s, gradients(le, x)) ≈ fd_grad(W, x0) rtol = 1e-5
    # a cost function of our own, normalized
    lf = empirical_sinkhorn(x0, y; reg=0.3, dist=(p, q) -> ot_dist(p, q, 1) .^ 2, normalized=true)
    M1 = D[:, :, 1] .^ 2
    @test run(s, lf) ≈ sum(sinkhorn_ref(fill(0.2, 5), fill(0.25, 4), M1 / maximum(M1), 0.3)[1] .* M1 / maximum(M1)) rtol = 1e-10
    @test_throws OxiflowError ot_dist(x0, [1.0 2.0 3.0])
end

using Random

# dynamic time warping by the textbook recursion, the oracle for dtw's cost
function dtw_ref(s, t)
    n, m = length(s), length(t); D = fill(Inf, n + 1, m + 1); D[1, 1] = 0.0
    for i in 1:n, j in 1:m
        D[i+1, j+1] = abs(s[i] - t[j]) + min(D[i, j], D[i, j+1], D[i+1, j])
    end
    return D[end, end]
end

@testset "dtw: exact distance, a warping path, gradients along it" begin
    reset_default_graph()
    s = Session()
    # ADCME's documentation example (distance 1)
    c, p = dtw(Float64[1, 2, 3, 5, 5, 5, 6], Float64[1, 1, 2, 2, 3, 5], true)
    cv, pv = run(s, [c, p])
    @test cv == 1.0 && eltype(pv) == Int64
    Random.seed!(3)
    for (n, m) in ((7, 5), (4, 9), (1, 3), (6, 6))
        a, b = randn(n), randn(m)
        sp, tp = placeholder(Float64; shape=[nothing]), placeholder(Float64; shape=[nothing])
        c, p = dtw(sp, tp)
        cv, pv = run(s, [c, p], sp => a, tp => b)
        @test cv ≈ dtw_ref(a, b) rtol = 1e-14
        # the path: from (1, 1) to (n, m) by unit steps, and its cost is the distance
        @test pv[1, :] == [1, 1] && pv[end, :] == [n, m]
        @test all(d -> d in ([1, 0], [0, 1], [1, 1]), [pv[k+1, :] - pv[k, :] for k in 1:size(pv, 1)-1])
        @test sum(abs(a[i] - b[j]) for (i, j) in eachrow(pv)) ≈ cv rtol = 1e-14
        # the gradient, against finite differences of the textbook recursion
        gs, gt = run(s, gradients(c, [sp, tp]), sp => a, tp => b)
        @test gs ≈ fd_grad(x -> dtw_ref(x, b), a) rtol = 1e-6
        @test gt ≈ fd_grad(x -> dtw_ref(a, x), b) rtol = 1e-6
    end
    # ADCME's map over pairs of rows, in Float32
    A, B = rand(Float32, 4, 6), rand(Float32, 4, 8)
    d = map(x -> dtw(x[1], x[2])[1], [constant(A), constant(B)], dtype=Float32)
    dv = run(s, d)
    @test eltype(dv) == Float32
    @test dv ≈ [dtw_ref(A[k, :], B[k, :]) for k in 1:4] rtol = 1e-5
    # bad input, and a session that stays usable
    @test_throws OxiflowError dtw(constant(ones(2, 2)), [1.0])
    @test_throws OxiflowError dtw(constant(ones(Float32, 2)), [1.0])
    @test_throws OxiflowError dtw([true], [1.0])
    big = constant(zeros(12_000))
    e = try; run(s, dtw(big, big)[1]); nothing; catch err; err; end
    @test e isa OxiflowError && occursin("Dtw", e.msg) && occursin("12000", e.msg)
    @test run(s, dtw([1.0, 2.0], [2.0])[1]) == 1.0
    # a missing value (NaN) gives a NaN distance and still a path from (1, 1) to (n, m)
    cv, pv = run(s, collect(dtw([1.0, NaN, 3.0, 4.0], [1.0, 2.0, 3.0])))
    @test isnan(cv) && pv[1, :] == [1, 1] && pv[end, :] == [4, 3]
end

# The 1-D earth mover's distance between weighted points, ∫ |F - G| (the cost |x - y|)
function w1_ref(xs, a, ys, b)
    pts = sort(vcat(collect(zip(xs, a)), collect(zip(ys, -b))); by=first)
    acc, w = 0.0, 0.0
    for k in 1:length(pts)-1
        acc += pts[k][2]
        w += abs(acc) * (pts[k+1][1] - pts[k][1])
    end
    return w
end

@testset "emd: the exact transport against the 1-D closed form, and its dual gradients" begin
    reset_default_graph()
    Random.seed!(21)
    xs, ys = 5 .* rand(7), 5 .* rand(9) .- 1
    a, b = rand(7) .+ 0.1, rand(9) .+ 0.1
    a, b = a / sum(a), b / sum(b)
    M0 = abs.(xs .- ys')
    Mv = placeholder(M0)
    P, loss = emd(a, b, Mv; returnall=true)
    s = Session()
    Pv, lv = run(s, [P, loss])
    @test lv ≈ w1_ref(xs, a, ys, b) rtol = 1e-12
    @test vec(sum(Pv; dims=2)) ≈ a rtol = 1e-12
    @test vec(sum(Pv; dims=1)) ≈ b rtol = 1e-12
    @test all(Pv .>= 0) && sum(Pv .* M0) ≈ lv
    # ∂loss/∂M = P, against central differences (random costs: a unique optimum)
    M1 = rand(7, 9)
    l1 = emd(a, b, Mv)
    g = run(s, gradients(l1, Mv), Mv => M1)
    for (i, j) in ((1, 1), (3, 4), (7, 9), (5, 2))
        Mp = copy(M1); Mp[i, j] += 1e-7; Mm = copy(M1); Mm[i, j] -= 1e-7
        @test g[i, j] ≈ (run(s, l1, Mv => Mp) - run(s, l1, Mv => Mm)) / 2e-7 atol = 1e-7
    end
    @test g ≈ run(s, emd(a, b, Mv; returnall=true)[1], Mv => M1)
    # ∂loss/∂a, ∂loss/∂b along directions that keep the sums (e_i - e_k): differences of
    # the potentials
    av, bv = placeholder(a), placeholder(b)
    l2 = emd(av, bv, M1)
    ga, gb = run(s, gradients(l2, [av, bv]))
    @test abs(sum(ga)) < 1e-12 && abs(sum(gb)) < 1e-12             # centered, as POT's
    h = 1e-7
    for (i, k) in ((1, 2), (4, 7))
        e = zeros(7); e[i] = h; e[k] = -h
        fd = (run(s, l2, av => a + e, bv => b) - run(s, l2, av => a - e, bv => b)) / 2h
        @test fd ≈ ga[i] - ga[k] rtol = 1e-6
    end
    e = zeros(9); e[3] = h; e[8] = -h
    @test (run(s, l2, av => a, bv => b + e) - run(s, l2, av => a, bv => b - e)) / 2h ≈ gb[3] - gb[8] rtol = 1e-6
    # through P: d sum(P .* C)/da for a fixed C, against differences (P linear in a on the basis)
    C = rand(7, 9)
    P2, _ = emd(av, bv, M1; returnall=true)
    gaP = run(s, gradients(sum(P2 .* C), av))
    e = zeros(7); e[2] = h; e[6] = -h
    fdP = (sum(run(s, P2, av => a + e, bv => b) .* C) - sum(run(s, P2, av => a - e, bv => b) .* C)) / 2h
    @test fdP ≈ gaP[2] - gaP[6] rtol = 1e-6
    # sinkhorn's "lp" is emd; empirical_emd is emd on the samples, differentiable in them
    @test run(s, sinkhorn(a, b, M0; method="lp")) ≈ lv rtol = 1e-12
    x = Variable(reshape(xs, :, 1))
    le = empirical_emd(x, reshape(ys, :, 1); dist=1)
    init(s)
    @test run(s, le) ≈ w1_ref(xs, fill(1 / 7, 7), ys, fill(1 / 9, 9)) rtol = 1e-12
    gx = run(s, gradients(le, x))
    W(X) = w1_ref(vec(X), fill(1 / 7, 7), ys, fill(1 / 9, 9))
    @test vec(gx) ≈ vec(fd_grad(W, reshape(xs, :, 1))) rtol = 1e-5
    # errors: a method that does not exist, the pivot limit, unequal sums of fed weights
    @test_throws OxiflowError sinkhorn(a, b, M0; method="nearest")
    @test_throws OxiflowError emd([0.5, 0.6], [0.5, 0.5], ones(2, 2))
    e = try; run(s, emd(a, b, M1; iter=0)); nothing; catch err; err; end
    @test e isa OxiflowError && occursin("OtNetwork", e.msg) && occursin("raise iter", e.msg)
    e = try; run(s, l2, av => 2 .* a, bv => b); nothing; catch err; err; end
    @test e isa OxiflowError && occursin("equal sums", e.msg)
    @test run(s, l2, av => a, bv => b) ≈ run(s, l1, Mv => M1)
end
