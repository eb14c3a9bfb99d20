# ADCME's αscheme (generalized-α). Oracles: the closed form of the trapezoidal rule (ρ = 1) on
# an undamped oscillator (exact amplitude, period stretched to ω̄ = (2/Δt) atan(ωΔt/2)); the
# exact solution of a damped two-degree-of-freedom system (the matrix exponential of its
# first-order form), against which the method must converge to second order for every ρ;
# finite differences for gradients.
using SparseArrays

@testset "αscheme: ρ = 1 is the trapezoidal rule on an undamped oscillator" begin
    reset_default_graph()
    ω, dt, NT = 3.0, 0.1, 60
    d, v, a = αscheme(sparse(fill(1.0, 1, 1)), sparse(zeros(1, 1)), sparse(fill(ω^2, 1, 1)), zeros(NT, 1), [1.0], [0.0], [-ω^2], fill(dt, NT))
    s = Session()
    D, V, A = run(s, [d, v, a])
    @test size(D) == (NT + 1, 1) && size(V) == (NT + 1, 1) && size(A) == (NT + 1, 1)
    ωb = 2 / dt * atan(ω * dt / 2)
    @test vec(D) ≈ [cos(n * ωb * dt) for n in 0:NT] atol = 1e-12
    @test vec(A) ≈ -ω^2 .* vec(D) atol = 1e-10            # the equation holds at every step
end

@testset "αscheme converges to second order for every ρ, sparse and dense alike" begin
    M = [2.0 0.0; 0.0 1.0]; C = [0.3 -0.1; -0.1 0.2]; K = [6.0 -2.0; -2.0 4.0]
    d0, v0 = [1.0, -0.5], [0.0, 0.8]
    a0 = M \ (-C * v0 - K * d0)
    T = 2.0
    Afirst = [zeros(2, 2) I; -(M \ K) -(M \ C)]
    exact = (exp(Afirst * T) * [d0; v0])[1:2]
    for ρ in (1.0, 0.6, 0.0)
        errs = map((20, 40, 80)) do NT
            reset_default_graph()
            d, _, _ = αscheme(sparse(M), sparse(C), sparse(K), zeros(NT, 2), d0, v0, a0, fill(T / NT, NT); ρ=ρ)
            dd, _, _ = αscheme(M, C, K, zeros(NT, 2), d0, v0, a0, fill(T / NT, NT); ρ=ρ)
            s = Session()
            Ds, Dd = run(s, [d, dd])
            @test Ds ≈ Dd rtol = 1e-12                      # sparse and dense matrices agree
            maximum(abs.(Ds[end, :] - exact))
        end
        @test 3.5 < errs[1] / errs[2] < 4.5 && 3.5 < errs[2] / errs[3] < 4.5
    end
end

@testset "αscheme: loads, variable steps and gradients" begin
    reset_default_graph()
    n, NT = 4, 12
    K0 = spdiagm(-1 => fill(-1.0, n - 1), 0 => fill(2.0, n), 1 => fill(-1.0, n - 1))
    Δt = collect(range(0.05, 0.1; length=NT))
    t_d, t_f = αscheme_time(Δt; ρ=0.5)
    @test t_d ≈ cumsum(Δt) && t_f ≈ t_d .- Δt .+ (1 - 0.5 / 1.5) .* Δt
    F = [sin(t) * j for t in t_f, j in 1:n]
    k = Variable(1.5)
    Ks = k * SparseTensor(K0)
    d, _, _ = αscheme(spdiag(n), 0.1 * SparseTensor(K0), Ks, F, zeros(n), zeros(n), zeros(n), Δt; ρ=0.5)
    loss = sum(d[NT+1, :]^2)
    g = gradients(loss, k)
    s = Session(); init(s)
    L(kv) = (run(s, assign(k, kv)); run(s, loss))
    num = (L(1.5 + 1e-6) - L(1.5 - 1e-6)) / 2e-6
    run(s, assign(k, 1.5))
    @test run(s, g) ≈ num rtol = 1e-6
    @test run(s, loss) > 0
    # a user solve replaces A \ rhs
    used = Ref(0)
    d2, _, _ = αscheme(spdiag(n), 0.1 * SparseTensor(K0), Ks, F, zeros(n), zeros(n), zeros(n), Δt; ρ=0.5,
                       solve=(A, r) -> (used[] += 1; A \ r))
    @test used[] == 1
    @test run(s, d2) ≈ run(s, d) rtol = 1e-12
    # bad arguments
    @test_throws OxiflowError αscheme(spdiag(n), spdiag(n), spdiag(n), zeros(NT + 1, n), zeros(n), zeros(n), zeros(n), Δt)
    @test_throws OxiflowError αscheme(spdiag(n), spdiag(n), spdiag(n), F, zeros(n), zeros(n), zeros(n), Δt; ρ=1.5)
    @test_throws OxiflowError αscheme(spdiag(n), spdiag(n), spdiag(n), F, zeros(n), zeros(n), zeros(n), Δt; extsolve=identity)
