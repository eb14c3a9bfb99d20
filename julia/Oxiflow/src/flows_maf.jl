# Masked autoregressive flows: ADCME's `autoregressive_network` (TF Probability's
# `AutoregressiveNetwork`, MADE: Germain et al. 2015), `MAF` (Papamakarios et al. 2017) and
# `IAF` (Kingma et al. 2016).

export MAF, IAF, autoregressive_network

"""
    autoregressive_network(x, config, scope="default"; activation="tanh")

ADCME's `autoregressive_network` (TF Probability's `AutoregressiveNetwork`, a MADE): for
`x` (`batch × d`) and `config = [hidden..., params]`, a `batch × d × params` tensor whose
entry `[:, i, :]` depends on `x[:, 1:i-1]` only. Dense layers of the `hidden` widths (with
`activation`; `nothing` for none) and a linear output layer, their weights masked by TF
Probability's degrees: input `j` has degree `j`, hidden unit `k` of a layer of width `h` the
degree `ceil(k (d - 1) / (h + 1))`, a unit sees the units of the layer before whose degree
is not larger, and output `i` the last hidden units of degree below `i`. The variables
(Glorot-uniform kernels, zero biases) live under the variable scope `scope`; another call
with the same scope reuses them. Needs `d ≥ 2` and known `d` (an `OxiflowError` otherwise).
"""
function autoregressive_network(x, config::AbstractVector{<:Integer}, scope::AbstractString="default"; activation="tanh")
    xt = x isa Tensor ? x : constant(Float64.(x))
    d = size(xt, 2)
    (ndims(xt) == 2 && d !== nothing && d >= 2) || invalid("autoregressive_network: x must be batch × d with d ≥ 2 known, got size $(size(xt))")
    length(config) >= 1 && all(>=(1), config) || invalid("autoregressive_network: config must be positive widths [hidden..., params], got $(collect(config))")
    act = activation === nothing ? identity : activation_function(activation)
    hidden, params = collect(Int, config[1:end-1]), Int(config[end])
    T = xt.dtype
    return variable_scope(scope; reuse=AUTO_REUSE) do
        deg_prev, h = collect(1:d), xt
        for (l, w) in enumerate(hidden)
            deg = [ceil(Int, k * (d - 1) / (w + 1)) for k in 1:w]
            mask = T[deg[k] >= deg_prev[j] for j in 1:length(deg_prev), k in 1:w]
            W = get_variable("dense_$l/kernel"; initializer=glorot_values(length(deg_prev), w, T))
            b = get_variable("dense_$l/bias"; initializer=zeros(T, w))
            h = act(h * (W .* mask) .+ b)
            deg_prev = deg
        end
        mask = T[i > deg_prev[k] for k in 1:length(deg_prev), i in 1:d]
        heads = map(1:params) do p
            W = get_variable("output_$p/kernel"; initializer=glorot_values(length(deg_prev), d, T))
            b = get_variable("output_$p/bias"; initializer=zeros(T, d))
            h * (W .* mask) .+ b
        end
        stack(heads; dims=3)
    end
end

"""
    MAF(dim, parity, config; name=missing, activation="relu")

ADCME's `MAF`: `z = x .* exp.(s) .+ t` with `(s, t)` from one
[`autoregressive_network`](@ref)`(x, [config; 2], name)`, so `z[:, i]` depends on `x[:, 1:i]`;
with `parity` the columns of `z` are reversed. `log_det = sum(s, dims=2)`. `backward` runs the
network once per dimension (slow in that direction, as a MAF is).
"""
struct MAF <: FlowOp
    dim::Int
    net::Function
    parity::Bool
end
function MAF(dim::Integer, parity::Bool, config::AbstractVector{<:Integer}; name=missing, activation="relu")
    nm = coalesce(name, "MAF_" * randstring(10))
    cfg = [collect(Int, config); 2]
    return MAF(dim, x -> autoregressive_network(x, cfg, nm; activation=activation), parity)
end
maf_split(st) = (st[:, :, 1], st[:, :, 2])
function forward(fo::MAF, x)
    x = flow_input(x)
    s, t = maf_split(fo.net(x))
    z = x .* exp(s) .+ t
    fo.parity && (z = z[:, fo.dim:-1:1])
    return z, rowsum(s)
end
function backward(fo::MAF, z)
    z = flow_input(z)
    fo.parity && (z = z[:, fo.dim:-1:1])
    x = 0 .* z
    ld = 0
    for i in 1:fo.dim
        s, t = maf_split(fo.net(x))
        col = (z[:, i:i] .- t[:, i:i]) .* exp(-s[:, i:i])
        parts = Any[i > 1 ? x[:, 1:i-1] : nothing, col, i < fo.dim ? 0 .* z[:, i+1:fo.dim] : nothing]
        x = hcat(filter(p -> p !== nothing, parts)...)
        ld = ld .- s[:, i]
    end
    return x, ld
end

"""
    IAF(dim, parity, config; name=missing, activation="relu")

An inverse autoregressive flow: a [`MAF`](@ref) used the other way round (its `forward` is
the MAF's `backward` and the reverse), fast to sample. ADCME's `IAF` returns a plain `MAF`
instead.
"""
struct IAF <: FlowOp
    dim::Int
    maf::MAF
end
IAF(dim::Integer, parity::Bool, config::AbstractVector{<:Integer}; kwargs...) = IAF(Int(dim), MAF(dim, parity, config; kwargs...))
forward(fo::IAF, x) = backward(fo.maf, x)
backward(fo::IAF, z) = forward(fo.maf, z)
