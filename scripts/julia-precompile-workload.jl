# The common path of an Oxiflow program, run under `julia --trace-compile` by
# scripts/julia-precompile-list.jl to find the methods worth precompiling: graph building
# with Base operators, gradients, sessions with feeds and fetches, variables and optimizers,
# devices and profiles. Kept small on purpose: every statement it yields adds to the package
# image that each `using Oxiflow` loads.
using Oxiflow, LinearAlgebra
use_emulated_gpus(1)
for T in (Float64, Float32)
    reset_default_graph()
    W = Variable(rand(T, 3, 2))
    b = Variable(zeros(T, 2))
    x = placeholder(T; shape=[4, 3])
    h = tanh(x * W .+ b)
    y = sigmoid(relu(h) .- exp(h) ./ 2 + log(abs(h) + one(T)) .* sqrt(h .^ 2 .+ one(T)))
    loss = sum(y .^ 2) + mean(h) * T(0.5) - sum(h; dims=1)[1]
    g = gradients(loss, [W, b])
    s = Session(); init(s)
    run(s, loss, x => rand(T, 4, 3))
    run(s, [loss, g[1]], Dict(x => rand(T, 4, 3)))
    for opt in (GradientDescentOptimizer(0.1), AdamOptimizer(0.01), MomentumOptimizer(0.1, 0.9))
        step = minimize(opt, loss)
        init(s)
        run(s, step, x => rand(T, 4, 3))
    end
    c = constant(rand(T, 3, 3))
    d = @gpu c * c'
    run(s, [d, transpose(c), c[1, :], reshape(c, 9), sin(c) + cos(c)])
    run_profile(s, d)
end
