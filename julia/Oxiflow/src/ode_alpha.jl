# ADCME's `αscheme`: the generalized-α method of Chung and Hulbert (J. Appl. Mech. 60, 1993)
# for the second-order system M a + C v + K d = F, as a `while_loop` over the time steps with
# the displacements, velocities and accelerations kept in `TensorArray`s. M, C and K may be
# sparse (a `SparseTensor` or a `SparseMatrixCSC`) or dense; every step solves one linear
# system with the step's matrix, and with a sparse matrix that does not change between steps
# (a constant Δt) the session factorizes it once (`SparseSolve`'s factorization cache).

export αscheme, αscheme_time, ExplicitNewmark, Newmark, TR_BDF2

# A matrix argument as what the step arithmetic uses: a SparseTensor stays, a sparse Julia
# matrix becomes one, a dense matrix a constant tensor.
alpha_matrix(A::SparseTensor, _) = A
alpha_matrix(A::SparseMatrixCSC, _) = SparseTensor(A)
alpha_matrix(A::AbstractMatrix, _) = constant(Array{Float64}(A))
function alpha_matrix(A::Tensor, what)
    length(size(A)) == 2 || invalid("$what must be a matrix, got a tensor of size $(size(A))")
    return A
end
alpha_matrix(A, what) = invalid("$what must be a SparseTensor, a sparse or dense matrix or a matrix tensor, got $(typeof(A))")

# A vector or matrix argument as a tensor (Julia values as Float64 constants).
alpha_vector(x) = x isa Tensor ? x : convert_to_tensor(collect(x); dtype=Float64)

"""
    αscheme(M, C, K, Force, d0, v0, a0, Δt; solve=missing, extsolve=missing, ρ=1.0) -> (d, v, a)

ADCME's `αscheme`: integrates `M a + C v + K d = F` with the generalized-α method (Chung and
Hulbert 1993) from `d0`, `v0`, `a0` (vectors of length `n`) over the `NT = length(Δt)` steps
`Δt` (a vector, or a tensor of length NT). `M`, `C`, `K` are `n×n`: `SparseTensor`s,
`SparseMatrixCSC`s, dense matrices or matrix tensors. `Force` is `NT×n`: row `i` is the
load of step `i` (the load the method applies at `t_{i-1} + (1-αf) Δt_i`, as ADCME's).
`ρ ∈ [0, 1]` is the spectral radius at infinite frequency: `ρ = 1` is the trapezoidal rule
(no numerical damping, `αm = αf = 1/2`), smaller values damp high frequencies; with
`αm = (2ρ-1)/(ρ+1)`, `αf = ρ/(ρ+1)`, `γ = 1/2 - αm + αf`, `β = (1 - αm + αf)²/4` the
method is second-order accurate and unconditionally stable.

Returns `(d, v, a)`, each an `(NT+1)×n` tensor whose row 1 is the initial state. Step `i`
solves `[(1-αm) M + (1-αf) γ Δt C + (1-αf) β Δt² K] a_{i} = F_i - αm M a_{i-1} -
C ((1-αf) ṽ + αf v_{i-1}) - K ((1-αf) d̃ + αf d_{i-1})` with the predictors
`d̃ = d + Δt v + Δt² (1-2β)/2 a`, `ṽ = v + (1-γ) Δt a`, then corrects `d` and `v`. The
result is differentiable (through the loop) with respect to the tensors that build `M`,
`C`, `K`, `Force`, `d0`, `v0`, `a0` and `Δt`. `solve(A, rhs)`, when given, replaces
`A \\ rhs`; `extsolve` (ADCME's external solver hook) is not supported and is an error.
"""
function αscheme(M, C, K, Force, d0, v0, a0, Δt; solve=missing, extsolve=missing, ρ::Real=1.0)
    extsolve === missing || invalid("αscheme: extsolve (an external solver library) is not supported; pass solve=(A, rhs) -> x instead")
    0 <= ρ <= 1 || invalid("αscheme: ρ must be in [0, 1], got $ρ")
    αm = (2ρ - 1) / (ρ + 1); αf = ρ / (ρ + 1)
    γ = 1 / 2 - αm + αf; β = (1 - αm + αf)^2 / 4
    M, C, K = alpha_matrix(M, "αscheme: M"), alpha_matrix(C, "αscheme: C"), alpha_matrix(K, "αscheme: K")
    d0, v0, a0 = alpha_vector(d0), alpha_vector(v0), alpha_vector(a0)
    Δt, Force = alpha_vector(Δt), alpha_vector(Force)
    NT = size(Δt, 1)
    NT === nothing && invalid("αscheme: the number of steps (length of Δt) must be known")
    size(Force, 1) == NT || invalid("αscheme: Force must have one row per step ($NT), got size $(size(Force))")
    linsolve = solve === missing ? ((A, b) -> A \ b) : solve
    tas = [write(TensorArray(NT + 1), 1, x) for x in (d0, v0, a0)]
    function body(i, tad, tav, taa)
        dc, vc, ac = read(tad, i - 1), read(tav, i - 1), read(taa, i - 1)
        dt = Δt[i - 1]
        f = Force[i - 1, :]
        dp = dc + dt * vc + (dt^2 * (1 - 2β) / 2) * ac
        vp = vc + (dt * (1 - γ)) * ac
        rhs = f - M * (αm * ac) - C * ((1 - αf) * vp + αf * vc) - K * ((1 - αf) * dp + αf * dc)
        A = (1 - αm) * M + ((1 - αf) * γ * dt) * C + ((1 - αf) * β * dt^2) * K
        an = linsolve(A, rhs)
        dn = dp + (β * dt^2) * an
        vn = vp + (γ * dt) * an
        return i + 1, write(tad, i, dn), write(tav, i, vn), write(taa, i, an)
    end
    _, d, v, a = while_loop((i, tad, tav, taa) -> i <= NT + 1, body, [constant(2), tas...])
    return stack(d), stack(v), stack(a)
