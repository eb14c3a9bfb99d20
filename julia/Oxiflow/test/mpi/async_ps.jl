# Run with `mpirun -np 2` or `-np 4` (make test-mpi). Asynchronous training with a parameter
# server on rank 0 (ParameterServer, ps_step!, ps_push!, ps_pull, close):
# - serialised (one rank pushes at a time, in rank order, barriers between pushes) the
#   result and every push's staleness equal a plain-Julia simulation of the server and the
#   ranks (sequential SGD, or TF's momentum, over the same gradient sequence);
# - truly asynchronous, a least-squares problem converges and the mean staleness over all
#   pushes is within [0, n - 1] (an upper bound that holds for any interleaving);
# - errors: before mpi_init, bad or disagreeing arguments (on every rank alike, after which
#   servers still start), a wrong gradient length (the server stays usable), a closed server.
using Test, Oxiflow, Random, LinearAlgebra

@testset "before mpi_init: a clear error" begin
    reset_default_graph()
    v = Variable([1.0, 2.0])
    s = Session(); init(s)
    e = try; ParameterServer(s, [v]; learning_rate=0.1); nothing; catch err; err; end
    @test e isa OxiflowError && occursin("ParameterServer", e.msg) && occursin("mpi_init", e.msg)
end

mpi_init()
r, n = mpi_rank(), mpi_size()

# each rank's least-squares data: loss_r(W, b) = mean((X_r W .+ b - y_r).^2), 2 variables of
# different shapes (a D×1 matrix and a 0-d scalar) to check the flattening
const D, M = 4, 6
data(q) = (rng = MersenneTwister(100 + q); (randn(rng, M, D), randn(rng, M)))
W0, b0 = reshape(collect(1.0:D) ./ D, D, 1), 0.25

