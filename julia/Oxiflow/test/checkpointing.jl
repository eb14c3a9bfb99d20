# gradient_checkpointing: recomputed activations give the ordinary gradients (oracles: the
# same network differentiated without checkpointing, and central finite differences),
# an optimizer trains along the same path, the recomputed ops are in the graph, and the
# peak of an emulated GPU's memory account (bytes of live tensors) falls.

@testset "gradient_checkpointing" begin

# `depth` layers h = tanh(h W + b) on a fixed batch × width input; loss sum(h .* h)
function ckpt_mlp(depth, batch, width)
    h = constant(Float64[sin(i + 2j) for i in 1:batch, j in 1:width])
    params = Tensor[]
    for k in 1:depth
        W = Variable(Float64[cos(k + i * j) for i in 1:width, j in 1:width] ./ sqrt(width))
        b = Variable(fill(0.1k, width))
        h = tanh(h * W + b)
        push!(params, W, b)
    end
    return sum(h .* h), params
end

node_names() = (g = Oxiflow.get_default_graph(); [Oxiflow.oxf_node_name(g, n) for n in 0:Oxiflow.oxf_graph_num_nodes(g)-1])
recomputed() = filter(n -> occursin("/recompute/", n), node_names())

# gradients of ckpt_mlp's loss with checkpointing `mode` (nothing: ordinary), and the copies
function ckpt_grads(mode)
    reset_default_graph()
    gradient_checkpointing(mode)
    try
        loss, params = ckpt_mlp(6, 8, 5)
        gs = gradients(loss, params)
        s = Session(); init(s)
        return run(s, gs), recomputed()
    finally
        gradient_checkpointing(nothing)
    end
end

@testset "gradients keep their values in every mode" begin
    want, none = ckpt_grads(nothing)
    @test isempty(none)
    for mode in ("speed", "memory")
        got, copies = ckpt_grads(mode)
        @test all(isapprox.(got, want; rtol=1e-12, atol=1e-14))
        @test !isempty(copies) && all(startswith.(copies, "gradients/recompute/"))
        # "speed" keeps every matrix product; "memory" recomputes some of them
        @test any(occursin("MatMul", c) for c in copies) == (mode == "memory")
    end
    # "collection": the tensors in the "checkpoints" collection are kept
    reset_default_graph()
    gradient_checkpointing("collection")
    try
        loss, params = ckpt_mlp(3, 4, 3)
        h1 = tensor("Tanh_1:0")
        add_to_collection("checkpoints", h1)
        gs = gradients(loss, params)
        copies = recomputed()
        @test "gradients/recompute/Tanh" in copies && "gradients/recompute/Tanh_2" in copies
        @test !("gradients/recompute/Tanh_1" in copies)
    finally
        gradient_checkpointing(nothing)
    end
    @test_throws OxiflowError gradient_checkpointing("fast")
end

@testset "against finite differences" begin
    reset_default_graph()
    gradient_checkpointing("memory")
    x = placeholder(Float64; shape=[3])
    local f, g
    try
        h = x
        for k in 1:5
            h = sin(h * 1.3 + 0.1k) .* h
        end
        f = sum(h .^ 2)
        g = gradients(f, x)
        @test !isempty(recomputed())
    finally
        gradient_checkpointing(nothing)
    end
    s = Session()
    x0 = [0.4, -0.7, 0.9]
    eps = 1e-6
    fd = [(run(s, f, x => x0 .+ eps .* (1:3 .== j)) - run(s, f, x => x0 .- eps .* (1:3 .== j))) / 2eps for j in 1:3]
    @test isapprox(run(s, g, x => x0), fd; rtol=1e-6)
end

@testset "training follows the same path" begin
    losses = map((nothing, "speed", "memory")) do mode
        reset_default_graph()
        gradient_checkpointing(mode)
        try
            loss, _ = ckpt_mlp(4, 6, 4)
            opt = AdamOptimizer(0.01).minimize(loss)
            s = Session(); init(s)
            for _ in 1:5
                run(s, opt)
            end
            run(s, loss)
        finally
            gradient_checkpointing(nothing)
        end
    end
    @test losses[2] ≈ losses[1] rtol=1e-12
    @test losses[3] ≈ losses[1] rtol=1e-12
end

@testset "an emulated GPU's peak memory falls" begin
    # 16 layers of 512 × 64 Float64 activations (256 KiB each); the ordinary pass keeps all
    function peak(mode)
        reset_default_graph()
        gradient_checkpointing(mode)
        try
            local gW
            @pywith tf.device("/device:GPU:0") begin
                loss, params = ckpt_mlp(16, 512, 64)
                gW = gradients(loss, params[1])
            end
            s = Session(emulated_gpus=1); init(s)
            run(s, gW)
            return memory_info(s, "GPU:0").peak
        finally
            gradient_checkpointing(nothing)
        end
    end
    plain, memory = peak(nothing), peak("memory")
    @test plain > 16 * 256 * 1024
    @test memory < 0.7 * plain
end

end