end

@testset "ExplicitNewmark: the central difference scheme's closed form, damping, gradients" begin
    reset_default_graph()
    # undamped oscillator: d_n = cos(nθ) with cos θ = 1 - ω²Δt²/2 (d_{-1} = d_1 by symmetry)
    ω, dt, NT = 2.0, 0.1, 40
    θc = acos(1 - ω^2 * dt^2 / 2)
    en = ExplicitNewmark(sparse(fill(1.0, 1, 1)), missing, sparse(fill(ω^2, 1, 1)), dt)
    d0, d1 = constant([cos(-θc)]), constant([1.0])
    ds = Tensor[]
    for n in 1:NT
        d0, d1 = d1, step(en, d0, d1, [0.0])
        push!(ds, d1)
    end
    s = Session()
    @test [run(s, d)[1] for d in ds] ≈ [cos(n * θc) for n in 1:NT] atol = 1e-12
    # a damped, loaded system against the same recurrence in plain Julia, with dense matrices too
    M = [2.0 0.0; 0.0 1.0]; Z1 = [0.3 -0.1; -0.1 0.2]; Z2 = [6.0 -2.0; -2.0 4.0]; h = 0.05
    f = [1.0, -0.5]
    k = Variable(1.0)
    enk = ExplicitNewmark(sparse(M), sparse(Z1), k * SparseTensor(sparse(Z2)), h)
    end_dense = ExplicitNewmark(M, Z1, Z2, h)
    a, b = constant([0.1, 0.0]), constant([0.1, 0.02])
    ad, bd = a, b
    for _ in 1:20
        a, b = b, step(enk, a, b, f)
        ad, bd = bd, step(end_dense, ad, bd, f)
    end
    function jl(kv)
        x0, x1 = [0.1, 0.0], [0.1, 0.02]
        for _ in 1:20
            # ADCME's scheme for M d̈ + Z1 ḋ + Z2 d + f = 0: the load enters with a minus sign
            x0, x1 = x1, (M / h^2 + Z1 / 2h) \ ((2M / h^2 - kv * Z2) * x1 - (M / h^2 - Z1 / 2h) * x0 - f)
        end
        return x1
    end
    init(s)
    @test run(s, b) ≈ jl(1.0) rtol = 1e-12
    @test run(s, bd) ≈ jl(1.0) rtol = 1e-12
    @test run(s, gradients(sum(b), k)) ≈ (sum(jl(1 + 1e-6)) - sum(jl(1 - 1e-6))) / 2e-6 rtol = 1e-6
    @test_throws OxiflowError ExplicitNewmark(M, missing, Z2, -1.0)
    @test_throws MethodError ExplicitNewmark(M, missing, Z2)
end

