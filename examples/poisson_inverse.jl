# ADCME's README inverse problem: recover the coefficient b of -b u'' + u = f on [0, 1]
# (u(0) = u(1) = 0, finite differences on n = 101 nodes) from one observation u = 1.
# Written as ADCME's README has it. The true b is 1, but the README's `u[div(n+1,2)]` is the
# node x = 0.51 (the interior nodes start at 0.01), so the discrete answer is b = 0.99956;
# observing `u[50]` (x = 0.5) gives b = 1 (test/examples/poisson.jl checks both).
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
ue = u[div(n + 1, 2)] # extract values at x=0.5

loss = (ue - 1.0)^2

# Optimization
sess = Session(); init(sess)
BFGS!(sess, loss)

b_est = run(sess, b)
println("Estimated b = ", b_est)
