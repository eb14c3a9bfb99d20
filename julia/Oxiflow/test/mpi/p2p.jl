# Run with `mpirun -np 2` or `-np 4` (make test-mpi): every rank runs this file. The
# point-to-point ops (mpi_send, mpi_recv, mpi_sendrecv, mpi_exchange), mpi_gather,
# mpi_halo_exchange and mpi_halo_exchange2.
# Oracles: ADCME's documented example, the same data computed in plain Julia from every
# rank's inputs (each rank can compute them all: they are closed forms of the rank), and
# central finite differences of the global loss (the sum of all ranks' losses), each rank
# perturbing its own inputs in turn while all ranks run the same graph. A gradient run
# fetches the loss too, so that every rank also runs the forward messages.
using Test, Oxiflow

mpi_init()
r, n = mpi_rank(), mpi_size()
@test n >= 2

include(joinpath(@__DIR__, "global_fd.jl"))

# this rank's value and gradient of `L` (fetched with the global loss) against the FD one
function check_grad(L, x, x0)
    G = mpi_allreduce(L)
    dx = gradients(L, x)
    s = Session()
    _, g = run(s, [G, dx], x => x0)
    @test g ≈ global_fd(s, G, x, x0) rtol = 1e-6 atol = 1e-8
    return g
end

@testset "ADCME's example: rank 1 sends, rank 0 receives, a == 1 on both" begin
    reset_default_graph()
    a = constant(Float64(r))
    if r == 1
        a = mpi_send(a, 0)
    end
    if r == 0
        a = mpi_recv(a, 1)
    end
    @test run(Session(), a) == (r <= 1 ? 1.0 : Float64(r))
end

@testset "mpi_send / mpi_recv: values, dtypes and gradients" begin
    # Float32 and Int64 travel as they are; a matrix keeps its shape and order
    reset_default_graph()
    M = Float32[1 2 3; 4 5 6] .+ 10r
    x = constant(M)
    y = r == 0 ? mpi_send(x, 1; tag=7) : r == 1 ? mpi_recv(x, 0; tag=7) : x
    k = constant(Int64[r, 2r])
    z = r == 1 ? mpi_send(k, 0) : r == 0 ? mpi_recv(k, 1) : k
    yv, zv = run(Session(), [y, z])
    @test yv == (r == 1 ? Float32[1 2 3; 4 5 6] : M) && eltype(yv) == Float32
    @test zv == (r == 0 ? Int64[1, 2] : Int64[r, 2r]) && eltype(zv) == Int64

    # rank 1 sends 2x and uses it; rank 0 receives it into sin(.); rank 1's gradient is its
    # own part (2 w1) plus the one rank 0 sends back (2 cos(2 x1) w0)
    reset_default_graph()
    x = placeholder(Float64; shape=[3])
    w = [1.0, -2.0, 0.5] .* (r + 1)
    if r == 1
        y = mpi_send(2x, 0)
        L = sum(y .* w)
    elseif r == 0
        y = mpi_recv(x, 1)
        L = sum(sin(y) .* w)
    else
        L = sum(x .^ 2)
    end
    x0 = [0.3, -0.1, 0.7] .+ 0.2r
    g = check_grad(L, x, x0)
    x1 = [0.3, -0.1, 0.7] .+ 0.2
    r == 1 && @test g ≈ 2 .* w .+ 2 .* cos.(2x1) .* [1.0, -2.0, 0.5] rtol = 1e-12
    r == 0 && @test g == zeros(3)   # the received value does not depend on rank 0's x
end

