#!/usr/bin/env bash
# Runs Julia scripts (the seeds, the example tests), each in its own scratch directory with
# the repository's package and library, JOBS at a time (default: the number of cores; a
# Julia process compiles on one core, so two scripts on two cores take about the time of
# one). Each script's output is printed in one piece when it ends, with its time; all run
# even if one fails; then a summary line, and the status is 1 when any failed.
#
#   JULIA_RUN="OXIFLOW_LIB=... julia --project=..." bash scripts/run-julia-scripts.sh NAME script.jl...
set -uo pipefail
name="$1"
shift
[ "$#" -gt 0 ] || { echo "$name: no scripts given"; exit 1; }
: "${JULIA_RUN:?JULIA_RUN must hold the command that runs a script}"
jobs="${JOBS:-$(nproc 2>/dev/null || echo 2)}"
root="$(pwd)"
logs="$(mktemp -d)"
trap 'rm -rf "$logs"' EXIT

run_one() {  # script, log file: runs the script in a scratch directory, writes its status
  local s="$1" log="$2" tmp start rc
  tmp="$(mktemp -d)"
  start=$(date +%s)
  (cd "$tmp" && eval "$JULIA_RUN" "\"$root/$s\"") > "$log" 2>&1
  rc=$?
  rm -rf "$tmp"
  echo "$rc" > "$log.status"
  # one script's output at a time, whole
  ( flock 9; echo "=== $s (status $rc, $(( $(date +%s) - start )) s)"; cat "$log" ) 9> "$lock"
}
export -f run_one
lock="$logs/print.lock"
export JULIA_RUN root lock

# precompile the package once: processes loading a stale package at the same time race on
# its cache file
eval "$JULIA_RUN" --startup-file=no -e "'using Oxiflow'" || { echo "$name: the package does not load"; exit 1; }

i=0
for s in "$@"; do
  i=$((i + 1))
  printf '%s\0%s\0' "$s" "$logs/$i.log"
done | xargs -0 -n 2 -P "$jobs" bash -c 'run_one "$0" "$1"'

pass=0; fail=0; failed=""
i=0
for s in "$@"; do
  i=$((i + 1))
  read -r rc < "$logs/$i.log.status" 2>/dev/null || rc=1
  if [ "$rc" -eq 0 ]; then pass=$((pass + 1)); else fail=$((fail + 1)); failed="$failed $s"; fi
done
echo "$name: $pass passed, $fail failed"
if [ "$fail" -ne 0 ]; then echo "failed $name:$failed"; exit 1; fi
