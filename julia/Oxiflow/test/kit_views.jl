# ADCME's landscape and gradient views (lineview, meshview, pcolormeshview, gradview, jacview,
# PCLview), the inverse-modeling recipe's checks: the losses they return against the loss
# computed in Julia at the same points, and the orders of their errors (2 for a right
# derivative, 1 for a wrong one). Their PyPlot drawing is checked last, against a stand-in
# PyPlot module that records the calls.

using Random

# the recipe's model, θ[3] σ(θ[1] x + θ[2]) + θ[4] at 10 points, in Julia
recipe_f(θ, x) = θ[3] .* (1 ./ (1 .+ exp.(-(θ[1] .* x .+ θ[2])))) .+ θ[4]

# f's value and what it printed to stdout
function with_stdout(f)
    path = tempname()
    v = open(path, "w") do io
        redirect_stdout(f, io)
    end
    return v, read(path, String)
end

# the observed orders log10(e[i] / e[i+1]) of the steps before rounding sets in
orders(e) = [log10(e[i] / e[i+1]) for i in 1:3]

@testset "lineview and meshview: the loss along a segment and over a plane" begin
    reset_default_graph()
    x = collect(LinRange(0.0, 1.0, 10))
    f0 = recipe_f([1.0, 2.0, 3.0, 4.0], x)
    θ = placeholder([1.0; 2.0; 3.0; 4.0])
    loss = sum((θ[3] * sigmoid(θ[1] * x + θ[2]) + θ[4] - f0)^2)
    julia_loss(t) = sum((recipe_f(t, x) .- f0) .^ 2)
    sess = Session(); init(sess)
    V_line, out = with_stdout(() -> lineview(sess, θ, loss, [1.0, 2.0, 3.0, 4.0], zeros(4); n=7))
    @test V_line ≈ [julia_loss((1 - a) .* [1.0, 2.0, 3.0, 4.0]) for a in LinRange(0, 1, 7)] rtol = 1e-12
    @test V_line[1] == 0 && issorted(V_line)                   # the segment leaves the minimum
    @test occursin("α = 0.5000  loss = ", out) && occursin("α = 1.0000", out)
    # linedata: the segment's points; without an end, a random one (Julia's global RNG)
    @test linedata([1.0, 2.0], [3.0, 6.0]; n=3) == [[1.0, 2.0], [2.0, 4.0], [3.0, 6.0]]
    Random.seed!(7); d1 = linedata([1.0, 2.0]; n=4)
    Random.seed!(7); @test linedata([1.0, 2.0]; n=4) == d1 && d1[1] == [1.0, 2.0]
    # meshview: θ at the center, α along δ, β along γ; the same draws give the same plane
    Random.seed!(11); dat = meshdata([1.0, 2.0, 3.0, 4.0]; a=0.5, b=0.2, m=5, n=3)
    Random.seed!(11)
    α, β, L = with_stdout(() -> meshview(sess, θ, loss, [1.0, 2.0, 3.0, 4.0]; a=0.5, b=0.2, m=5, n=3))[1]
    @test size(L) == (5, 3)
    @test L ≈ julia_loss.(dat) rtol = 1e-12
    @test α[:, 1] ≈ LinRange(-0.5, 0.5, 5) && all(α[:, 1] .== α[:, 3])
    @test β[1, :] ≈ LinRange(-0.2, 0.2, 3) && all(β[1, :] .== β[5, :])
    @test L[3, 2] == 0 && dat[3, 2] == [1.0, 2.0, 3.0, 4.0]
    Random.seed!(11)
    _, _, L2 = with_stdout(() -> pcolormeshview(sess, θ, loss, [1.0, 2.0, 3.0, 4.0]; a=0.5, b=0.2, m=5, n=3))[1]
    @test L2 == L
    # direction: α = 1 reaches it, and γ has δ's length
    d = meshdata([1.0, 1.0]; direction=[4.0, 5.0], m=3, n=3)
    @test d[3, 2] ≈ [4.0, 5.0] && d[2, 2] == [1.0, 1.0] && norm(d[2, 3] - d[2, 2]) ≈ 5
    # a loss that is not a scalar, and bad sizes, are errors naming the function
    e = try lineview(sess, θ, θ * 2, zeros(4), ones(4)); nothing catch err; err end
    @test e isa OxiflowError && occursin("lineview: the loss must be a scalar", e.msg)
    @test_throws OxiflowError linedata(zeros(2), zeros(3))
    @test_throws OxiflowError meshdata(zeros(2); direction=zeros(3))
    @test run(sess, loss, θ => [1.0, 2.0, 3.0, 4.0]) == 0          # the session is still usable
end

