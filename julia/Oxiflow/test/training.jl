# Graph utilities, TF1 optimizers (one step against the closed-form update, Adam on a
# quadratic, TF's node and slot names, colocation) and BFGS! (Rosenbrock, bounds).

@testset "graph utilities" begin
    reset_default_graph()
    v = Variable([1.0, 2.0]; name="w")
    u = Variable(3.0; name="counter", trainable=false)
    @test get_collection(TRAINABLE_VARIABLES) == [v]
    @test get_collection(GLOBAL_VARIABLES) == [v, u]
    @test get_collection("^w") == [v] && get_collection("count") == Tensor[]
    add_to_collection(UPDATE_OPS, u)
    @test get_collection(UPDATE_OPS) == [u]
    # tensor identity, hash, lookup by name
    @test v == v && v != u && (v == u) isa Bool
    @test Dict(v => 1, u => 2)[tensor("w:0")] == 1
    @test tensor("w") == v && hash(tensor("w:0")) == hash(v)
    e = try; tensor("nope:0"); nothing; catch err; err; end
    @test e isa OxiflowError
    # assign, bind, control_dependencies, group
    inc = assign(u, u + 1.0)
    @test inc.op.type == "Assign"
    s = Session(); init(s)
    r = bind(u * 10.0, inc)                 # fetching r runs the increment too
    @test r.op.type == "Identity" && any(i -> i == "^" * inc.op.name, r.op.inputs)
    @test run(s, r) in (30.0, 40.0)         # u*10 itself is not ordered after inc (as in TF)
    @test run(s, u) == 4.0
    local c
    control_dependencies(inc) do
        c = sin(constant(0.0)) + 1.0
    end
    @test any(i -> i == "^" * inc.op.name, c.op.inputs)
    run(s, c); @test run(s, u) == 5.0
    gr = group(inc, assign(v, v * 2.0))
    @test gr.op.type == "NoOp" && gr.op.name == "group_deps"
    @test run(s, gr) === nothing
    @test run(s, u) == 6.0 && run(s, v) == [2.0, 4.0]
    @test_throws OxiflowError assign(sin(v), [1.0, 2.0])
    @test_throws OxiflowError assign(v, [1.0, 2.0, 3.0])
    @test run(s, v) == [2.0, 4.0]           # the failed assigns left the session usable
end

@testset "get_variable and variable_scope" begin
    reset_default_graph()
    local a, b, c
    variable_scope("layer") do
        a = get_variable("W"; initializer=[1.0, 2.0])
        b = get_variable("W"; initializer=[9.0, 9.0])          # AUTO_REUSE (ADCME's default)
        c = sin(a)
    end
    @test a == b && a.name == "layer/W:0" && c.op.name == "layer/Sin"
    e = try; variable_scope(() -> get_variable("W"; initializer=[0.0, 0.0]), "layer"; reuse=false); nothing; catch err; err; end
    @test e isa OxiflowError && occursin("layer/W already exists", e.msg)
    e = try; variable_scope(() -> get_variable("V"; shape=[2]), "layer"; reuse=true); nothing; catch err; err; end
    @test e isa OxiflowError && occursin("layer/V does not exist", e.msg)
    d = variable_scope(() -> get_variable("b"; shape=[3, 2], dtype=Float32), "layer")
    @test d.name == "layer/b:0" && d.dtype == Float32 && size(d) == (3, 2)
    @test get_variable([1.0]; name="x", scope="s") == get_variable([5.0]; name="x", scope="s")
    @test startswith(get_variable(1.0).name, "unnamed_")
    @test get_variable(Float64; shape=[4], name="z").name == "z:0"
    s = Session(); init(s)
    @test run(s, a) == [1.0, 2.0]
    W = run(s, d)
    @test all(abs.(W) .<= sqrt(6 / 5)) && length(unique(W)) == 6   # Glorot uniform, fan 3 + 2
end


