# ADCME's uncertainty quantification helpers (ADCME's extra.jl): `nnuq`, the covariance of a
# linearized Bayesian inversion, and `MCMCSimple` with `simulate`, a random-walk Metropolis
# sampler for small parameter vectors. Plain Julia: the forward model `h` may run a session.

export nnuq, MCMCSimple, simulate, diagnose

"""
    nnuq(H, invR, invQ) -> Matrix{Float64}

ADCME's `nnuq`: the posterior covariance `V = (Hᵀ R⁻¹ H + Q⁻¹)⁻¹` of the linearized Bayesian
inversion with the negative log likelihood `½ (y - h(s))ᵀ R⁻¹ (y - h(s)) + ½ sᵀ Q⁻¹ s`,
where `H = ∇h(s₀)` (`m×n`), `invR` (`m×m`, or a number for `invR * I`) and `invQ` (`n×n`,
or a number). Returns the symmetrized `(V + Vᵀ)/2`. A singular precision raises
LinearAlgebra's `SingularException`; sizes that do not fit a `DimensionMismatch`.
"""
function nnuq(H::AbstractMatrix{<:Real}, invR::Union{Real,AbstractMatrix{<:Real}}, invQ::Union{Real,AbstractMatrix{<:Real}})
    R = invR isa Real ? invR * I : invR
    Q = invQ isa Real ? invQ * I : invQ
    Σ = inv(Matrix{Float64}(H' * R * H + Q))
    return (Σ + Σ') / 2
end

"""
    MCMCSimple(obs, h, σ, θ0, lb, ub, δ=(ub - lb)/100)
    simulate(ms::MCMCSimple, N, burnin=round(0.2N)) -> Matrix (N × length(θ0))

ADCME's `MCMCSimple`: random-walk Metropolis sampling of `θ` for the model `obs = h(θ) +
noise` (independent normal noise of standard deviation `σ`), with the prior
`N(θ0, τ² I)`, `τ = (ub - lb)/6`, and the hard bounds `lb ≤ θ ≤ ub` (numbers). A proposal
moves every component by a uniform step in `[-δ, δ]`, redrawn until it is inside the bounds;
it is accepted with probability `min(1, exp(Δ log f))`. `simulate` returns the chain, one
row per step starting at `θ0`, and keeps the acceptance rate after each step (`ms.AC`) and
the log density (`ms.L`); as in ADCME, `burnin` is accepted and not applied (drop the first
rows yourself). Random numbers come from Julia's global RNG (`Random.seed!` repeats a chain).
"""
mutable struct MCMCSimple
    logf::Function
    proposal::Function
    θ0::Vector{Float64}
    ub::Float64
    lb::Float64
    L::Vector{Float64}
    AC::Vector{Float64}
end

function MCMCSimple(obs::AbstractVector{<:Real}, h::Function, σ::Real, θ0::AbstractVector{<:Real}, lb::Real, ub::Real,
                    δ::Union{Missing,Real}=missing)
    ub > lb || invalid("MCMCSimple: the upper bound $ub must exceed the lower bound $lb")
    σ > 0 || invalid("MCMCSimple: σ must be positive, got $σ")
    all(x -> lb <= x <= ub, θ0) || invalid("MCMCSimple: θ0 must lie within [$lb, $ub]")
    τ = (ub - lb) / 6
    step = Float64(coalesce(δ, (ub - lb) / 100))
    θc = Vector{Float64}(θ0)
    logf(x) = -sum((obs .- h(x)) .^ 2 ./ (2σ^2)) - sum((x .- θc) .^ 2) / (2τ^2)
    proposal(x) = x .+ (rand(length(x)) .- 0.5) .* 2step
    return MCMCSimple(logf, proposal, θc, Float64(ub), Float64(lb), Float64[], Float64[])
end

"""
    simulate(ms::MCMCSimple, N, burnin=missing) -> Matrix{Float64}

ADCME's `simulate`: `N` steps of the chain of [`MCMCSimple`](@ref) from `ms.θ0`, one row per
step (the first is `θ0`), `N × length(θ0)`; sets `ms.AC` (the acceptance rate after each step,
`NaN` at the first) and `ms.L` (the log density of each row). `burnin` is accepted and not
applied, as in ADCME. `N < 1` is an `OxiflowError`.
"""
function simulate(ms::MCMCSimple, N::Integer, burnin::Union{Integer,Missing}=missing)
    N >= 1 || invalid("simulate: N must be positive, got $N")
    sim = zeros(N, length(ms.θ0))
    sim[1, :] = ms.θ0
    L, AC = zeros(N), ones(N)
    AC[1] = NaN
    L[1] = ms.logf(ms.θ0)
    accepted = 1
    for i in 2:N
        x = sim[i-1, :]
        local x_star
        while true
            x_star = ms.proposal(x)
            all(v -> ms.lb <= v <= ms.ub, x_star) && break
        end
        lx, ls = L[i-1], ms.logf(x_star)
        if log(rand()) < ls - lx
            sim[i, :] = x_star; L[i] = ls; accepted += 1
        else
            sim[i, :] = x; L[i] = lx
        end
        AC[i] = accepted / i
    end
    ms.AC, ms.L = AC, L
    return sim
end

"""
    diagnose(ms::MCMCSimple)

ADCME's `diagnose`: plots the acceptance rate and the log likelihood of the last
`simulate` with PyPlot, which the program must have loaded (`using PyPlot`); an error
otherwise, as in ADCME.
"""
function diagnose(ms::MCMCSimple)
    isdefined(Main, :PyPlot) || error("Package PyPlot.jl must be imported in the main module using `import PyPlot` or `using PyPlot`")
    plt = getfield(Main, :PyPlot)
    plt.figure(figsize=(10, 4))
    plt.subplot(121); plt.title("Acceptance Rate"); plt.plot(ms.AC); plt.ylim(0, 1.05)
    plt.subplot(122); plt.title("Log Likelihood"); plt.plot(ms.L)
end
