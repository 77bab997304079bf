#!/usr/bin/env bash
# The Node benchmark (issue 13, item 5): rl-limiter vs rate-limiter-flexible's RateLimiterRedis
# (ioredis), side by side in one run, in three scenarios (bench.mjs: lone, hot, many), twice:
#   pinned    node (and so rl's runtime threads) on cpu 0, redis-server on cpu 1
#   unpinned  both free to use every cpu
# against one private redis-server that rl-harness starts on a free loopback port and stops (by
# pid) afterwards. Builds the addon in release mode first. Then prints Redis bytes per idle key,
# and a summary table with the ratios. Not part of the test command.
#
#   bash bindings-node/bench/run.sh [--seconds 5] [--rounds 2] [--scenarios lone,hot,many] ...
# Extra arguments go to bench.mjs. RL_BENCH_PINS="pinned" (or "unpinned") runs only one mode.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
node_dir="$(cd "$here/.." && pwd)"
root="$(cd "$node_dir/.." && pwd)"

export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$root/target}"
(cd "$root" && cargo build -p rl-harness --locked -q)
cd "$node_dir"
[ -d node_modules/@napi-rs/cli ] || npm ci --ignore-scripts --no-audit --no-fund --loglevel=error
echo "-- release build of the addon"
npm run --silent build
cd "$here"
# rate-limiter-flexible and ioredis live in the bench's own package.json, not in the package's.
# --ignore-scripts: the addon's `prepare` (another release build) already ran above.
[ -d node_modules/rate-limiter-flexible ] || npm ci --ignore-scripts --no-audit --no-fund --loglevel=error
echo "-- machine: $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg), $(redis-server --version | cut -d' ' -f1-3), node $(node --version)"
out="$(mktemp)"
trap 'rm -f "$out"' EXIT
export RL_BENCH_OUT="$out" RL_BENCH_PINS="${RL_BENCH_PINS:-pinned unpinned}"
"$CARGO_TARGET_DIR/debug/rl-harness" run -- bash "$here/modes.sh" "$@"
node "$here/summary.mjs" "$out"
