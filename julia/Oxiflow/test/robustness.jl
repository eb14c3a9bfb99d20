# Bad input must give an error and leave Julia and the session usable. Each probe runs in
# a child Julia process, so one that crashes the process (as a panic inside the library
# did under Julia 1.5: libgcc_s's unwinder aborted) fails here with its output instead of
# killing the test run.

"""Runs `code` in a child `julia` with this package; returns (whether it exited with status 0
and no signal, its stdout+stderr)."""
function child_julia(code::AbstractString)
    project = dirname(dirname(pathof(Oxiflow)))
    cmd = `$(Base.julia_cmd()) --startup-file=no --project=$project -e $code`
    out = IOBuffer()
    p = run(pipeline(ignorestatus(cmd); stdout=out, stderr=out))
    return success(p), String(take!(out))
end

@testset "a panic inside the library is an error in Julia" begin
    # oxf_panic_check panics inside the ABI's guard: the unwind must reach its catch_unwind
    # (status 13, the panic's message) and Julia must go on.
    code = """
        using Oxiflow
        st = ccall(Oxiflow.sym(:oxf_panic_check), Int32, ())
        println("STATUS: ", st, " ", unsafe_string(ccall(Oxiflow.sym(:oxf_last_error), Cstring, ())))
        println("AFTER: ", run(Session(), constant(2.0) + 1.0))
        """
    ok, out = child_julia(code)
    @test ok
    @test occursin("STATUS: 13 internal error: Oxiflow panicked: oxf_panic_check", out)
    @test occursin("AFTER: 3.0", out)
    ok || println(out)
end

@testset "outputs that cannot be allocated fail cleanly" begin
    # Each was an abort (Rust's allocation failure handler) or a panic: now TF's
    # ResourceExhausted OOM text, naming the op, the shape and the device, and the session
    # runs again. The child sees one emulated GPU (16 GiB limit): the CPU probes are pinned
    # with @cpu (the host refuses 8 TiB), the GPU probe is over the GPU's limit.
    code = """
        using Oxiflow
        sess = Session()
        p = placeholder(Float64; shape=[2])
        probes = [
            ("normal", () -> run(sess, @cpu sum(Oxiflow.normal(2^20, 2^20)))),
            ("diagm", () -> run(sess, @cpu sum(diagm(constant(ones(2^16)))))),
            ("repeat", () -> run(sess, (@cpu repeat(p, 2^40)), p => [1.0, 2.0])),
            ("gpu", () -> run(sess, @gpu sum(Oxiflow.normal(2^17, 2^17)))),
        ]
        for (name, f) in probes
            e = try; f(); nothing; catch err; err; end
            println("PROBE ", name, ": ", e === nothing ? "no error" : sprint(showerror, e))
            println("AFTER ", name, ": ", run(sess, constant(2.0) + 1.0))
        end
        # padding by typemax(Int) made a shape that wrapped around; now refused when built
        e = try; Oxiflow.pad(constant(collect(1.0:6.0)), [0 typemax(Int)]); nothing; catch err; err; end
        println("PROBE pad: ", e === nothing ? "no error" : sprint(showerror, e))
        """
    ok, out = withenv(() -> child_julia(code), "OXIFLOW_EMULATED_GPUS" => "1", "CUDA_VISIBLE_DEVICES" => nothing)
    @test ok
    for (name, parts) in (("normal", ["OOM when allocating tensor with shape[1048576,1048576] and type Float64", "device:CPU:0", "RandomStandardNormal"]),
                          ("diagm", ["OOM when allocating tensor with shape[65536,65536]", "device:CPU:0", "MatrixDiag"]),
                          ("repeat", ["OOM when allocating tensor with shape[2199023255552]", "device:CPU:0", "Tile"]),
                          ("gpu", ["OOM when allocating 137438953472 bytes on /job:localhost/replica:0/task:0/device:GPU:0 for RandomStandardNormal", "limit"]))
        m = match(Regex("PROBE $name: (.*)"), out)
        @test m !== nothing && occursin("ResourceExhaustedError", m.captures[1]) && all(x -> occursin(x, m.captures[1]), parts)
        @test occursin("AFTER $name: 3.0", out)
    end
    m = match(r"PROBE pad: (.*)", out)
    @test m !== nothing && occursin("InvalidArgumentError", m.captures[1]) && occursin("Pad", m.captures[1]) && occursin("overflows", m.captures[1])
    ok && all(n -> occursin("AFTER $n: 3.0", out), ("normal", "diagm", "repeat", "gpu")) || println(out)
