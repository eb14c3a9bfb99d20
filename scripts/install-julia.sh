#!/usr/bin/env bash
# Installs Julia 1.5.3 from Debian's bullseye suite when `julia` is not on PATH.
# Debian bookworm and later no longer ship julia; bullseye's package is the only one
# reachable from this project's machines (no Julia registry, no binary downloads).
set -euo pipefail
if command -v julia >/dev/null 2>&1; then
  exit 0
fi
SUDO=""
if [ "$(id -u)" != "0" ]; then SUDO="sudo"; fi
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
  # keep everything else on the machine's own suite: only julia and what it needs come from bullseye
  $SUDO tee /etc/apt/preferences.d/oxiflow-bullseye >/dev/null <<'PREF'
Package: *
Pin: release n=bullseye
Pin-Priority: 100
PREF
fi
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq -t bullseye julia >/dev/null
julia --version