end

"""
    αscheme_time(Δt; ρ=1.0) -> (t_d, t_f)

ADCME's `αscheme_time`: the times at which `αscheme` with steps `Δt` gives the solution
(`t_d`, the step ends `cumsum(Δt)`) and applies the loads (`t_f`, `t_{i-1} + (1-αf) Δt_i`),
as Julia vectors of length `length(Δt)`; use `t_f` to evaluate `Force`.
"""
function αscheme_time(Δt::AbstractVector{<:Real}; ρ::Real=1.0)
    αf = ρ / (ρ + 1)
    t_d = cumsum(Float64.(Δt))
    t_f = (t_d .- Δt) .+ (1 - αf) .* Δt
    return t_d, t_f
end

# ------------------------------------------------------------------ ExplicitNewmark, Newmark, TR_BDF2

# A matrix argument of the one-step integrators (`missing` where allowed: a zero matrix).
step_matrix(A, _, what) = alpha_matrix(A, what)
step_matrix(::Missing, n, _) = spzero(n)

"""
    ExplicitNewmark(M, Z1, Z2, Δt)
    step(en::ExplicitNewmark, d0, d1, f) -> d2

ADCME's explicit Newmark (central difference) integrator for `M d̈ + Z1 ḋ + Z2 d + f = 0`:
`(M/Δt² + Z1/(2Δt)) d^{n+1} = (2M/Δt² - Z2) d^n - (M/Δt² - Z1/(2Δt)) d^{n-1} - f^n`. The
load enters with a minus sign, as in ADCME's `step`: pass `-f` to integrate `M d̈ + Z1 ḋ +
Z2 d = f`.
`M` (`n×n`), `Z1`, `Z2` (`missing` for zero) are `SparseTensor`s, `SparseMatrixCSC`s, dense
matrices or matrix tensors; `Δt` a number. `step` takes the two previous displacements
`d0 = d^{n-1}`, `d1 = d^n` and the load `f = f^n` (vectors or tensors of length `n`) and
returns `d^{n+1}`, differentiable in everything. Conditionally stable (for `Z1 = 0`:
`Δt ω_max < 2`); the left-hand matrix is the same every step, so the session factorizes it
once when it is sparse.
"""
struct ExplicitNewmark
    A::Any   # M/Δt² + Z1/(2Δt)
    B::Any   # 2M/Δt² - Z2
    C::Any   # M/Δt² - Z1/(2Δt)
    function ExplicitNewmark(M, Z1, Z2, Δt::Real)
        Δt > 0 || invalid("ExplicitNewmark: Δt must be positive, got $Δt")
        Mt = alpha_matrix(M, "ExplicitNewmark: M")
        n = size(Mt, 1)
        Z1t, Z2t = step_matrix(Z1, n, "ExplicitNewmark: Z1"), step_matrix(Z2, n, "ExplicitNewmark: Z2")
        return new(Mt / Δt^2 + Z1t / (2Δt), 2 / Δt^2 * Mt - Z2t, Mt / Δt^2 - Z1t / (2Δt))
    end
