# A job whose ranks diverge must end with a clear error, never hang (make test-mpi runs this
# under `timeout` and checks mpirun's status and output). ARGS[1]:
# - "throws": rank 1 throws before the collective; mpirun ends the job and shows the error.
# - "stalls": rank 1 sleeps instead of joining; rank 0's collective fails after
#   OXIFLOW_MPI_TIMEOUT seconds with a DeadlineExceededError naming the op, the rank and,
#   from the stall census, rank 1 as never joined; printed here before rank 0 exits
#   non-zero and mpirun ends the job. On 4 ranks ("stalls" with -np 4) rank 2 sleeps and
#   the others name it, and each other the op they wait in.
# - "diverged": rank 1 waits in mpi_recv from rank 0 while rank 0 runs the all-reduce; the
#   census tells rank 0 where rank 1 waits.
# - "recv_stalls": the same with a point-to-point op: rank 0's mpi_recv from rank 1 fails
#   with a DeadlineExceededError naming the op, the rank and the peer.
# - "ps_close_stalls": rank 1 never closes the parameter server; rank 0's close fails with a
#   DeadlineExceededError naming the rank that did not close.
# The checks read rank 0's error. Two races could hide it on a loaded machine, so:
# - every rank first runs one all-reduce together ("warmup"), which compiles `run` and lines
#   the ranks up: the census names a rank missing if it times out more than the grace
#   period after rank 0, and a rank still compiling could;
# - a rank other than 0 that fails waits before it exits (`fail`): mpirun kills the job
#   when the first rank exits, which could be before rank 0 has printed.
using Oxiflow

function fail(e)
    # one write, so that mpirun does not interleave another rank's error into this line
    write(stderr, string("rank ", mpi_rank(), ": ", sprint(showerror, e), "\n"))
    flush(stderr)
    mpi_rank() == 0 || sleep(20)
    exit(3)
end

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
        fail(e)
    end
end
run(Session(), mpi_allreduce(constant([1.0]); name="warmup"))
sleeper = mode == "stalls" && mpi_size() == 4 ? 2 : 1
x = if mode == "recv_stalls"
    mpi_recv(constant([1.0]), 1; name="halo")
elseif mode == "diverged" && mpi_rank() == 1
    mpi_recv(constant([1.0]), 0; name="halo")
else
    mpi_allreduce(constant([1.0]); name="grads")
end
s = Session()
if mpi_rank() == sleeper && mode != "diverged"
    mode == "throws" && error("rank 1 fails on purpose")
    sleep(600)
end
try
    run(s, x)
catch e
    fail(e)
end
