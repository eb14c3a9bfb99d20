# ADCME's normalizing flows (ADCME's flow.jl, after Karpathy's pytorch-normalizing-flows and
# TF Probability's bijectors): invertible maps `z = f(x)` of `batch × dim` matrices that
# return their log-Jacobian determinants, chained by `NormalizingFlow` and put on a prior
# distribution by `NormalizingFlowModel`. Every map is built from graph ops, so its
# parameters (variables) train by the log likelihood `logpdf(prior, z) + log|det ∂z/∂x|`.

export FlowOp, LinearFlow, AffineFlow, AffineConstantFlow, ActNorm, AffineHalfFlow, SlowMAF, Invertible1x1Conv,
       TanhFlow, AffineScalarFlow, InvertFlow, NormalizingFlow, NormalizingFlowModel,
       Exp, Log, Sigmoid, Softplus, Square, PowerTransform, Permute

"""
    FlowOp

The supertype of ADCME's flow operators. Each `fo` defines `Oxiflow.forward(fo, x) -> (z,
log_det)` and `Oxiflow.backward(fo, z) -> (x, log_det)` for `batch × dim` tensors or arrays,
where `log_det` is `log|det ∂z/∂x|` per row (a vector of the batch, or one number for all
rows) for `forward` and `log|det ∂x/∂z|` for `backward`. A flow of one's own is a subtype
with those two methods. Provided: [`LinearFlow`](@ref), [`AffineFlow`](@ref),
[`AffineConstantFlow`](@ref), [`ActNorm`](@ref), [`AffineHalfFlow`](@ref), [`SlowMAF`](@ref),
[`Invertible1x1Conv`](@ref), [`TanhFlow`](@ref), [`AffineScalarFlow`](@ref),
[`InvertFlow`](@ref), [`MAF`](@ref), [`IAF`](@ref), [`NeuralCouplingFlow`](@ref) and TF
Probability's bijectors `Exp`, `Log`, `Sigmoid`, `Softplus`, `Square`, `PowerTransform`,
`Permute` (each `T(dim, args...)`).
"""
abstract type FlowOp end

"""`forward(fo::FlowOp, x) -> (z, log_det)`: see [`FlowOp`](@ref)."""
function forward end
"""`backward(fo::FlowOp, z) -> (x, log_det)`: see [`FlowOp`](@ref)."""
function backward end

flow_input(x) = x isa Tensor ? x : constant(Float64.(x))
# Glorot-uniform initial values of an `m×n` variable (`get_variable`'s default initializer,
# as ADCME's `get_variable(Float64, shape=...)` draws them)
glorot_values(m, n, T=Float64) = initial_value(glorot_uniform_initializer(), (m, n), T)
rowsum(t) = sum(t; dims=2)
per_row(x, v) = v .* ones_like(x[:, 1])     # a number (tensor) repeated for every row of x

# ---------------------------------------------------------------- linear and affine maps

"""
    LinearFlow(indim, outdim, A=missing, b=missing; name), LinearFlow(dim), LinearFlow(A, b=missing)

ADCME's `LinearFlow`: the map `x = A z + b` from `z` (`indim`) to `x` (`outdim`), so its
`forward` (data to latent) solves `A z = x - b` per row (least squares when `A` is not
square) with `log_det = -log|det A|` (`-½ log det(AᵀA)`), and `backward` is `z Aᵀ + b`
(`log_det` `nothing` when `A` is not square). Missing `A`, `b` become trainable variables
(`A` the identity when square, else Glorot uniform; `b` zeros).
"""
struct LinearFlow <: FlowOp
    dim::Int
    indim::Int
    outdim::Int
    A::Tensor
    b::Tensor
end
function LinearFlow(indim::Integer, outdim::Integer, A=missing, b=missing; name=missing)
    nm = coalesce(name, "LinearFlow_" * randstring(10))
    At = A !== missing ? flow_input(A) : Variable(indim == outdim ? Matrix(1.0I, indim, indim) :
                                                  glorot_values(outdim, indim); name=nm * "_A")
    bt = b !== missing ? reshape(flow_input(b), 1, :) : Variable(zeros(1, outdim); name=nm * "_b")
    size(At) == (outdim, indim) || invalid("LinearFlow: expected A of size $((outdim, indim)), got $(size(At))")
    size(bt) == (1, outdim) || invalid("LinearFlow: expected b of length $outdim, got size $(size(bt))")
    return LinearFlow(outdim, indim, outdim, At, bt)
