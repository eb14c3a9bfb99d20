# ADCME's optimal transport: `sinkhorn`, `empirical_sinkhorn` and `ot_dist` (ADCME's ot.jl,
# whose Sinkhorn-Knopp iteration follows POT's `ot.bregman.sinkhorn_knopp`). ADCME runs the
# iteration in a custom C++ op; here it is a `while_loop` of graph ops. The exact transport
# (`emd`, `empirical_emd`, `sinkhorn`'s "lp") is the engine's `OtNetwork` op, and `dtw`, the
# dynamic time warping distance, its `Dtw` op.

export sinkhorn, empirical_sinkhorn, ot_dist, dtw, emd, empirical_emd

# a Julia weight vector must be a probability vector (ADCME asserts the same)
function check_weights(w, what, fname)
    w isa Tensor && return w
    all(x -> x >= 0, w) && isapprox(sum(w), 1.0) ||
        invalid("$fname: $what must be non-negative and sum to 1, got sum $(sum(w))")
    return constant(Float64.(collect(w)))
end

# The weights and the cost matrix as tensors of one float dtype, their sizes checked.
function ot_inputs(a, b, M, fname)
    a, b = check_weights(a, "a", fname), check_weights(b, "b", fname)
    Mt = M isa Tensor ? M : constant(Float64.(M))
    T = Mt.dtype
    T <: AbstractFloat || invalid("$fname: M must be a float matrix, got $T")
    a, b = cast(a, T), cast(b, T)
    ndims(Mt) == 2 && ndims(a) == 1 && ndims(b) == 1 ||
        invalid("$fname: a and b must be vectors and M a matrix, got sizes $(size(a)), $(size(b)), $(size(Mt))")
    m, n = size(Mt)
    (m === nothing || n === nothing || size(a, 1) === nothing || size(b, 1) === nothing) &&
        invalid("$fname: the sizes of a, b and M must be known, got $(size(a)), $(size(b)), $(size(Mt))")
    (size(a, 1), size(b, 1)) == (m, n) || invalid("$fname: M is $(m)×$(n), but a has length $(size(a, 1)) and b $(size(b, 1))")
    return a, b, Mt
end