@testset "ADCME's mpi_sendrecv: one-way, the same call on every rank" begin
    # ADCME's example: rank n-1 sends to rank 0; the others keep their own values
    reset_default_graph()
    x = placeholder(Float64; shape=[3])
    a = mpi_sendrecv(x, 0, n - 1)
    L = sum(a .^ 2)
    xs(q) = fill(Float64(q), 3) .+ [0.1, 0.2, 0.3]
    s = Session()
    @test run(s, a, x => xs(r)) == (r == 0 ? xs(n - 1) : xs(r))
    # rank 0's loss depends on rank n-1's x: d(sum of losses)/dx on rank n-1 counts it twice
    Lv, g = run(s, [L, gradients(L, x)], x => xs(r))
    @test g ≈ (r == n - 1 ? 4 .* xs(r) : r == 0 ? zeros(3) : 2 .* xs(r)) rtol = 1e-14
    @test_throws OxiflowError mpi_sendrecv(x, 1, 1)
end

@testset "mpi_exchange: a ring, values and gradients" begin
    reset_default_graph()
    x = placeholder(Float64; shape=[4])
    next, prev = (r + 1) % n, (r + n - 1) % n
    y = mpi_exchange(x .^ 2, next, prev)
    w = collect(1.0:4.0) .+ r
    L = sum(sin(y) .* w)
    xs(q) = [0.5, -0.3, 0.2, 0.9] .* (q + 1)
    @test run(Session(), y, x => xs(r)) ≈ xs(prev) .^ 2 rtol = 1e-15
    g = check_grad(L, x, xs(r))
    # closed form: rank r's x^2 goes to rank next, whose loss is sum(sin(.) .* w_next)
    @test g ≈ 2 .* xs(r) .* cos.(xs(r) .^ 2) .* (collect(1.0:4.0) .+ next) rtol = 1e-12
    # two rings in opposite directions in one run, with Int32 and Float32
    reset_default_graph()
    a = mpi_exchange(constant(Int32[r, 100r]), next, prev; tag=3)
    b = mpi_exchange(constant(Float32[r]), prev, next)
    av, bv = run(Session(), [a, b])
    @test av == Int32[prev, 100prev] && bv == Float32[next]
end

@testset "mpi_gather: values on the root, zeros elsewhere, and the gradient (scatter)" begin
    root = n - 1
    reset_default_graph()
    x = placeholder(Float64; shape=[3])
    y = mpi_gather(x .^ 2; root=root)
    @test size(y) == (3n,)
    W = collect(1.0:3n)
    L = sum(y .* y .* W) + sum(x)
    xs(q) = [0.1, -0.4, 0.3] .+ 0.25q
    want = vcat([xs(q) .^ 2 for q in 0:n-1]...)
    @test run(Session(), y, x => xs(r)) ≈ (r == root ? want : zeros(3n)) rtol = 1e-15
    g = check_grad(L, x, xs(r))
    # closed form: d/dx of sum over root's y of y^2 W, plus 1 from sum(x)
    @test g ≈ 4 .* xs(r) .^ 3 .* W[3r+1:3r+3] .+ 1 rtol = 1e-12
    # ADCME's default root 0; a matrix gathers along its first dimension
    reset_default_graph()
    M = [1.0 2.0; 3.0 4.0] .+ 10r
    z = mpi_gather(M)
    @test size(z) == (2n, 2)
    @test run(Session(), z) == (r == 0 ? vcat([[1.0 2.0; 3.0 4.0] .+ 10q for q in 0:n-1]...) : zeros(2n, 2))
    # empty tensors (OpenMPI aborts an empty gather or scatter at the root): empty results,
    # and the gradient's scatter of nothing
    reset_default_graph()
    e = placeholder(Float64; shape=[0])
    ge = mpi_gather(e)
    @test run(Session(), ge, e => zeros(0)) == zeros(0)
    @test run(Session(), gradients(sum(ge .* 2.0), e), e => zeros(0)) == zeros(0)
    @test size(run(Session(), mpi_gather(constant(zeros(Int64, 0, 3))))) == (0, 3)
end

