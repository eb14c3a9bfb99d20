#!/usr/bin/env bash
# Installs what the tests and kernels use when it is missing: Debian's `chromium`
# (headless checks and a screenshot of the HTML timeline), `graphviz` (`dot`, for
# `save_graph("x.svg")`) and OpenBLAS (`libopenblas0-pthread`, loaded at run time by the
# MatMul kernel; without it MatMul uses the `gemm` crate), OpenMPI and libclang (the MPI
# collectives; without them the library builds without MPI). All come from the machine's
# own Debian suite.
set -euo pipefail
SUDO=""
if [ "$(id -u)" != "0" ]; then SUDO="sudo"; fi
missing=()
command -v chromium >/dev/null 2>&1 || missing+=(chromium)
command -v dot >/dev/null 2>&1 || missing+=(graphviz)
ldconfig -p 2>/dev/null | grep -q 'libopenblas\.so\.0 ' || missing+=(libopenblas0-pthread)
# OpenMPI (mpirun, and mpicc and headers to build the MPI collectives with rsmpi) and
# libclang (rsmpi's bindgen reads mpi.h with it)
command -v mpirun >/dev/null 2>&1 || missing+=(openmpi-bin)
command -v mpicc >/dev/null 2>&1 || missing+=(libopenmpi-dev)
ls /usr/lib/llvm-*/lib/libclang.so* >/dev/null 2>&1 || ldconfig -p 2>/dev/null | grep -q 'libclang[-.0-9]*\.so' || missing+=(libclang-dev)
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
echo "oxiflow setup: installing ${missing[*]}"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
