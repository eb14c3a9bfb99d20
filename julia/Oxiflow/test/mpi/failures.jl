# A job whose ranks diverge must end with a clear error, never hang (make test-mpi runs this
# under `timeout` and checks mpirun's status and output). ARGS[1]:
# - "throws": rank 1 throws before the collective; mpirun ends the job and shows the error.
# - "stalls": rank 1 sleeps instead of joining; rank 0's collective fails after
#   OXIFLOW_MPI_TIMEOUT seconds with a DeadlineExceededError naming the op and the rank,
#   printed here before rank 0 exits non-zero and mpirun ends the job.
# - "recv_stalls": the same with a point-to-point op: rank 0's mpi_recv from rank 1 fails
#   with a DeadlineExceededError naming the op, the rank and the peer.
# - "ps_close_stalls": rank 1 never closes the parameter server; rank 0's close fails with a
#   DeadlineExceededError naming the rank that did not close.
using Oxiflow

mode = ARGS[1]
mpi_init()
if mode == "ps_close_stalls"
    v = Variable([1.0, 2.0])
    s = Session(); init(s)
    ps = ParameterServer(s, [v]; learning_rate=0.1)
    ps_push!(ps, [1.0, 1.0])
    mpi_rank() == 1 && sleep(600)
    try
        close(ps)
    catch e
        println(stderr, "rank $(mpi_rank()): ", sprint(showerror, e))
        exit(3)
    end
end
x = mode == "recv_stalls" ? mpi_recv(constant([1.0]), 1; name="halo") : mpi_allreduce(constant([1.0]); name="grads")
s = Session()
if mpi_rank() == 1
    mode == "throws" && error("rank 1 fails on purpose")
    sleep(600)
end
try
    run(s, x)
catch e
    println(stderr, "rank $(mpi_rank()): ", sprint(showerror, e))
    exit(3)
end