# the gradient of loss_q in plain Julia (the oracle's; the ranks use the graph's)
function grad_oracle(q, W, b)
    X, y = data(q)
    res = X * vec(W) .+ b .- y
    return 2 / M * (X' * res), 2 / M * sum(res)
end

function build(q)
    reset_default_graph()
    # every rank starts from its own values; the server takes rank 0's
    W, b = Variable(W0 .+ q), Variable(b0 - q)
    X, y = data(q)
    loss = mean((constant(X) * W .+ b - constant(reshape(y, M, 1))) .^ 2)
    s = Session(); init(s)
    return s, W, b, loss, gradients(loss, [W, b])
end

@testset "serialised pushes equal sequential SGD in plain Julia (momentum $mom)" for mom in (0.0, 0.9)
    lr, steps = 0.05, 5
    s, W, b, _, grads = build(r)
    ps = ParameterServer(s, [W, b]; learning_rate=lr, momentum=mom)
    @test run(s, W) == W0 && run(s, b) == b0          # rank 0's values everywhere
    stale = Int[]
    for _ in 1:steps, q in 0:n-1
        q == r && push!(stale, ps_step!(ps, s, grads))
        mpi_barrier()
    end
    final = close(ps, s)
    # the oracle: the server's values and accumulator, and each rank's last received values
    P, accum = vcat(vec(W0), b0), zeros(D + 1)
    local_vals = [copy(P) for _ in 0:n-1]
    expected_stale, version, seen = Int[], 0, zeros(Int, n)
    for _ in 1:steps, q in 0:n-1
        gW, gb = grad_oracle(q, reshape(local_vals[q+1][1:D], D, 1), local_vals[q+1][end])
        g = vcat(gW, gb)
        if mom > 0
            accum = mom .* accum .+ g
            P = P .- lr .* accum
        else
            P = P .- lr .* g
        end
        q == r && push!(expected_stale, version - seen[q+1])
        version += 1
        seen[q+1] = version
        local_vals[q+1] = copy(P)
    end
    @test maximum(abs.(vec(final[1]) - P[1:D])) <= 1e-12 && abs(final[2] - P[end]) <= 1e-12
    @test maximum(abs.(vec(run(s, W)) - P[1:D])) <= 1e-12 && abs(run(s, b) - P[end]) <= 1e-12
    @test maximum(abs.(P[1:D] - vec(W0))) > 1e-2        # it moved
    @test stale == expected_stale                       # r in the first round, then n - 1
    @test stale == [r; fill(n - 1, steps - 1)]
    st = ps_stats(ps)
    @test st.pushes == steps && st.version == n * steps && st.max_staleness == (steps > 1 ? n - 1 : r)
end

@testset "ps_pull and ps_push! without a session; staleness counts from the last pull" begin
    s, W, b, _, _ = build(r)
    ps = ParameterServer(s, [W, b]; learning_rate=0.5)
    mpi_barrier()
    # everyone pulls, then pushes a gradient of ones in rank order: rank q sees q updates
    @test ps_pull(ps) == Any[W0, b0]
    mpi_barrier()
    for q in 0:n-1
        if q == r
            vals = ps_push!(ps, vcat(ones(D), 1.0))      # one flat vector
            @test ps_stats(ps).last_staleness == q
            @test vals[1] ≈ W0 .- 0.5 * (q + 1) atol=1e-14
            @test vals[2] isa Float64
            @test vals[2] ≈ b0 - 0.5 * (q + 1) atol=1e-14
        end
        mpi_barrier()
    end
    @test ps_pull(ps)[1] ≈ W0 .- 0.5 * n atol=1e-14
    close(ps)
end

@testset "asynchronous least squares converges; mean staleness within [0, n - 1]" begin
    # one true solution for every rank's data, so the asynchronous steps share a minimum
    rng = MersenneTwister(5 + r)
    wstar = [1.0, -2.0, 0.5, 3.0]
    X = randn(rng, 32, D)
    reset_default_graph()
    w = Variable(zeros(D) .+ r)
    loss = mean((constant(X) * w - constant(X * wstar)) .^ 2)
    s = Session(); init(s)
    ps = ParameterServer(s, [w]; learning_rate=0.05)
    g = gradients(loss, [w])
    loss0 = run(s, loss)
    mpi_barrier()                            # start together, and take time per step, so
    for k in 1:300                           # that the ranks' pushes interleave
        ps_step!(ps, s, g)
        sleep(0.002)
    end
    final = close(ps, s)
    st = ps_stats(ps)
    @test st.pushes == 300 && st.version == 300n          # every rank's updates were applied
    @test norm(final[1] - wstar) < 1e-6 * norm(wstar)
    @test run(s, loss) < 1e-10 * loss0
    stale, pushes = run(Session(), mpi_allreduce(constant([Float64(st.total_staleness), Float64(st.pushes)]); op="sum"))
    println("async, rank $r of $n: mean staleness $(st.mean_staleness), max $(st.max_staleness); over all $(Int(pushes)) pushes: $(stale / pushes)")
    @test 0 <= stale / pushes <= n - 1
    n == 1 || @test stale > 0                             # the ranks did interleave
end

@testset "errors leave the server (and the next one) usable" begin
    s, W, b, _, grads = build(r)
    # bad or disagreeing arguments fail on every rank alike, before a server exists
    e = try; ParameterServer(s, [W, b]; learning_rate=-1.0); nothing; catch err; err; end
    @test e isa OxiflowError && occursin("learning_rate must be finite and > 0", e.msg) && occursin("-1.0", e.msg)
    e = try; ParameterServer(s, r == n - 1 ? [W] : [W, b]; learning_rate=0.1); nothing; catch err; err; end
    @test e isa OxiflowError && occursin("different numbers of parameters (from $D to $(D + 1)", e.msg)
    e = try; ParameterServer(s, [W, b]; learning_rate=0.1 * (r + 1)); nothing; catch err; err; end
    @test e isa OxiflowError && occursin("different hyperparameters", e.msg)
    e = try; ParameterServer(s, [W, b]; learning_rate=0.1, momentum=r == 0 ? 1.0 : 0.0); nothing; catch err; err; end
    @test e isa OxiflowError && occursin(r == 0 ? "momentum = 1.0" : "another rank passed an invalid", e.msg)
    @test_throws OxiflowError ParameterServer(s, [W, constant(1.0)]; learning_rate=0.1)
    # a server after the failures works
    ps = ParameterServer(s, [W, b]; learning_rate=0.5)
    e = try; ps_push!(ps, zeros(D + 2)); nothing; catch err; err; end
    @test e isa OxiflowError && occursin("the gradient has $(D + 2) elements, but the parameter server holds $(D + 1) parameters", e.msg)
    e = try; ps_push!(ps, Any[zeros(D), 0.0]); nothing; catch err; err; end
    @test e isa OxiflowError && occursin("has size ($D,), the variable ($D, 1)", e.msg)
    @test_throws OxiflowError ps_push!(ps, Any[zeros(D, 1)])
    mpi_barrier()
    for q in 0:n-1
        q == r && ps_push!(ps, Any[ones(D, 1), nothing])    # `nothing`: no gradient for b
        mpi_barrier()
    end
    @test ps_pull(ps) == Any[W0 .- 0.5n, b0]
    @test sprint(show, ps) == "ParameterServer(2 variables, $(D + 1) parameters, learning_rate=0.5)"
    close(ps)
    e = try; ps_step!(ps, s, grads); nothing; catch err; err; end
    @test e isa OxiflowError && occursin("closed", e.msg)
    @test_throws OxiflowError close(ps)
end

@testset "mpi_finalize stops a server nobody closed" begin
    s, W, b, _, _ = build(r)
    ps = ParameterServer(s, [W, b]; learning_rate=0.1)
    ps_push!(ps, zeros(D + 1))
    mpi_barrier()
    mpi_finalize()                                    # returns: the server thread stopped
    @test mpi_finalized()
    e = try; ps_push!(ps, zeros(D + 1)); nothing; catch err; err; end
    @test e isa OxiflowError && occursin("MPI was finalized", e.msg)
end
