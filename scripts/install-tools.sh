#!/usr/bin/env bash
# Installs the tools the profile tests use when they are missing: Debian's `chromium`
# (headless checks and a screenshot of the HTML timeline) and `graphviz` (`dot`, for
# `save_graph("x.svg")`). Both come from the machine's own Debian suite.
set -euo pipefail
SUDO=""
if [ "$(id -u)" != "0" ]; then SUDO="sudo"; fi
missing=()
command -v chromium >/dev/null 2>&1 || missing+=(chromium)
command -v dot >/dev/null 2>&1 || missing+=(graphviz)
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
echo "oxiflow setup: installing ${missing[*]}"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
