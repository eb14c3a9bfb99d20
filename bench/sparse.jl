# Sparse solves and assembly against Julia's own SparseArrays in one run on this machine.
# Figures: docs/performance/sparse.md, "Sparse matrices".
#   make bench-sparse          (or: julia --project=julia/Oxiflow bench/sparse.jl [k])
#
# - The 2-D Poisson matrix (5-point stencil, Dirichlet) on a k x k grid (default k = 500:
#   250,000 unknowns, 1,248,000 stored entries): Oxiflow's `SparseSolve` by LU and by
#   Cholesky against `lu(A) \ b` (UMFPACK) and `cholesky(A) \ b` (CHOLMOD), each including
#   its factorization. The values are fed and change every run (scaled by 1 + 1e-9 i), so
#   every Oxiflow run factorizes afresh instead of reusing the session's factorization.
# - The gradient: one run of x and of ∂(w·x)/∂values, ∂/∂b against the solve alone (the
#   gradient's transposed solve reuses the forward factorization).
# - Assembly: a `SparseTensor` of 10^6 COO triplets (with repeats) built from Julia arrays
#   through the public constructor (repeats need no merge: they add up where used), and the
#   same triplets fed to `SparseRemap` (merge and sort, ADCME's `compress`), against
#   `sparse(I, J, V, m, n)`.
# Each figure is the median of `reps` runs after one warm-up run.
using Oxiflow, SparseArrays, LinearAlgebra, Printf, Random

const K = length(ARGS) >= 1 ? parse(Int, ARGS[1]) : 500
reps = 5

function poisson(k)
    T = spdiagm(-1 => fill(-1.0, k - 1), 0 => fill(2.0, k), 1 => fill(-1.0, k - 1))
    Id = sparse(1.0I, k, k)
    return kron(Id, T) + kron(T, Id)
end

function median_s(f; n=reps)
    f(0)
    ts = Float64[]
    for i in 1:n
        t0 = time_ns(); f(i); push!(ts, (time_ns() - t0) / 1e9)
    end
    return sort!(ts)[div(n + 1, 2)]
end
median_s(f::Function, ::Nothing; n=reps) = median_s(i -> f(); n=n)

A = poisson(K)
N = size(A, 1)
I_, J_, V_ = findnz(A)
nnzA = length(V_)
b = rand(MersenneTwister(1), N)
w = rand(MersenneTwister(2), N)
@printf("Poisson %dx%d: %d unknowns, %d stored entries; Julia %s, %d CPU threads\n", K, K, N, nnzA, VERSION, Sys.CPU_THREADS)

t_umf = median_s(i -> lu(A * (1 + 1e-9 * i)) \ b)
t_chm = median_s(i -> cholesky(A * (1 + 1e-9 * i)) \ b)
t_def = median_s(i -> (A * (1 + 1e-9 * i)) \ b)

reset_default_graph()
idx = constant(hcat(I_ .- 1, J_ .- 1))
vals = placeholder(Float64; shape=[nnzA])
rhs = constant(b)
xs = Dict(m => Oxiflow.add_op("SparseSolve", [idx, vals, rhs]; dense_shape=[N, N], method=m) for m in ("lu", "cholesky"))
loss = Dict(m => sum(xs[m] .* constant(w)) for m in keys(xs))
grads = Dict(m => gradients(loss[m], [vals, rhs]) for m in keys(xs))
sess = Session()
feed(i) = vals => V_ .* (1 + 1e-9 * i)
t_ox = Dict(m => median_s(i -> run(sess, xs[m], feed(i))) for m in keys(xs))
t_oxg = Dict(m => median_s(i -> run(sess, [xs[m], grads[m]...], feed(i))) for m in keys(xs))
x_lu = run(sess, xs["lu"], vals => V_)
@printf("residual |A x - b|_inf / |b|_inf (LU): %.2e\n", norm(A * x_lu - b, Inf) / norm(b, Inf))

@printf("%-44s %10s %10s\n", "workload", "Oxiflow s", "Julia s")
@printf("%-44s %10.3f %10.3f  (%.2fx)\n", "solve, LU vs lu(A) \\ b (UMFPACK)", t_ox["lu"], t_umf, t_ox["lu"] / t_umf)
@printf("%-44s %10.3f %10.3f  (%.2fx)\n", "solve, Cholesky vs cholesky(A) \\ b (CHOLMOD)", t_ox["cholesky"], t_chm, t_ox["cholesky"] / t_chm)
@printf("%-44s %10s %10.3f\n", "Julia's A \\ b (its own choice)", "", t_def)
for m in ("lu", "cholesky")
    @printf("%-44s %10.3f %10s  (gradient alone %.2fx the solve)\n", "solve + gradient ($m)", t_oxg[m], "", (t_oxg[m] - t_ox[m]) / t_ox[m])
end

# assembly
rng = MersenneTwister(3)
M = 100_000
nz = 1_000_000
ii = rand(rng, 1:M, nz); jj = rand(rng, 1:M, nz); vv = rand(rng, nz)
t_jl = median_s(() -> sparse(ii, jj, vv, M, M), nothing)
reset_default_graph()
t_ctor = median_s(() -> SparseTensor(ii, jj, vv, M, M), nothing)
@printf("%-44s %10.3f %10.3f  (%.2fx; %.0f M nonzeros/s)\n", "SparseTensor(ii, jj, vv, m, n), 10^6 triplets", t_ctor, t_jl, t_ctor / t_jl, nz / t_ctor / 1e6)
reset_default_graph()
pix = placeholder(Int64; shape=[nz, 2])
pv = placeholder(Float64; shape=[nz])
ident = constant(collect(Int64, 0:M-1))
merged = Oxiflow.add_op("SparseRemap", [pix, pv, ident, ident]; dense_shape=[M, M])
sess2 = Session()
ix0 = hcat(ii .- 1, jj .- 1)
t_asm = median_s(() -> run(sess2, merged, pix => ix0, pv => vv), nothing)
@printf("%-44s %10.3f %10.3f  (%.2fx; %.0f M nonzeros/s)\n", "assembly of 10^6 COO triplets (merge, sort)", t_asm, t_jl, t_asm / t_jl, nz / t_asm / 1e6)