end
LinearFlow(dim::Integer) = LinearFlow(dim, dim)
function LinearFlow(A::Union{Tensor,AbstractMatrix}, b=missing; name=missing)
    outdim, indim = size(A)
    return LinearFlow(indim, outdim, A, b === missing ? zeros(outdim) : b; name=name)
end
function forward(fo::LinearFlow, x)
    x = flow_input(x)
    z = solve_batch(fo.A, x - fo.b)
    ld = fo.indim == fo.outdim ? -log(abs(det(fo.A))) : -0.5 * log(abs(det(fo.A' * fo.A)))
    return z, per_row(x, ld)
end
backward(fo::LinearFlow, z) = (flow_input(z) * fo.A' + fo.b, fo.indim == fo.outdim ? log(abs(det(fo.A))) : nothing)

"""
    AffineConstantFlow(dim, name=missing; scale=true, shift=true)

ADCME's `AffineConstantFlow`: `z = x .* exp.(s) .+ t` with trainable rows `s`, `t` (`1×dim`,
Glorot uniform; `scale=false` or `shift=false` fixes one at zero); `log_det = sum(s)`.
"""
struct AffineConstantFlow <: FlowOp
    dim::Int
    s::Union{Missing,Tensor}
    t::Union{Missing,Tensor}
end
function AffineConstantFlow(dim::Integer, name=missing; scale::Bool=true, shift::Bool=true)
    nm = coalesce(name, randstring(10))
    return AffineConstantFlow(dim, scale ? Variable(glorot_values(1, dim); name=nm * "_s") : missing,
                              shift ? Variable(glorot_values(1, dim); name=nm * "_t") : missing)
end
function forward(fo::AffineConstantFlow, x)
    x = flow_input(x)
    z = fo.s === missing ? x : x .* exp(fo.s)
    fo.t === missing || (z = z .+ fo.t)
    return z, per_row(x, fo.s === missing ? 0.0 : sum(fo.s))
end
function backward(fo::AffineConstantFlow, z)
    z = flow_input(z)
    x = fo.t === missing ? z : z .- fo.t
    fo.s === missing || (x = x .* exp(-fo.s))
    return x, per_row(z, fo.s === missing ? 0.0 : -sum(fo.s))
end

"""
    ActNorm(dim, name=missing)

ADCME's `ActNorm` (Glow's activation normalization, Kingma & Dhariwal 2018): an
[`AffineConstantFlow`](@ref) `z = x .* exp.(s) .+ t` whose rows `s`, `t` (`1×dim`
variables) are initialized from the data. The first run of a graph holding `forward(an, x)`
sets `s = -log.(std(x, dims=1))` and `t = mean(-x .* exp.(s), dims=1)` (so `z` has zero
mean and unit standard deviation per column over that batch; `std` uncorrected, as TF's
`reduce_std`) and stores them in the variables; later runs use the variables, which train as
usual. The flag is the Int64 variable `an.initialized` (1 until the first run, then 0, as in
ADCME; not trainable). `backward(an, z)` uses the `s`, `t` of the last `forward` (before any
`forward`, the variables). No gradient reaches `x` through the initial `s`, `t` (ADCME's
assign has none either). Ops: `SelectV2` between the data's values and the variables, three
`Assign`s that every run of the forward pass makes.
"""
mutable struct ActNorm <: FlowOp
    dim::Int
    fo::AffineConstantFlow
    initialized::Tensor
    s::Tensor
    t::Tensor
end
function ActNorm(dim::Integer, name=missing)
    nm = coalesce(name, "ActNorm_" * randstring(10))
    fo = AffineConstantFlow(dim, nm)
    return ActNorm(dim, fo, Variable(1; name=nm * "_initialized", trainable=false), fo.s, fo.t)
end
function forward(an::ActNorm, x)
    x = flow_input(x)
    size(x, 2) in (an.dim, nothing) || invalid("ActNorm: expected $(an.dim) columns, got a tensor of size $(size(x))")
    needs = an.initialized > 0
    s0 = independent(reshape(-log(std(x; dims=1)), 1, :))
    t0 = independent(reshape(mean(-x .* exp(s0); dims=1), 1, :))
    s = if_else(needs, s0, an.s)
    t = if_else(needs, t0, an.t)
    done = control_dependencies(() -> assign(an.initialized, 0), needs)
    ops = (assign(an.s, s), assign(an.t, t), done)
    an.fo = AffineConstantFlow(an.dim, bind(s, ops...), bind(t, ops...))
    return forward(an.fo, x)
end
backward(an::ActNorm, z) = backward(an.fo, z)

"""
    AffineHalfFlow(dim, parity, s_cond=missing, t_cond=missing)

ADCME's `AffineHalfFlow` (RealNVP's coupling layer): the odd columns `x₀` pass through, the
even columns become `x₁ .* exp.(s_cond(x₀)) .+ t_cond(x₀)` (with `parity` the roles of odd
and even swap); `log_det = sum(s, dims=2)`. `s_cond`, `t_cond` map a `batch × |x₀|` tensor
to `batch × |x₁|` (missing: zero; another width is an `OxiflowError`). The outputs go back to the columns they came from, so
`backward(forward(x)) == x` for every `dim`; ADCME concatenates the two halves instead,
which is the same for `dim = 2` and does not invert for larger `dim`.
"""
struct AffineHalfFlow <: FlowOp
    dim::Int
    parity::Bool
    s_cond::Union{Missing,Function}
    t_cond::Union{Missing,Function}
end
AffineHalfFlow(dim::Integer, parity::Bool, s_cond=missing, t_cond=missing) = AffineHalfFlow(Int(dim), parity, s_cond, t_cond)

# the two halves of the columns (odd, even; swapped with parity) and their inverse
halves(fo::AffineHalfFlow, x) = (a = x[:, 1:2:fo.dim]; b = x[:, 2:2:fo.dim]; fo.parity ? (b, a) : (a, b))
function interleave(fo::AffineHalfFlow, h0, h1)
    odd, even = fo.parity ? (h1, h0) : (h0, h1)
    no = (fo.dim + 1) ÷ 2
    return hcat(odd, even)[:, [isodd(j) ? (j + 1) ÷ 2 : no + j ÷ 2 for j in 1:fo.dim]]
end
function coupling(fo::AffineHalfFlow, h0, h1)
    s = fo.s_cond === missing ? 0 .* h1 : fo.s_cond(h0)
    t = fo.t_cond === missing ? 0 .* h1 : fo.t_cond(h0)
    for (v, what) in ((s, "s_cond"), (t, "t_cond"))
        (ndims(v) == 2 && size(v, 2) == size(h1, 2)) ||
            invalid("AffineHalfFlow: $what must return batch × $(size(h1, 2)) (the width of the transformed half), got size $(size(v))")
    end
    return s, t
end
function forward(fo::AffineHalfFlow, x)
    x = flow_input(x)
    h0, h1 = halves(fo, x)
    s, t = coupling(fo, h0, h1)
    return interleave(fo, h0, exp(s) .* h1 .+ t), rowsum(s)
end
function backward(fo::AffineHalfFlow, z)
    z = flow_input(z)
    h0, h1 = halves(fo, z)
    s, t = coupling(fo, h0, h1)
    return interleave(fo, h0, (h1 .- t) .* exp(-s)), -rowsum(s)
end

"""
    SlowMAF(dim, parity, nns)

ADCME's `SlowMAF` (a masked autoregressive flow, one network per dimension): `z[:, order[i]] =
x[:, i] .* exp(s_i) .+ t_i` with `(s_i, t_i)` the two columns of `nns[i-1](x[:, 1:i-1])` (`nns`:
`dim - 1` functions to `batch × 2`) and a trainable pair for `i = 1`; `order` is `1:dim`
(`parity`) or reversed. `log_det = Σ s_i`. `backward` runs the dimensions one after another.
"""
struct SlowMAF <: FlowOp
    dim::Int
    layers::Vector{Any}
    order::Vector{Int}
    p::Tensor
end
function SlowMAF(dim::Integer, parity::Bool, nns::AbstractVector)
    length(nns) == dim - 1 || invalid("SlowMAF: needs dim - 1 = $(dim - 1) networks, got $(length(nns))")
    return SlowMAF(dim, collect(Any, nns), parity ? collect(1:dim) : collect(dim:-1:1), Variable(zeros(2)))
end
function maf_st(fo::SlowMAF, x, i)
    i == 1 && return per_row(x, fo.p[1]), per_row(x, fo.p[2])
    st = fo.layers[i-1](x[:, 1:i-1])
    return st[:, 1], st[:, 2]
end
function forward(fo::SlowMAF, x)
    x = flow_input(x)
    cols = Vector{Any}(undef, fo.dim); ld = 0
    for i in 1:fo.dim
        s, t = maf_st(fo, x, i)
        cols[fo.order[i]] = reshape(x[:, i] .* exp(s) .+ t, :, 1)
        ld = ld .+ s
    end
    return hcat(cols...), ld
end
function backward(fo::SlowMAF, z)
    z = flow_input(z)
    x = nothing; ld = 0
    for i in 1:fo.dim
        s, t = maf_st(fo, x === nothing ? z : x, i)
        col = reshape((z[:, fo.order[i]] .- t) .* exp(-s), :, 1)
        x = x === nothing ? col : hcat(x, col)
        ld = ld .- s
    end
    return x, ld
end

"""
    Invertible1x1Conv(dim, name=missing)

ADCME's `Invertible1x1Conv` (Glow's): `z = x W` with `W = P L (U + diag(S))` from the LU
factorization of a random matrix, `P` fixed, the strict lower `L` (unit diagonal), `S` and
the strict upper `U` trainable; `log_det = sum(log|S|)`. `backward` multiplies by `inv(W)`.
"""
struct Invertible1x1Conv <: FlowOp
    dim::Int
    P::Matrix{Float64}
    L::Tensor
    S::Tensor
    U::Tensor
end
function Invertible1x1Conv(dim::Integer, name=missing)
    nm = coalesce(name, randstring(10))
    F = lu(randn(dim, dim))
    return Invertible1x1Conv(dim, Matrix{Float64}(F.P), Variable(Matrix(F.L); name=nm * "_L"),
                             Variable(diag(F.U); name=nm * "_S"), Variable(triu(F.U, 1); name=nm * "_U"))
end
flow_W(fo::Invertible1x1Conv) = constant(fo.P) * (tril(fo.L, -1) + Matrix(1.0I, fo.dim, fo.dim)) * (triu(fo.U, 1) + diagm(fo.S))
forward(fo::Invertible1x1Conv, x) = (flow_input(x) * flow_W(fo), sum(log(abs(fo.S))))
backward(fo::Invertible1x1Conv, z) = (flow_input(z) * inv(flow_W(fo)), -sum(log(abs(fo.S))))

"""`TanhFlow(dim)`: `z = tanh.(x)`, `log_det = Σ log(1 - tanh(x)²)` (TF Probability's `Tanh` bijector, computed as `2(log 2 - x - softplus(-2x))`)."""
struct TanhFlow <: FlowOp
    dim::Int
end
forward(::TanhFlow, x) = (x = flow_input(x); (tanh(x), rowsum(2 .* (log(2.0) .- x .- softplus(-2 .* x)))))
backward(::TanhFlow, z) = (z = flow_input(z); (0.5 .* log((1 .+ z) ./ (1 .- z)), -rowsum(log(1 .- z .* z))))

"""`AffineScalarFlow(dim, shift=0.0, scale=1.0)`: `z = shift + scale x` (TF Probability's `AffineScalar`), `log_det = dim log|scale|`."""
struct AffineScalarFlow <: FlowOp
    dim::Int
    shift::Float64
    scale::Float64
end
AffineScalarFlow(dim::Integer, shift::Real=0.0, scale::Real=1.0) = AffineScalarFlow(Int(dim), Float64(shift), Float64(scale))
forward(fo::AffineScalarFlow, x) = (x = flow_input(x); (fo.shift .+ fo.scale .* x, per_row(x, fo.dim * log(abs(fo.scale)))))
backward(fo::AffineScalarFlow, z) = (z = flow_input(z); ((z .- fo.shift) ./ fo.scale, per_row(z, -fo.dim * log(abs(fo.scale)))))

"""`InvertFlow(fo)`: the inverse of `fo` (its `forward` is `fo`'s `backward`, and the reverse)."""
struct InvertFlow <: FlowOp
    dim::Int
    o::FlowOp
end
InvertFlow(fo::FlowOp) = InvertFlow(fo.dim, fo)
forward(fo::InvertFlow, x) = backward(fo.o, x)
backward(fo::InvertFlow, z) = forward(fo.o, z)
"""
    AffineFlow(args...; kwargs...)

ADCME's `AffineFlow`: `InvertFlow(LinearFlow(args...; kwargs...))`, the map `z = A x + b` from
data to latent (`A` is `outdim × indim`; arguments and errors as [`LinearFlow`](@ref)). Its
`forward` has `log_det = log|det A|` (`nothing` when `A` is not square).
"""
AffineFlow(args...; kwargs...) = InvertFlow(LinearFlow(args...; kwargs...))

include("flows_model.jl")
include("flows_maf.jl")
