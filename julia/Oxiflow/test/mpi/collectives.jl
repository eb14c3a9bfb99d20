# Run with `mpirun -np 2` or `-np 4` (make test-mpi): every rank runs this file. Oracles:
# ADCME's documented example, closed forms of the reductions over ranks, and central finite
# differences of the global loss (the sum of all ranks' losses), each rank perturbing its own
# inputs in turn while all ranks run the same graph.
using Test, Oxiflow

mpi_init()
r, n = mpi_rank(), mpi_size()
@test mpi_initialized() && !mpi_finalized() && 0 <= r < n

@testset "ADCME's example: L = sum(mpi_sum(mpi_bcast(θ)^mpi_rank()))" begin
    reset_default_graph()
    θ = constant([2.0])
    L = sum(mpi_sum(mpi_bcast(θ)^mpi_rank()))
    g = gradients(L, θ)
    s = Session()
    Lv, gv = run(s, [L, g])
    # rank 0 holds sum_r 2^r and its derivative sum_r r 2^(r-1); the others zeros
    @test Lv == (r == 0 ? sum(2.0^q for q in 0:n-1) : 0.0)
    @test gv == (r == 0 ? [sum(q * 2.0^(q - 1) for q in 0:n-1)] : [0.0])
    n == 4 && r == 0 && @test (Lv, gv) == (15.0, [17.0])
end

include(joinpath(@__DIR__, "global_fd.jl"))

@testset "mpi_allreduce: values and gradients across ranks" begin
    for op in ("sum", "mean", "max", "min")
        reset_default_graph()
        x = placeholder(Float64; shape=[3])
        y = mpi_allreduce(x; op=op)
        w = [1.0, 2.0, 3.0] .+ r             # a different weighting on every rank
        L = sum(y .* y .* w)
        G = mpi_allreduce(L)                  # the global loss, the same on every rank
        dx = gradients(L, x)
        s = Session()
        x0 = [0.3, -0.2, 0.5] .* (r + 1) .+ 0.1r   # distinct values: max and min are unique
        all_x = [[0.3, -0.2, 0.5] .* (q + 1) .+ 0.1q for q in 0:n-1]
        want = op == "sum" ? sum(all_x) : op == "mean" ? sum(all_x) / n :
               op == "max" ? reduce((a, b) -> max.(a, b), all_x) : reduce((a, b) -> min.(a, b), all_x)
        @test run(s, y, x => x0) ≈ want rtol = 1e-14
        @test run(s, dx, x => x0) ≈ global_fd(s, G, x, x0) rtol = 1e-6 atol = 1e-8
    end
end

@testset "mpi_sum and mpi_bcast: values and gradients across ranks, other roots" begin
    root = n - 1
    reset_default_graph()
    x = placeholder(Float64; shape=[2])
    a = mpi_sum(x .^ 2; root=root)
    b = mpi_bcast(sin(x), root)
    L = sum(a .* [1.0, 2.0]) + sum(b .^ 2 .* (r + 1))
    G = mpi_allreduce(L)
    dx = gradients(L, x)
    s = Session()
    x0 = [0.4, -0.7] .+ 0.1r
    all_x = [[0.4, -0.7] .+ 0.1q for q in 0:n-1]
    @test run(s, a, x => x0) ≈ (r == root ? sum(v .^ 2 for v in all_x) : zeros(2)) rtol = 1e-14
    @test run(s, b, x => x0) ≈ sin.(all_x[root+1]) rtol = 1e-14
    @test run(s, dx, x => x0) ≈ global_fd(s, G, x, x0) rtol = 1e-6 atol = 1e-8
    # Float32 and Int64 travel as they are
    @test run(s, mpi_allreduce(constant(Float32[r, 1]))) == Float32[n * (n - 1) / 2, n]
    @test run(s, mpi_sum(constant([Int64(r)]); root=0)) == (r == 0 ? [Int64(n * (n - 1) / 2)] : [0])
end

