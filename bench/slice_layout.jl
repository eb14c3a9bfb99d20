# Slices of a column-major 1000x1000 Float64 Variable (a Julia array), µs (median of 200
# runs after 20 warm-up runs, Session(intra=2, inter=2)): fetching `x[2:end-1, :]`,
# reducing it and `x[:, 2:end-1]` without a fetch, the gradient of sum(y .* y) with
# respect to x, and summing every other row or column picked by an index vector
# (`GatherV2`). The values are checked against Julia's own indexing first. Figures:
# docs/performance/peers.md, "Column-major slices and gathers".
#   OXIFLOW_LIB=$PWD/target/release/liboxiflow.so julia --project=julia/Oxiflow bench/slice_layout.jl
using Oxiflow, Printf

include("timing.jl")

X = rand(1000, 1000)
x = Variable(X)
y = x[2:end-1, :]
z = x[:, 2:end-1]
sy, sz, sx = sum(y), sum(z), sum(x)
odd = collect(1:2:1000)
gr, gc = x[odd, :], x[:, odd]
g = gradients(sum(y .* y), x)
sess = Session(intra=2, inter=2); init(sess)
run(sess, y) == X[2:end-1, :] || error("x[2:end-1, :] differs from Julia's")
run(sess, z) == X[:, 2:end-1] || error("x[:, 2:end-1] differs from Julia's")
G = zeros(1000, 1000); G[2:end-1, :] .= 2 .* X[2:end-1, :]
isapprox(run(sess, g), G; rtol=1e-14) || error("the gradient differs from 2x on the slice")
run(sess, gr) == X[odd, :] && run(sess, gc) == X[:, odd] || error("x[odd, :] or x[:, odd] differs from Julia's")
for (name, t) in [("fetch x[2:end-1, :]", y), ("sum(x[2:end-1, :])", sy), ("sum(x[:, 2:end-1])", sz),
                  ("gradient of sum(y .* y)", g), ("sum(x[odd, :])", sum(gr)), ("sum(x[:, odd])", sum(gc)),
                  ("sum(x) (no slice)", sx)]
    @printf("%-26s %8.1f µs\n", name, median_us(() -> run(sess, t); n=200, warmup=20))
end
