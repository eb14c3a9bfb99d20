#!/usr/bin/env bash
# Installs the OpenBLAS build that NumPy and SciPy ship (the pip wheel scipy-openblas32:
# OpenBLAS with the LP64 cblas interface, every symbol prefixed `scipy_`) into
# .deps/openblas when it is missing, unpacked, no pip environment touched:
#
#   .deps/openblas/scipy_openblas32/lib/libscipy_openblas.so
#
# MatMul's CPU kernel loads it at run time (crates/oxiflow-core/src/ops/blas.rs); the Julia
# package points OXIFLOW_BLAS_LIB at it when the variable is unset. It is newer than
# Debian's libopenblas0 (0.3.21 on bullseye) and faster on the products of small and
# skinny matrices that training steps make (docs/performance/peers-history.md has the figures). Without
# it the kernel uses Debian's OpenBLAS, and without that the `gemm` crate.
# Offline: OXIFLOW_OPENBLAS_WHEEL=/path/to/scipy_openblas32-*.whl installs that file.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VERSION="${OPENBLAS_WHEEL_VERSION:-0.3.34.481.3}"
# shellcheck source=scripts/unpack-wheel.sh
source "$ROOT/scripts/unpack-wheel.sh"
install_wheel OpenBLAS scipy-openblas32 "$VERSION" "$ROOT/.deps/openblas" scipy_openblas32/lib/libscipy_openblas.so "${OXIFLOW_OPENBLAS_WHEEL:-}"
