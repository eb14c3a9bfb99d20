#!/usr/bin/env bash
# Installs Julia 1.5.3 from Debian's bullseye suite when `julia` is not on PATH.
# Debian bookworm and later ship no julia; bullseye's package is the only Julia reachable
# from this project's machines (no Julia registry, no binary downloads).
#
# Julia 1.5.3 must run with bullseye's libunwind8 (1.3.2): with bookworm's 1.6.2 every
# exception thrown through JIT-compiled code segfaults the process (seen here: even a
# caught `error()` inside a function kills julia with SIGSEGV). So libunwind8 is pinned to
# bullseye's version too, and a smoke test checks that exceptions are catchable.
set -euo pipefail
SUDO=""
if [ "$(id -u)" != "0" ]; then SUDO="sudo"; fi

julia_catches_exceptions() {
  julia --startup-file=no -e 'f() = error("x"); try f() catch; end; print("ok")' 2>/dev/null | grep -q ok
}

if command -v julia >/dev/null 2>&1 && julia_catches_exceptions; then
  exit 0
fi

src=/etc/apt/sources.list.d/oxiflow-bullseye.sources
if [ ! -f "$src" ]; then
  echo "oxiflow setup: adding Debian bullseye suite ($src) for julia 1.5.3"
  $SUDO tee "$src" >/dev/null <<'SRC'
Types: deb
URIs: http://deb.debian.org/debian
Suites: bullseye
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SRC
  # everything else stays on the machine's own suite
  $SUDO tee /etc/apt/preferences.d/oxiflow-bullseye >/dev/null <<'PREF'
Package: *
Pin: release n=bullseye
Pin-Priority: 100
PREF
fi
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --allow-downgrades -t bullseye julia libunwind8/bullseye >/dev/null
if ! julia_catches_exceptions; then
  echo "oxiflow setup: julia $(julia --version) still crashes on exceptions; check that libunwind8 is bullseye's 1.3.2 (dpkg -l libunwind8)" >&2
  exit 1
fi
julia --version
