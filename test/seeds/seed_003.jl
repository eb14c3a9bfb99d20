# Seed 003 (TF's "Using GPUs" guide): its code blocks in their Julia form, with the documented
# results asserted. Each block of the guide is a program of its own ("put this as the first
# statement of your program"), so the process-wide settings are reset between blocks with
# `Oxiflow.reset_device_configuration()`. GPUs are emulated (OXIFLOW_EMULATED_GPUS), so the
# guide's machines (no GPU, one GPU, four GPUs) are all reproduced here.
# Left out: the MirroredStrategy block (Keras models; another part of the project).
using Oxiflow
include(joinpath(@__DIR__, "common.jl"))

const GPU(i) = "/job:localhost/replica:0/task:0/device:GPU:$i"

# the guide's program: two constants and their product; the constants (and the product
# when `matmul_inside`) under an optional device scope
function matmul_program(device=nothing; matmul_inside=false)
    reset_default_graph()
    function body()
        a = tf.constant([1.0, 2.0, 3.0, 4.0, 5.0, 6.0], shape=[2, 3], name="a")
        b = tf.constant([1.0, 2.0, 3.0, 4.0, 5.0, 6.0], shape=[3, 2], name="b")
        return a, b, (matmul_inside ? tf.matmul(a, b) : nothing)
    end
    local a, b, c
    if device === nothing
        a, b, c = body()
    else
        @pywith tf.device(device) begin
            a, b, c = body()
        end
    end
    return a, b, (c === nothing ? tf.matmul(a, b) : c)
end

const AB = [22.0 28.0; 49.0 64.0]
total_gpu_memory() = parse(Int, get(ENV, "OXIFLOW_EMULATED_GPU_MEMORY_MB", "16384")) * 2^20

@testset "seed 003" begin

@testset "logging device placement" begin
    Oxiflow.reset_device_configuration()
    tf.debugging.set_log_device_placement(true)
    for (gpus, dev) in ((0, CPU0), (1, GPU0))      # the guide's output (no GPU), then with gpu:0
        use_emulated_gpus(gpus)
        a, b, c = matmul_program()
        val, out = capture(() -> run(Session(), c))
        println(out)
        @test val ≈ AB
        @test occursin("Executing op MatMul in device $dev", out)
        @test occursin("MatMul: (MatMul): $dev", out)           # TF1's placer line as well
    end
end

@testset "manual device placement" begin
    Oxiflow.reset_device_configuration()
    tf.debugging.set_log_device_placement(true)
    use_emulated_gpus(0)                             # the guide's machine: cpu:0 only
    a, b, c = matmul_program("/cpu:0")
    val, out = capture(() -> run(Session(), c))
    println(out)
    @test val ≈ AB
    @test occursin("a: (Const): $CPU0", out) && occursin("b: (Const): $CPU0", out)
    @test occursin("Executing op MatMul in device $CPU0", out)
    # with a GPU the MatMul (not pinned) goes to gpu:0 and its inputs are copied there
    use_emulated_gpus(1)
    a, b, c = matmul_program("/cpu:0")
    s = Session()
    @test assigned_device(s, a) == CPU0 && assigned_device(s, b) == CPU0
    @test assigned_device(s, c) == GPU0
    @test run_profile(s, c) ≈ AB
    @test profile_copies().count == 2
end

@testset "allowing GPU memory growth" begin
    Oxiflow.reset_device_configuration()
    use_emulated_gpus(1)
    tf.config.gpu.set_per_process_memory_growth()
    @test get_memory_growth(tf.config.list_physical_devices("GPU")[1])
    a, b, c = matmul_program()
    s = Session()
    @test run(s, c) ≈ AB
    m = memory_info(s, "GPU:0")
    @test m.peak == 3 * 6 * 8 - 2 * 8                  # a, b (6 Float64 each) and c (4)
    @test m.reserved == 2 * 2^20                       # one 2 MiB region, grown on demand
    @test m.limit > m.reserved
    # once a session exists the physical devices are initialized: TF's error
    e = try; tf.config.gpu.set_per_process_memory_growth(); nothing; catch err; err; end
    @test e isa OxiflowError && occursin("cannot be modified after being initialized", e.msg)

    # without growth the whole limit is taken at the first allocation
    Oxiflow.reset_device_configuration()
    s = Session()
    run(s, c)
    m = memory_info(s, "GPU:0")
    @test m.reserved == m.limit

    Oxiflow.reset_device_configuration()
    tf.config.gpu.set_per_process_memory_fraction(0.4)
    s = Session()
    @test run(s, c) ≈ AB
    m = memory_info(s, "GPU:0")
    @test m.limit == floor(Int, 0.4 * total_gpu_memory())   # 40% of the GPU's memory
    @test tf.config.experimental.get_memory_info("GPU:0")["peak"] == m.peak
