# make bench-mpi: Oxiflow's mpi_allreduce of 100 MB (12,500,000 Float64) in a session run,
# against a bare MPI_Allreduce of the same buffer on the same ranks
# (crates/oxiflow-mpi/examples/allreduce_bench.rs, run by the same make target). The run
# fetches nothing: its target is a NoOp after the allreduce (`group`), so the figure is the
# collective and its copies, not a 100 MB fetch. Median of 10 runs after 2 warm-ups.
using Oxiflow, Printf

n = length(ARGS) >= 1 ? parse(Int, ARGS[1]) : 12_500_000
mpi_init()
r = mpi_rank()
v = Variable(fill(1.0 + r, n))
y = mpi_allreduce(v)
done = group(y)
s = Session(); init(s)
times = Float64[]
for k in 1:12
    t = @elapsed run(s, done)
    k > 2 && push!(times, t)
end
# the value, once, every element
total = run(s, y)
want = mpi_size() + mpi_size() * (mpi_size() - 1) / 2
all(==(want), total) || error("mpi_allreduce gave $(unique(total)), want $want everywhere")
r == 0 && @printf("Oxiflow mpi_allreduce, %d ranks, %.0f MB Float64: %.2f ms (median of %d)\n", mpi_size(), n * 8e-6, sort(times)[length(times) ÷ 2 + 1] * 1e3, length(times))
mpi_finalize()