end

@testset "tensors of an old graph after reset_default_graph" begin
    # The engine knows nodes by id: a tensor of another graph must never be taken for the
    # node with its id in the session's graph (that fed the wrong node and seeded the wrong
    # gradient). TF builds an op in its inputs' graph, so `old + 1.0` is an op of the old graph.
    reset_default_graph()
    p = placeholder(Float64; name="p")
    x = constant([1.0, 2.0]; name="x")
    y = 3.0 .* x
    A = constant([1.0 2.0; 3.0 4.0]; name="A")
    L = constant([1.0 0.0]; name="L")
    old_sess = Session()
    reset_default_graph()
    q = placeholder(Float64; name="q")
    sess = Session()
    e = try; run(sess, q * 2.0, p => 5.0); nothing; catch err; err; end
    @test e isa OxiflowError && occursin("feed key p", e.msg) && occursin("another graph", e.msg)
    @test run(sess, q * 2.0, q => 5.0) == 10.0              # the session is usable
    # grad_ys for an old-graph y: the seed goes into y's graph
    g = gradients(y, x; grad_ys=[1.0, 1.0])
    @test getfield(g, :graph) === getfield(y, :graph)
    @test run(old_sess, g) == [3.0, 3.0]
    # helper constants go into the tensor's graph
    z = y + 1.0
    @test getfield(z, :graph) === getfield(y, :graph)
    @test run(old_sess, z) == [4.0, 7.0]
    @test run(old_sess, y[[2]]) == [6.0]
    @test run(old_sess, if_else([true, false], y, 0.0)) == [3.0, 0.0]
    @test run(old_sess, Oxiflow.vector([2, 3], y, 3)) == [0.0, 3.0, 6.0]
    @test run(old_sess, tril(A)) == [1.0 0.0; 3.0 4.0]
    @test run(old_sess, A + LinearAlgebra.I) == [2.0 2.0; 3.0 5.0]
    @test run(old_sess, Oxiflow.gradient_magnitude(sum(y), [p])) == 0.0     # no path: zero
    @test run(old_sess, softmax_cross_entropy_with_logits([0.0 0.0], L)) ≈ [log(2.0)]
    # mixing graphs in one op or as a seed is an error naming the tensors
    @test_throws OxiflowError y + constant(1.0)
    e = try; gradients(y, x; grad_ys=constant([1.0, 1.0])); nothing; catch err; err; end
    @test e isa OxiflowError && occursin("grad_ys", e.msg) && occursin("another graph", e.msg)
end

@testset "unbounded options, bad attrs and names, close" begin
    reset_default_graph()
    # each hung or exhausted memory before; now refused at once, naming the option
    for (kw, part) in ((inter=2^31,) => "inter_op_parallelism_threads = 2147483648",
                       (intra=5000,) => "intra_op_parallelism_threads = 5000",
                       (CPU=2^40,) => "device_count['CPU'] = 1099511627776",
                       (emulated_gpus=10^7,) => "emulated_gpus = 10000000")
        e = try; Session(; kw...); nothing; catch err; err; end
        @test e isa OxiflowError && occursin(part, e.msg)
    end
    # a bool attr given a string was read as false
    a = constant(ones(2, 3)); b = constant(ones(2, 3))
    e = try; Oxiflow.add_op("MatMul", [a, b]; transpose_b="yes"); nothing; catch err; err; end
    @test e isa OxiflowError && occursin("transpose_b", e.msg) && occursin("must be a bool", e.msg)
    @test size(Oxiflow.add_op("MatMul", [a, b]; transpose_b=true)) == (2, 2)
    # names TF refuses
    for bad in ("a:b", "")
        e = try; sin(constant(1.0; name=bad)); nothing; catch err; err; end
        @test e isa OxiflowError && occursin("not a valid node name", e.msg)
    end
    # close frees the session now; a closed session says so, twice closing is fine
    x = Variable(2.0)
    sess = Session(); init(sess)
    @test run(sess, x + 1.0) == 3.0
    close(sess)
    close(sess)
    e = try; run(sess, x + 1.0); nothing; catch err; err; end
    @test e isa OxiflowError && occursin("closed", e.msg)
    e = try; init(sess); nothing; catch err; err; end
    @test e isa OxiflowError && occursin("closed", e.msg)
    s2 = Session(); init(s2)
    @test run(s2, x + 1.0) == 3.0                                # a new session works
