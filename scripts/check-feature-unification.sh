#!/usr/bin/env bash
# Checks that building the library (`make build`: oxiflow-capi and what it links) and
# building every test, bench and example of the workspace turn on the same features of every
# crate they share. When they differ, cargo compiles those crates, and everything above them
# (faer, gemm, oxiflow-core), once per feature set: CI compiled the dependency tree three
# times before the workspace Cargo.toml listed the dev-dependencies' features for the
# library too. Prints each crate whose features differ, with both sets, and fails.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
CARGO="${CARGO:-cargo}"
tree() { "$CARGO" tree --locked --prefix none --format '{p}|{f}' "$@" | sed 's/ (\*)$//' | sort -u; }
lib="$(tree -p oxiflow-capi -e normal)"
all="$(tree --workspace)"
# A crate of the library's tree whose "name version|features" line is not in the full tree
# is built with other features by the tests.
diff="$(comm -23 <(echo "$lib") <(echo "$all"))"
if [ -n "$diff" ]; then
  echo "feature unification: the library and the tests build these crates with different features:"
  while IFS= read -r line; do
    pkg="${line%%|*}"
    echo "  $pkg: library [${line#*|}], tests [$(grep -F "$pkg|" <<<"$all" | head -1 | cut -d'|' -f2)]"
  done <<<"$diff"
  echo "list the tests' features in the workspace Cargo.toml's [workspace.dependencies] (and in"
  echo "oxiflow-core's [dependencies]), as its comment on feature unification says"
  exit 1
fi
echo "feature unification: the library and the tests share one feature set ($(wc -l <<<"$lib") crates)"
