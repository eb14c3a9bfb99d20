# ADCME's README, "function inverse problem, sparse data": the coefficient of the nonlinear
# equation -b(u) u'' + u = f is a network, b(u) = fc(u, [20, 20, 1], θ) + 1, and the solution
# u is not observed everywhere: the equation is solved for u by `newton_raphson_with_grad`
# (a Newton loop whose Jacobian is `gradients(res, x)`), and θ is fitted by BFGS! to 20 of
# the 99 interior values of u = sin(πx), the gradient passing through the solve by the
# implicit function theorem. Written as the README has it (`using Oxiflow` for `using ADCME`,
# `Oxiflow.options` for `ADCME.options`, the plots left out). As the README says, u is
# fitted well but b(u) need not be the true (1 + u²)/(1 + 2u²): the data do not determine it.
#
#   julia --project=julia/Oxiflow examples/nn_newton.jl
#
# test/examples/nn_newton.jl checks the fit, the solve and the gradient.
using LinearAlgebra
using Oxiflow
using Random

Random.seed!(4)                              # fc_init's draw
n = 101
h = 1/(n-1)
x = LinRange(0,1,n)|>collect

u = sin.(π*x)
f = @. (1+u^2)/(1+2u^2) * π^2 * u + u

# we use a Newton Raphson solver to solve the nonlinear PDE problem
function residual_and_jac(θ, x)
    nn = squeeze(fc(reshape(x,:,1), [20,20,1], θ)) + 1.0
    u_full = vector(2:n-1, x, n)
    res = -nn.*(u_full[3:end]+u_full[1:end-2]-2u_full[2:end-1])/h^2 + u_full[2:end-1] - f[2:end-1]
    J = gradients(res, x)
    res, J
end
θ = Variable(fc_init([1,20,20,1]))
Oxiflow.options.newton_raphson.rtol = 1e-4 # relative tolerance
Oxiflow.options.newton_raphson.tol = 1e-4 # absolute tolerance
Oxiflow.options.newton_raphson.verbose = true # print details in newton_raphson
u_est = newton_raphson_with_grad(residual_and_jac, constant(zeros(n-2)),θ)
residual = u_est[1:5:end] - u[2:end-1][1:5:end]
loss = sum(residual^2)

b = squeeze(fc(reshape(x,:,1), [20,20,1], θ)) + 1.0
sess = Session(); init(sess)
loss0 = run(sess, loss)
BFGS!(sess, loss)

u_err = maximum(abs.(run(sess, u_est) - u[2:end-1]))
println("loss ", loss0, " -> ", run(sess, loss), "; max |u_est - sin(πx)| on the interior: ", u_err)
