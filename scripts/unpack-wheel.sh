#!/usr/bin/env bash
# Shared by the install scripts that unpack one pip wheel into .deps (no pip environment is
# touched); they call `install_wheel` (below). `unpack_wheel PACKAGE VERSION DEST FILE [WHEEL]` downloads PACKAGE==VERSION (or
# copies the local wheel file WHEEL, for offline machines), unpacks it into DEST.partial,
# checks that FILE (a path inside the wheel) is there, and only then replaces DEST, so an
# interrupted install never leaves a DEST that looks complete. Needs $PYTHON (pip and the
# zipfile module).
unpack_wheel() {
  local package="$1" version="$2" dest="$3" file="$4" local_wheel="${5:-}"
  local tmp wheel
  tmp="$(mktemp -d)"
  # shellcheck disable=SC2064  # expand now: the trap runs after this function returns
  trap "rm -rf '$tmp' '$dest.partial'" EXIT
  if [ -n "$local_wheel" ]; then
    cp "$local_wheel" "$tmp/"
  else
    "${PYTHON:-python3}" -m pip download --quiet --no-deps --only-binary=:all: "$package==$version" -d "$tmp"
  fi
  wheel="$(ls "$tmp"/*.whl | head -n 1)"
  rm -rf "$dest.partial"
  mkdir -p "$dest.partial"
  "${PYTHON:-python3}" -m zipfile -e "$wheel" "$dest.partial"
  if [ ! -f "$dest.partial/$file" ]; then
    echo "oxiflow setup: $wheel has no $file" >&2
    return 1
  fi
  rm -rf "$dest"
  mv "$dest.partial" "$dest"
}

# `install_wheel NAME PACKAGE VERSION DEST FILE [WHEEL]`: `unpack_wheel` unless DEST already
# holds FILE and the wheel's `<package>-VERSION.dist-info` (so a new VERSION reinstalls),
# with one line before and after saying what NAME is being installed where.
install_wheel() {
  local name="$1" package="$2" version="$3" dest="$4" file="$5" local_wheel="${6:-}"
  if [ -f "$dest/$file" ] && [ -d "$dest/${package//-/_}-$version.dist-info" ]; then
    return 0
  fi
  echo "oxiflow setup: installing $name (pip wheel $package $version) into $dest"
  unpack_wheel "$package" "$version" "$dest" "$file" "$local_wheel"
  echo "oxiflow setup: $name in $dest/$(dirname "$file")"
}
