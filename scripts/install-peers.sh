#!/usr/bin/env bash
# Installs the peer frameworks that `make bench-peers` measures Oxiflow against into a
# Python virtual environment at .deps/peers (git-ignored with the rest of .deps):
#
#   numpy, torch (CPU), tensorflow-cpu (or tensorflow), jax[cpu]
#
# torch: first the CPU-only wheel from PyTorch's own index; where that index cannot be
# reached, PyPI's `torch` with --no-deps plus its pure-Python dependencies (PyPI's Linux
# wheel would otherwise pull several GB of nvidia-* CUDA wheels), kept only if `import
# torch` then works; failing that, PyPI's `torch` with all its dependencies.
#
# A framework that fails to install is reported and left out; the script still exits 0
# (bench/peers/peers.py then prints it as "not installed"). Only a venv that cannot be
# created at all is an error. Idempotent: when every framework imports, the stamp file
# .deps/peers/peers-installed.txt is written (one line per framework and version) and a
# later run does nothing but print it. A partial install is retried for the missing ones.
#
#   PYTHON=python3.11 bash scripts/install-peers.sh     (default PYTHON: python3)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PYTHON="${PYTHON:-python3}"
VENV="$ROOT/.deps/peers"
STAMP="$VENV/peers-installed.txt"
PY="$VENV/bin/python"

if [ -f "$STAMP" ] && [ -x "$PY" ]; then
  echo "peers: already installed in .deps/peers ($(tr '\n' ' ' < "$STAMP"))"
  exit 0
fi

if [ ! -x "$PY" ]; then
  echo "peers: creating the virtual environment .deps/peers"
  mkdir -p "$ROOT/.deps"
  "$PYTHON" -m venv "$VENV"
fi

pip_install() {
  "$PY" -m pip install --quiet --disable-pip-version-check "$@"
}

# `importable MODULE`: the module imports in a fresh interpreter (prints its version).
importable() {
  "$PY" -c "import $1 as m; print(m.__version__)" 2>/dev/null
}

install_numpy() {
  pip_install numpy
}

install_torch() {
  echo "peers: torch, CPU wheel from PyTorch's index"
  if pip_install --timeout 30 --retries 1 --index-url https://download.pytorch.org/whl/cpu torch 2>/dev/null \
      && importable torch >/dev/null; then
    return 0
  fi
  echo "peers: PyTorch's index unreachable; PyPI torch without its CUDA dependencies (--no-deps)"
  # pip reports the CUDA requirements left out as conflicts here: expected, so not shown.
  if pip_install --no-deps torch \
      && pip_install filelock typing-extensions sympy networkx jinja2 fsspec setuptools 2>/dev/null \
      && importable torch >/dev/null; then
    return 0
  fi
  echo "peers: torch without CUDA wheels does not import; PyPI torch with all its dependencies (large download)"
  pip_install torch
}

install_tensorflow() {
  echo "peers: tensorflow-cpu"
  if pip_install tensorflow-cpu && importable tensorflow >/dev/null; then
    return 0
  fi
  echo "peers: no tensorflow-cpu wheel for this Python; tensorflow"
  pip_install tensorflow
}

install_jax() {
  echo "peers: jax[cpu]"
  pip_install "jax[cpu]"
}

# framework name, module to import, install function
for spec in "numpy numpy install_numpy" "torch torch install_torch" \
            "tensorflow tensorflow install_tensorflow" "jax jax install_jax"; do
  read -r name module fn <<< "$spec"
  if importable "$module" >/dev/null; then
    continue
  fi
  if ! "$fn"; then
    echo "peers: installing $name failed" >&2
  fi
done

# Installing one framework can move a shared dependency (numpy) under another: check
# every one again, in its own interpreter, after all installs.
lines=()
failed=()
for module in numpy torch tensorflow jax; do
  if v="$(importable "$module")"; then
    lines+=("$module $v")
  else
    failed+=("$module")
  fi
done
printf '%s\n' "${lines[@]}"
if [ ${#failed[@]} -ne 0 ]; then
  echo "peers: NOT installed (the bench marks them \"not installed\"): ${failed[*]}" >&2
  exit 0
fi
printf '%s\n' "${lines[@]}" > "$STAMP"
echo "peers: all installed (.deps/peers)"
