# A linear solve with a hand-written adjoint gradient, through `register` (ADCME's pattern
# for plugging a solver into the graph: its MPI Poisson example registers the solve with a
# backward that does the transposed solve). Here on one process, in 1-D:
#
#   -(κ(x) u')' = f on (0, 1), u(0) = u(1) = 0,
#
# finite volumes on n interior nodes, κ on the n + 1 cell faces, κ(x) = exp(θ₁ + θ₂ x + θ₃ x²)
# with θ the unknowns. The forward is the sparse solve u = A(κ) \ f. The backward gets du = ∂L/∂u and
# returns ∂L/∂κ from one adjoint solve λ = A' \ du (A is symmetric here, so the same
# matrix): ∂L/∂κ_j = -λᵀ (∂A/∂κ_j) u = -(u_j - u_{j-1})(λ_j - λ_{j-1}) / h², with u and λ
# padded by the zero boundary values.
#
# We recover θ from u observed at every node, starting from κ = 1, with BFGS!.
#
#   julia --project=julia/Oxiflow examples/poisson_adjoint.jl
#
# test/examples/poisson_adjoint.jl checks the gradient against the automatic one through
# the sparse solve and against finite differences, and the recovered κ.
using Oxiflow
using LinearAlgebra

n = 49
h = 1 / (n + 1)
xf = collect(range(0, 1; length=n + 2))[1:end-1] .+ h / 2       # the n + 1 cell faces
V = [ones(n + 1) xf xf .^ 2]
θ_true = [0.1, 0.5, -0.8]
κ_true = exp.(V * θ_true)
f = ones(n)

# The stiffness matrix of κ: A[i, i] = (κ_i + κ_{i+1}) / h², A[i, i±1] = -κ_{i+1 or i} / h².
function stiffness(κ)
    ii = [1:n; 1:n-1; 2:n]
    jj = [1:n; 2:n; 1:n-1]
    vals = vcat(κ[1:n] + κ[2:n+1], -κ[2:n], -κ[2:n]) / h^2
    return SparseTensor(ii, jj, vals, n, n)
end

# padded differences: [0; v; 0][j+1] - [0; v; 0][j], j = 1..n+1
pad_diff(v) = [v; constant([0.0])] - [constant([0.0]); v]

solve_with_adjoint = register(
    κ -> stiffness(κ) \ f,
    (du, u, κ) -> begin
        λ = stiffness(κ) \ du
        -pad_diff(u) .* pad_diff(λ) / h^2
    end,
)

θ = Variable(zeros(3))
κ = exp(constant(V) * θ)
u = solve_with_adjoint(κ)

# the observations, from the true κ (plain Julia)
A_true = Tridiagonal(-κ_true[2:n] / h^2, (κ_true[1:n] + κ_true[2:n+1]) / h^2, -κ_true[2:n] / h^2)
u_obs = A_true \ f

loss = sum((u - u_obs)^2) * 1e4
sess = Session(); init(sess)
loss0 = run(sess, loss)
BFGS!(sess, loss)
θ_est = run(sess, θ)
println("loss: ", loss0, " -> ", run(sess, loss))
println("θ = ", θ_est, " (true ", θ_true, ")")
