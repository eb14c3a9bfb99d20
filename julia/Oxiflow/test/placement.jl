# Placement as users meet it, in Julia: scopes, device functions, colocation, soft
# placement, unknown devices. Oracle: TF's documented placement rules (device scopes in ops.py, placer.cc);
# crates/oxiflow-core/tests/placer_cases.rs holds the full table of engine cases.

const GPU1 = "/job:localhost/replica:0/task:0/device:GPU:1"

"""`(assigned device, nothing)` or `(nothing, error message)` of `t` in a new session."""
function placed(t; soft=false, gpus=1)
    s = Session(soft=soft, emulated_gpus=gpus)
    try
        return assigned_device(s, t), nothing
    catch e
        e isa OxiflowError || rethrow()
        return nothing, e.msg
    end
end

@testset "placement cases (Julia)" begin
    reset_default_graph()
    x = constant(0.5)
    # requested devices
    @gpu 1 begin
        global s1 = sin(x)
    end
    @test placed(s1, gpus=2) == (GPU1, nothing)
    d, e = placed(s1, gpus=1)
    @test d === nothing && occursin("was explicitly assigned to /device:GPU:1 but available devices are [ $CPU0, $GPU0 ]", e)
    @test placed(s1, gpus=1, soft=true) == (GPU0, nothing)
    @test placed(s1, gpus=0, soft=true) == (CPU0, nothing)
    @test placed(sin(x), gpus=1) == (GPU0, nothing)                    # unconstrained: GPU first
    @test placed(sin(x), gpus=0) == (CPU0, nothing)
    @pywith tf.device("/device:TPU:0") begin
        global tpu = cos(x)
    end
    d, e = placed(tpu)
    @test d === nothing && occursin("Cannot assign a device for operation $(tpu.op.name)", e)
    @test placed(tpu, soft=true) == (GPU0, nothing)

    # nested scopes: inner fields win, nothing clears, "" changes nothing
    @pywith tf.device("/job:localhost") begin
        @gpu 1 begin
            global n1 = exp(x)
        end
    end
    @test n1.device == "/job:localhost/device:GPU:1"
    @test placed(n1, gpus=2) == (GPU1, nothing)
    @gpu 1 begin
        @pywith tf.device(nothing) begin
            global n2 = exp(x)
        end
        @pywith tf.device("") begin
            global n3 = exp(x)
        end
    end
    @test n2.device == "" && n3.device == "/device:GPU:1"

    # device functions: variables on the CPU, the rest on the GPU (seed 000)
    @pywith tf.device(node -> node.op == "VariableV2" ? "/device:CPU:0" : "/device:GPU:0") begin
        global v = Variable(2.0)
        global sv = sin(v)
    end
    s = Session(emulated_gpus=1); init(s)
    @test assigned_device(s, v) == CPU0 && assigned_device(s, sv) == GPU0
    @test run(s, sv) ≈ sin(2.0)

    # Int32 Pow has no GPU kernel (nor in TF): CPU unconstrained, an error pinned, CPU with soft
    i = constant(Int32(2))
    @test placed(i ^ 3) == (CPU0, nothing)
    @gpu begin
        global ii = i ^ 3
    end
    d, e = placed(ii)
    @test d === nothing && occursin("no supported kernel for GPU devices", e)
    @test occursin("with soft placement, Session(soft=true) or allow_soft_placement=true, it runs on the CPU", e)
    @test placed(ii, soft=true) == (CPU0, nothing)
    # Int32 arithmetic goes to the GPU, computed in host memory (TF's int32 GPU kernels)
    @test placed(i * i) == (GPU0, nothing)
    @test run(Session(emulated_gpus=1), i * i + i) == 6
    # a while_loop (one While op) goes to the GPU it is pinned to, no soft placement: its
    # loop runs on the host, the body's float ops on the GPU and its Int32 counter on the
    # host (TF keeps loop control in host memory)
    xw = constant([1.0, 2.0])
    @gpu begin
        global wl = while_loop((k, v) -> k < 3, (k, v) -> (k + 1, 2 .* v), [constant(Int32(0)), xw])[2]
        global dwl = gradients(sum(wl .^ 2), xw)
    end
    @test placed(wl) == (GPU0, nothing) && placed(dwl) == (GPU0, nothing)
    s = Session(emulated_gpus=1)
    @test run(s, wl) == [8.0, 16.0] && assigned_device(s, wl) == GPU0
    # d sum((8x)²)/dx = 128x
    @test run(s, dwl) ≈ [128.0, 256.0]
    # so does a cond: its condition read on the host, its branch's ops on the GPU
    @gpu begin
        global cb = cond(sum(xw) > 0.0, () -> sin(xw), () -> 2 .* xw)
    end
    @test placed(cb) == (GPU0, nothing)
    @test run(s, cb) ≈ sin.([1.0, 2.0])
    # Int64 arithmetic and comparisons have GPU kernels (TF's int64 GPU kernels): ADCME's
    # 1-based argmax (`ArgMax` then `+ 1`) stays on a GPU it is pinned to, no soft placement
    @gpu begin
        global am = argmax(constant([0.5 2.0; 3.0 1.0]); dims=2)
        global lt = am < constant([2, 2])
    end
    @test placed(am) == (GPU0, nothing) && placed(lt) == (GPU0, nothing)
    @test run(Session(emulated_gpus=1), am) == [2, 1]

    # colocation: outer scopes do not apply inside colocate_with; variables keep their readers
    @gpu 1 begin
        global anchor = tanh(x)
    end
    @cpu begin
        colocate_with(anchor) do
            global near = sqrt(x)
        end
    end
    @test placed(near, gpus=2) == (GPU1, nothing)
    @cpu begin
        global cv = Variable(1.0)
    end
    @gpu begin
        global rd = cv + 1.0
    end
    s = Session(emulated_gpus=1); init(s)
    @test assigned_device(s, cv) == CPU0 && assigned_device(s, rd) == GPU0
    @test run(s, rd) == 2.0

    # a bad device string fails when the op is created and leaves the graph usable
    @test_throws OxiflowError @pywith tf.device("/device:GPU:3/extra") begin
        cos(x)
    end
    @test placed(cos(x)) == (GPU0, nothing)
end
