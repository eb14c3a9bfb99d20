# ADCME's second-order physics constrained learning (PCL) helpers: Hessians of a scalar loss
# propagated backward through a graph one operator at a time. If `y = F(x)` and the loss `L`
# has the gradient `g = ∂L/∂y` and the Hessian `W = ∂²L/∂y²`, then by the chain rule
#     ∂²L/∂x² = Jᵀ W J + Σ_m g_m ∂²y_m/∂x²,        J = ∂y/∂x,
# so each operator maps (W, g) downstream to the Hessian upstream. `pcl_square_sum` starts the
# chain at a least-squares loss, `pcl_linear_op`, `pcl_sparse_solve` and `pcl_compress` are
# the steps of three operators, and `pcl_hessian` builds the step of any graph `y = F(x)`.
# All but `pcl_hessian` are plain Julia on Julia arrays, as in ADCME.

export pcl_square_sum, pcl_linear_op, pcl_sparse_solve, pcl_compress, pcl_hessian

"""
    pcl_square_sum(n; scaling=1.0) -> Matrix{Float64}

ADCME's `pcl_square_sum`: the `n×n` Hessian `2 scaling I` of the loss
`scaling * ‖u - u_obs‖²` with respect to `u` (length `n`), where a PCL chain starts.
"""
pcl_square_sum(n::Integer; scaling::Real=1.0) = Matrix{Float64}(2 * Float64(scaling) * I, n, n)

"""
    pcl_linear_op(J, W) -> Matrix{Float64}

ADCME's `pcl_linear_op`: for a linear operator `y = Jᵀ x + b` (`J` is `length(x)×length(y)`)
and the downstream Hessian `W` (`length(y)×length(y)`), the Hessian with respect to `x`,
`J W Jᵀ` (the operator's second derivatives are zero). A `DimensionMismatch` names the sizes
that do not fit.
"""
function pcl_linear_op(J::AbstractMatrix{<:Real}, W::AbstractMatrix{<:Real})
    size(W) == (size(J, 2), size(J, 2)) ||
        throw(DimensionMismatch("pcl_linear_op: W must be $(size(J, 2))×$(size(J, 2)) for J of size $(size(J)), got $(size(W))"))
    return Matrix{Float64}(J * W * J')
end

"""
    pcl_sparse_solve(indices, vals, u, hessian_u, grad_u) -> Matrix{Float64}

ADCME's `pcl_sparse_solve`: the Hessian step of `u = A⁻¹ f` with respect to the nonzero
values `vals` (length `N`) of the sparse `A`. `indices` is `N×2`, 1-based rows and columns
(repeated positions add, as in `sparse`); `u` (length `n`) is the solution, `hessian_u`
(`n×n`) and `grad_u` (length `n`) the downstream Hessian and gradient with respect to `u`.
With `J[k, :] = ∂u/∂vals[k] = -A⁻¹ e_i u_j` for entry `k` at `(i, j)` and `x = A⁻ᵀ grad_u`,
returns the `N×N` matrix `J hessian_u Jᵀ + H` with `H[l, r] = -(x[i_l] J[r, j_l] + x[i_r]
J[l, j_r])`, the second-derivative term of `A u = f`. Dense algebra (one LU of `A`): meant for
the small systems of ADCME's PCL examples. A singular `A` raises LinearAlgebra's
`SingularException`; sizes that do not fit raise a `DimensionMismatch`.
"""
function pcl_sparse_solve(indices::AbstractMatrix{<:Integer}, vals::AbstractVector{<:Real},
                          u::AbstractVector{<:Real}, hessian_u::AbstractMatrix{<:Real}, grad_u::AbstractVector{<:Real})
    N, n = length(vals), length(u)
    size(indices) == (N, 2) ||
        throw(DimensionMismatch("pcl_sparse_solve: indices must be $(N)×2 for $N values, got $(size(indices))"))
    size(hessian_u) == (n, n) && length(grad_u) == n ||
        throw(DimensionMismatch("pcl_sparse_solve: hessian_u must be $(n)×$(n) and grad_u of length $n for u of length $n, got $(size(hessian_u)) and $(length(grad_u))"))
    all(1 .<= indices .<= n) ||
        throw(DimensionMismatch("pcl_sparse_solve: indices must lie in 1:$n for a $(n)×$(n) matrix"))
    A = Matrix(sparse(indices[:, 1], indices[:, 2], Float64.(vals), n, n))
    F = lu(A)
    Ainv_cols = F \ Matrix{Float64}(I, n, n)          # column i: A⁻¹ e_i
    J = Matrix{Float64}(undef, N, n)
    for k in 1:N
        i, j = indices[k, 1], indices[k, 2]
        J[k, :] .= -u[j] .* Ainv_cols[:, i]
    end
    x = F' \ Float64.(grad_u)
    H = Matrix{Float64}(undef, N, N)
    for r in 1:N, l in 1:N
        H[l, r] = -(x[indices[l, 1]] * J[r, indices[l, 2]] + x[indices[r, 1]] * J[l, indices[r, 2]])
    end
    return J * hessian_u * J' + H
end

"""
    pcl_compress(indices) -> Matrix{Float64}

ADCME's `pcl_compress`: the Jacobian `J[k, m] = ∂u_m/∂v_k` of [`compress`](@ref), which
merges the entries `v` at the `N` positions `indices` (`N×2`, 1-based rows and columns) into
the values `u` at the distinct positions, sorted row-major as `compress` returns them. `J` is
`N × (number of distinct positions)`, with one 1 per row.
"""
function pcl_compress(indices::AbstractMatrix{<:Integer})
    size(indices, 2) == 2 ||
        throw(DimensionMismatch("pcl_compress: indices must have two columns (rows, columns), got size $(size(indices))"))
    keys_ = [(indices[k, 1], indices[k, 2]) for k in 1:size(indices, 1)]
    distinct = sort(unique(keys_))                    # tuples sort by row, then column
    pos = Dict(p => m for (m, p) in enumerate(distinct))
    J = zeros(length(keys_), length(distinct))
    for (k, p) in enumerate(keys_)
        J[k, pos[p]] = 1.0
    end
    return J
end

"""
    pcl_hessian(y, x, loss) -> (H, W)

ADCME's `pcl_hessian`: the PCL step of an arbitrary operator `y = F(x)` (`x`, `y` vector
tensors of known lengths `m`, `n`; `loss` a scalar tensor that depends on `y`). Returns the
`m×m` tensor `H = Jᵀ W J + ∂²(dy ⋅ y)/∂x²`, where `J` is [`jacobian`](@ref)`(y, x)`,
`dy = ∂loss/∂y` with its gradient stopped, and `W` the `n×n` Float64 placeholder it also
returns: feed it the downstream Hessian `∂²loss/∂y²`. `H` is then `∂²loss/∂x²`. An
`OxiflowError` names a non-vector `x` or `y`, a `y` that does not depend on `x` and a `loss`
that does not depend on `y`.
"""
function pcl_hessian(y::Tensor, x::Tensor, loss::Tensor)
    ndims(x) == 1 && ndims(y) == 1 ||
        invalid("pcl_hessian: x and y must be vectors, got sizes $(size(x)) and $(size(y))")
    J = jacobian(y, x)
    J === nothing && invalid("pcl_hessian: jacobian(y, x) is nothing: y does not depend on x")
    n = size(y, 1)
    W = placeholder(Float64; shape=[n, n])
    g = gradients(loss, y)
    g === nothing && invalid("pcl_hessian: loss does not depend on y")
    dy = independent(g)
    H = J' * W * J + hessian(dot(dy, y), x)
    return H, W
end