end

@testset "values, names and hyperparameters of the wrong kind" begin
    reset_default_graph()
    err(f) = try; f(); nothing; catch e; e; end
    # a string or nothing as a value was a MethodError from deep inside
    for (f, part) in ((() -> constant("abc"), "constant: the value must be a number or an array of numbers, got \"abc\""),
                      (() -> Variable("a"), "Variable: the value must be a number"),
                      (() -> constant(nothing), "got nothing"),
                      (() -> constant(1im), "not Complex{Int64}"),
                      (() -> constant(Float16[1, 2]), "not Float16"))
        e = err(f)
        @test e isa OxiflowError && occursin(part, e.msg)
    end
    # mixed numbers take their promoted type; a dtype converts what has no tensor type
    sess = Session()
    @test run(sess, constant(Any[1, 2.5])) == [1.0, 2.5]
    @test run(sess, constant(Float16[1, 2]; dtype=Float32)) == Float32[1, 2]
    @test run(sess, constant(π)) == Float64(π) && run(sess, constant(π; dtype=Float32)) == Float32(π)
    # an output index too large for an Int was an OverflowError
    s = sin(constant(1.0; name="x"))
    e = err(() -> tensor("x:99999999999999999999999"))
    @test e isa OxiflowError && occursin("has no output 99999999999999999999999", e.msg)
    @test tensor("x:0") isa Tensor
    # a learning rate that is neither a number nor a scalar tensor was accepted and failed
    # at minimize with a MethodError
    for (f, part) in ((() -> GradientDescentOptimizer("a"), "GradientDescentOptimizer: learning_rate must be a number or a scalar tensor, got \"a\""),
                      (() -> AdamOptimizer(constant([1.0, 2.0])), "AdamOptimizer: learning_rate must be a number or a scalar tensor, got a tensor of shape (2,)"),
                      (() -> MomentumOptimizer(0.1, "m"), "MomentumOptimizer: momentum"))
        e = err(f)
        @test e isa OxiflowError && occursin(part, e.msg)
    end
    v = Variable(1.0)
    lr = placeholder(Float64)
    step = minimize(GradientDescentOptimizer(lr), v^2)
    init(sess)
    run(sess, step, lr => 0.25)
    @test run(sess, v) ≈ 0.5                                    # v - 0.25 * 2v
    # a TensorArray's zeros are a BroadcastTo, not a Julia array built at once: a size too
    # large is the engine's OOM error when the graph runs (it was a Julia OutOfMemoryError,
    # or an allocation of the whole array, at the first write)
    ta = write(TensorArray(2^40), 1, constant(1.0))
    e = err(() -> run(sess, stack(ta)))
    @test e isa OxiflowError && occursin("ResourceExhaustedError", sprint(showerror, e)) && occursin("BroadcastTo", e.msg)
    @test run(sess, stack(write(TensorArray(3; element_shape=[2]), 2, constant([1.0, 2.0])))) == [0 0; 1 2; 0 0]
    e = err(() -> TensorArray(3; element_shape=[-2]))
    @test e isa OxiflowError && occursin("element_shape must be a vector of sizes >= 0", e.msg)
    @test run(sess, tf.zeros([2, 3])) == zeros(Float32, 2, 3)
    # integer and Bool fills stay Consts (BroadcastTo has float GPU kernels only), so they
    # go where a device scope pins them
    @gpu begin
        global ones_i = tf.ones([2]; dtype=Int32)
        global zeros_f = tf.zeros([2, 2])
    end
    sg = Session(emulated_gpus=1)
    @test run(sg, ones_i) == Int32[1, 1] && run(sg, zeros_f) == zeros(Float32, 2, 2)
    @test assigned_device(sg, ones_i) == assigned_device(sg, zeros_f) == "/job:localhost/replica:0/task:0/device:GPU:0"
    @test run(sess, constant(2.0) + 1.0) == 3.0
end

