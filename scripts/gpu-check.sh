#!/usr/bin/env bash
# Build here, run on a GPU machine (the device tool's lent H100/H200, which has CUDA 13.0,
# driver 580 and PyTorch but no Rust and no Julia):
#
#   bash scripts/gpu-check.sh build      # here: test and bench binaries, packed into .gpu/bin.tar.xz
#   # then, with the device tool: run `bash scripts/gpu-check.sh run` with carry [".gpu"]
#
# `build` packs the GPU test binaries of oxiflow-cuda, oxiflow-capi's C ABI GPU test, the
# GPU benchmark and the digits main job (crates/oxiflow-cuda/examples/digits_gpu.rs, the
# Rust twin of examples/digits_mlp.jl) into one xz archive (what travels must stay under
# 64 MiB; the stripped binaries are ~90 MB, the archive ~20 MB).
#
# `run` is strict: OXIFLOW_REQUIRE_GPU=1 makes every GPU test fail rather than skip when it
# cannot use a GPU. It finds the CUDA libraries cudarc loads (libnvrtc.so.13,
# libcublas.so.13, libnccl.so.2) in the machine's Python nvidia-* packages, runs every test binary, the
# benchmark, PyTorch's side of it and the digits job, leaves logs and figures in $OUT (or
# .gpu/out), and ends with one summary line. It exits non-zero if nvidia-smi fails, a test
# fails or skips, no kernel was timed on the GPU, or a benchmark fails.
set -euo pipefail
cd "$(dirname "$0")/.."
mode="${1:-}"

# `cargo test --no-run` executables of the given cargo arguments, as "name path" lines
test_executables() {
  cargo test --release "$@" --no-run --message-format=json 2>/dev/null \
    | python3 -c 'import sys, json
for l in sys.stdin:
    m = json.loads(l)
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["profile"]["test"]:
        print(m["target"]["name"], m["executable"])'
}

case "$mode" in
build)
  rm -rf .gpu && mkdir -p .gpu/bin
  # nccl_binding checks the NCCL binding against a stand-in it compiles from this checkout:
  # a host test, run by `make test`, not a GPU one
  { test_executables -p oxiflow-cuda; test_executables -p oxiflow-capi --test gpu_abi; } \
    | grep -v '^nccl_binding ' \
    | while read -r name exe; do cp "$exe" ".gpu/bin/test-$name"; done
  cargo build --release -p oxiflow-cuda --example gpu_bench --example digits_gpu
  cp target/release/examples/gpu_bench target/release/examples/digits_gpu .gpu/bin/
  strip .gpu/bin/*
  ls -la .gpu/bin
  tar -C .gpu -cJf .gpu/bin.tar.xz bin && rm -rf .gpu/bin
  ls -la .gpu/bin.tar.xz
  echo "now run on the GPU machine: bash scripts/gpu-check.sh run   (carry: .gpu)"
  ;;
run)
  out="${OUT:-.gpu/out}"; mkdir -p "$out"
  [ -f .gpu/bin.tar.xz ] && tar -C .gpu -xJf .gpu/bin.tar.xz
  nv=$(python3 -c 'import nvidia, os; print(os.path.dirname(list(nvidia.__path__)[0]))' 2>/dev/null || true)
  libs=$(find "${nv:-/nonexistent}" -path '*nvidia*' -name 'lib*.so*' -printf '%h\n' 2>/dev/null | sort -u | tr '\n' ':' || true)
  # the project's own NVRTC, when it was carried or installed here
  [ -d .deps/nvrtc/nvidia/cu13/lib ] && libs="$PWD/.deps/nvrtc/nvidia/cu13/lib:$libs"
  export LD_LIBRARY_PATH="${libs}${LD_LIBRARY_PATH:-}"
  # the kernel cache lives outside $OUT: only a few files come back from there
  export OXIFLOW_KERNEL_CACHE="${TMPDIR:-/tmp}/oxiflow-kernel-cache"
  export OXIFLOW_REQUIRE_GPU=1
  # the collectives' NCCL path (tests/gpu_collective.rs) must run: libnccl.so.2 comes with
  # the machine's Python nvidia-nccl package, found through LD_LIBRARY_PATH above
  export OXIFLOW_REQUIRE_NCCL=1
  problems=()
  if ! nvidia-smi -L > "$out/gpu.txt" 2>&1; then problems+=("nvidia-smi failed"); fi
  cat "$out/gpu.txt"
  : > "$out/tests.log"
  for t in .gpu/bin/test-*; do
    echo "=== $t" | tee -a "$out/tests.log"
    if ! timeout 300 "$t" --nocapture --test-threads=1 >> "$out/tests.log" 2>&1; then problems+=("$(basename "$t") failed"); fi
  done
  grep -E "^test result|^skipped|panicked|FAILED" "$out/tests.log" || true
  # counts from the libtest lines; `|| true`: a grep that finds nothing must not end the run
  passed=$({ grep -oE "^test result: [A-Za-z]+\. [0-9]+ passed" "$out/tests.log" || true; } | awk '{s += $4} END {print s + 0}')
  failed=$({ grep -oE "^test result: .* [0-9]+ failed" "$out/tests.log" || true; } | awk '{s += $(NF-1)} END {print s + 0}')
  skipped=$({ grep -E "^(test .* \.\.\. )?skipped" "$out/tests.log" || true; } | wc -l)
  timed=$({ grep -oE "kernels timed by CUDA events on GPU:[0-9]+: [0-9]+" "$out/tests.log" || true; } | awk '{s += $NF} END {print s + 0}')
  [ "$skipped" -eq 0 ] || problems+=("$skipped test(s) skipped")
  [ "$timed" -gt 0 ] || problems+=("no kernel was timed on the GPU")
  : > "$out/bench.txt"
  if ! timeout 300 .gpu/bin/gpu_bench >> "$out/bench.txt" 2>&1; then problems+=("gpu_bench failed"); fi
  if ! timeout 120 python3 scripts/torch_bench.py >> "$out/bench.txt" 2>&1; then problems+=("torch_bench failed"); fi
  cat "$out/bench.txt"
  gunzip -c data/digits.csv.gz > "${TMPDIR:-/tmp}/digits.csv"
  if ! timeout 300 .gpu/bin/digits_gpu "${TMPDIR:-/tmp}/digits.csv" > "$out/digits.txt" 2>&1; then problems+=("digits_gpu failed"); fi
  echo "--- digits, CPU only, for comparison" >> "$out/digits.txt"
  timeout 300 .gpu/bin/digits_gpu "${TMPDIR:-/tmp}/digits.csv" --cpu >> "$out/digits.txt" 2>&1 || problems+=("digits_gpu --cpu failed")
  cat "$out/digits.txt"
  figures=$({ grep -hE "GB/s|GFLOP/s|us/op| ms|steps/s" "$out/bench.txt" "$out/digits.txt" || true; } | wc -l)
  nccl=$({ grep -m1 -oE "NCCL [0-9.]+ from [^ ]+" "$out/tests.log" || echo "NCCL not used"; } | head -1)
  summary="gpu-check: $(head -1 "$out/gpu.txt"); $nccl; tests: $passed passed, $failed failed, $skipped skipped; $timed kernels timed by CUDA events; $figures figure lines in bench.txt and digits.txt"
  if [ ${#problems[@]} -gt 0 ]; then summary="$summary; FAILED: $(IFS=';'; echo "${problems[*]}")"; fi
  echo "$summary" | tee "$out/summary.txt"
  [ ${#problems[@]} -eq 0 ]
  ;;
*)
  echo "usage: bash scripts/gpu-check.sh build|run" >&2
  exit 2
  ;;
esac
