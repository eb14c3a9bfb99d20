# Run with `mpirun -np 2` or `-np 4` (make test-mpi). Horovod-style training: local ranks,
# GPU pinning, fused gradient all-reduce, broadcast of the variables, and the defining
# property of synchronous data parallelism: n ranks on equal shards of a batch take exactly
# the steps one process takes on the whole batch (the oracle: the same model trained in this
# process without MPI ops).
using Test, Oxiflow, Random

use_emulated_gpus(2)        # before mpi_init, which pins each rank to one GPU of its host
mpi_init()
r, n = mpi_rank(), mpi_size()

@testset "local rank and size on one host (OpenMPI's own numbering as the oracle)" begin
    @test mpi_local_size() == n   # every rank of this job runs on this host
    @test mpi_local_rank() == parse(Int, ENV["OMPI_COMM_WORLD_LOCAL_RANK"])
    @test mpi_local_size() == parse(Int, ENV["OMPI_COMM_WORLD_LOCAL_SIZE"])
end

@testset "each rank keeps GPU local_rank (mod the GPU count) alone" begin
    @test get_visible_devices("GPU") == [Oxiflow.PhysicalDevice("/physical_device:GPU:$(mpi_local_rank() % 2)", "GPU")]
    reset_default_graph()
    x = @gpu constant([1.0, 2.0]) .* 3.0
    s = Session()
    @test run(s, x) == [3.0, 6.0]
    @test endswith(assigned_device(s, x), "GPU:0")   # its one GPU, whichever it is
end

# A 2-layer tanh network's mean squared error on a batch (rows of X), built in the default graph.
function model(X, Y, W1, b1, W2)
    h = tanh(X * W1 .+ b1)
    return mean((h * W2 - Y) .^ 2)
end

rng = MersenneTwister(7)
const B, D, H = 24, 5, 6          # batch (divisible by 2 and 4), inputs, hidden units
Xall, Yall = randn(rng, B, D), randn(rng, B, 1)
W10, b10, W20 = randn(rng, D, H), randn(rng, 1, H), randn(rng, H, 1)
steps = 6

function train(make_opt, X, Y; distributed::Bool)
    reset_default_graph()
    # distributed: every rank starts from its own values; the broadcast makes them rank 0's
    off = distributed ? Float64(r) : 0.0
    W1, b1, W2 = Variable(W10 .+ off), Variable(b10 .- off), Variable(W20 .* (1 + off))
    loss = model(constant(X), constant(Y), W1, b1, W2)
    step = minimize(make_opt(), loss)
    s = Session(); init(s)
    distributed && run(s, broadcast_global_variables(0))
    for _ in 1:steps
        run(s, step)
    end
    return run(s, [W1, b1, W2, loss]), s, step
end

@testset "synchronous training on n shards equals one process on the whole batch" begin
    shard = (r * B ÷ n + 1):((r + 1) * B ÷ n)
    for (label, make) in (("Adam", () -> AdamOptimizer(0.05)), ("GradientDescent", () -> GradientDescentOptimizer(0.1)))
        single, _, _ = train(make, Xall, Yall; distributed=false)
        dist, s, step = train(() -> DistributedOptimizer(make()), Xall[shard, :], Yall[shard, :]; distributed=true)
        for k in 1:3
            @test maximum(abs.(dist[k] - single[k])) <= 1e-10
        end
        # the variables moved: the comparison is not between starting points
        @test maximum(abs.(single[1] - W10)) > 1e-3
        # one fused all-reduce per step for the three Float64 gradients
        run_profile(s, step)
        evs = filter(e -> e.kind === :op && (startswith(e.op, "Mpi") || startswith(e.op, "MPI_")), profile_events())
        @test sort([e.op for e in evs]) == ["MPI_Allreduce", "MpiGroupedAllreduce", "MpiNegotiate"]
        # the phases: waiting for the other ranks, then moving the 3 gradients' bytes
        xfer = only(filter(e -> e.op == "MPI_Allreduce", evs))
        @test xfer.bytes == 8 * (D * H + H + H) && endswith(xfer.name, "/transfer")
    end
end

