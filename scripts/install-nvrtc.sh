#!/usr/bin/env bash
# Installs NVRTC, the CUDA run-time compiler, into .deps/nvrtc when it is missing: the pip
# wheel nvidia-cuda-nvrtc (13.0.x, matching the CUDA 13.0 driver of the lent GPU
# machines), unpacked, no pip environment touched. `make test` compiles every kernel of
# kernels/ with it (crates/oxiflow-cuda/tests/kernels_compile.rs), no GPU needed.
#
#   .deps/nvrtc/nvidia/cu13/lib/libnvrtc.so.13   (+ libnvrtc-builtins.so.13.0)
#
# Use it with LD_LIBRARY_PATH=$PWD/.deps/nvrtc/nvidia/cu13/lib, or
# OXIFLOW_NVRTC_LIB=$PWD/.deps/nvrtc/nvidia/cu13/lib/libnvrtc.so.13.
# Offline: OXIFLOW_NVRTC_WHEEL=/path/to/nvidia_cuda_nvrtc-13.0.88-*.whl installs that file.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VERSION="${NVRTC_VERSION:-13.0.88}"
# shellcheck source=scripts/unpack-wheel.sh
source "$ROOT/scripts/unpack-wheel.sh"
install_wheel NVRTC nvidia-cuda-nvrtc "$VERSION" "$ROOT/.deps/nvrtc" nvidia/cu13/lib/libnvrtc.so.13 "${OXIFLOW_NVRTC_WHEEL:-}"