@testset "lbfgsb: a gradient of the wrong length or a NaN is not a convergence" begin
    # a short gradient was read past its end, then reported CONVERGENCE
    e = try; lbfgsb(x -> (sum(abs2, x), 2 .* x[1:2]), [1.0, 2.0, 3.0]); nothing; catch err; err; end
    @test e isa OxiflowError && occursin("gradient of length 2 for 3 variables", e.msg)
    # a NaN gradient converged after 0 iterations; a NaN that appears later stops there too
    x, f, iters, msg = lbfgsb(x -> (sum(abs2, x), fill(NaN, length(x))), [1.0, 2.0])
    @test msg == "ABNORMAL_TERMINATION: NUMERICAL FAILURE" && iters == 0 && x == [1.0, 2.0]
    calls = Ref(0)
    fg(x) = (calls[] += 1; (sum(abs2, x .- 3), calls[] >= 3 ? [NaN, 0.0] : 2 .* (x .- 3)))
    x, f, iters, msg = lbfgsb(fg, [0.0, 0.0])
    @test msg == "ABNORMAL_TERMINATION: NUMERICAL FAILURE" && iters >= 1
    # a good problem still converges
    x, f, iters, msg = lbfgsb(x -> (sum(abs2, x .- 3), 2 .* (x .- 3)), [0.0, 0.0])
    @test startswith(msg, "CONVERGENCE") && isapprox(x, [3.0, 3.0]; atol=1e-8)
end

@testset "two threads build one graph at once (JULIA_NUM_THREADS=2)" begin
    # TF1 keeps device, name, colocation and control-dependency scopes per thread, and
    # serialises builders. Thread 1 sits inside `@gpu 1` (then a device function) while
    # thread 2 builds: thread 2's ops must not get GPU:1, and no build may fail.
    code = """
        using Oxiflow
        use_emulated_gpus(2)
        Threads.nthreads() == 2 || error("needs 2 threads, got \$(Threads.nthreads())")
        x = constant(1.0; name="x")
        inside = Threads.Atomic{Int}(0); finished = Threads.Atomic{Int}(0)
        a_ops = Vector{Any}(undef, 400); b_ops = Vector{Any}(undef, 400); errors = String[]
        function spin(flag, want)
            while flag[] < want
                GC.safepoint(); ccall(:jl_cpu_pause, Cvoid, ())
            end
        end
        Threads.@threads for t in 1:2
            try
                if t == 1
                    @gpu 1 begin
                        inside[] = 1
                        for i in 1:200; a_ops[i] = sin(x); end
                        spin(finished, 1)               # still inside while thread 2 builds
                    end
                    @pywith tf.device(nd -> "/device:GPU:0") begin
                        for i in 201:400; a_ops[i] = exp(x); end
                    end
                else
                    spin(inside, 1)
                    for i in 1:400; b_ops[i] = cos(x); end
                    finished[] = 1
                end
            catch e
                push!(errors, sprint(showerror, e))
            end
        end
        println("ERRORS: ", length(errors), " ", join(errors, " | "))
        println("A_GPU1: ", count(t -> t.device == "/device:GPU:1", a_ops[1:200]))
        println("A_FN_GPU0: ", count(t -> t.device == "/device:GPU:0", a_ops[201:400]))
        println("B_UNPINNED: ", count(t -> t.device == "", b_ops))
        names = [t.name for t in vcat(a_ops, b_ops)]
        println("UNIQUE: ", length(unique(names)) == 800)
        s = Session()
        println("RUN: ", run(s, b_ops[end] + a_ops[1] + a_ops[end]) ≈ cos(1.0) + sin(1.0) + exp(1.0))
        println("AFTER: ", run(s, sin(x) * 2.0) ≈ 2sin(1.0))
        """
    ok, out = withenv(() -> child_julia(code), "JULIA_NUM_THREADS" => "2", "OXIFLOW_EMULATED_GPUS" => nothing, "CUDA_VISIBLE_DEVICES" => nothing)
    @test ok
    for line in ("ERRORS: 0 ", "A_GPU1: 200", "A_FN_GPU0: 200", "B_UNPINNED: 400", "UNIQUE: true", "RUN: true", "AFTER: true")
        @test occursin(line, out)
    end
    ok && occursin("B_UNPINNED: 400", out) || println(out)
end
