# The fixed cost of one `run` from Julia on tiny graphs, µs (median of 3,000 runs after
# 200 warm-up runs): a two-root plan (`constant(1.0) + 1`), a vector one, a single `Const`,
# and chains with a fed placeholder. Figures: docs/performance/engine.md, "Executor".
#   julia --project=julia/Oxiflow bench/run_overhead.jl
using Oxiflow, Printf

include("timing.jl")

reset_default_graph()
k = constant(1.0) + 1
kv = constant([1.0, 2.0]) + 1
c = constant(1.0)
p = placeholder(Float64; shape=[4]); y = p * 2.0
ps = placeholder(Float64); ys = ps * 2.0
sess = Session(inter=2, intra=2)
for (name, f) in (("constant(1.0) + 1", () -> run(sess, k)), ("constant([1.0, 2.0]) + 1", () -> run(sess, kv)),
                  ("constant(1.0)", () -> run(sess, c)), ("p * 2.0, p fed 4 elements", () -> run(sess, y, p => [1.0, 2.0, 3.0, 4.0])),
                  ("ps * 2.0, ps fed a scalar", () -> run(sess, ys, ps => 3.0)))
    @printf("%-28s %.2f µs\n", name, median_us(f))
end
