# A 1-D heat equation u_t = κ u_xx on [0, 1], u = 0 at both ends, stepped in time by
# `while_loop` (forward Euler, finite differences on n interior nodes), its solution kept in a
# `TensorArray`; the unknown diffusivity κ is recovered from observations of u at three nodes
# over time by `BFGS!`, through the gradient of the whole loop.
#
#   julia --project=julia/Oxiflow examples/heat_inverse.jl
#
# test/examples/heat.jl checks the forward solve against the same scheme in plain Julia
# (to 1e-6) and the recovered κ against the true one.
using Oxiflow
using LinearAlgebra

n = 40                      # interior nodes
h = 1 / (n + 1)
xs = h .* (1:n)
dt = 2e-4                   # r = κ dt / h² = 0.336 κ: stable for κ < 1.48
NT = 250                    # time steps
κ_true = 1.3
obs = [8, 20, 33]           # observed nodes

# the second-difference matrix (u_{i-1} - 2u_i + u_{i+1}) / h²
L = diagm(0 => -2 * ones(n), -1 => ones(n - 1), 1 => ones(n - 1)) / h^2
u0 = @. sin(π * xs) + 0.5 * sin(3π * xs)

"""The solution at every step (NT + 1 rows of n values) for diffusivity `κ` (a tensor)."""
function heat_solve(κ)
    ta = write(TensorArray(NT + 1), 1, constant(u0))
    step(k, ta) = begin
        u = read(ta, k - 1)
        (k + 1, write(ta, k, u + dt * κ * (L * u)))
    end
    _, ta = while_loop((k, ta) -> k <= NT + 1, step, [constant(2), ta])
    return stack(ta)
end

"""The same scheme in plain Julia: the oracle of the forward solve."""
function heat_solve_julia(κ)
    U = zeros(NT + 1, n); U[1, :] = u0
    for k in 2:NT+1
        U[k, :] = U[k-1, :] + dt * κ * (L * U[k-1, :])
    end
    return U
end

U_obs = heat_solve_julia(κ_true)[:, obs]   # the observations (noise-free)

κ = Variable(0.5)                            # the unknown, with a poor first guess
U = heat_solve(κ)
loss = sum((U[:, obs] - U_obs)^2)

sess = Session(); init(sess)
BFGS!(sess, loss)
κ_est = run(sess, κ)
println("Estimated κ = ", κ_est, " (true ", κ_true, ")")