end

@testset "using a single GPU on a multi-GPU system" begin
    Oxiflow.reset_device_configuration()
    tf.debugging.set_log_device_placement(true)
    use_emulated_gpus(2)                               # fewer GPUs than /device:GPU:2 needs
    a, b, c = matmul_program("/device:GPU:2", matmul_inside=true)
    e = try; run(Session(), c); nothing; catch err; err; end
    @test e isa OxiflowError
    @test occursin("/device:GPU:2", e.msg) && occursin("but available devices are [ $CPU0, $(GPU(0)), $(GPU(1)) ]", e.msg)
    tf.config.set_soft_device_placement(true)
    val, out = capture(() -> run(Session(), c))
    println(out)
    @test val ≈ AB
    @test occursin("Executing op MatMul in device $(GPU(0))", out)   # an existing, supported device
    # with four GPUs the request is honoured
    use_emulated_gpus(4)
    tf.config.set_soft_device_placement(false)
    val, out = capture(() -> run(Session(), c))
    println(out)
    @test val ≈ AB
    @test occursin("Executing op MatMul in device $(GPU(2))", out)
end

@testset "CUDA_VISIBLE_DEVICES selects and orders GPUs" begin
    Oxiflow.reset_device_configuration()
    use_emulated_gpus(4)
    try
        ENV["CUDA_VISIBLE_DEVICES"] = "2"
        @test length(tf.config.list_physical_devices("GPU")) == 1
        s = Session()
        gpus = filter(d -> d.type == "GPU", Oxiflow.list_devices())
        @test [d.name for d in gpus] == [GPU(0)]
        @test occursin("pci bus id: emulated:2", gpus[1].description)   # physical GPU 2
        ENV["CUDA_VISIBLE_DEVICES"] = "3,1"
        gpus = filter(d -> d.type == "GPU", Oxiflow.list_devices())
        @test [d.name for d in gpus] == [GPU(0), GPU(1)]
        @test occursin("emulated:3", gpus[1].description) && occursin("emulated:1", gpus[2].description)
        ENV["CUDA_VISIBLE_DEVICES"] = "0,7"              # no GPU 7: as in CUDA, the list ends there
        @test length(tf.config.list_physical_devices("GPU")) == 1
        gpus = filter(d -> d.type == "GPU", Oxiflow.list_devices())
        @test [d.name for d in gpus] == [GPU(0)] && occursin("emulated:0", gpus[1].description)
        ENV["CUDA_VISIBLE_DEVICES"] = ""
        @test isempty(tf.config.list_physical_devices("GPU"))
    finally
        delete!(ENV, "CUDA_VISIBLE_DEVICES")
    end
end

@testset "using multiple GPUs without tf.distribute.Strategy" begin
    Oxiflow.reset_device_configuration()
    tf.debugging.set_log_device_placement(true)
    use_emulated_gpus(4)
    reset_default_graph()
    c = []
    for d in ["/device:GPU:2", "/device:GPU:3"]
        @pywith tf.device(d) begin
            a = tf.constant([1.0, 2.0, 3.0, 4.0, 5.0, 6.0], shape=[2, 3])
            b = tf.constant([1.0, 2.0, 3.0, 4.0, 5.0, 6.0], shape=[3, 2])
            push!(c, tf.matmul(a, b))
        end
    end
    @pywith tf.device("/cpu:0") begin
        global sum_ = tf.add_n(c)
    end
    val, out = capture(() -> run(Session(), sum_))
    println(out)
    println(val)
    @test val == [44.0 56.0; 98.0 128.0]
    # the guide prints GPU:0 and GPU:1 for the loop over GPU:2 and GPU:3; TF places the
    # requested devices, as here
    @test occursin("Executing op MatMul in device $(GPU(2))", out)
    @test occursin("Executing op MatMul in device $(GPU(3))", out)
    @test occursin("Executing op AddN in device $CPU0", out)
end

end
Oxiflow.reset_device_configuration()