"""
    sinkhorn(a, b, M; reg=1.0, iter=1000, tol=1e-9, method="sinkhorn", returnall=false)

ADCME's `sinkhorn`: the entropy-regularized optimal transport between the weights `a`
(length `m`) and `b` (length `n`) with the cost matrix `M` (`m×n`): the plan `P = diag(u) K
diag(v)`, `K = exp.(-M / reg)`, from the Sinkhorn-Knopp iteration of POT and ADCME (`v = b ./
(K'u)`, `u = a ./ (K v)`, from `u = 1/m`, `v = 1/n`; the marginal error `‖sum(P, dims=1) - b‖`
checked every 10 iterations against `tol`, at most `iter` iterations; a zero in `K'u` or a
non-finite `u` or `v` keeps the previous iterate and stops). `method="greenkhorn"` reaches
the same plan by rescaling, per iteration, only the row or column whose sum is furthest from
its target (Altschuler et al. 2017, POT's and ADCME's `greenkhorn`: stops once that largest
violation is at most `tol`, after at most `iter` single-row or single-column updates).
Returns the loss `sum(P .* M)`, or with `returnall=true` the pair `(P, loss)`.

Gradients follow ADCME's: `∂loss/∂M = P`, `P` held fixed (the envelope theorem's gradient of
the regularized problem), scaled by the gradient reaching the loss; `P` itself is returned
through `independent` (no gradient flows through it), and `a`, `b` and `reg` get none.
Julia weight vectors must be non-negative and sum to 1 (an `OxiflowError` otherwise, where
ADCME asserts). `method="lp"` is the exact transport of [`emd`](@ref) (with `iter` its
limit of simplex pivots); any other method is an `OxiflowError`.
Small `reg` underflows `K`; as ADCME, the loop then stops at the last finite iterate.
"""
function sinkhorn(a, b, M; reg=1.0, iter::Integer=1000, tol::Real=1e-9, method::AbstractString="sinkhorn", returnall::Bool=false)
    method == "lp" && return emd(a, b, M; iter=iter, tol=tol, returnall=returnall)
    method in ("sinkhorn", "greenkhorn") ||
        invalid("sinkhorn: method \"$method\" not implemented (\"sinkhorn\", \"greenkhorn\" or the exact \"lp\")")
    iter >= 0 || invalid("sinkhorn: iter must be non-negative, got $iter")
    a, b, Mt = ot_inputs(a, b, M, "sinkhorn")
    T = Mt.dtype
    m, n = size(Mt)
    P = name_scope(method) do
        K = exp(-independent(Mt) ./ cast(as_tensor(reg), T))
        a_, b_ = independent(a), independent(b)
        method == "greenkhorn" && return greenkhorn_plan(a_, b_, K, iter, tol)
        Kp = K ./ reshape(a_, m, 1)
        marginal_error(u, v) = norm(sum(reshape(u, m, 1) .* K .* reshape(v, 1, n); dims=1) .- b_)
        finite(x) = (s = sum(abs(x)); (s - s) <= 0)          # false for NaN and Inf
        function body(cpt, u, v, err, stop)
            KtU = reshape(reshape(u, 1, m) * K, n)
            vn = b_ ./ KtU
            un = 1 ./ reshape(Kp * reshape(vn, n, 1), m)
            bad = (minimum(abs(KtU)) <= 0) | !(finite(un) & finite(vn))
            u2, v2 = if_else(bad, u, un), if_else(bad, v, vn)
            err2 = if_else((mod(cpt, 10) <= 0) & !bad, marginal_error(u2, v2), err)
            return cpt + 1, u2, v2, err2, bad
        end
        vars0 = (constant(0), constant(fill(T(1 / m), m)), constant(fill(T(1 / n), n)), constant(one(T)), constant(false))
        _, u, v, _, _ = while_loop((cpt, u, v, err, stop) -> !stop & (err > tol) & (cpt < iter), body, vars0; back_prop=false)
        reshape(u, m, 1) .* K .* reshape(v, 1, n)
    end
    P = independent(P)
    loss = sum(P .* Mt)
    return returnall ? (P, loss) : loss
end

# Greenkhorn (Altschuler, Weed and Rigollet 2017; ADCME's `greenkhorn`, after POT's
# `ot.bregman.greenkhorn`): from `u = 1/m`, `v = 1/n`, each iteration finds the largest
# violation of the plan's row sums `u .* (K v) - a` and column sums `v .* (K'u) - b` and
# rescales that one row (`u[i] = a[i] / (K v)[i]`, when the row violation is strictly the
# larger) or column (`v[j] = b[j] / (K'u)[j]`); it stops after the update where the largest
# violation was at most `tol`, or after `iter` iterations. Ties go to the first index.
function greenkhorn_plan(a, b, K, iter, tol)
    T = K.dtype
    m, n = size(K)
    rows, cols = constant(collect(Int64, 0:m-1)), constant(collect(Int64, 0:n-1))
    # the one-hot vector of the largest |x| (ArgMax's first index on ties), and that |x|
    function largest(x, positions)
        i = add_op("ArgMax", [abs(x)]; axis=0)
        return cast(add_op("Equal", [positions, i]), T), maximum(abs(x))
    end
    rescale(x, e, target, Kx) = x .* (1 - e) + e .* (sum(e .* target) / sum(e .* Kx))
    function body(cpt, u, v, stop)
        Kv = reshape(K * reshape(v, n, 1), m)
        Ktu = reshape(reshape(u, 1, m) * K, n)
        e1, viol1 = largest(u .* Kv - a, rows)
        e2, viol2 = largest(v .* Ktu - b, cols)
        row = viol1 > viol2
        u2 = if_else(row, rescale(u, e1, a, Kv), u)
        v2 = if_else(row, v, rescale(v, e2, b, Ktu))
        return cpt + 1, u2, v2, max(viol1, viol2) <= tol
    end
    vars0 = (constant(0), constant(fill(T(1 / m), m)), constant(fill(T(1 / n), n)), constant(false))
    _, u, v, _ = while_loop((cpt, u, v, stop) -> !stop & (cpt < iter), body, vars0; back_prop=false)
    return reshape(u, m, 1) .* K .* reshape(v, 1, n)
