# ADCME's PCL helpers (second-order physics constrained learning). Oracles: Hessians of the
# same losses by central second differences of plain Julia functions, and for pcl_compress
# the engine's own `compress` (u = Jᵀ v must be the merged values).
using SparseArrays

# The Hessian of a scalar f at x by central second differences.
function fd_hessian(f, x; h=1e-4)
    n = length(x)
    e(i) = h * ((1:n) .== i)
    return [(f(x + e(l) + e(r)) - f(x + e(l) - e(r)) - f(x - e(l) + e(r)) + f(x - e(l) - e(r))) / (4h^2) for l in 1:n, r in 1:n]
end

@testset "pcl_square_sum, pcl_linear_op: against second differences" begin
    uo = [0.3, -1.0, 2.0]
    @test pcl_square_sum(3; scaling=0.7) ≈ fd_hessian(u -> 0.7 * sum((u - uo) .^ 2), [1.0, 0.5, -0.2]) rtol = 1e-6
    @test pcl_square_sum(2) == [2.0 0.0; 0.0 2.0]
    # y = Jᵀx + b, loss sum(y⁴)/4: W = diag(3y²), and the Hessian in x is J W Jᵀ
    J = [1.0 -2.0 0.5; 0.3 1.0 -1.0]; b = [0.1, 0.2, -0.3]; x0 = [0.4, -0.7]
    y0 = J' * x0 + b
    @test pcl_linear_op(J, Diagonal(3 .* y0 .^ 2)) ≈ fd_hessian(x -> sum((J' * x + b) .^ 4) / 4, x0) rtol = 1e-5
    @test_throws DimensionMismatch pcl_linear_op(J, zeros(2, 2))
end

@testset "pcl_sparse_solve: the Hessian of a loss of A⁻¹f in A's nonzeros" begin
    # a 3x3 matrix with a repeated position (entries 1 and 6 both add to A[1, 1]), unsorted
    indices = [1 1; 2 2; 3 3; 1 2; 3 1; 1 1; 2 3]
    vals = [2.0, 3.0, 4.0, 0.5, -0.7, 1.5, 0.8]
    f = [1.0, -2.0, 0.5]; uo = [0.2, 0.1, -0.4]
    usol(v) = Matrix(sparse(indices[:, 1], indices[:, 2], v, 3, 3)) \ f
    u = usol(vals)
    # a quadratic loss: W = 2 I, grad = 2(u - uo)
    Hq = pcl_sparse_solve(indices, vals, u, pcl_square_sum(3), 2 .* (u - uo))
    @test Hq ≈ fd_hessian(v -> sum((usol(v) - uo) .^ 2), vals) rtol = 1e-5 atol = 1e-7
    # a quartic loss, whose W is not a multiple of I
    Hc = pcl_sparse_solve(indices, vals, u, Matrix(Diagonal(3 .* u .^ 2)), u .^ 3)
    @test Hc ≈ fd_hessian(v -> sum(usol(v) .^ 4) / 4, vals) rtol = 1e-5 atol = 1e-7
    @test Hc ≈ Hc' rtol = 1e-12
    @test_throws DimensionMismatch pcl_sparse_solve(indices[1:3, :], vals, u, pcl_square_sum(3), u)
    @test_throws DimensionMismatch pcl_sparse_solve(indices, vals, u, pcl_square_sum(2), u)
    @test_throws DimensionMismatch pcl_sparse_solve([1 1; 4 4], [1.0, 1.0], u, pcl_square_sum(3), u)
end

@testset "pcl_compress: the Jacobian of compress" begin
    reset_default_graph()
    ii = [3, 1, 2, 1, 3, 1, 2]; jj = [2, 1, 2, 1, 2, 3, 1]
    J = pcl_compress([ii jj])
    @test size(J) == (7, 5)                       # five distinct positions
    @test all(sum(J; dims=2) .== 1)
    v = [0.5, 1.0, -2.0, 3.0, 0.25, 4.0, -1.5]
    A = compress(SparseTensor(ii, jj, constant(v), 3, 3))
    s = Session()
    idx, vals = run(s, [A.indices, A.values])
    @test vals ≈ J' * v rtol = 1e-14
    @test [(idx[k, 1] + 1, idx[k, 2] + 1) for k in 1:size(idx, 1)] == [(1, 1), (1, 3), (2, 1), (2, 2), (3, 2)]
    @test_throws DimensionMismatch pcl_compress([1 2 3])
end

@testset "pcl_hessian: Jᵀ W J plus the operator's own curvature" begin
    reset_default_graph()
    M = [1.0 -0.5; 0.3 2.0; -1.0 0.7]; N = [0.2 1.0; -0.4 0.6; 1.1 0.3]
    yj(x) = sin.(M * x) .* (N * x)
    Lj(y) = sum(y .^ 3) / 3 + sum(y)
    x = placeholder(Float64; shape=[2])
    y = sin(constant(M) * x) .* (constant(N) * x)
    loss = sum(y .^ 3) / 3 + sum(y)
    H, W = pcl_hessian(y, x, loss)
    @test size(H) == (2, 2) && size(W) == (3, 3)
    x0 = [0.6, -0.8]
    W0 = Matrix(Diagonal(2 .* yj(x0)))            # ∂²L/∂y² of the loss above
    s = Session()
    @test run(s, H, Dict(x => x0, W => W0)) ≈ fd_hessian(z -> Lj(yj(z)), x0) rtol = 1e-5
    # with W = 0 only the curvature of y = F(x) weighted by dy remains
    @test run(s, H, Dict(x => x0, W => zeros(3, 3))) ≈ fd_hessian(z -> dot(1 .+ yj(x0) .^ 2, yj(z)), x0) rtol = 1e-5
    @test_throws OxiflowError pcl_hessian(reshape(y, 3, 1), x, loss)
    @test_throws OxiflowError pcl_hessian(y, x, sum(constant(1.0) * x))
    @test_throws OxiflowError pcl_hessian(constant([1.0, 2.0]) * 2.0, x, loss)
end
