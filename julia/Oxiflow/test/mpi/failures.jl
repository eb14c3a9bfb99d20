# A job whose ranks diverge must end with a clear error, never hang (make test-mpi runs this
# under `timeout` and checks mpirun's status and output). ARGS[1]:
# - "throws": rank 1 throws before the collective; mpirun ends the job and shows the error.
# - "stalls": rank 1 sleeps instead of joining; rank 0's collective fails after
#   OXIFLOW_MPI_TIMEOUT seconds with a DeadlineExceededError naming the op and the rank,
#   printed here before rank 0 exits non-zero and mpirun ends the job.
using Oxiflow

mode = ARGS[1]
mpi_init()
x = mpi_allreduce(constant([1.0]); name="grads")
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