@testset "optimizers: one step = the closed-form update" begin
    x0 = [1.0, -2.0]; g0 = gradq(x0)
    vals, op, _, _ = step_values(() -> GradientDescentOptimizer(0.1), 2)
    @test op.op.name == "GradientDescent"
    @test vals[2] ≈ x0 - 0.1 * g0
    @test vals[3] ≈ vals[2] - 0.1 * gradq(vals[2])
    @test tensor("GradientDescent/update_Variable/ApplyGradientDescent").op.type == "ApplyGradientDescent"

    vals, op, _, _ = step_values(() -> MomentumOptimizer(0.1, 0.9), 2)
    a1 = g0; x1 = x0 - 0.1 * a1
    a2 = 0.9 * a1 + gradq(x1); x2 = x1 - 0.1 * a2
    @test vals[2] ≈ x1 && vals[3] ≈ x2
    @test tensor("Variable/Momentum").op.type == "VariableV2"

    vals, op, s, x = step_values(() -> AdamOptimizer(0.01; beta1=0.8, beta2=0.99, epsilon=1e-7), 2)
    m = 0.2 * g0; v = 0.01 * g0 .^ 2
    x1 = x0 - 0.01 * sqrt(1 - 0.99) / (1 - 0.8) * m ./ (sqrt.(v) .+ 1e-7)
    g1 = gradq(x1); m2 = 0.8 * m + 0.2 * g1; v2 = 0.99 * v + 0.01 * g1 .^ 2
    x2 = x1 - 0.01 * sqrt(1 - 0.99^2) / (1 - 0.8^2) * m2 ./ (sqrt.(v2) .+ 1e-7)
    @test vals[2] ≈ x1 rtol = 1e-12
    @test vals[3] ≈ x2 rtol = 1e-12
    @test op.op.name == "Adam"
    @test run(s, tensor("Variable/Adam")) ≈ m2 && run(s, tensor("Variable/Adam_1")) ≈ v2
    @test run(s, tensor("beta1_power")) ≈ 0.8^3 && run(s, tensor("beta2_power")) ≈ 0.99^3
    @test tensor("Adam/update_Variable/ApplyAdam").op.type == "ApplyAdam"
    @test tensor("Variable/Adam").op.colocation_groups == ["loc:@Variable"]
    @test tensor("Adam/update_Variable/ApplyAdam").op.colocation_groups == ["loc:@Variable"]
    @test tensor("beta1_power").op.colocation_groups == ["loc:@Variable"]
    @test !(tensor("Variable/Adam") in get_collection(TRAINABLE_VARIABLES))
    @test tensor("Variable/Adam") in get_collection(GLOBAL_VARIABLES)

    vals, op, _, _ = step_values(() -> RMSPropOptimizer(0.01; decay=0.9, momentum=0.5), 2)
    ms = 1.0 .+ 0.1 * (g0 .^ 2 .- 1.0); mom = 0.01 * g0 ./ sqrt.(ms .+ 1e-10); x1 = x0 - mom
    g1 = gradq(x1); ms2 = ms + 0.1 * (g1 .^ 2 - ms); mom2 = 0.5 * mom + 0.01 * g1 ./ sqrt.(ms2 .+ 1e-10)
    @test vals[2] ≈ x1 && vals[3] ≈ x1 - mom2
    @test tensor("Variable/RMSProp").op.type == "VariableV2" && tensor("Variable/RMSProp_1").op.type == "VariableV2"
end

@testset "optimizers: Float32 and Float64 variables in one step, hyperparameters cast once per dtype" begin
    reset_default_graph()
    a = Variable(Float32[1.0, -2.0]); b = Variable([0.5, 3.0]); c = Variable(Float32[2.0])
    loss = sum(cast(a, Float64)^2) + sum(b^2) + sum(cast(c, Float64)^2)
    train = minimize(AdamOptimizer(0.01), loss)
    s = Session(); init(s); run(s, train)
    # the first Adam step moves each entry by lr * g/|g| (up to epsilon): -0.01 sign(x)
    @test run(s, a) isa Vector{Float32}
    @test run(s, a) ≈ Float32[0.99, -1.99] rtol = 1e-6
    @test run(s, b) ≈ [0.49, 2.99] rtol = 1e-6       # beta powers are Float32 (the first variable's), as TF
    @test run(s, c) ≈ Float32[1.99] rtol = 1e-6
    hyper(v) = tensor("Adam/update_$v/ApplyAdam").op.inputs[6:9]   # lr, beta1, beta2, epsilon
    ha, hb, hc = hyper("Variable"), hyper("Variable_1"), hyper("Variable_2")
    @test ha == hc                  # one Cast per hyperparameter serves both Float32 variables
    @test all(n -> tensor(n).op.type == "Cast", ha) && all(n -> tensor(n).op.type == "Const", hb)
end

