# A 2-D heat equation u_t = κ Δu on the unit square, u = 0 on the boundary, solved on a 2×2
# grid of MPI ranks: each rank holds one N/2-by-N/2 block of the N-by-N interior nodes and
# steps it by forward Euler with the 5-point Laplacian, getting its neighbours' edge values
# from `mpi_halo_exchange` every step (fill value 0: the Dirichlet boundary). Rank 0 gathers
# the blocks (`mpi_gather`) and compares the result with the single-process solve of the same
# global problem in plain Julia. Then the gradient of a data misfit with respect to κ (through
# every halo exchange, backwards) is checked against central finite differences.
#
#   mpirun -np 4 julia --project=julia/Oxiflow examples/mpi_heat.jl
#
# Prints the largest difference to the single-process solve and the gradient's relative
# error; exits with status 1 (on every rank) when either is above its tolerance (1e-12,
# 1e-6). `make test-mpi` runs it.
using Oxiflow
using Printf

mpi_init()
rank, nranks = mpi_rank(), mpi_size()
nranks == 4 || error("examples/mpi_heat.jl runs on a 2x2 grid of ranks: mpirun -np 4 (got $nranks)")

const M, N_GRID = 2, 2          # process grid: rank = I * N_GRID + J
const N = 16                    # interior nodes per direction (global)
const k = N ÷ 2                 # block size per rank
const h = 1 / (N + 1)
const dt = 0.2 * h^2            # stable for κ dt / h² ≤ 1/4, i.e. κ < 1.25
const NT = 60                   # time steps
const κ_true, κ0 = 1.2, 0.9

xs = h .* (1:N)
U0 = [sin(π * x) * sin(π * y) + 0.5 * sin(2π * x) * sin(3π * y) + 4x * (1 - x) * y^2 * (1 - y) for x in xs, y in xs]

"""Rows and columns of the global array held by rank `q`."""
block_range(q) = ((q ÷ N_GRID) * k .+ (1:k), (q % N_GRID) * k .+ (1:k))

"""The single-process solve in plain Julia: `NT` forward-Euler steps from `U`."""
function heat_julia(U, κ)
    for _ in 1:NT
        P = zeros(N + 2, N + 2)
        P[2:end-1, 2:end-1] = U
        U = U + dt * κ / h^2 * (P[1:end-2, 2:end-1] + P[3:end, 2:end-1] + P[2:end-1, 1:end-2] + P[2:end-1, 3:end] - 4U)
    end
    return U
end

"""This rank's block after `NT` steps of the distributed solve, for diffusivity `κ` (a tensor)."""
function heat_mpi(u, κ)
    for _ in 1:NT
        H = mpi_halo_exchange(u, M, N_GRID; fill_value=0.0)
        lap = H[1:end-2, 2:end-1] + H[3:end, 2:end-1] + H[2:end-1, 1:end-2] + H[2:end-1, 3:end] - 4 * u
        u = u + (dt / h^2) * κ * lap
    end
    return u
end

rows, cols = block_range(rank)
κ = placeholder(Float64; shape=Int[])
u = heat_mpi(constant(U0[rows, cols]), κ)
all_blocks = mpi_gather(u)                      # rank 0: the 4 blocks stacked, rank order

# data misfit against the solution for κ_true; the global loss is the sum over ranks
U_obs = heat_julia(U0, κ_true)
L = sum((u - U_obs[rows, cols])^2)
G = mpi_allreduce(L)
dG = mpi_allreduce(gradients(L, κ))             # κ is shared: its gradient sums over ranks

sess = Session()
blocks, Gv, dGv = run(sess, [all_blocks, G, dG], κ => κ0)
ε = 1e-5
fd = (run(sess, G, κ => κ0 + ε) - run(sess, G, κ => κ0 - ε)) / 2ε

ok = [1]
if rank == 0
    U_mpi = zeros(N, N)
    for q in 0:nranks-1
        r_, c_ = block_range(q)
        U_mpi[r_, c_] = blocks[q*k+1:(q+1)*k, :]
    end
    maxdiff = maximum(abs.(U_mpi - heat_julia(U0, κ0)))
    relerr = abs(dGv - fd) / abs(fd)
    @printf("2-D heat, %dx%d nodes on a %dx%d rank grid, %d steps: max |u_mpi - u_single| = %.3e\n", N, N, M, N_GRID, NT, maxdiff)
    @printf("dLoss/dκ at κ = %.2f: %.10f (halo adjoints), %.10f (finite differences), relative error %.2e\n", κ0, dGv, fd, relerr)
    ok[1] = maxdiff <= 1e-12 && relerr <= 1e-6 && maximum(abs.(U_mpi)) > 0.01
end
mpi_sync!(ok)
mpi_finalize()
ok[1] == 1 || exit(1)