@testset "TR_BDF2: its stability function on y' = λy, second order, gradients" begin
    reset_default_graph()
    # ADCME's form D1 ẏ + D0 y = f: y' = λy is D1 = 1, D0 = -λ; one step multiplies y by
    # R(z) = (4(1 + z/4)/(1 - z/4) - 1)/(3 - z), z = λΔt
    λ, dt = -3.0, 0.2
    R(z) = (4 * (1 + z / 4) / (1 - z / 4) - 1) / (3 - z)
    tr = TR_BDF2(sparse(fill(-λ, 1, 1)), sparse(fill(1.0, 1, 1)), dt)
    u = constant([1.0])
    us = Tensor[]
    for _ in 1:10
        u = tr(u, [0.0], [0.0], [0.0]); push!(us, u)
    end
    s = Session()
    @test [run(s, x)[1] for x in us] ≈ [R(λ * dt)^n for n in 1:10] rtol = 1e-13
    # Julia matrices and vectors: the same step in plain Julia
    @test tr.symbolic == false
    @test tr([1.0], [0.0], [0.0], [0.0]) ≈ [R(λ * dt)] rtol = 1e-14
    # a 2x2 system D1 ẏ + D0 y = g against its exact solution: second-order convergence
    D1 = [2.0 0.0; 0.0 1.0]; D0 = [3.0 -1.0; -1.0 2.0]; g = [1.0, 0.5]; T = 1.0
    A = -(D1 \ D0); c = D1 \ g; u0 = [1.0, -1.0]
    exact = exp(A * T) * u0 + (A \ ((exp(A * T) - I) * c))
    errs = map((10, 20, 40)) do NT
        reset_default_graph()
        trn = TR_BDF2(SparseTensor(sparse(D0)), D1, T / NT)      # sparse and dense arguments mixed
        @test trn.symbolic
        x = constant(u0)
        for _ in 1:NT
            x = trn(x, g, g, g)
        end
        maximum(abs.(run(Session(), x) - exact))
    end
    @test 3.5 < errs[1] / errs[2] < 4.5 && 3.5 < errs[2] / errs[3] < 4.5
    # gradient with respect to a parameter of D0
    reset_default_graph()
    k = Variable(1.0)
    trk = TR_BDF2(k * SparseTensor(sparse(D0)), sparse(D1), 0.1)
    x = constant(u0)
    for _ in 1:5
        x = trk(x, g, g, g)
    end
    function jl(kv)
        y = u0; h = 0.1; D = kv * D0
        for _ in 1:5
            yh = (D1 + h / 4 * D) \ (D1 * y - h / 4 * (D * y) + h / 4 * 2g)
            y = (3D1 + h * D) \ (4 * D1 * yh - D1 * y + h * g)
        end
        return y
    end
    s = Session(); init(s)
    @test run(s, x) ≈ jl(1.0) rtol = 1e-12
    @test run(s, gradients(sum(x), k)) ≈ (sum(jl(1 + 1e-6)) - sum(jl(1 - 1e-6))) / 2e-6 rtol = 1e-6
    @test_throws OxiflowError TR_BDF2(D0, D1, 0.0)
    @test_throws OxiflowError TR_BDF2(D0, ones(3, 3), 0.1)
end

@testset "TR_BDF2 over many steps: ADCME's test problem, in Julia and in the graph" begin
    reset_default_graph()
    # ADCME's own test: D1 ẏ + D0 y = f with y = (t² + t, t), loads at t_i and t_i + Δt/2
    D0 = sparse([1.0 0.0; 1.0 1.0]); D1 = sparse([2.0 0.0; 0.0 1.0])
    ts = collect(LinRange(0, 1, 100)); Δt = ts[2] - ts[1]
    f(t) = [t^2 + 5t + 2, t^2 + 2t + 1]
    F = zeros(199, 2)
    for i in 1:100
        F[2i-1, :] = f(ts[i])
        i < 100 && (F[2i, :] = f(ts[i] + Δt / 2))
    end
    td = TR_BDF2(D0, D1, Δt)
    @test td.symbolic == false
    @test sprint(show, td) == "TR_BDF2 (DOF = 2, Δt = $Δt)"
    u = td(zeros(2), F)
    @test u isa Matrix{Float64} && size(u) == (100, 2)
    @test maximum(abs.(u - hcat(ts .^ 2 .+ ts, ts))) < 1e-5
    tc = constant(td)
    @test tc.symbolic && occursin("symbolic", sprint(show, tc))
    ua = tc(zeros(2), F)
    @test size(ua) == (100, 2)
    s = Session()
    @test run(s, ua) ≈ u rtol = 1e-12
    # the loads as a tensor, differentiable: d(sum of the last row)/dF against finite differences
    Fv = Variable(F)
    ub = tc(zeros(2), Fv)
    g = gradients(sum(ub[100, :]), Fv)
    init(s)
    G = run(s, g)
    for (r, c) in ((1, 1), (100, 2), (199, 1), (198, 2))
        Fp = copy(F); Fp[r, c] += 1e-6; Fm = copy(F); Fm[r, c] -= 1e-6
        @test G[r, c] ≈ (sum(td(zeros(2), Fp)[100, :]) - sum(td(zeros(2), Fm)[100, :])) / 2e-6 rtol = 1e-5 atol = 1e-9
    end
    e = try; td(zeros(2), zeros(4, 2)); nothing; catch err; err; end
    @test e isa OxiflowError && occursin("(2NT+1)×2", e.msg)