end

"""
    ot_dist(x, y, order=2)

ADCME's `ot_dist`: the `n×m` matrix of distances `‖x[i, :] - y[j, :]‖_order` between the
rows of `x` (`n×d`) and `y` (`m×d`); vectors are one column. With Julia arrays it is a Julia
matrix (LinearAlgebra's `norm`), with tensors a tensor, `sum(abs(x_i - y_j)^order)^(1/order)`
(differentiable except where two rows coincide, as ADCME's).
"""
function ot_dist(x, y, order::Real=2)
    if !(x isa Tensor || y isa Tensor)
        X, Y = reshape(x, size(x, 1), :), reshape(y, size(y, 1), :)
        size(X, 2) == size(Y, 2) || invalid("ot_dist: x has $(size(X, 2)) columns and y $(size(Y, 2))")
        return [norm(X[i, :] - Y[j, :], order) for i in 1:size(X, 1), j in 1:size(Y, 1)]
    end
    xt, yt = as_tensor(x), as_tensor(y)
    xt, yt = ndims(xt) == 1 ? reshape(xt, :, 1) : xt, ndims(yt) == 1 ? reshape(yt, :, 1) : yt
    (n, d), (m, d2) = size(xt), size(yt)
    any(s -> s === nothing, (n, d, m, d2)) && invalid("ot_dist: the sizes of x and y must be known, got $(size(xt)) and $(size(yt))")
    d == d2 || invalid("ot_dist: x has $d columns and y $d2")
    diff = reshape(xt, n, 1, d) .- reshape(yt, 1, m, d)
    return sum(abs(diff) .^ order; dims=3) .^ (1 / order)
end

"""
    empirical_sinkhorn(x, y; reg=1.0, iter=1000, tol=1e-9, method="sinkhorn", dist=2,
                       returnall=false, normalized=false)

ADCME's `empirical_sinkhorn`: [`sinkhorn`](@ref) between the samples `x` (`n×d`, or a vector
of `n`) and `y` (`m×d`), each with uniform weights, with the cost `M = dist(x, y)`: an
integer `dist` is [`ot_dist`](@ref)`(x, y, dist)`, a function is called on the two (as
tensors). `normalized=true` divides `M` by its maximum. Gradients reach `x` and `y`
through `M`.
"""
function empirical_sinkhorn(x, y; reg=1.0, iter::Integer=1000, tol::Real=1e-9, method::AbstractString="sinkhorn",
                            dist::Union{Integer,Function}=2, returnall::Bool=false, normalized::Bool=false)
    xt, yt = as_tensor(x), as_tensor(y)
    xt, yt = ndims(xt) == 1 ? reshape(xt, :, 1) : xt, ndims(yt) == 1 ? reshape(yt, :, 1) : yt
    M = dist isa Integer ? ot_dist(xt, yt, dist) : dist(xt, yt)
    normalized && (M = M / maximum(M))
    n, m = size(xt, 1), size(yt, 1)
    (n === nothing || m === nothing) && invalid("empirical_sinkhorn: the numbers of samples must be known, got sizes $(size(xt)) and $(size(yt))")
    return sinkhorn(fill(1 / n, n), fill(1 / m, m), M; reg=reg, iter=iter, tol=tol, method=method, returnall=returnall)
end

