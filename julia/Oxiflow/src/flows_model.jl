# TF Probability's elementwise bijectors as flows (ADCME wraps `tfp.bijectors`), and the flow
# chain `NormalizingFlow` with its model on a prior, `NormalizingFlowModel`.

# name, forward, its log|derivative| per element, inverse, the inverse's log|derivative|
const BIJECTORS = (
    (:Exp, x -> exp(x), x -> x, z -> log(z), z -> -log(z)),
    (:Log, x -> log(x), x -> -log(x), z -> exp(z), z -> z),
    (:Sigmoid, x -> sigmoid(x), x -> -softplus(-x) .- softplus(x), z -> log(z) .- log(1 .- z), z -> -log(z) .- log(1 .- z)),
    (:Softplus, x -> softplus(x), x -> -softplus(-x), z -> log(exp(z) .- 1), z -> z .- log(exp(z) .- 1)),
    (:Square, x -> x .* x, x -> log(2.0) .+ log(x), z -> sqrt(z), z -> -log(2.0) .- 0.5 .* log(z)),
)
for (T, f, fl, g, gl) in BIJECTORS
    doc = "`$T(dim)`: TF Probability's `$T` bijector as a flow (elementwise; `log_det` sums over the columns)."
    @eval begin
        struct $T <: FlowOp
            dim::Int
        end
        forward(::$T, x) = (x = flow_input(x); ($f(x), rowsum($fl(x))))
        backward(::$T, z) = (z = flow_input(z); ($g(z), rowsum($gl(z))))
        @doc $doc $T
    end
end

"""`PowerTransform(dim, power)`: TF Probability's `PowerTransform`, `z = (1 + c x)^(1/c)` (`exp(x)` for `c = 0`), `log_det = Σ (1/c - 1) log(1 + c x)`."""
struct PowerTransform <: FlowOp
    dim::Int
    power::Float64
end
PowerTransform(dim::Integer, power::Real) = PowerTransform(Int(dim), Float64(power))
function forward(fo::PowerTransform, x)
    x = flow_input(x); c = fo.power
    c == 0 && return forward(Exp(fo.dim), x)
    return (1 .+ c .* x) .^ (1 / c), rowsum((1 / c - 1) .* log(1 .+ c .* x))
end
function backward(fo::PowerTransform, z)
    z = flow_input(z); c = fo.power
    c == 0 && return backward(Exp(fo.dim), z)
    return (z .^ c .- 1) ./ c, rowsum((c - 1) .* log(z))
end

"""
`Permute(dim, permutation)`: TF Probability's `Permute`, `z = x[:, permutation]`,
`log_det = 0`. `permutation` is a permutation of `0:dim-1` (0-based, as ADCME passes it on to
TF Probability) or of `1:dim` (1-based, Julia's); the field `permutation` holds the 1-based
one. Anything else raises an `OxiflowError`.
"""
struct Permute <: FlowOp
    dim::Int
    permutation::Vector{Int}
    function Permute(dim::Integer, permutation::AbstractVector{<:Integer})
        p = sort(collect(Int, permutation))
        p == collect(0:dim-1) && return new(Int(dim), collect(Int, permutation) .+ 1)
        p == collect(1:dim) || invalid("Permute: $(collect(permutation)) is not a permutation of 0:$(dim-1) (0-based, as ADCME) or 1:$dim")
        return new(Int(dim), collect(Int, permutation))
    end
end
forward(fo::Permute, x) = (x = flow_input(x); (x[:, fo.permutation], per_row(x, 0.0)))
backward(fo::Permute, z) = (z = flow_input(z); (z[:, invperm(fo.permutation)], per_row(z, 0.0)))

"""
    NormalizingFlow(flows)

ADCME's `NormalizingFlow`: the chain of `flows` (data to latent in order). `forward(nf, x)`
returns the list `zs` (`x`, then each flow's output) and the summed `log_det`;
`backward(nf, z)` runs the flows in reverse and returns the list `xs` and the summed
`log_det` (`nothing` if a flow has none).
"""
struct NormalizingFlow
    flows::Vector{Any}
    NormalizingFlow(flows::AbstractVector) = new(collect(Any, flows))
end
function forward(nf::NormalizingFlow, x)
    x = flow_input(x)
    zs = Any[x]; ld = per_row(x, 0.0)
    for fl in nf.flows
        x, l = forward(fl, x)
        ld = ld .+ l
        push!(zs, x)
    end
    return zs, ld
end
function backward(nf::NormalizingFlow, z)
    z = flow_input(z)
    xs = Any[z]; ld = per_row(z, 0.0)
    for fl in reverse(nf.flows)
        z, l = backward(fl, z)
        ld = (l === nothing || ld === nothing) ? nothing : ld .+ l
        push!(xs, z)
    end
    return xs, ld
end

"""
    NormalizingFlowModel(prior, flows)
    model(x) -> (zs, prior_logpdf, log_det)
    rand(model, n) -> xs

ADCME's `NormalizingFlowModel`: the flows on a prior distribution (an
[`ADCMEDistribution`](@ref) whose event is a row, e.g. `Oxiflow.MultivariateNormalDiag(loc=zeros(d))`).
`model(x)` (or `forward(model, x)`) maps data rows to latent ones and returns the list of
intermediate values, the prior's log density of the last and the summed log-determinant,
so the data's log likelihood is `prior_logpdf + log_det`. `rand(model, n)` draws `n` prior
samples and maps them back through the flows (`backward`), returning the list whose last
entry is the data-space samples.
"""
struct NormalizingFlowModel
    prior::ADCMEDistribution
    flow::NormalizingFlow
end
NormalizingFlowModel(prior::ADCMEDistribution, flows::AbstractVector) = NormalizingFlowModel(prior, NormalizingFlow(flows))
function forward(m::NormalizingFlowModel, x)
    zs, ld = forward(m.flow, x)
    return zs, logpdf(m.prior, zs[end]), ld
end
backward(m::NormalizingFlowModel, z) = backward(m.flow, z)
(m::NormalizingFlowModel)(x) = forward(m, x)
Base.rand(m::NormalizingFlowModel, n::Integer) = backward(m.flow, rand(m.prior, n))[1]
function Base.show(io::IO, m::NormalizingFlowModel)
    println(io, "( $(nameof(typeof(m.prior))) )")
    for fl in reverse(m.flow.flows)
        println(io, "\t↓\n$(nameof(typeof(fl))) (dim = $(fl.dim))")
    end
    print(io, "\t↓\n(    Data    )")
end