end
Base.step(en::ExplicitNewmark, d0, d1, f) = en.A \ (en.B * alpha_vector(d1) - en.C * alpha_vector(d0) - alpha_vector(f))

"""
    Newmark(M, C, K, Δt; β=1/4, γ=1/2, factorize_S=true)
    step(nm::Newmark, d, v, a, F) -> (d_next, v_next, a_next)

ADCME's implicit Newmark-β integrator for `M a + C v + K d + F = 0`. The load enters with a
minus sign, as in ADCME's `step`: pass `-F` to integrate `M a + C v + K d = F`. `M`, `C`, `K`
(`n×n`; `C` and `K` may be `missing` for zero) are `SparseTensor`s, `SparseMatrixCSC`s, dense
matrices or matrix tensors; `Δt` a positive number. One step predicts `d̃ = d + Δt v +
Δt²(1-2β)/2 a` and `ṽ = v + (1-γ) Δt a`, solves `S a_next = -F - C ṽ - K d̃` with
`S = M + γ Δt C + β Δt² K`, then corrects `d_next = d̃ + β Δt² a_next`,
`v_next = ṽ + γ Δt a_next`. The defaults `β = 1/4`, `γ = 1/2` are the average-acceleration
(trapezoidal) rule: second-order accurate, unconditionally stable, no numerical damping.
With `factorize_S` and a sparse `S` the solves go through `factorize(S)`, so a session
factorizes `S` once for all steps (as long as its values do not change). `d`, `v`, `a`, `F`
are vectors or tensors of length `n`; the results are differentiable in all of them and in
the tensors that build `M`, `C`, `K`. A non-positive `Δt` raises an `OxiflowError`.
"""
struct Newmark
    M::Any
    C::Any
    K::Any
    S::Any   # M + γΔt C + βΔt² K, or its SparseFactorization
    β::Float64
    γ::Float64
    Δt::Float64
    function Newmark(M, C, K, Δt::Real; β::Real=1 / 4, γ::Real=1 / 2, factorize_S::Bool=true)
        Δt > 0 || invalid("Newmark: Δt must be positive, got $Δt")
        Mt = alpha_matrix(M, "Newmark: M")
        n = size(Mt, 1)
        Ct, Kt = step_matrix(C, n, "Newmark: C"), step_matrix(K, n, "Newmark: K")
        S = Mt + (γ * Δt) * Ct + (β * Δt^2) * Kt
        factorize_S && S isa SparseTensor && (S = factorize(S))
        return new(Mt, Ct, Kt, S, Float64(β), Float64(γ), Float64(Δt))
    end
end
Base.show(io::IO, nm::Newmark) = print(io, "Newmark(DOF=$(size(nm.M, 1)), γ=$(nm.γ), β=$(nm.β))")
function Base.step(nm::Newmark, d, v, a, F)
    β, γ, h = nm.β, nm.γ, nm.Δt
    d, v, a, F = alpha_vector(d), alpha_vector(v), alpha_vector(a), alpha_vector(F)
    dp = d + h * v + (h^2 / 2 * (1 - 2β)) * a
    vp = v + ((1 - γ) * h) * a
    an = nm.S \ (-F - nm.C * vp - nm.K * dp)
    return dp + (β * h^2) * an, vp + (γ * h) * an, an
end

