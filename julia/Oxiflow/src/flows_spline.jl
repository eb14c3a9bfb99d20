# ADCME's NeuralCouplingFlow: a coupling layer of rational-quadratic splines (Durkan, Bekasov,
# Murray and Papamakarios, "Neural Spline Flows", NeurIPS 2019), whose spline ADCME takes from
# TF Probability's `RationalQuadraticSpline` bijector. The spline is built from graph ops
# here: knots by a cumulative-sum matmul, the bin of each element by a one-hot mask, the
# map and its inverse in closed form (the paper's eqs. 4, 5 and 6, and the quadratic of its
# appendix A.3).

export NeuralCouplingFlow

# The rational-quadratic spline on [-B, B] (identity outside, slope 1 at both ends, as
# TFP's bijector) of the column `v` (N×1), with bin widths `w` and heights `h` (N×K, positive,
# each row summing to 2B; K >= 2) and interior knot slopes `d` (N×(K-1), positive): `(y, log dy/dx)`
# elementwise, or with `inverse` the preimage of `v` and `log dx/dy`.
function rq_spline(v::Tensor, w::Tensor, h::Tensor, d::Tensor, B::Real, inverse::Bool)
    T, K = v.dtype, size(w, 2)
    cumulative = constant([T(i <= j) for i in 1:K, j in 1:K])      # row * cumulative = running sums
    xr, yr = (w * cumulative) .- T(B), (h * cumulative) .- T(B)     # right knots
    xl, yl = xr - w, yr - h                                         # left knots
    one_col = ones_like(v)
    dl, dr = hcat(one_col, d), hcat(d, one_col)                     # slopes at the left and right knots
    lo = inverse ? yl : xl
    # bin k holds lo_k <= v < lo_{k+1}; the last bin is open above, so a rounding of the
    # knots' sum below B leaves no gap (values at or past B are outside anyway)
    up = hcat(lo[:, 2:K], Inf .* one_col)
    mask = cast((v >= lo) & (v < up), T)
    inside = (v >= T(-B)) & (v < T(B))
    # the bin's parameters; harmless values outside, so no NaN reaches the unused branch or
    # its gradient
    pick(t, safe) = if_else(inside, reshape(sum(mask .* t; dims=2), (-1, 1)), safe)
    wk, hk, xk, yk = pick(w, one(T)), pick(h, one(T)), pick(xl, zero(T)), pick(yl, zero(T))
    dlk, drk = pick(dl, one(T)), pick(dr, one(T))
    s = hk ./ wk
    c2 = dlk .+ drk .- 2 .* s
    if inverse
        Δ = v .- yk
        a = hk .* (s .- dlk) .+ Δ .* c2
        b = hk .* dlk .- Δ .* c2
        c = -s .* Δ
        ξ = 2 .* c ./ (-b .- sqrt(max(b .* b .- 4 .* a .* c, zero(T))))
        out = ξ .* wk .+ xk
    else
        ξ = (v .- xk) ./ wk
    end
    ξ1 = ξ .* (1 .- ξ)
    den = s .+ c2 .* ξ1
    deriv = s .* s .* (drk .* ξ .* ξ .+ 2 .* s .* ξ1 .+ dlk .* (1 .- ξ) .* (1 .- ξ)) ./ (den .* den)
    inverse || (out = yk .+ hk .* (s .* ξ .* ξ .+ dlk .* ξ1) ./ den)
    logd = inverse ? -log(deriv) : log(deriv)
    return if_else(inside, out, v), if_else(inside, logd, zero(T))
end