"""
    emd(a, b, M; iter=100000, tol=1e-9, returnall=false)

ADCME's `emd`: the exact optimal transport (earth mover's distance) between the weights `a`
(length `m`) and `b` (length `n`) with the cost matrix `M` (`m×n`): the plan `P >= 0` with
row sums `a` and column sums `b` that minimizes `loss = sum(P .* M)`, by the transportation
simplex (op `OtNetwork`, CPU; ADCME's `ot_network` custom op runs a network simplex). Returns
`loss`, or with `returnall=true` the pair `(P, loss)`. `iter` bounds the simplex pivots: a
problem not solved within it fails the run naming the op ("raise iter"); ADCME's default of
1000 stops problems from about 30×30 on, so the default here is 100,000. `tol` is accepted
for ADCME's signature and unused (the simplex stops at an optimum).

Gradients (LP duality, as POT's `emd2`): `∂loss/∂M = P`, `∂loss/∂a` and `∂loss/∂b` the dual
potentials `u`, `v` (`u_i + v_j = M_ij` where `P_ij > 0`), each centered to mean zero.
Through `P` (with `returnall`) gradients reach `a` and `b` (on the optimal basis `P` is
linear in them) and not `M` (piecewise constant). Errors (`OxiflowError`): weights that are
negative or do not sum to 1, sizes that do not match (when built); unequal sums of tensor
weights, non-finite values, or the pivot limit (when run).
"""
function emd(a, b, M; iter::Integer=100_000, tol::Real=1e-9, returnall::Bool=false)
    iter >= 0 || invalid("emd: iter must be non-negative, got $iter")
    a, b, Mt = ot_inputs(a, b, M, "emd")
    P = add_op("OtNetwork", Tensor[a, b, Mt]; max_iter=Int(iter))
    loss = output_of(P, 1)
    return returnall ? (P, loss) : loss
end

"""
    empirical_emd(x, y; iter=100000, tol=1e-9, dist=2, returnall=false, normalized=false)

ADCME's `empirical_emd`: [`emd`](@ref) between the samples `x` (`n×d`, or a vector of `n`)
and `y` (`m×d`) with uniform weights and the cost `M = dist(x, y)` as in
[`empirical_sinkhorn`](@ref) (an integer `dist` is [`ot_dist`](@ref)`(x, y, dist)`;
`normalized=true` divides `M` by its maximum). ADCME's version drops `dist` and
`normalized` (it always uses the Euclidean distance); here they apply. Gradients reach `x`
and `y` through `M`.
"""
empirical_emd(x, y; iter::Integer=100_000, tol::Real=1e-9, dist::Union{Integer,Function}=2, returnall::Bool=false,
              normalized::Bool=false) =
    empirical_sinkhorn(x, y; iter=iter, tol=tol, method="lp", dist=dist, returnall=returnall, normalized=normalized)

"""
    dtw(s, t, use_fast=false) -> (cost, path)

ADCME's `dtw`: the dynamic time warping distance between the time series `s` (length `n`)
and `t` (length `m`), real Julia vectors or float vector tensors (Julia values become
Float64; two tensors must share their dtype). `cost` is a scalar of that dtype, the least
sum of `|s[i] - t[j]|` over a warping path from `(1, 1)` to `(n, m)` with steps `(1, 0)`,
`(0, 1)`, `(1, 1)` (Sakoe & Chiba); `path` is that path, an Int64 tensor `[k, 2]` of 1-based
`(i, j)` pairs in order (its `k` is known only when the graph runs). Op: `Dtw` (CPU). The
cost is differentiable in `s` and `t` (`DtwGrad`: the signs of `s[i] - t[j]` summed along
the path), so it can be a loss; works inside `map` and `while_loop`. A `NaN` in either series
(a missing value) makes the cost `NaN`; the path is still one from `(1, 1)` to `(n, m)`.

`use_fast` is accepted for ADCME's signature, but the cost is always exact (an O(nm)
table); ADCME's `use_fast=true` runs FastDTW, an approximation whose cost can only be
higher. Errors (`OxiflowError`): a non-vector or non-real series when the op is built;
series whose table would pass 2^27 cells (e.g. two of 12,000 points) when it runs.
"""
function dtw(s, t, use_fast::Bool=false)
    series(x) = x isa Tensor ? x :
        (x isa AbstractVector{<:Real} && !(eltype(x) <: Bool)) ? constant(Float64.(x)) :
        invalid("dtw: a time series must be a real vector or a tensor, got a $(typeof(x))")
    cost = add_op("Dtw", Tensor[series(s), series(t)])
    return cost, output_of(cost, 1) + 1
end
