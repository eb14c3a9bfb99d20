# A physics-informed neural network (PINN), as ADCME's examples write them: u(x) is a fully
# connected network `fc(x, [20, 20, 20, 1], θ)` trained so that -u'' = π² sin(πx) on (0, 1)
# with u(0) = u(1) = 0, whose solution is sin(πx). u'' comes from `gradients` applied
# twice, so the loss's gradient in θ goes through the third derivative of tanh; BFGS!
# minimizes it.
#
#   julia --project=julia/Oxiflow examples/poisson_pinn.jl
#
# test/examples/poisson_pinn.jl checks the network against sin(πx).
using Oxiflow
using Random

Random.seed!(1)                              # fc_init draws the weights from Julia's RNG
X = collect(range(0, 1; length=100))
x = constant(reshape(X, 100, 1))
θ = Variable(fc_init([1, 20, 20, 20, 1]))
u = fc(x, [20, 20, 20, 1], θ)                # 100×1
uxx = gradients(sum(gradients(sum(u), x)), x)
ub = fc(constant([0.0; 1.0][:, :]), [20, 20, 20, 1], θ)
loss = mean((uxx + π^2 * sin(π * x))^2) + sum(ub^2)

sess = Session(); init(sess)
loss0 = run(sess, loss)
BFGS!(sess, loss)
err = maximum(abs.(vec(run(sess, u)) .- sin.(π .* X)))
println("loss ", loss0, " -> ", run(sess, loss), "; max |u(x) - sin(πx)| on the 100 points: ", err)
