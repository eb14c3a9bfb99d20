# A 2-D Poisson problem -∇·(κ ∇u) = f on the unit square, u = 0 on the boundary, solved by
# linear finite elements (P1 triangles) on a 101 x 101 grid of cells: 100 x 100 = 10,000
# unknowns. The stiffness matrix is assembled as a `SparseTensor` from COO triplets whose
# values depend on the coefficient field κ(x, y) > 0, and the unknown field is recovered by
# `BFGS!` from observations of u at every node, through the gradient of the sparse solve.
#
# The field is κ = exp(s(x, y)), with s bilinear on a 3 x 3 grid of control values θ (nine
# unknowns), so the problem is well posed with noise-free data.
#
#   julia --project=julia/Oxiflow examples/poisson_fem.jl
#
# test/examples/poisson_fem.jl checks the assembly and the solve against the same finite
# elements assembled with SparseArrays and solved by Julia's `\`, the gradient against
# finite differences of that Julia solve, and the recovered θ against the true one.
using Oxiflow
using LinearAlgebra, SparseArrays

N = 101                          # cells per side; nodes 0..N, interior 1..N-1
h = 1 / N
nodes = [(i * h, j * h) for j in 0:N for i in 0:N]                  # node (i, j) at i + (N+1) j + 1
interior(i, j) = 0 < i < N && 0 < j < N
unknown(i, j) = interior(i, j) ? (i - 1) + (N - 1) * (j - 1) + 1 : 0   # 1-based unknown number
nu = (N - 1)^2

# two triangles per cell, as (i, j) corner triples
triangles = NTuple{3,Tuple{Int,Int}}[]
for j in 0:N-1, i in 0:N-1
    push!(triangles, ((i, j), (i + 1, j), (i, j + 1)))
    push!(triangles, ((i + 1, j + 1), (i, j + 1), (i + 1, j)))
end

"""The P1 stiffness matrix of a triangle with unit coefficient, `∫ ∇φa · ∇φb`."""
function local_stiffness(t)
    P = [1.0 t[1][1]*h t[1][2]*h; 1.0 t[2][1]*h t[2][2]*h; 1.0 t[3][1]*h t[3][2]*h]
    G = inv(P)[2:3, :]                        # gradients of the three hat functions
    return abs(det(P)) / 2 * (G' * G)
end

# COO triplets of the interior-interior couplings: row, column, element, unit-κ value
ii, jj, elem, kval = Int[], Int[], Int[], Float64[]
F = zeros(nu)                                  # load vector for f = 10
for (e, t) in enumerate(triangles)
    K = local_stiffness(t)
    area = h^2 / 2
    for a in 1:3
        ra = unknown(t[a]...)
        ra == 0 && continue
        F[ra] += 10 * area / 3
        for b in 1:3
            cb = unknown(t[b]...)
            cb == 0 && continue
            push!(ii, ra); push!(jj, cb); push!(elem, e); push!(kval, K[a, b])
        end
    end
end

# the bilinear interpolation of 3 x 3 control values at each triangle's centroid
function hat(x, k)                             # piecewise-linear hat of control point k ∈ 0:2
    c = k / 2
    return max(0.0, 1 - abs(x - c) * 2)
end
centroid(t) = (sum(p[1] for p in t) * h / 3, sum(p[2] for p in t) * h / 3)
# Φ[e, k]: the weight of control value k (kx = (k-1) % 3 along x, ky = (k-1) ÷ 3 along y)
Φ = [hat(centroid(t)[1], (k - 1) % 3) * hat(centroid(t)[2], (k - 1) ÷ 3) for t in triangles, k in 1:9]

"""The FEM solution for control values θ (a tensor of 9): assembly, then a sparse solve."""
function fem_solve(θ)
    κ = exp(Φ * θ)                                       # one κ per triangle
    vv = κ[elem] .* kval                                  # values of the COO triplets
    A = SparseTensor(ii, jj, vv, nu, nu)                  # repeats add up
    return A \ F
end

"""The same finite elements with SparseArrays: the oracle."""
function fem_solve_julia(θ)
    κ = exp.(Φ * θ)
    A = sparse(ii, jj, κ[elem] .* kval, nu, nu)
    return A \ F
end

θ_true = [0.2, -0.1, 0.3, 0.0, 0.4, -0.2, 0.1, 0.25, -0.3]
u_obs = fem_solve_julia(θ_true)

θ = Variable(zeros(9))
u = fem_solve(θ)
loss = 1e4 * sum((u - u_obs)^2)

sess = Session(); init(sess)
BFGS!(sess, loss)
θ_est = run(sess, θ)
println("max |θ_est - θ_true| = ", maximum(abs.(θ_est - θ_true)))
