#!/usr/bin/env bash
# Build here, run on a GPU machine (the device tool's lent H100/H200, which has CUDA 13.0,
# driver 580 and PyTorch but no Rust):
#
#   bash scripts/gpu-check.sh build      # here: test and bench binaries into .gpu/
#   # then, with the device tool: run `bash scripts/gpu-check.sh run` with carry [".gpu"]
#
# `run` finds the CUDA libraries cudarc loads (libnvrtc.so.13, libcublas.so.13) in the
# machine's Python nvidia-* packages, runs every GPU test binary (each test prints
# `skipped` when there is no GPU, so a run without one is visible as such), then the GPU
# benchmark, and leaves logs and figures in $OUT (or .gpu/out).
set -euo pipefail
cd "$(dirname "$0")/.."
mode="${1:-}"

case "$mode" in
build)
  rm -rf .gpu && mkdir -p .gpu/bin
  # the test binaries of oxiflow-cuda (kernels compile check, launcher tests, sessions)
  cargo test --release -p oxiflow-cuda --no-run --message-format=json 2>/dev/null \
    | python3 -c 'import sys, json
for l in sys.stdin:
    m = json.loads(l)
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["profile"]["test"]:
        print(m["target"]["name"], m["executable"])' \
    | while read -r name exe; do cp "$exe" ".gpu/bin/test-$name"; done
  if cargo build --release -p oxiflow-cuda --example gpu_bench 2>/dev/null; then
    cp target/release/examples/gpu_bench .gpu/bin/
  fi
  # no debug info: what is carried to the device machine must stay under 64 MiB
  strip .gpu/bin/*
  ls -la .gpu/bin
  echo "now run on the GPU machine: bash scripts/gpu-check.sh run   (carry: .gpu)"
  ;;
run)
  out="${OUT:-.gpu/out}"; mkdir -p "$out"
  nv=$(python3 -c 'import nvidia, os; print(os.path.dirname(list(nvidia.__path__)[0]))' 2>/dev/null || true)
  libs=$(find "${nv:-/nonexistent}" -path '*nvidia*' -name 'lib*.so*' -printf '%h\n' 2>/dev/null | sort -u | tr '\n' ':' || true)
  # the project's own NVRTC, when it was carried or installed here
  [ -d .deps/nvrtc/nvidia/cu13/lib ] && libs="$PWD/.deps/nvrtc/nvidia/cu13/lib:$libs"
  export LD_LIBRARY_PATH="${libs}${LD_LIBRARY_PATH:-}"
  export OXIFLOW_KERNEL_CACHE="$out/kernel-cache"
  nvidia-smi -L | tee "$out/gpu.txt" || echo "nvidia-smi failed" | tee "$out/gpu.txt"
  status=0
  for t in .gpu/bin/test-*; do
    echo "=== $t" | tee -a "$out/tests.log"
    if ! "$t" --nocapture --test-threads=1 2>&1 | tee -a "$out/tests.log"; then status=1; fi
  done
  if [ -x .gpu/bin/gpu_bench ]; then
    .gpu/bin/gpu_bench 2>&1 | tee "$out/bench.txt" || status=1
  fi
  python3 scripts/torch_bench.py 2>&1 | tee -a "$out/bench.txt" || echo "torch_bench failed" | tee -a "$out/bench.txt"

  exit $status
  ;;
*)
  echo "usage: bash scripts/gpu-check.sh build|run" >&2
  exit 2
  ;;
esac
