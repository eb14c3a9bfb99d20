# Runs examples/nn_newton.jl (ADCME's README: a network coefficient fitted through a Newton
# solve to sparse observations of u) and checks the fit, that u_est solves the discrete
# equation with the fitted coefficient (the residual evaluated in plain Julia), and the
# gradient of the loss against a finite difference of the whole solve.
#   julia --project=julia/Oxiflow test/examples/nn_newton.jl
using Test
include(joinpath(@__DIR__, "..", "..", "examples", "nn_newton.jl"))

@testset "NN coefficient through a Newton solve (ADCME's README)" begin
    @test loss0 > 1e-2
    @test run(sess, loss) < 1e-6
    @test u_err < 1e-3                               # u everywhere, from 20 observed values
    # u_est solves -b(u) u'' + u = f with the fitted b, to Newton's tolerance (the README's
    # `b` is the network on the grid x; the equation evaluates it at u)
    U, BU = run(sess, [u_est, squeeze(fc(reshape(u_est, :, 1), [20, 20, 1], θ)) + 1.0])
    uf = [0.0; U; 0.0]
    r = -BU .* (uf[3:end] + uf[1:end-2] - 2uf[2:end-1]) / h^2 + U - f[2:end-1]
    @test norm(r) < 1e-4
    # the gradient through the solve: a central difference along the gradient's direction, at
    # the initial θ (`init` restores it), where the gradient is large; at the fitted θ it is
    # about 1e-6, as small as the difference's error from the solves' tolerance (1e-4)
    init(sess)
    θv, G = run(sess, [θ, gradients(loss, θ)])
    d = G / norm(G)
    lossat(t) = (run(sess, assign(θ, t)); run(sess, loss))
    ε = 1e-4
    fd = (lossat(θv + ε * d) - lossat(θv - ε * d)) / 2ε
    run(sess, assign(θ, θv))
    @test fd ≈ norm(G) rtol = 1e-3
end
