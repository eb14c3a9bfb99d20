#!/usr/bin/env bash
# Installs what the tests and kernels use when it is missing: Debian's `chromium`
# (headless checks and a screenshot of the HTML timeline), `graphviz` (`dot`, for
# `save_graph("x.svg")`) and OpenBLAS (`libopenblas0-pthread`, loaded at run time by the
# MatMul kernel; without it MatMul uses the `gemm` crate). All come from the machine's own
# Debian suite.
set -euo pipefail
SUDO=""
if [ "$(id -u)" != "0" ]; then SUDO="sudo"; fi
missing=()
command -v chromium >/dev/null 2>&1 || missing+=(chromium)
command -v dot >/dev/null 2>&1 || missing+=(graphviz)
ldconfig -p 2>/dev/null | grep -q 'libopenblas\.so\.0 ' || missing+=(libopenblas0-pthread)
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
echo "oxiflow setup: installing ${missing[*]}"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
