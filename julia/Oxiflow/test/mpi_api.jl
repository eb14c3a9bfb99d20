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