"""
    NeuralCouplingFlow(dim, f1, f2, K=8, B=3)

ADCME's `NeuralCouplingFlow`: a coupling flow of rational-quadratic splines (Durkan et al.,
Neural Spline Flows, 2019; the spline of TF Probability's `RationalQuadraticSpline`) on
`[-B, B]` with `K` bins, the identity outside. With `x = [lower upper]` (`dim` even, each
half `dim ÷ 2` columns), `forward` maps `upper` by the splines that `f1(lower)` gives, then
`lower` by those that `f2(new upper)` gives, and returns `([lower upper], log_det)`;
`backward` undoes the two steps in reverse order. `f1` and `f2` map a `batch × dim÷2` tensor
to `batch × (3K-1)·(dim÷2)` (a network): read as `(3K-1)` parameters per element (rows of
`reshape(out, (-1, dim÷2, 3K-1))`, TF's row-major order as ADCME), split into `K` widths and
`K` heights (a softmax scaled to `2B`) and `K-1` interior knot slopes (a softplus).
`log_det` is the sum over the columns of `log |dz/dx|` per row, a vector of the batch.

Errors (`OxiflowError`): an odd `dim`, `K < 2`, `B <= 0`, or a network output of another width.
"""
struct NeuralCouplingFlow <: FlowOp
    dim::Int
    K::Int
    B::Float64
    f1::Function
    f2::Function
end
function NeuralCouplingFlow(dim::Integer, f1::Function, f2::Function, K::Integer=8, B::Real=3)
    iseven(dim) && dim > 0 || invalid("NeuralCouplingFlow: dim must be even and positive, got $dim")
    K >= 2 || invalid("NeuralCouplingFlow: K (the number of bins) must be >= 2, got $K")
    B > 0 || invalid("NeuralCouplingFlow: B (the spline's half-width) must be positive, got $B")
    return NeuralCouplingFlow(Int(dim), Int(K), Float64(B), f1, f2)
end

# The spline parameters for the elements of `cond`'s other half, one row per element
# (row-major over batch × dim÷2), from `net(cond)`.
function spline_params(fo::NeuralCouplingFlow, net, cond::Tensor, which::AbstractString)
    K, half = fo.K, fo.dim ÷ 2
    out = net(cond)
    (out isa Tensor && ndims(out) == 2 && size(out, 2) == (3K - 1) * half) ||
        invalid("NeuralCouplingFlow: $which must return batch × $((3K - 1) * half) ((3K-1)·dim÷2 with K = $K), got " *
                (out isa Tensor ? "size $(size(out))" : "a $(typeof(out))"))
    rows = reshape(out, (-1, 3K - 1))
    W, H, D = split(rows, [K, K, K - 1]; dims=2)
    T = rows.dtype
    return T(2fo.B) .* softmax(W), T(2fo.B) .* softmax(H), softplus(D)
end

# One spline step: the half `h` (batch × dim÷2) through the splines of `params`.
function spline_half(fo::NeuralCouplingFlow, h::Tensor, params, inverse::Bool)
    half = fo.dim ÷ 2
    y, logd = rq_spline(reshape(h, (-1, 1)), params..., fo.B, inverse)
    return reshape(y, (-1, half)), sum(reshape(logd, (-1, half)); dims=2)
end

# The first and second halves of the columns of `x` (batch × dim).
function coupling_halves(fo::NeuralCouplingFlow, x)
    x = flow_input(x)
    size(x, 2) == fo.dim || invalid("NeuralCouplingFlow: input of size $(size(x)) for dim = $(fo.dim)")
    half = fo.dim ÷ 2
    return x[:, 1:half], x[:, half+1:fo.dim]
end

function forward(fo::NeuralCouplingFlow, x)
    lower, upper = coupling_halves(fo, x)
    upper, ld1 = spline_half(fo, upper, spline_params(fo, fo.f1, lower, "f1"), false)
    lower, ld2 = spline_half(fo, lower, spline_params(fo, fo.f2, upper, "f2"), false)
    return hcat(lower, upper), ld1 + ld2
end

function backward(fo::NeuralCouplingFlow, z)
    lower, upper = coupling_halves(fo, z)
    lower, ld1 = spline_half(fo, lower, spline_params(fo, fo.f2, upper, "f2"), true)
    upper, ld2 = spline_half(fo, upper, spline_params(fo, fo.f1, lower, "f1"), true)
    return hcat(lower, upper), ld1 + ld2
end
