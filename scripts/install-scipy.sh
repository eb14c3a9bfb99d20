#!/usr/bin/env bash
# Installs SciPy (with NumPy) into a Python virtual environment at .deps/scipy (git-ignored
# with the rest of .deps) for the Julia tests of `save`/`load` (julia/Oxiflow/test/matfile.jl):
# they check that scipy.io.loadmat reads the .mat files Oxiflow writes and that Oxiflow
# loads what scipy.io.savemat writes. The tests find this interpreter through
# OXIFLOW_SCIPY_PYTHON (set by `make test-julia`), else at .deps/scipy/bin/python.
#
# Idempotent and quiet: when .deps/scipy/bin/python already imports scipy, nothing happens.
# Without network access pip fails and so does this script (the tests then fail too, unless
# OXIFLOW_ALLOW_NO_SCIPY=1 marks their SciPy part broken instead).
#
#   PYTHON=python3.11 bash scripts/install-scipy.sh     (default PYTHON: python3)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PYTHON="${PYTHON:-python3}"
VERSION="${SCIPY_VERSION:-1.15.3}"
VENV="$ROOT/.deps/scipy"
PY="$VENV/bin/python"

if [ -x "$PY" ] && "$PY" -c "import scipy.io" 2>/dev/null; then
  exit 0
fi
echo "oxiflow setup: installing SciPy $VERSION into .deps/scipy (a virtual environment)"
mkdir -p "$ROOT/.deps"
[ -x "$PY" ] || "$PYTHON" -m venv "$VENV"
"$PY" -m pip install --quiet --disable-pip-version-check --only-binary=:all: "scipy==$VERSION"
"$PY" -c "import scipy, numpy; print('oxiflow setup: SciPy', scipy.__version__, 'NumPy', numpy.__version__, 'in .deps/scipy')"
