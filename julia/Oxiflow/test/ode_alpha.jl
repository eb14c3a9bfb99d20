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
