# Elementwise fusion as a user sees it: values and gradients of fused CPU steps against
# Julia Base and hand-derived derivatives, the same values with fusion off, and profiles
# that name the ops a fused step replaced.

isdefined(@__MODULE__, :timeline_ops) || include("profile_helpers.jl")   # once per process (profile.jl uses it too)

@testset "fused elementwise steps: values, gradients, profiles" begin
    # a 200-op Sin/Cos chain on a scalar and its derivative (product of the local ones)
    reset_default_graph()
    x = placeholder(Float64; shape=Int[])
    y = x
    for i in 1:200
        y = isodd(i) ? sin(y) : cos(y)
    end
    dy = gradients(y, x)
    function chain(x0)
        v, d = x0, 1.0
        for i in 1:200
            d *= isodd(i) ? cos(v) : -sin(v)
            v = isodd(i) ? sin(v) : cos(v)
        end
        return v, d
    end
    on, off = Session(emulated_gpus=0), Session(emulated_gpus=0, fusion=false)   # CPU only
    for x0 in (0.5, -1.3, 2.0)
        v, d = chain(x0)
        got = run(on, [y, dy], x => x0)
        @test got[1] ≈ v rtol = 1e-13
        @test got[2] ≈ d rtol = 1e-10
        @test got == run(off, [y, dy], x => x0)           # the same bits either way
    end

    # a tensor expression with a broadcast scalar, intermediate fetches, Float32
    reset_default_graph()
    X = Float32[0.1 -0.7 1.3; 2.0 -0.2 0.45]
    a = placeholder(Float32; shape=[2, 3]); s = placeholder(Float32; shape=Int[])
    t = tanh(a) * s
    u = exp(t) - a
    w = sigmoid(u) + t .* t
    jl_t = tanh.(X) .* 0.8f0
    jl_u = exp.(jl_t) .- X
    jl_w = 1 ./ (1 .+ exp.(-jl_u)) .+ jl_t .* jl_t
    on, off = Session(emulated_gpus=0), Session(emulated_gpus=0, fusion=false)   # CPU only
    got = run(on, [w, t], a => X, s => 0.8f0)
    @test eltype(got[1]) == Float32
    @test got[1] ≈ jl_w rtol = 1f-5
    @test got[2] ≈ jl_t rtol = 1f-6
    @test got == run(off, [w, t], a => X, s => 0.8f0)

    # the profile shows one fused CPU step naming what it replaced; with fusion off, the ops
    run_profile(on, w, a => X, s => 0.8f0)
    path = tempname() * ".json"
    save_profile(path)
    xs, dev = timeline_ops(path)
    fused = [e for e in xs if e["args"]["op"] == "_FusedElementwise"]
    @test length(fused) == 1 && dev(fused[1]) == CPU0
    names = [String(split(m, " (")[1]) for m in fused[1]["args"]["fused_ops"]]
    @test "Tanh" in names && "Sigmoid" in names && length(names) == 7
    run_profile(off, w, a => X, s => 0.8f0)
    save_profile(path)
    xs, _ = timeline_ops(path)
    @test !any(e -> e["args"]["op"] == "_FusedElementwise", xs)
    @test count(e -> e["args"]["op"] in ("Tanh", "Sigmoid", "Exp"), xs) == 3

    # ops on a GPU are never fused (the fused op has no GPU kernel)
    reset_default_graph()
    b = placeholder(Float64; shape=[4])
    local v
    @pywith tf.device("/GPU:0") begin
        v = cos(sin(b)) * 2.0
    end
    sg = Session(); run_profile(sg, v, b => [0.1, 0.2, 0.3, 0.4])
    save_profile(path)
    xs, dev = timeline_ops(path)
    @test !any(e -> e["args"]["op"] == "_FusedElementwise", xs)
    @test run(sg, v, b => [0.1, 0.2, 0.3, 0.4]) ≈ cos.(sin.([0.1, 0.2, 0.3, 0.4])) .* 2
end
