# The MPI API in one process without mpirun (the multi-rank tests are test/mpi/, run by
# `make test-mpi`): the library is built with MPI where OpenMPI is installed; before
# mpi_init every query and collective fails with a clear error; the collectives build graph
# ops whose gradients are the adjoint collectives (ADCME's mpi_sum <-> mpi_bcast).
@testset "MPI API before mpi_init" begin
    reset_default_graph()
    @test Oxiflow.oxf_mpi_state().built == (Sys.which("mpicc") !== nothing)
    @test !mpi_initialized() && !mpi_finalized()
    e = try; mpi_rank(); nothing; catch err; err; end
    @test e isa OxiflowError && occursin("not initialized", e.msg)
    x = placeholder(Float64; shape=[3])
    y = mpi_sum(x; root=1)
    @test y.op.type == "MpiSum" && size(y) == (3,)
    e = try; run(Session(), y, x => ones(3)); nothing; catch err; err; end
    @test e isa OxiflowError && occursin("MpiSum", e.msg) && occursin("mpi_init", e.msg)
    # the gradients are the adjoint collectives
    @test gradients(sum(mpi_sum(x)), x).op.type == "MpiBcast"
    @test gradients(sum(mpi_bcast(x, 2)), x).op.type == "MpiSum"
    @test gradients(sum(mpi_allreduce(x; op="mean")), x).op.type == "MpiAllreduce"
    # bad arguments are refused when the op is built
    @test_throws OxiflowError mpi_sum(x; root=-1)
    @test_throws OxiflowError mpi_allreduce(x; op="prod")
    @test_throws OxiflowError mpi_allreduce(constant([1, 2]); op="mean")
    @test_throws OxiflowError mpi_bcast(constant([true]))
end

@testset "has_mpi, get_mpi, get_mpirun (ADCME's MPI queries)" begin
    built = Sys.which("mpicc") !== nothing
    @test has_mpi(false) == built
    if built
        inc, lib = get_mpi()
        @test isfile(joinpath(inc, "mpi.h")) && isfile(lib) && occursin("libmpi", lib)
        @test get_mpirun() == something(Sys.which("mpirun"), Sys.which("mpiexec"))
        @test_logs (:info, r"libmpi") has_mpi()
    else
        @test_throws OxiflowError get_mpi()
        @test_throws OxiflowError get_mpirun()
    end
    withenv("MPI_INCLUDE_PATH" => "/opt/mympi/include", "MPI_C_LIBRARIES" => "/opt/mympi/lib/libmpi.so") do
        @test get_mpi() == ("/opt/mympi/include", "/opt/mympi/lib/libmpi.so")
        # ADCME's rule: bin/mpirun next to that include directory, which does not exist here
        built && @test_logs (:warn,) (@test_throws OxiflowError get_mpirun())
    end
end

@testset "DistributedOptimizer's fusion buckets (built without MPI)" begin
    reset_default_graph()
    f64 = [placeholder(Float64; shape=[k]) for k in (100, 100, 300, 50)]    # 800, 800, 2400, 400 bytes
    f32 = placeholder(Float32; shape=[10])
    unknown = placeholder(Float64; shape=[nothing])
    fb = Oxiflow.fusion_buckets
    # from the last gradient back, per dtype, at most 1000 bytes; 2400 bytes alone
    @test fb(f64, 1000) == [[4], [3], [2], [1]]
    @test fb(f64, 1600) == [[4, 2], [3], [1]]     # the large one does not close the open bucket
    @test fb(f64, 10_000) == [[4, 3, 2, 1]]
    @test fb([f64[1], f32, f64[2]], 10_000) == [[3, 1], [2]]
    @test fb([f64[1], unknown, f64[2]], 10_000) == [[3, 1], [2]]
    @test sort(vcat(fb(vcat(f64, [f32]), 900)...)) == 1:5    # every gradient, once
    # the optimizer all-reduces the present gradients in groups and applies them
    x = Variable(ones(3)); y = Variable(ones(2)); z = Variable(ones(2))
    opt = DistributedOptimizer(AdamOptimizer(0.1))
    gv = compute_gradients(opt, sum(x .^ 2) + sum(y); var_list=[x, y, z])
    @test gv[3][1] === nothing && gv[3][2] === z
    @test gv[1][1].op.type == "MpiGroupedAllreduce" && gv[1][1].op === gv[2][1].op
    @test opt.name == "DistributedAdam"
    @test_throws OxiflowError DistributedOptimizer(AdamOptimizer(); op="max")
    @test_throws OxiflowError mpi_grouped_allreduce([x, constant(Float32[1])])
    e = try; run(Session(), mpi_grouped_allreduce([constant([1.0])])[1]); nothing; catch err; err; end
    @test e isa OxiflowError && occursin("MpiGroupedAllreduce", e.msg) && occursin("mpi_init", e.msg)
end

@testset "ParameterServer without MPI running (the multi-rank tests: test/mpi/async_ps.jl)" begin
    reset_default_graph()
    v = Variable([1.0, 2.0]); i = Variable([1, 2]); f = Variable(Float32[1])
    s = Session(); init(s)
    # MPI not started (or not built): a clear error, no server
    e = try; ParameterServer(s, [v]; learning_rate=0.1); nothing; catch err; err; end
    @test e isa OxiflowError && occursin("ParameterServer", e.msg) &&
          occursin(Oxiflow.oxf_mpi_state().built ? "mpi_init" : "built without MPI", e.msg)
    # arguments refused before any MPI call
    e = try; ParameterServer(s, [v, i]; learning_rate=0.1); nothing; catch err; err; end
    @test e isa OxiflowError && occursin("Int64 variable", e.msg) && occursin("Float64 variables only", e.msg)
    @test_throws OxiflowError ParameterServer(s, [f]; learning_rate=0.1)
    @test_throws OxiflowError ParameterServer(s, [v + 1.0]; learning_rate=0.1)
    @test_throws OxiflowError ParameterServer(s, Tensor[]; learning_rate=0.1)
end