@testset "save_profile(all_ranks=true): one timeline, every rank's processes" begin
    # the session of the fusion test below is not made yet: profile one collective here
    reset_default_graph()
    y = mpi_allreduce(constant(fill(1.0, 1000)); name="sum_of_ones")
    s = Session()
    run_profile(s, y)
    # collectives are GPU ops: default placement prefers this rank's (emulated) GPU, whose
    # kernels for them are the CPU's, over MPI
    dev = assigned_device(s, y)
    @test dev == "/job:localhost/replica:0/task:0/device:GPU:0"
    path = joinpath(tempdir(), "oxiflow_ranks_$(getpid()).json")
    save_profile(path; all_ranks=true)
    if r == 0
        text = read(path, String)
        rm(path)
        for q in 0:n-1
            @test occursin("\"rank $q: MPI rank $q of $n\"", text)
            @test occursin("\"rank $q: $dev Compute\"", text)
        end
        # one transfer and one negotiation per rank (the merged file is compact JSON)
        @test count("\"name\":\"MPI_Allreduce\"", text) == n && count("\"name\":\"MpiNegotiate\"", text) == n
    else
        @test !isfile(path)
    end
end

@testset "fusion threshold: a bucket per threshold's worth of gradients" begin
    reset_default_graph()
    vs = [Variable(fill(1.0 + r, 100)) for _ in 1:5]       # 800 bytes each
    loss = sum(sum(v .^ 2) for v in vs)
    opt = DistributedOptimizer(GradientDescentOptimizer(0.1); fusion_threshold=1600)
    step = minimize(opt, loss)
    s = Session(); init(s)
    run_profile(s, step)
    evs = filter(e -> e.kind === :op && e.op == "MpiGroupedAllreduce", profile_events())
    @test length(evs) == 3                                  # 2 + 2 + 1 gradients
    # each variable took the step of the mean gradient: v - 0.1 * mean over ranks of 2v
    mean_v = 1.0 + (n - 1) / 2
    @test all(run(s, v) ≈ fill(1.0 + r - 0.2 * mean_v, 100) for v in vs)
end

@testset "mpi_optimize: ADCME's example, a Rosenbrock loss summed over ranks" begin
    reset_default_graph()
    θ0 = Variable(rand(2))
    θ = mpi_bcast(θ0)
    x, y = θ[1], θ[2]
    local_loss = ((1.0 - x)^2 + 100.0 * (y - x^2)^2) * (r + 1)
    loss = mpi_sum(local_loss)
    g = gradients(loss, θ0)
    s = Session(); init(s)
    nf, ng = Ref(0), Ref(0)
    f(x0) = (nf[] += 1; run(s, loss, θ0 => x0))
    g!(G, x0) = (ng[] += 1; G[:] = run(s, g, θ0 => x0))
    res = mpi_optimize(f, g!, [-0.5, 0.8] .+ r)        # only rank 0's start counts
    if r == 0
        @test res.minimizer ≈ [1.0, 1.0] rtol = 1e-6   # the minimum of every rank's term
        @test res.minimum < 1e-10 && res.f_calls == nf[]
        # the same steps as the engine's L-BFGS on the closed-form sum of the ranks' losses
        w = sum(1:n)
        fg(z) = (w * ((1 - z[1])^2 + 100 * (z[2] - z[1]^2)^2),
                 w .* [-2 * (1 - z[1]) - 400 * z[1] * (z[2] - z[1]^2), 200 * (z[2] - z[1]^2)])
        ref = Oxiflow.lbfgsb(fg, [-0.5, 0.8]; max_iter=1000, pgtol=1e-8, ftol=0.0)
        @test res.minimizer ≈ ref[1] rtol = 1e-8
        @test res.iterations == ref[3]
    else
        @test res === nothing
    end
    # every rank evaluated f and g! as often as rank 0
    counts = [nf[], ng[]]
    @test mpi_sync!(copy(counts)) == counts
    # rank 0's f fails on its third call: every rank stops with an error, none waits
    calls = Ref(0)
    fbad(x0) = (calls[] += 1; r == 0 && calls[] == 3 && error("f failed"); run(s, loss, θ0 => x0))
    @test_throws Exception mpi_optimize(fbad, g!, [-0.5, 0.8])
    @test_throws OxiflowError mpi_optimize(f, g!, [0.0, 0.0]; method="Newton")
    @test_throws OxiflowError mpi_optimize(f, g!, [0.0, 0.0]; options=(maxiter=3,))
end

mpi_finalize()