# The global array U (m*k1 by n*k2), rank q's block, and the halo of width w of rank q's
# block computed from U padded by w cells of fill_value (the w-by-w corners 0, as ADCME's
# kernels).
global_array(m, n, k1, k2) = [sin(0.3i + 0.7j) + i for i in 1:m*k1, j in 1:n*k2]
block(U, q, n, k1, k2) = U[(q ÷ n)*k1 .+ (1:k1), (q % n)*k2 .+ (1:k2)]
function halo_oracle(U, q, n, k1, k2, fill, w=1)
    P = fill .* ones(size(U) .+ 2w)
    P[w+1:end-w, w+1:end-w] = U
    H = P[(q ÷ n)*k1 .+ (1:k1+2w), (q % n)*k2 .+ (1:k2+2w)]
    rows, cols = [1:w; k1+w+1:k1+2w], [1:w; k2+w+1:k2+2w]
    H[rows, cols] .= 0.0
    return H
end

# width 1 is ADCME's mpi_halo_exchange, width 2 its mpi_halo_exchange2; blocks of 3 x 2 are
# the narrowest width 2 takes (both column strips are the whole block)
@testset "mpi_halo_exchange$(w == 1 ? "" : "2") on a $m x $gn grid: values and gradients" for (m, gn) in
        (n == 4 ? [(2, 2), (1, 4), (4, 1)] : [(1, 2), (2, 1)]), w in (1, 2)
    k1, k2 = 3, 2
    U = global_array(m, gn, k1, k2)
    reset_default_graph()
    u = placeholder(Float64; shape=[k1, k2])
    h = (w == 1 ? mpi_halo_exchange : mpi_halo_exchange2)(u, m, gn; fill_value=-1.5, tag=5)
    @test size(h) == (k1 + 2w, k2 + 2w)
    u0 = block(U, r, gn, k1, k2)
    @test run(Session(), h, u => u0) == halo_oracle(U, r, gn, k1, k2, -1.5, w)
    # a weighting of the frame and interior that differs on every rank
    W = [1.0 + 0.1i - 0.2j + 0.3r for i in 1:k1+2w, j in 1:k2+2w]
    L = sum(h .^ 2 .* W)
    check_grad(L, u, u0)
end

@testset "mpi_halo_exchange: a 5-point Laplacian of the global array, Float32" begin
    m, gn = n == 4 ? (2, 2) : (1, 2)
    k = 3
    U = global_array(m, gn, k, k)
    reset_default_graph()
    h = mpi_halo_exchange(constant(Float32.(block(U, r, gn, k, k))), m, gn)
    lap = h[1:end-2, 2:end-1] + h[3:end, 2:end-1] + h[2:end-1, 1:end-2] + h[2:end-1, 3:end] - 4.0f0 * h[2:end-1, 2:end-1]
    P = zeros(size(U) .+ 2)
    P[2:end-1, 2:end-1] = U
    full = [P[i-1, j] + P[i+1, j] + P[i, j-1] + P[i, j+1] - 4P[i, j] for i in 2:size(P, 1)-1, j in 2:size(P, 2)-1]
    @test run(Session(), lap) ≈ Float32.(block(full, r, gn, k, k)) rtol = 1e-5
end

@testset "mpi_halo_exchange2: a fourth-order Laplacian of the global array (reach 2)" begin
    m, gn = n == 4 ? (2, 2) : (2, 1)
    k = 4
    U = global_array(m, gn, k, k)
    reset_default_graph()
    h = mpi_halo_exchange2(constant(block(U, r, gn, k, k)), m, gn; fill_value=0.5)
    c = [-1.0, 16.0, -30.0, 16.0, -1.0] ./ 12
    lap = sum(c[d+3] * (h[3+d:end-2+d, 3:end-2] + h[3:end-2, 3+d:end-2+d]) for d in -2:2)
    P = fill(0.5, size(U) .+ 4)
    P[3:end-2, 3:end-2] = U
    full = [sum(c[d+3] * (P[i+d, j] + P[i, j+d]) for d in -2:2) for i in 3:size(P, 1)-2, j in 3:size(P, 2)-2]
    @test run(Session(), lap) ≈ block(full, r, gn, k, k) rtol = 1e-12
