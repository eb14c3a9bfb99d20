#!/usr/bin/env bash
# Jobs whose ranks diverge end with a clear error within a bounded time (issue: no silent
# hang). Runs julia/Oxiflow/test/mpi/failures.jl on 2 ranks in both modes and checks
# mpirun's status and output:
# - throws: rank 1 throws before the collective; the job fails and shows rank 1's error;
# - stalls: rank 1 never joins; rank 0's collective fails after OXIFLOW_MPI_TIMEOUT (3 s)
#   with a DeadlineExceededError naming the op and the rank;
# - recv_stalls: the same for a point-to-point op (mpi_recv from rank 1), naming the peer;
# - ps_close_stalls: rank 1 never closes the parameter server; rank 0's close fails after
#   the timeout naming rank 1.
# Each job must end within 120 s (`timeout`'s status 124 is a failure).
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
MPIRUN="${MPIRUN:-mpirun --oversubscribe}"
JULIA="${JULIA:-julia}"
fail=0
check() {  # mode, text the output must hold
  local out rc
  out="$(OXIFLOW_MPI_TIMEOUT=3 timeout 120 $MPIRUN -np 2 "$JULIA" --startup-file=no --project=julia/Oxiflow julia/Oxiflow/test/mpi/failures.jl "$1" 2>&1)"
  rc=$?
  if [ "$rc" -eq 0 ] || [ "$rc" -eq 124 ] || ! grep -qF "$2" <<<"$out"; then
    echo "check-mpi-failures: $1: status $rc (want a failure that is not a timeout), output:"
    echo "$out" | tail -20
    fail=1
  else
    echo "check-mpi-failures: $1: the job failed with status $rc and said: $(grep -F "$2" <<<"$out" | head -1 | cut -c1-160)"
  fi
}
check throws "rank 1 fails on purpose"
check stalls "DeadlineExceededError): MpiAllreduce 'grads' on rank 0 of 2: the other ranks did not join within 3 s"
check recv_stalls "DeadlineExceededError): MpiRecv 'halo' on rank 0 of 2: the messages with rank(s) [1] did not complete within 3 s"
check ps_close_stalls "DeadlineExceededError): close(ParameterServer) on rank 0 of 2: not every rank closed the parameter server (a collective call) within 3 s"
exit $fail