end

@testset "Newmark: the trapezoidal rule's closed form, second order, ADCME's load sign, gradients" begin
    reset_default_graph()
    # undamped oscillator d'' + ω² d = 0 with β = 1/4, γ = 1/2 is the trapezoidal rule on (d, v):
    # d_n = cos(nθ) with θ = 2 atan(ωΔt/2) when d0 = 1, v0 = 0, a0 = -ω²
    ω, h = 3.0, 0.1
    θ = 2 * atan(ω * h / 2)
    nm = Newmark(sparse(fill(1.0, 1, 1)), missing, sparse(fill(ω^2, 1, 1)), h)
    @test sprint(show, nm) == "Newmark(DOF=1, γ=0.5, β=0.25)"
    d, v, a = constant([1.0]), constant([0.0]), constant([-ω^2])
    ds, vs = Tensor[], Tensor[]
    for _ in 1:30
        d, v, a = step(nm, d, v, a, [0.0]); push!(ds, d); push!(vs, v)
    end
    s = Session()
    @test [run(s, x)[1] for x in ds] ≈ [cos(n * θ) for n in 1:30] atol = 1e-12
    @test [run(s, x)[1] for x in vs] ≈ [-ω * sin(n * θ) for n in 1:30] atol = 1e-11
    # a damped 2x2 system under a constant load F, which enters as M a + C v + K d + F = 0:
    # second-order convergence to the exact solution of the first-order system
    M = [2.0 0.0; 0.0 1.0]; C = [0.3 -0.1; -0.1 0.2]; K = [6.0 -2.0; -2.0 4.0]; F = [1.0, -0.5]
    d0, v0 = [0.1, 0.0], [0.0, 0.2]
    a0 = M \ (-F - C * v0 - K * d0)
    A = [zeros(2, 2) Matrix(1.0I, 2, 2); -(M \ K) -(M \ C)]
    T = 1.0
    dstar = K \ (-F)                      # the equilibrium
    exact = (exp(A * T) * [d0 - dstar; v0])[1:2] + dstar
    errs = map((20, 40, 80)) do NT
        reset_default_graph()
        nmn = Newmark(sparse(M), C, sparse(K), T / NT)     # sparse and dense mixed
        x, y, z = constant(d0), constant(v0), constant(a0)
        for _ in 1:NT
            x, y, z = step(nmn, x, y, z, F)
        end
        maximum(abs.(run(Session(), x) - exact))
    end
    @test 3.5 < errs[1] / errs[2] < 4.5 && 3.5 < errs[2] / errs[3] < 4.5
    # gradient in a parameter of K, against central differences of the same graph; other β, γ;
    # factorize_S = false and dense matrices give the same numbers
    reset_default_graph()
    k = Variable(1.0)
    mk(kv, fS) = Newmark(sparse(M), sparse(C), kv * SparseTensor(sparse(K)), 0.05; β=0.3, γ=0.6, factorize_S=fS)
    nms = (mk(k, true), mk(k, false), Newmark(M, C, k * constant(K), 0.05; β=0.3, γ=0.6))
    outs = map(nms) do nmk
        x, y, z = constant(d0), constant(v0), constant(a0)
        for _ in 1:10
            x, y, z = step(nmk, x, y, z, F)
        end
        sum(x) + sum(y)
    end
    s = Session(); init(s)
    vals = [run(s, o) for o in outs]
    @test vals[2] ≈ vals[1] rtol = 1e-12
    @test vals[3] ≈ vals[1] rtol = 1e-12
    g = run(s, gradients(outs[1], k))
    at(kv) = (run(s, assign(k, kv)); run(s, outs[1]))
    fd = (at(1 + 1e-6) - at(1 - 1e-6)) / 2e-6
    @test g ≈ fd rtol = 1e-6
    @test abs(g) > 1e-3
    @test_throws OxiflowError Newmark(M, C, K, 0.0)
end