end

@testset "mpi_halo_exchange in a while_loop body (explicit heat steps): values and gradients" begin
    # u <- u + 0.1 * (5-point Laplacian of u, zero outside), three steps on the rank grid;
    # the gradient (WhileGrad) reruns the steps' halo exchanges and sends their adjoints
    m, gn = n == 4 ? (2, 2) : (1, 2)
    k = 3
    U = global_array(m, gn, k, k) ./ 10
    reset_default_graph()
    u = placeholder(Float64; shape=[k, k])
    function step(i, v)
        h = mpi_halo_exchange(v, m, gn)
        lap = h[1:end-2, 2:end-1] + h[3:end, 2:end-1] + h[2:end-1, 1:end-2] + h[2:end-1, 3:end] - 4 * v
        return i + 1, v + 0.1 * lap
    end
    _, y = while_loop((i, v) -> i < 3, step, [constant(0), u])
    V = copy(U)
    for _ in 1:3
        P = zeros(size(V) .+ 2)
        P[2:end-1, 2:end-1] = V
        V = V + 0.1 * [P[i-1, j] + P[i+1, j] + P[i, j-1] + P[i, j+1] - 4P[i, j] for i in 2:size(P, 1)-1, j in 2:size(P, 2)-1]
    end
    u0 = block(U, r, gn, k, k)
    @test run(Session(), y, u => u0) ≈ block(V, r, gn, k, k) rtol = 1e-13
    check_grad(sum(y .^ 2 .* (1.0 + r)), u, u0)
end

@testset "errors name the op and the peer; MPI goes on" begin
    reset_default_graph()
    s = Session()
    e = try; run(s, mpi_send(constant([1.0]), r)); nothing; catch err; err; end
    @test e isa OxiflowError && occursin("MpiSend", e.msg) && occursin("is this rank", e.msg)
    e = try; run(s, mpi_recv(constant([1.0]), n)); nothing; catch err; err; end
    @test e isa OxiflowError && occursin("MpiRecv", e.msg) && occursin("src $n is not a rank", e.msg)
    @test_throws OxiflowError mpi_send(constant([1.0]), 0; tag=40000)
    @test_throws OxiflowError mpi_recv(constant([1.0]), -1)
    # rank 1 sends 2 elements, rank 0 expects 3: both fail before any data moves
    if r <= 1
        op = r == 1 ? mpi_send(constant([1.0, 2.0]), 0; name="s2") : mpi_recv(constant([0.0, 0.0, 0.0]), 1; name="r3")
        e = try; run(s, op); nothing; catch err; err; end
        @test e isa OxiflowError && occursin("does not run the matching point-to-point op", e.msg) &&
              occursin(r == 1 ? "MpiSend 's2'" : "MpiRecv 'r3'", e.msg)
    end
    e = try; run(s, mpi_halo_exchange(constant(ones(2, 2)), n, 2)); nothing; catch err; err; end
    @test e isa OxiflowError && occursin("MpiHaloExchange", e.msg) && occursin("needs m * n ranks", e.msg)
    # a halo of width 2 needs blocks of at least 2 x 2 (refused when built, on every rank)
    e = try; mpi_halo_exchange2(constant(ones(1, 3)), 1, n); nothing; catch err; err; end
    @test e isa OxiflowError && occursin("MpiHaloExchange", e.msg) && occursin("at least 2x2", e.msg) &&
          occursin("[1,3]", e.msg)
    e = try; mpi_halo_exchange2(constant(ones(4)), n, 1); nothing; catch err; err; end
    @test e isa OxiflowError && occursin("needs a matrix", e.msg)
    # the job goes on: a ring after the errors
    @test run(s, mpi_exchange(constant([Float64(r)]), (r + 1) % n, (r + n - 1) % n)) == [Float64((r + n - 1) % n)]
end

mpi_finalize()
@test mpi_finalized()