"""
    TR_BDF2(D0, D1, Δt)
    (tr::TR_BDF2)(y, f1, f2, f3) -> y_next
    (tr::TR_BDF2)(y0, F) -> Y
    constant(tr::TR_BDF2)

ADCME's TR-BDF2 integrator for `D1 ẏ + D0 y = f(t)`: one step of size `Δt` is a
trapezoidal half step, `(D1 + Δt/4 D0) y_{1/2} = D1 y - Δt/4 D0 y + Δt/4 (f1 + f2)`, then a
second-order backward difference, `(3 D1 + Δt D0) y_next = 4 D1 y_{1/2} - D1 y + Δt f3`,
with `f1`, `f2`, `f3` the loads at `t`, `t + Δt/2` and `t + Δt`. L-stable and second-order
accurate. `D0`, `D1` (`n×n`) are `SparseTensor`s, `SparseMatrixCSC`s, dense matrices or
matrix tensors.

`tr(y, f1, f2, f3)` takes one step; `tr(y0, F)` takes `NT` steps from `y0` with the loads as
the rows of the `(2NT+1)×n` matrix `F` (at `t_0, t_0 + Δt/2, t_1, …, t_NT`, so step `i` uses
rows `2i-1`, `2i`, `2i+1`) and returns the `(NT+1)×n` solution, `y0` its first row (a
`while_loop` over the steps).

As in ADCME, an integrator built from Julia matrices only (`tr.symbolic == false`) steps
Julia vectors in plain Julia and returns Julia arrays; given a tensor, or built from a
tensor or `SparseTensor` (`tr.symbolic == true`, or after `constant(tr)`), it builds graph
ops and returns tensors, differentiable in everything. Matrices that are not square and of
one size, `F` with other than `n` columns or an even number of rows, or `Δt ≤ 0` raise an
`OxiflowError`.
"""
struct TR_BDF2
    D0::Any
    D1::Any
    Δt::Float64
    symbolic::Bool
    A::Any   # D1 + Δt/4 D0, the half step's matrix (built once, as ADCME's _D0)
    B::Any   # 3 D1 + Δt D0, the BDF2 step's (ADCME's _D1, times Δt)
    function TR_BDF2(D0, D1, Δt::Real)
        Δt > 0 || invalid("TR_BDF2: Δt must be positive, got $Δt")
        symbolic = !(D0 isa AbstractMatrix && D1 isa AbstractMatrix)
        if symbolic
            D0, D1 = alpha_matrix(D0, "TR_BDF2: D0"), alpha_matrix(D1, "TR_BDF2: D1")
        end
        n = size(D0, 1)
        size(D0) == size(D1) == (n, n) || invalid("TR_BDF2: D0 and D1 must be square matrices of one size, got $(size(D0)) and $(size(D1))")
        h = Float64(Δt)
        return new(D0, D1, h, symbolic, D1 + h / 4 * D0, 3 * D1 + h * D0)
    end
end
Base.show(io::IO, tr::TR_BDF2) = print(io, "TR_BDF2 (DOF = $(size(tr.D0, 1)), Δt = $(tr.Δt)$(tr.symbolic ? ", symbolic" : ""))")

"""`constant(tr::TR_BDF2)`: `tr` with its matrices as graph constants, so that it builds graph ops (ADCME's)."""
constant(tr::TR_BDF2) = tr.symbolic ? tr : TR_BDF2(alpha_matrix(tr.D0, "TR_BDF2: D0"), alpha_matrix(tr.D1, "TR_BDF2: D1"), tr.Δt)

# one step, in plain Julia or in the graph (the same formulas)
function tr_bdf2_step(tr::TR_BDF2, y, f1, f2, f3)
    D0, D1, h = tr.D0, tr.D1, tr.Δt
    yh = tr.A \ (D1 * y - (h / 4) * (D0 * y) + (h / 4) * (f1 + f2))
    return tr.B \ (4 * (D1 * yh) - D1 * y + h * f3)
end

function (tr::TR_BDF2)(y, f1, f2, f3)
    if !tr.symbolic && all(v -> v isa AbstractVector{<:Real}, (y, f1, f2, f3))
        return tr_bdf2_step(tr, y, f1, f2, f3)
    end
    tr.symbolic || return constant(tr)(y, f1, f2, f3)
    return tr_bdf2_step(tr, alpha_vector(y), alpha_vector(f1), alpha_vector(f2), alpha_vector(f3))
end

function (tr::TR_BDF2)(y0, F)
    n = size(tr.D0, 1)
    (ndims(F) == 2 && size(F, 2) == n && size(F, 1) !== nothing && isodd(size(F, 1))) ||
        invalid("TR_BDF2: the loads F must be a (2NT+1)×$n matrix, got size $(size(F))")
    NT = size(F, 1) ÷ 2
    if !tr.symbolic && y0 isa AbstractVector{<:Real} && F isa AbstractMatrix{<:Real}
        Y = zeros(NT + 1, n)
        Y[1, :] = y0
        for i in 1:NT
            Y[i+1, :] = tr(Y[i, :], F[2i-1, :], F[2i, :], F[2i+1, :])
        end
        return Y
    end
    tr.symbolic || return constant(tr)(y0, F)
    Ft = alpha_vector(F)
    ta = write(TensorArray(NT + 1), 1, alpha_vector(y0))
    body(i, ta) = (i + 1, write(ta, i + 1, tr(read(ta, i), Ft[2i-1, :], Ft[2i, :], Ft[2i+1, :])))
    _, ta = while_loop((i, ta) -> i <= NT, body, [constant(1), ta])
    return stack(ta)
end
