# ADCME's README inverse problem: recover the coefficient b of -b u'' + u = f on [0, 1]
# (u(0) = u(1) = 0, finite differences on n = 101 nodes) from one observation u = 1.
# Written as ADCME's README has it, with one fix: the README observes `u[div(n+1,2)]`, meant
# as x = 0.5, but the interior nodes start at x = 0.01, so that is node x = 0.51 and BFGS!
# would find b = 0.99956. We observe the node at x = 0.5 (`u[50]`), as the README meant, and
# recover the true b = 1 (test/examples/poisson.jl checks it to 1e-6).
#
#   julia --project=julia/Oxiflow examples/poisson_inverse.jl
#
# Needs `\` (a linear solve), `A + I` and scalar indexing `u[k]` on tensors, which other
# parts of the dense API provide; test/examples/poisson.jl checks the result.
using Oxiflow
using LinearAlgebra

n = 101 # number of grid nodes in [0,1]
h = 1 / (n - 1)
x = LinRange(0, 1, n)[2:end-1]

b = Variable(10.0) # we use Variable keyword to mark the unknowns
A = diagm(0 => 2 / h^2 * ones(n - 2), -1 => -1 / h^2 * ones(n - 3), 1 => -1 / h^2 * ones(n - 3))
B = b * A + I  # I stands for the identity matrix
f = @. 4 * (2 + x - x^2)
u = B \ f # solve the equation using built-in linear solver
k = div(n + 1, 2) - 1 # the node at x = 0.5 (ADCME's README writes div(n+1,2): x = 0.51)
@assert x[k] == 0.5
ue = u[k] # extract values at x=0.5

loss = (ue - 1.0)^2

# Optimization
sess = Session(); init(sess)
BFGS!(sess, loss)

b_est = run(sess, b)
println("Estimated b = ", b_est)
