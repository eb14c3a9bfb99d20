# The central finite-difference gradient of the global loss `G` (the same scalar on every
# rank, e.g. `mpi_allreduce` of each rank's loss) with respect to this rank's input `x`, at
# this rank's value `x0` (any shape). Every rank runs the same runs: rank p perturbs entry j
# of its own input while the others keep theirs, so the result on each rank is the
# derivative with respect to its own entries. Included by the multi-rank tests.
function global_fd(s, G, x, x0; h=1e-6)
    r, n = mpi_rank(), mpi_size()
    d = zeros(size(x0))
    for p in 0:n-1, j in 1:length(x0)
        vals = Float64[]
        for sign in (1, -1)
            xv = copy(x0)
            r == p && (xv[j] += sign * h)
            push!(vals, run(s, G, x => xv))
        end
        r == p && (d[j] = (vals[1] - vals[2]) / 2h)
    end
    return d
end
