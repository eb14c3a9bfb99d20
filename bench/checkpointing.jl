# What gradient_checkpointing trades: the peak of an emulated GPU's memory account (bytes of
# live tensors) and the CPU time of one step computing every weight gradient of an MLP of
# `tanh` layers on a 512 × 64 Float64 batch, for 16 and 64 layers, ordinary and checkpointed
# (median of 50 steps after 5 warm-up steps, CPU only). Figures: docs/user-guide/training.md,
# "Gradient checkpointing".
#   julia --project=julia/Oxiflow bench/checkpointing.jl
using Oxiflow, Printf

include("timing.jl")

function mlp(depth, batch, width)
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

# the gradients of the loss, built with checkpointing `mode` (nothing: ordinary)
function step(mode, depth; device="/device:CPU:0")
    reset_default_graph()
    gradient_checkpointing(mode)
    try
        local gs
        @pywith tf.device(device) begin
            loss, params = mlp(depth, 512, 64)
            gs = gradients(loss, params)
        end
        return gs
    finally
        gradient_checkpointing(nothing)
    end
end

@printf("%-7s %-10s %12s %12s\n", "layers", "type", "peak MiB", "CPU step ms")
for depth in (16, 64), mode in (nothing, "speed", "memory")
    gs = step(mode, depth; device="/device:GPU:0")
    s = Session(emulated_gpus=1); init(s); run(s, gs)
    peak = memory_info(s, "GPU:0").peak / 2^20
    gs = step(mode, depth)
    s = Session(emulated_gpus=0); init(s)
    ms = median_us(() -> run(s, gs); n=50, warmup=5) / 1e3
    @printf("%-7d %-10s %12.2f %12.2f\n", depth, something(mode, "ordinary"), peak, ms)
end
