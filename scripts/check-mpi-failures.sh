#!/usr/bin/env bash
# Jobs whose ranks diverge end with a clear error within a bounded time (issue: no silent
# hang). Runs julia/Oxiflow/test/mpi/failures.jl on 2 ranks in both modes and checks
# mpirun's status and output:
# - throws: rank 1 throws before the collective; the job fails and shows rank 1's error;
# - stalls: rank 1 never joins; rank 0's collective fails after OXIFLOW_MPI_TIMEOUT (3 s)
#   with a DeadlineExceededError naming the op, the rank and (the stall census) rank 1 as
#   never joined; on 4 ranks rank 2 sleeps and rank 0 names it and where ranks 1 and 3 wait;
# - diverged: rank 1 waits in a receive while rank 0 runs the all-reduce; rank 0's error
#   says where rank 1 waits;
# - recv_stalls: the same for a point-to-point op (mpi_recv from rank 1), naming the peer;
# - ps_close_stalls: rank 1 never closes the parameter server; rank 0's close fails after
#   the timeout naming rank 1.
# Each job must end within 120 s (`timeout`'s status 124 is a failure).
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
MPIRUN="${MPIRUN:-mpirun --oversubscribe}"
JULIA="${JULIA:-julia}"
fail=0
check() {  # mode, ranks, texts the output must all hold
  local out rc mode="$1" np="$2" t missing=""
  shift 2
  out="$(OXIFLOW_MPI_TIMEOUT=3 timeout 120 $MPIRUN -np "$np" "$JULIA" --startup-file=no --project=julia/Oxiflow julia/Oxiflow/test/mpi/failures.jl "$mode" 2>&1)"
  rc=$?
  for t in "$@"; do grep -qF "$t" <<<"$out" || missing+="  missing: $t"$'\n'; done
  if [ "$rc" -eq 0 ] || [ "$rc" -eq 124 ] || [ -n "$missing" ]; then
    echo "check-mpi-failures: $mode on $np ranks: status $rc (want a failure that is not a timeout)"
    printf '%s' "$missing"
    echo "output:"
    echo "$out" | tail -20
    fail=1
  else
    echo "check-mpi-failures: $mode on $np ranks: the job failed with status $rc and said: $(grep -F "$1" <<<"$out" | head -1 | cut -c1-400)"
  fi
}
check throws 2 "rank 1 fails on purpose"
check stalls 2 "DeadlineExceededError): MpiAllreduce 'grads' on rank 0 of 2: the other ranks did not all join within 3 s (OXIFLOW_MPI_TIMEOUT); stall census: rank(s) [1] never joined"
check stalls 4 "DeadlineExceededError): MpiAllreduce 'grads' on rank 0 of 4: the other ranks did not all join within 3 s (OXIFLOW_MPI_TIMEOUT); stall census: rank(s) [2] never joined" \
  "rank(s) [1, 3] wait in MpiAllreduce 'grads'"
check diverged 2 "DeadlineExceededError): MpiAllreduce 'grads' on rank 0 of 2: the other ranks did not all join within 3 s (OXIFLOW_MPI_TIMEOUT); stall census: every other rank is waiting in an MPI op too; rank(s) [1] wait in MpiRecv 'halo'"
check recv_stalls 2 "DeadlineExceededError): MpiRecv 'halo' on rank 0 of 2: the messages with rank(s) [1] did not complete within 3 s" "stall census: rank(s) [1] never joined"
check ps_close_stalls 2 "DeadlineExceededError): close(ParameterServer) on rank 0 of 2: not every rank closed the parameter server (a collective call) within 3 s"
exit $fail
