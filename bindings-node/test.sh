#!/usr/bin/env bash
# The Node.js suite: installs the package's dev tools (npm ci, from the committed lock file),
# builds the addon (debug: the tests need no speed, and the build stays incremental in the
# workspace's target/), fails if the generated index.js / index.d.ts differ from the checked-in
# ones, type-checks the TypeScript examples, then runs node:test against a real redis-server that
# rl-harness starts and stops. Called by scripts/test-all.sh after `cargo build --workspace`;
# works on its own too (it builds rl-harness if it is missing).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/.." && pwd)"
cd "$here"

command -v node >/dev/null || { echo "bindings-node/test.sh: node is missing (Node.js >= 20 is required)" >&2; exit 1; }
command -v npm >/dev/null || { echo "bindings-node/test.sh: npm is missing" >&2; exit 1; }
command -v redis-cli >/dev/null || { echo "bindings-node/test.sh: redis-cli is missing (scripts/ensure-deps.sh installs it)" >&2; exit 1; }

export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$root/target}"
harness="$CARGO_TARGET_DIR/debug/rl-harness"
if [ ! -x "$harness" ]; then
  (cd "$root" && cargo build -p rl-harness --locked)
fi

# Dev tools (@napi-rs/cli, typescript) exactly as locked. npm ci starts from scratch, so it is
# skipped when node_modules was installed after the last change to the lock file.
# --ignore-scripts: `prepare` would run the release build; the tests use the debug one below.
if [ ! -f node_modules/.package-lock.json ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
  echo "-- npm ci"
  npm ci --ignore-scripts --no-audit --no-fund --loglevel=error
fi

echo "-- build the addon (napi build, debug, with the test-panic hook: see core/src/unwind.rs)"
stash="$(mktemp -d)"
trap 'rm -rf "$stash"' EXIT
cp index.js index.d.ts "$stash/"
npm run --silent build:debug -- --features test-panic
stale=0
for f in index.js index.d.ts; do
  if ! cmp -s "$stash/$f" "$f"; then
    echo "bindings-node/test.sh: bindings-node/$f is stale: the build generated a different one:" >&2
    diff -u "$stash/$f" "$f" | head -40 >&2 || true
    stale=1
  fi
done
if [ "$stale" -ne 0 ]; then
  echo "bindings-node/test.sh: the regenerated files are now in bindings-node/; review and commit them." >&2
  exit 1
fi

echo "-- tsc --noEmit (TypeScript examples)"
node_modules/.bin/tsc -p test/types/tsconfig.json

echo "-- node --test (against a redis-server from rl-harness)"
"$harness" run -- node --test --test-reporter=spec test/*.test.mjs
