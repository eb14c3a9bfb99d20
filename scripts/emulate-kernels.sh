#!/usr/bin/env bash
# Runs the kernels of kernels/ on the CPU under a host emulation of CUDA (threads and a
# barrier per block; crates/oxiflow-cuda/tests/emulation/), checking their results against
# naive loops. A development check for machines without a GPU: it exercises the kernels'
# index arithmetic, reduction trees and edge-value rules, not the CUDA compiler (that is
# tests/kernels_compile.rs) nor real GPU execution (tests/gpu_ops.rs). Needs g++ >= 11.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
SRC="$ROOT/crates/oxiflow-cuda/tests/emulation"
CXX="${CXX:-g++}"
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
for t in reduce misc index; do
  "$CXX" -std=c++20 -O1 -pthread -w "$SRC/$t.cpp" -o "$out/$t"
  "$out/$t"
done