@testset "collectives in a while_loop body: values and gradients across ranks" begin
    # y_q <- sin(mean over ranks of y) * (q + 1) + y_0 / 2, three times; the gradient
    # (WhileGrad) runs the loop's collectives again, then their adjoints, on every rank
    reset_default_graph()
    x = placeholder(Float64; shape=[3])
    body(k, y) = (k + 1, sin(mpi_allreduce(y; op="mean")) * (r + 1.0) + mpi_bcast(y, 0) * 0.5)
    _, y = while_loop((k, y) -> k < 3, body, [constant(0), x])
    L = sum(y .^ 2)
    G = mpi_allreduce(L)
    dx = gradients(L, x)
    s = Session()
    x0 = [0.3, -0.2, 0.5] .* (r + 1) .+ 0.1r
    ys = [[0.3, -0.2, 0.5] .* (q + 1) .+ 0.1q for q in 0:n-1]
    for _ in 1:3
        m = sum(ys) / n
        ys = [sin.(m) .* (q + 1) .+ ys[1] .* 0.5 for q in 0:n-1]
    end
    @test run(s, y, x => x0) ≈ ys[r+1] rtol = 1e-13
    @test run(s, G, x => x0) ≈ sum(sum(v .^ 2) for v in ys) rtol = 1e-13
    @test run(s, dx, x => x0) ≈ global_fd(s, G, x, x0) rtol = 1e-6 atol = 1e-8
end

@testset "mpi_allreduce sends any layout: a transposed operand, a Float32 mean" begin
    reset_default_graph()
    A = reshape(collect(1.0:6.0), 2, 3) .+ 10r
    y = mpi_allreduce(transpose(constant(A)))     # not row-major in memory: copied first
    z = mpi_allreduce(constant(Float32.(A)); op="mean")
    s = Session()
    total = sum(reshape(collect(1.0:6.0), 2, 3) .+ 10q for q in 0:n-1)
    @test run(s, y) == permutedims(total)
    @test run(s, z) ≈ Float32.(total ./ n) rtol = 1e-6
    @test run(s, mpi_allreduce(constant(Int32[r, -r]); op="max")) == Int32[n - 1, 0]
end

@testset "independent collectives of one run keep one order on every rank" begin
    reset_default_graph()
    xs = [mpi_allreduce(constant(fill(Float64(k + r), 1000))) for k in 1:6]
    s = Session()
    vals = run(s, xs)
    @test all(vals[k] == fill(Float64(n * k + n * (n - 1) / 2), 1000) for k in 1:6)
end

@testset "ranks running different collectives get an error, not each other's data" begin
    reset_default_graph()
    a = mpi_allreduce(constant([1.0]); name="a")
    b = mpi_allreduce(constant([2.0]); name="b")
    s = Session()
    e = try; run(s, r == 0 ? a : b); nothing; catch err; err; end
    if n > 1
        @test e isa OxiflowError && occursin("not running the same collective", e.msg) && occursin("MpiAllreduce", e.msg)
    end
    # the session and MPI go on
    @test run(s, a) == [Float64(n)]
end

@testset "mpi_sync! and mpi_barrier" begin
    m = [10 * r + k for k in 1:3]
    @test mpi_sync!(m) === m && m == [1, 2, 3]
    f = fill(Float64(r), 4)
    mpi_sync!(f, n - 1)
    @test f == fill(Float64(n - 1), 4)
    e = try; mpi_sync!([1.0], n); nothing; catch err; err; end
    @test e isa OxiflowError && occursin("root $n", e.msg)
    # the barrier holds every rank until the last one arrives: rank 0 comes 1 s late
    t = @elapsed begin
        r == 0 && sleep(1.0)
        mpi_barrier()
    end
    @test t >= 0.9
end

@testset "errors name the op" begin
    reset_default_graph()
    e = try; run(Session(), mpi_sum(constant([1.0]); root=n)); nothing; catch err; err; end
    @test e isa OxiflowError && occursin("MpiSum", e.msg) && occursin("root $n", e.msg)
    @test_throws OxiflowError mpi_allreduce(constant([1.0]); op="prod")
    @test_throws OxiflowError mpi_allreduce(constant([1, 2]); op="mean")
end

mpi_finalize()
@test mpi_finalized() && !mpi_initialized()
