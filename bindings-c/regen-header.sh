#!/usr/bin/env bash
# Regenerates include/rl.h from bindings-c/src with the pinned cbindgen (run `cargo run -p rl-gen`
# first when rl-core's tables changed: it writes bindings-c/src/generated.rs).
#   bindings-c/regen-header.sh            write include/rl.h
#   bindings-c/regen-header.sh --check    fail if include/rl.h differs from a fresh generation
# cbindgen is installed once into target/tools (repo-local, ignored by git) when missing or when
# its version differs from the pin below.
set -euo pipefail
CBINDGEN_VERSION=0.29.4
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
tools="$root/target/tools"
cbindgen="$tools/bin/cbindgen"

if ! [ -x "$cbindgen" ] || [ "$("$cbindgen" --version 2>/dev/null)" != "cbindgen $CBINDGEN_VERSION" ]; then
  echo "regen-header: installing cbindgen $CBINDGEN_VERSION into target/tools" >&2
  CARGO_TARGET_DIR="$tools/build" cargo install cbindgen --version "$CBINDGEN_VERSION" --locked --root "$tools" --force --quiet
fi

generate() {
  # --lockfile: read the workspace's Cargo.lock as it is; cbindgen must not change it.
  "$cbindgen" --quiet --config bindings-c/cbindgen.toml --lockfile "$root/Cargo.lock" --output "$1" bindings-c
}

if [ "${1:-}" = "--check" ]; then
  fresh="$(mktemp "${TMPDIR:-/tmp}/rl.h.XXXXXX")"
  trap 'rm -f "$fresh"' EXIT
  generate "$fresh"
  if ! [ -f include/rl.h ]; then
    echo "regen-header: include/rl.h is missing; run bindings-c/regen-header.sh" >&2
    exit 1
  fi
  if ! diff -u include/rl.h "$fresh" >&2; then
    echo "regen-header: include/rl.h is stale (diff above: checked-in vs generated from bindings-c/src);" \
      "run bindings-c/regen-header.sh and commit the result" >&2
    exit 1
  fi
  echo "regen-header: include/rl.h is up to date (cbindgen $CBINDGEN_VERSION)"
else
  generate include/rl.h
  echo "regen-header: wrote include/rl.h (cbindgen $CBINDGEN_VERSION)"
fi