@testset "gradview: a graph's gradient against finite differences" begin
    reset_default_graph()
    Random.seed!(3)
    x = collect(LinRange(0.0, 1.0, 10))
    f0 = recipe_f([1.0, 2.0, 3.0, 4.0], x)
    θ = placeholder([1.0; 2.0; 3.0; 4.0])
    loss = sum((θ[3] * sigmoid(θ[1] * x + θ[2]) + θ[4] - f0)^2)
    sess = Session(); init(sess)
    (e1, e2), out = with_stdout(() -> gradview(sess, θ, loss, zeros(4)))
    @test all(abs.(orders(e1) .- 1) .< 0.1) && all(abs.(orders(e2[2:end]) .- 2) .< 0.1)
    @test occursin("gradview: γ = [0.1, 0.01", out) && occursin("Automatic differentiation: ", out)
    # a wrong gradient (10 % too large) falls as γ only
    g = gradients(loss, θ)
    _, bad = with_stdout(() -> gradview(sess, θ, loss, zeros(4), 1.1 * g))[1]
    @test all(abs.(orders(bad[2:end]) .- 1) .< 0.1)
    # the sensitivity analysis of the recipe: a scalar placeholder with a default, `scale`
    reset_default_graph()
    ε = placeholder(1.0)
    θc = constant([1.0; 2.0; 3.0; 4.0])
    loss = sum((θc[3] * sigmoid(θc[1] * x + θc[2] + ε) + θc[4] - f0)^2)
    sess = Session(); init(sess)
    e1, e2 = with_stdout(() -> gradview(sess, ε, loss, 0.01; scale=0.1))[1]
    @test e1[1] > 0 && all(abs.(orders(e2[2:end]) .- 2) .< 0.1)
    # a loss that does not depend on the placeholder
    p = placeholder(Float64; shape=[2])
    e = try gradview(sess, p, loss, zeros(2)); nothing catch err; err end
    @test e isa OxiflowError && occursin("gradview: loss does not depend on the placeholder", e.msg)
end

@testset "jacview and PCLview: Jacobians and physics-constrained gradients" begin
    reset_default_graph()
    Random.seed!(5)
    sess = Session()
    u0 = rand(10)
    # ADCME's examples: a sparse Jacobian, and stacked ones
    f1(θ, u) = (u^3 + u - u0, spdiag(3u^2 + 1.0))
    _, e2 = with_stdout(() -> jacview(sess, f1, missing, u0))[1]
    @test all(abs.(orders(e2) .- 2) .< 0.1)
    rs = rand(10)
    f2(θ, u) = ([u^2; u] - [rs; rs], [spdiag(2 * u); spdiag(10)])
    _, e2 = with_stdout(() -> jacview(sess, f2, missing, u0))[1]
    @test all(abs.(orders(e2) .- 2) .< 0.1)
    # a dense Jacobian with a parameter and a feed; a wrong one (the 3 of u³'s derivative
    # taken as 2) falls as γ only
    c = placeholder(Float64; shape=[])
    f3(θ, u) = (θ * u^3 + c * u, diagm(3 * θ * u^2 + c))
    _, e2 = with_stdout(() -> jacview(sess, f3, constant(2.0), u0, c => 0.5))[1]
    @test all(abs.(orders(e2) .- 2) .< 0.1)
    f4(θ, u) = (u^3, diagm(2 * u^2))
    _, e2 = with_stdout(() -> jacview(sess, f4, missing, u0))[1]
    @test all(abs.(orders(e2[2:end]) .- 1) .< 0.1)
    e = try jacview(sess, (θ, u) -> (u, ones(3, 3)), missing, u0); nothing catch err; err end
    @test e isa OxiflowError && occursin("jacview:", e.msg)
    # PCLview: min (u - 1)² subject to u³ + u = θ (ADCME's NonlinearConstrainedProblem example)
    fr(θ, u) = (u^3 + u - θ, spdiag(3u^2 + 1))
    Lf(u) = sum((u - 1)^2)
    e1, e2 = with_stdout(() -> PCLview(sess, fr, Lf, [3.0], ones(1)))[1]
    @test all(abs.(orders(e1) .- 1) .< 0.1) && all(abs.(orders(e2) .- 2) .< 0.1)
    @test_throws OxiflowError PCLview(sess, fr, Lf, [3.0], ones(1); options=Dict("max_iter" => 3))
end

# A stand-in for PyPlot: records each call, so the views' drawing path runs without Python.
module PyPlot
const calls = Any[]
rec(name) = (args...; kw...) -> (push!(calls, (name, args, Dict(kw))); nothing)
for f in (:close, :plot, :xlabel, :ylabel, :zlabel, :grid, :mesh, :scatter3D, :pcolormesh,
          :scatter, :colorbar, :loglog, :legend, :savefig)
    @eval const $f = rec($(QuoteNode(f)))
end
const plt = (gca = () -> (invert_xaxis = rec(:invert_xaxis),),)
end

@testset "the views draw with PyPlot when the program has loaded it" begin
    reset_default_graph()
    Random.seed!(9)
    p = placeholder(Float64; shape=[2])
    loss = sum(p^2)
    sess = Session()
    drawn(name) = [c for c in PyPlot.calls if c[1] === name]
    empty!(PyPlot.calls)
    V = lineview(sess, p, loss, [1.0, 0.0], [0.0, 1.0]; n=5)
    @test length(drawn(:plot)) == 1 && drawn(:plot)[1][2] == (collect(LinRange(0, 1, 5)), V)
    empty!(PyPlot.calls)
    α, β, L = meshview(sess, p, loss, [0.0, 0.0]; m=3, n=3)
    @test drawn(:mesh)[1][2] == (α, β, L) && drawn(:scatter3D)[1][2] == (α[2, 2], β[2, 2], L[2, 2])
    empty!(PyPlot.calls)
    α, β, L = pcolormeshview(L)
    @test drawn(:pcolormesh)[1][2] == (α, β, L) && length(drawn(:colorbar)) == 1
    empty!(PyPlot.calls)
    e1, e2 = with_stdout(() -> gradview(sess, p, loss, [1.0, 2.0]))[1]
    @test [c[2][2] for c in drawn(:loglog)][1:2] == [e1, e2] && isempty(drawn(:savefig))
    empty!(PyPlot.calls)
    with_stdout(() -> gradview(sess, p, loss, [1.0, 2.0]; mpi=true))
    @test drawn(:savefig)[1][2] == ("mpi_gradview.png",)
end