@testset "optimizers: Adam converges, opt.minimize, apply_gradients, placement" begin
    reset_default_graph()
    @gpu begin
        global xa = Variable([3.0, -1.0, 2.0])
        global la = sum((xa - [1.0, 2.0, 3.0])^2)
    end
    opt = AdamOptimizer(0.1)
    train = opt.minimize(la)
    s = Session(); init(s)
    for _ in 1:2000
        run(s, train)
    end
    @test run(s, xa) ≈ [1.0, 2.0, 3.0] atol = 1e-4
    @test assigned_device(s, tensor("Adam/update_Variable/ApplyAdam")) == assigned_device(s, xa)
    # a second minimize of the same optimizer reuses its slots, with a new scope
    train2 = opt.minimize(la)
    @test train2.op.name == "Adam_1" && tensor("Adam_1/update_Variable/ApplyAdam").op.type == "ApplyAdam"
    # apply_gradients with explicit (gradient, variable) pairs, a Float32 variable
    y = Variable(Float32[1.0, 2.0])
    gd = GradientDescentOptimizer(0.5)
    up = gd.apply_gradients([(constant(Float32[2.0, 4.0]), y)])
    init(s); run(s, up)
    @test run(s, y) == Float32[0.0, 0.0]
    e = try; minimize(GradientDescentOptimizer(0.1), sum(constant([1.0])); var_list=[y]); nothing; catch err; err; end
    @test e isa OxiflowError && occursin("No gradients", e.msg)
end

@testset "BFGS!: Rosenbrock, bounds, explicit gradients" begin
    reset_default_graph()
    a = Variable(-1.2); b = Variable(1.0)
    loss = (1.0 - a)^2 + 100.0 * (b - a^2)^2
    s = Session(); init(s)
    seen = Int[]
    hist = BFGS!(s, loss, 500; callback=(vs, it, l) -> push!(seen, it))
    @test run(s, a) ≈ 1.0 atol = 1e-5
    @test run(s, b) ≈ 1.0 atol = 1e-5
    @test hist[end] < 1e-10 && length(hist) == length(seen) && seen == 0:length(hist)-1
    @test issorted(hist; rev=true)
    # the iteration limit as a keyword too (as the explicit-gradient form takes it)
    init(s)
    h_kw = BFGS!(s, loss; max_iter=3)
    init(s)
    h_pos = BFGS!(s, loss, 3)
    @test length(h_kw) == 3 && h_kw == h_pos
    # a bound that is active at the optimum: a <= 0.5 gives a = 0.5, b = 0.25
    init(s)
    BFGS!(s, loss; bounds=Dict(a => [-2.0, 0.5]))
    @test run(s, a) <= 0.5
    @test run(s, a) ≈ 0.5 atol = 1e-8
    @test run(s, b) ≈ 0.25 atol = 1e-5
    # explicit gradient tensors, a vector variable
    x = Variable([3.0, -4.0])
    q = sum((x - [1.0, 2.0])^2)
    init(s)
    BFGS!(s, q, [2.0 * (x - [1.0, 2.0])], [x])
    @test run(s, x) ≈ [1.0, 2.0] atol = 1e-8
    @test_throws OxiflowError BFGS!(s, q; bounds=Dict(constant(1.0) => [0.0, 1.0]))
    # the raw solver, and an objective that throws
    xs, f, it, msg = lbfgsb(x -> (sum(abs2, x .- 2), 2 .* (x .- 2)), [0.0, 0.0, 0.0]; upper=[1.0, 3.0, 3.0])
    @test xs ≈ [1.0, 2.0, 2.0] atol = 1e-8
    @test_throws ErrorException lbfgsb(x -> error("boom"), [1.0])
end

@testset "GPU queries" begin
    out = mktemp() do path, io
        redirect_stdout(io) do
            @test gpu_info() === nothing
        end
        close(io)
        read(path, String)
    end
    @test occursin("CUDA driver version", out) && occursin("Total number of GPUs: 0", out)
    @test list_physical_devices("CPU") == ["/device:CPU:0"]
    @test "/device:GPU:0" in list_physical_devices()      # one emulated GPU (runtests.jl)
    @test has_gpu()
end

@testset "add_op with named inputs (the op's declared names, TF's)" begin
    reset_default_graph()
    v = Variable([1.0, 2.0])
    s = Session(); init(s)
    # put in the op's order by name, whatever order they are given in
    up = Oxiflow.add_op("ApplyGradientDescent", (delta=constant([10.0, 20.0]), var=v, alpha=constant(0.5)))
    @test run(s, up) ≈ [1.0, 2.0] .- 0.5 .* [10.0, 20.0]
    e = try; Oxiflow.add_op("ApplyGradientDescent", (var=v, lr=constant(0.5), delta=constant([1.0, 1.0]))); nothing; catch err; err; end
    @test e isa OxiflowError && occursin("ApplyGradientDescent takes the inputs (var, alpha, delta)", e.msg) &&
          occursin("missing: alpha", e.msg) && occursin("unknown: lr", e.msg)
    @test Oxiflow.oxf_op_inputs("ApplyAdam") == ["var", "m", "v", "beta1_power", "beta2_power", "lr", "beta1", "beta2", "epsilon", "grad"]
end
