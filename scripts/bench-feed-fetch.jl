# Timing of the Julia <-> engine data path (not a test): feeding an array into a
# placeholder and fetching it back through an Identity op, fetching a row-major tensor (a
# MatMul result kept in a variable), and the fixed cost of a tiny run.
#
#   OXIFLOW_LIB=target/release/liboxiflow.so julia --project=julia/Oxiflow scripts/bench-feed-fetch.jl
#
# GB/s counts bytes fed + bytes fetched per second (median over the repetitions).
using Oxiflow
using Printf
using Statistics
using LinearAlgebra

function timed(f, reps)
    f()   # compile, warm caches
    ts = Float64[]
    for _ in 1:reps
        t0 = time_ns(); f(); push!(ts, (time_ns() - t0) / 1e9)
    end
    return median(ts)
end

function feed_fetch(T, n; reps=30)
    reset_default_graph()
    x = placeholder(T; shape=[n, n])
    y = Oxiflow.add_op("Identity", [x])
    s = Session()
    A = T <: AbstractFloat ? rand(T, n, n) : rand(T(-1000):T(1000), n, n)
    run(s, y, x => A) == A || error("round trip changed the values")
    t = timed(() -> run(s, y, x => A), reps)
    return 2 * sizeof(A) / t / 1e9, t
end

function fetch_row_major(T, n; reps=30)
    reset_default_graph()
    A = rand(T, n, n); B = Matrix{T}(I, n, n)
    v = Variable(zeros(T, n, n))
    s = Session(); init(s)
    run(s, assign(v, constant(A) * constant(B)))   # v now holds a row-major MatMul result
    run(s, v) ≈ A || error("MatMul result differs")
    t = timed(() -> run(s, v), reps)
    return sizeof(A) / t / 1e9, t
end

function tiny_run(; reps=20000)
    reset_default_graph()
    x = placeholder(Float64)
    y = Oxiflow.add_op("Identity", [x])
    c = constant(2.0)
    s = Session()
    t_feed = timed(() -> run(s, y, x => 1.5), reps)
    t_fetch = timed(() -> run(s, c), reps)
    return t_feed * 1e6, t_fetch * 1e6
end

println("feed + fetch through Identity (GB/s = (fed + fetched bytes) / s):")
for T in (Float64, Float32, Int64, Int32), n in (1024, 2048)
    g, t = feed_fetch(T, n)
    @printf("  %-8s %4d×%-4d  %6.2f GB/s  (%.3f ms per run)\n", T, n, n, g, t * 1e3)
end
println("fetch of a row-major tensor (a MatMul result in a variable; GB/s = fetched bytes / s):")
for T in (Float64, Float32), n in (1024, 2048)
    g, t = fetch_row_major(T, n)
    @printf("  %-8s %4d×%-4d  %6.2f GB/s  (%.3f ms per run)\n", T, n, n, g, t * 1e3)
end
tf, tc = tiny_run()
@printf("tiny runs: scalar feed + fetch through Identity %.1f µs; fetch of a constant %.1f µs\n", tf, tc)
