# How much a kernel's second intra-op thread helps when the session's threads have been idle:
# `sum(tanh(x))` of a 2048 × 1024 Float32 variable (`Tanh` shards over the intra-op threads),
# one second of back-to-back runs first, then 100 runs each preceded by Julia work (a busy
# loop) of 0, 2 or 10 ms; median ms per run, intra-op threads 1 and 2 alternately.
# Figures: docs/performance/engine.md, "Intra-op threads after idle time".
#   julia --project=julia/Oxiflow bench/intra_op_idle.jl
using Oxiflow, Printf, Statistics

X = Float32.((0:2048*1024-1) .% 97 ./ 97)
x = Variable(reshape(X, 2048, 1024))
s1 = sum(tanh(x))
busy(s) = (t = time(); while time() - t < s; end)
for round in 1:2, intra in (1, 2)
    sess = Session(intra=intra); init(sess)
    t = time(); while time() - t < 1; run(sess, s1); end
    for gap in (0.0, 0.002, 0.01)
        ts = Float64[]
        for i in 1:100
            gap > 0 && busy(gap)
            push!(ts, @elapsed(run(sess, s1)))
        end
        @printf("round %d, intra %d, Julia busy %4.1f ms before each run: median %.3f ms\n", round, intra, gap * 1e3, median(ts) * 1e3)
    end
end
