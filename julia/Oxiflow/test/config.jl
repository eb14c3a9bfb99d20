# Device configuration as users meet it: Session options and ConfigProto, TF2's
# process-wide tf.config calls, memory accounting on emulated GPUs, Executing-op lines and
# explain_placement. Oracles: TF's documented behaviour (placer.cc, GPUOptions, tf.config) and byte
# counts from the arrays' sizes. Process-wide settings are reset before and after.

"""Runs `f()`, returning its value and what it printed."""
function captured(f)
    path, io = mktemp()
    r = redirect_stdout(f, io)
    close(io)
    return r, read(path, String)
end

# TF's descriptions of the session's GPUs (`device: emulated:1, ..., uuid: GPU-...`).
gpu_lines(s) = [d.description for d in Oxiflow.oxf_session_devices(s) if d.type == "GPU"]

@testset "device configuration" begin
    Oxiflow.reset_device_configuration()
    use_emulated_gpus(2)
    try
        # Session keywords and ConfigProto
        reset_default_graph()
        x = constant(ones(100))
        y = sin(x)
        s = Session(inter=3, intra=2)
        @test session_threads(s) == (inter=3, intra=2)           # inter is not taken from intra (ADCME's bug)
        @test session_threads(Session(intra=5)).intra == 5
        s = Session(gpu_options=(per_process_gpu_memory_fraction=0.25, allow_growth=true))
        @test run(s, y) ≈ sin.(ones(100))
        m = memory_info(s, "GPU:0")
        @test m.limit == floor(Int, 0.25 * 16 * 2^30)
        @test m.peak == 1600 && m.current == 0 && m.reserved == 2 * 2^20
        c = tf.ConfigProto(allow_soft_placement=true, device_count=Dict("GPU" => 1))
        c.gpu_options.visible_device_list = "1"
        s = tf.Session(config=c)
        gpus = gpu_lines(s)
        @test length(gpus) == 1 && occursin("emulated:1", gpus[1])
        c.gpu_options.visible_device_list = "4"
        e = try; Session(config=c); nothing; catch err; err; end
        @test e isa OxiflowError && occursin("visible_device_list", e.msg) && occursin("'4'", e.msg)
        @test_throws OxiflowError memory_info(s, "CPU:0")

        # over the limit: ResourceExhausted naming device, request and bytes in use; usable after
        Oxiflow.reset_device_configuration()
        set_logical_device_configuration(tf.config.list_physical_devices("GPU")[1],
                                         [LogicalDeviceConfiguration(memory_limit=1), LogicalDeviceConfiguration(memory_limit=2)])
        @test [c.memory_limit for c in get_logical_device_configuration("/physical_device:GPU:0")] == [1, 2]
        @test [d.name for d in list_logical_devices("GPU")] == ["/device:GPU:0", "/device:GPU:1", "/device:GPU:2"]
        e = try; set_memory_growth(tf.config.list_physical_devices("GPU")[2], true); nothing; catch err; err; end
        @test e isa OxiflowError && occursin("cannot be modified after being initialized", e.msg)
        reset_default_graph()
        big = sin(constant(ones(400, 400)))                     # 1.28 MB per tensor, 1 MiB limit
        s = Session()
        e = try; run(s, big); nothing; catch err; err; end
        @test e isa OxiflowError && e.kind == "ResourceExhaustedError"
        @test occursin("/device:GPU:0", e.msg) && occursin("1280000 bytes", e.msg)
        @test run(s, sin(constant(ones(10)))) ≈ sin.(ones(10))
        @test memory_info(s, "GPU:0").current == 0
        @test memory_info(s, "GPU:1").limit == 2 * 2^20
        @test tf.config.experimental.get_memory_info("GPU:0")["peak"] == 160

        # process-wide switches: defaults of new sessions, logging prints placement and executions
        Oxiflow.reset_device_configuration()
        reset_default_graph()
        @gpu 2 begin                                            # two GPUs: GPU:2 does not exist
            global far = cos(constant(0.5))
        end
        @test_throws OxiflowError run(Session(), far)
        tf.config.set_soft_device_placement(true)
        @test get_soft_device_placement()
        @test run(Session(), far) ≈ cos(0.5)
        @test_throws OxiflowError run(Session(soft=false), far)  # an explicit keyword wins
        tf.debugging.set_log_device_placement(true)
        v, out = captured(() -> run(Session(emulated_gpus=1), far))
        @test occursin("Cos: (Cos): $GPU0", out) && occursin("Executing op Cos in device $GPU0", out)
        tf.debugging.set_log_device_placement(false)
        @test_throws OxiflowError tf.config.experimental.set_memory_growth(tf.config.list_physical_devices("CPU")[1], true)
        @test tf.config.list_physical_devices("GPU")[1] isa PhysicalDevice

        # explain_placement
        Oxiflow.reset_device_configuration()
        reset_default_graph()
        x = constant(0.5)
        @gpu begin
            global a = sin(x)
        end
        k = constant(Int32[1, 2]) .^ 2     # Int32 Pow has no GPU kernel
        b = colocate_with(() -> exp(a), a)
        s = Session()
        run(s, [a, k, b])
        @test occursin("rule: own request: a device scope asked for /device:GPU:0", explain_placement(s, a))
        @test occursin("rule: kernel availability", explain_placement(s, k))
        @test occursin("rule: colocation group: it shares a device with $(a.op.name)", explain_placement(s, b))
        @test occursin("rule: default", explain_placement(cos(x)))     # placed on demand in the last session
        r = placement_report(s)
        @test occursin("$(k.op.name) (Pow) on $CPU0", r)
    finally
        Oxiflow.reset_device_configuration()
        use_emulated_gpus(1)
    end
