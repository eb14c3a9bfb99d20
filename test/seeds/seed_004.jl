# Seed 004 (a TF1 tutorial chapter, "TF使用GPU"): its code blocks in their Julia form, with
# the documented results asserted: placement lines with log_device_placement, ops pinned
# by tf.device, CUDA_VISIBLE_DEVICES, allow_growth and a 0.4 memory fraction. GPUs are
# emulated (OXIFLOW_EMULATED_GPUS), so the tutorial's "without GPU" and "on GPU" outputs
# are both reproduced.
using Oxiflow
include(joinpath(@__DIR__, "common.jl"))

total_gpu_memory() = parse(Int, get(ENV, "OXIFLOW_EMULATED_GPU_MEMORY_MB", "16384")) * 2^20

@testset "seed 004" begin

@testset "log_device_placement prints each op's device" begin
    for (gpus, dev) in ((0, CPU0), (1, GPU0))     # "在没有GPU上运行" (no GPU), then "在GPU" (on GPU)
        use_emulated_gpus(gpus)
        reset_default_graph()
        a = tf.constant([1.0, 2.0, 3.0], shape=[3], name="a")
        b = tf.constant([1.0, 2.0, 3.0], shape=[3], name="b")
        c = a + b
        val, out = capture() do
            sess = tf.Session(config=tf.ConfigProto(log_device_placement=true))
            run(sess, c)
        end
        println(out)
        @test val == [2.0, 4.0, 6.0]
        for line in ("add: (Add): $dev", "a: (Const): $dev", "b: (Const): $dev")
            @test occursin(line, out)
        end
    end
end

@testset "tf.device pins ops" begin
    reset_default_graph()
    # the tutorial writes tf.device('cpu/:0'), which Python's lenient parser reads as
    # /device:CPU:*; Oxiflow's parser rejects the malformed string, quoting it
    e = try; @pywith tf.device("cpu/:0") begin constant(1.0) end; nothing; catch err; err; end
    @test e isa OxiflowError && occursin("'cpu/:0'", e.msg)
    @pywith tf.device("/cpu:0") begin
        global a = tf.constant([1.0, 2.0, 3.0], shape=[3], name="a")
        global b = tf.constant([1.0, 2.0, 3.0], shape=[3], name="b")
    end
    @pywith tf.device("/gpu:1") begin
        global c = a + b
    end
    # two GPUs: add goes where it was asked
    use_emulated_gpus(2)
    val, out = capture(() -> run(tf.Session(config=tf.ConfigProto(log_device_placement=true)), c))
    println(out)
    @test val == [2.0, 4.0, 6.0]
    @test occursin("add: (Add): /job:localhost/replica:0/task:0/device:GPU:1", out)
    @test occursin("a: (Const): $CPU0", out) && occursin("b: (Const): $CPU0", out)
    # the tutorial's output (one GPU: add on GPU:0) is what soft placement gives; without
    # it /gpu:1 is an unknown device
    use_emulated_gpus(1)
    e = try; run(tf.Session(), c); nothing; catch err; err; end
    @test e isa OxiflowError && occursin("was explicitly assigned to /device:GPU:1", e.msg)
    val, out = capture(() -> run(tf.Session(config=tf.ConfigProto(log_device_placement=true, allow_soft_placement=true)), c))
    @test val == [2.0, 4.0, 6.0]
    @test occursin("add: (Add): $GPU0", out) && occursin("a: (Const): $CPU0", out)
    # "some ops cannot go on a GPU": Int32 `Pow` has no GPU kernel (nor in TF). Pinned to
    # a GPU it fails; with soft placement it runs on the CPU. Int32 `Add` has one, computed
    # in host memory as TF's int32 GPU kernels are; Int64 and float arithmetic have device
    # kernels
    reset_default_graph()
    @gpu begin
        global k = constant(Int32[1, 2]) .^ 2
        global k32 = constant(Int32[1, 2]) + constant(Int32[3, 4])
        global k64 = constant([1, 2]) + constant([3, 4])
    end
    e = try; run(Session(), k); nothing; catch err; err; end
    @test e isa OxiflowError && occursin("no supported kernel for GPU devices", e.msg)
    s = Session(soft=true)
    @test run(s, k) == [1, 4]
    @test assigned_device(s, k) == CPU0
    s = Session()
    @test run(s, k32) == [4, 6] && assigned_device(s, k32) == GPU0
    @test run(s, k64) == [4, 6] && assigned_device(s, k64) == GPU0
end

@testset "CUDA_VISIBLE_DEVICES" begin
    use_emulated_gpus(3)
    try
        ENV["CUDA_VISIBLE_DEVICES"] = "1"          # only the second GPU
        gpus = filter(d -> d.type == "GPU", Oxiflow.list_devices())
        @test length(gpus) == 1 && occursin("emulated:1", gpus[1].description)
        ENV["CUDA_VISIBLE_DEVICES"] = "2"          # os.environ["CUDA_VISIBLE_DEVICES"]="2"
        gpus = filter(d -> d.type == "GPU", Oxiflow.list_devices())
        @test length(gpus) == 1 && occursin("emulated:2", gpus[1].description)
        @test list_physical_devices("GPU") == ["/device:GPU:0"]
    finally
        delete!(ENV, "CUDA_VISIBLE_DEVICES")
    end
end

@testset "allow_growth and per_process_gpu_memory_fraction" begin
    use_emulated_gpus(1)
    reset_default_graph()
    x = constant(ones(256, 256))
    y = x * x
    config = tf.ConfigProto()
    config.gpu_options.allow_growth = true          # 让TF按需分配显存
    session = tf.Session(config=config)
    @test run(session, y) ≈ fill(256.0, 256, 256)
    m = memory_info(session, "GPU:0")
    @test m.peak == 2 * 256 * 256 * 8               # x and y
    @test m.reserved == 2 * 2^20                    # grown to one 2 MiB region... 
    @test m.reserved < m.limit                      # ...not the whole GPU
    config = tf.ConfigProto()
    config.gpu_options.per_process_gpu_memory_fraction = 0.4   # 占用40%
    session = tf.Session(config=config)
    run(session, y)
    m = memory_info(session, "GPU:0")
    @test m.limit == floor(Int, 0.4 * total_gpu_memory())
    @test m.reserved == m.limit                     # no growth: all of it at once
end

end
