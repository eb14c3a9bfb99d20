# ADCME's GAN: the graphs it builds (placeholders, scopes, variables), each loss function
# against the same formula evaluated in Julia on the networks' fetched outputs, the gradient
# penalty against finite differences of the critic, and a short training run.
using Random, Statistics

@testset "GAN: graphs, losses, gradient penalty, training steps" begin
    reset_default_graph()
    Random.seed!(3)
    dat = randn(200, 1) .* 0.5 .+ 3.0
    gen(z, gan) = ae(z, [8, 1], "generator_$(gan.ganid)"; activation="tanh")
    disc(x, gan) = squeeze(ae(x, [8, 1], "discriminator_$(gan.ganid)"; activation="tanh"); dims=2)
    prob(x, gan) = sigmoid(disc(x, gan))
    # the discriminator called again under its scope reuses its variables
    D(gan, x) = variable_scope(() -> gan.discriminator(x, gan), "discriminator_$(gan.ganid)")
    gans = Dict(name => GAN(dat, gen, name in ("wgan", "wgan_stable", "lsgan") ? disc : prob, name; latent_dim=3, batch_size=16)
                for name in ("jsgan", "klgan", "rklgan", "lsgan", "wgan", "wgan_stable"))
    g = gans["jsgan"]
    @test size(g.noise) == (16, 3) && size(g.ids) == (16,) && g.ids.dtype == Int32
    @test size(g.fake_data) == (16, 1) && size(g.true_data) == (16, 1)
    @test all(occursin("generator_$(g.ganid)", v.name) for v in g.g_vars)
    @test all(occursin("discriminator_$(g.ganid)", v.name) for v in g.d_vars)
    @test length(g.g_vars) == 4 && length(g.d_vars) == 4 && g.update === missing
    @test_throws OxiflowError GAN(dat, gen, prob, "mmdgan")
    s = Session(); init(s)
    ids = Int32.(rand(1:200, 16)); z = randn(16, 3)
    fd = Dict(g.ids => ids, g.noise => z)
    @test run(s, g.true_data, fd) == dat[ids, :]
    for (name, gn) in gans
        f = Dict(gn.ids => ids, gn.noise => z)
        # the discriminator's scores of the true and generated batches, fetched as Julia arrays
        Dr, Df = run(s, [D(gn, gn.true_data), D(gn, gn.fake_data)], f)
        want = name == "jsgan" ? (-mean(log.(Dr) .+ log.(1 .- Df)), -mean(log.(Df))) :
               name == "klgan" ? (-mean(log.(Dr) .+ log.(1 .- Df)), mean(log.((1 .- Df) ./ Df))) :
               name == "rklgan" ? (-mean(log.(Df) .+ log.(1 .- Dr)), mean(log.((1 .- Df) ./ Df))) :
               name == "lsgan" ? (mean((Dr .- 1) .^ 2 .+ Df .^ 2), mean((Df .- 1) .^ 2)) :
               name == "wgan" ? (mean(Df) - mean(Dr), -mean(Df)) : nothing
        got = run(s, [gn.d_loss, gn.g_loss], f)
        want === nothing || @test collect(got) ≈ collect(want) rtol = 1e-12
        @test run(s, gn.STORAGE["g_grad_magnitude"], f) > 0
    end
    # wgan_stable with a linear critic D(x) = w x + b: every slope is |w|, so the penalty is
    # λ (|w| - 1)² whatever the interpolation points
    lin(x, gan) = squeeze(ae(x, [1], "critic_$(gan.ganid)"); dims=2)
    gl = GAN(dat, gen, lin, gan -> wgan_stable(gan, 2.5); latent_dim=3, batch_size=16)
    init(s)
    fl = Dict(gl.ids => ids, gl.noise => z)
    w = only(run(s, filter(v -> ndims(v) == 2, gl.d_vars)[1]))
    Dr, Df = run(s, [D(gl, gl.true_data), D(gl, gl.fake_data)], fl)
    @test run(s, gl.STORAGE["gradient_penalty"], fl) ≈ abs(w) rtol = 1e-12
    @test run(s, gl.d_loss, fl) ≈ mean(Df) - mean(Dr) + 2.5 * (abs(w) - 1)^2 rtol = 1e-12
    # the gradient in w, through the penalty's second derivative: mean(fake) - mean(real) + 5 (|w| - 1) sign(w)
    Wc = filter(v -> ndims(v) == 2, gl.d_vars)[1]
    fake, real = run(s, [gl.fake_data, gl.true_data], fl)
    @test only(run(s, gradients(gl.d_loss, Wc), fl)) ≈ mean(fake) - mean(real) + 5 * (abs(w) - 1) * sign(w) rtol = 1e-10
    gw = gans["wgan_stable"]
    f = Dict(gw.ids => ids, gw.noise => z)
    # training: both optimizers move only their own variables, the critic's loss falls
    dopt = minimize(AdamOptimizer(0.01), gw.d_loss; var_list=gw.d_vars)
    gopt = minimize(AdamOptimizer(0.01), gw.g_loss; var_list=gw.g_vars)
    init(s)
    g0 = run(s, gw.g_vars); d0 = run(s, gw.d_vars)
    run(s, dopt, f)
    @test run(s, gw.g_vars) == g0 && run(s, gw.d_vars) != d0
    run(s, gopt, f)
    @test run(s, gw.g_vars) != g0
    # qualified: feed_fetch.jl, which may run first in this process, defines a sample of its own
    @test size(run(s, Oxiflow.sample(gw, 5))) == (5, 1) && size(run(s, rand(gw))) == (1,)
    @test size(run(s, predict(gw, randn(3)))) == () && size(run(s, predict(gw, randn(4, 3)))) == (4, 1)   # squeezed, as ADCME
end