end


@testset "variables in GPU memory, intra threads, visible devices, GPU UUIDs" begin
    Oxiflow.reset_device_configuration()
    use_emulated_gpus(3)
    try
        # a variable's value counts in its GPU's memory from init until replaced
        reset_default_graph()
        v = Variable(ones(1000))                                 # 8000 bytes on GPU:0
        s = Session(); init(s)
        @test assigned_device(s, v) == GPU0
        @test memory_info(s, "GPU:0").current == 8000
        run(s, assign(v, fill(2.0, 1000)))
        @test memory_info(s, "GPU:0").current == 8000           # the old value was released
        @test run(s, v) == fill(2.0, 1000)
        # a new value that does not fit beside the old one: ResourceExhausted, old value kept
        Oxiflow.reset_device_configuration()
        set_logical_device_configuration(tf.config.list_physical_devices("GPU")[1], [LogicalDeviceConfiguration(memory_limit=1)])
        reset_default_graph()
        w = Variable(ones(100_000))                              # 800 kB of 1 MiB
        s = Session(); init(s)
        @test memory_info(s, "GPU:0").current == 800_000
        e = try; run(s, assign(w, fill(3.0, 100_000))); nothing; catch err; err; end
        @test e isa OxiflowError && e.kind == "ResourceExhaustedError"
        @test occursin("/device:GPU:0", e.msg) && occursin("800000 bytes in use", e.msg)
        @test run(s, w) == ones(100_000)
        @test run(s, sin(constant(ones(10)))) ≈ sin.(ones(10))
        @test memory_info(s, "GPU:0").current == 800_000

        # intra: the threads one kernel gets, independent of inter; 0 is TF's default (every core)
        @test session_threads(Session(inter=1, intra=3)) == (inter=1, intra=3)
        @test session_threads(Session(intra=0)).intra == session_threads(Session()).intra >= 1
        reset_default_graph()
        A = reshape(collect(1.0:120.0^2) .% 7, 120, 120); B = reshape(collect(1.0:120.0^2) .% 5, 120, 120)
        p = constant(A) * constant(B)                            # large enough to run in parallel
        @test run(Session(inter=1, intra=2), p) == A * B         # integer values: exact

        # set_visible_devices / get_visible_devices (TF2's tf.config)
        Oxiflow.reset_device_configuration()
        gpus = tf.config.list_physical_devices("GPU")
        @test length(gpus) == 3 && get_visible_devices("GPU") == gpus
        tf.config.set_visible_devices([gpus[3], gpus[1]], "GPU")
        @test [d.name for d in tf.config.get_visible_devices()] == ["/physical_device:CPU:0", "/physical_device:GPU:2", "/physical_device:GPU:0"]
        e = try; set_visible_devices(gpus[1]); nothing; catch err; err; end      # would hide the CPU
        @test e isa OxiflowError && occursin("No CPU devices are available in this process", e.msg)
        e = try; set_visible_devices("/physical_device:GPU:5", "GPU"); nothing; catch err; err; end
        @test e isa OxiflowError && occursin("Unrecognized device", e.msg)
        @test get_visible_devices("GPU") == [gpus[3], gpus[1]]                   # unchanged by the errors
        reset_default_graph()
        s = Session()
        g = gpu_lines(s)
        @test length(g) == 2 && occursin("emulated:0", g[1]) && occursin("emulated:2", g[2])   # physical order
        e = try; tf.config.set_visible_devices(gpus[1:1], "GPU"); nothing; catch err; err; end
        @test e isa OxiflowError && e.kind == "FailedPreconditionError"
        @test occursin("Visible devices cannot be modified after being initialized", e.msg)
        tf.config.set_visible_devices([gpus[3], gpus[1]], "GPU")                 # the same list: no change
        Oxiflow.reset_device_configuration()
        tf.config.experimental.set_visible_devices(PhysicalDevice[], "GPU")
        @test isempty(list_logical_devices("GPU")) && length(list_logical_devices("CPU")) == 1

        # GPU UUIDs: stable, shown in the details and descriptions, accepted by CUDA_VISIBLE_DEVICES
        Oxiflow.reset_device_configuration()
        uuid = tf.config.experimental.get_device_details(gpus[2])["uuid"]
        @test startswith(uuid, "GPU-") && length(uuid) == 40
        @test isempty(tf.config.experimental.get_device_details(tf.config.list_physical_devices("CPU")[1]))
        withenv("CUDA_VISIBLE_DEVICES" => uuid[1:12] * ",0") do
            @test length(tf.config.list_physical_devices("GPU")) == 2
            g = gpu_lines(Session())
            @test occursin("emulated:1", g[1]) && occursin("uuid: $uuid", g[1]) && occursin("emulated:0", g[2])
        end
        # As CUDA does, the first entry that names no GPU ends the list, with a warning in
        # the session's log: an ambiguous prefix, or -1 (the usual way to hide GPUs)
        withenv("CUDA_VISIBLE_DEVICES" => "GPU-") do                             # a prefix of all three
            @test isempty(tf.config.list_physical_devices("GPU"))
            s, out = captured(() -> Session())
            @test occursin("W oxiflow: CUDA_VISIBLE_DEVICES entry 'GPU-' is ambiguous", out) && occursin("no GPU is visible", out)
        end
        withenv("CUDA_VISIBLE_DEVICES" => "1,-1,0") do
            s, out = captured(() -> Session())
            g = gpu_lines(s)
            @test length(g) == 1 && occursin("emulated:1", g[1]) && occursin("'-1'", out)
            @test run(s, constant(2.0) + 1.0) == 3.0
        end
    finally
        Oxiflow.reset_device_configuration()
        use_emulated_gpus(1)
    end
end
