#!/usr/bin/env bash
# The Node benchmark: rl-limiter vs rate-limiter-flexible's RateLimiterRedis (ioredis), one key,
# limit 5000 / 1000 ms, 64 concurrent callers, 10 s each, against one private redis-server that
# rl-harness starts on a free loopback port and stops afterwards. Builds the addon in release
# mode first. Extra arguments go to bench.mjs (e.g. --rounds 3, --seconds 3, --json, --ping, --only rl).
#
#   bash bindings-node/bench/run.sh
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
node_dir="$(cd "$here/.." && pwd)"
root="$(cd "$node_dir/.." && pwd)"

export CARGO_TARGET_DIR="$root/target"
(cd "$root" && cargo build -p rl-harness --locked -q)
cd "$node_dir"
[ -d node_modules/@napi-rs/cli ] || npm ci --ignore-scripts --no-audit --no-fund --loglevel=error
echo "-- release build of the addon"
npm run --silent build
cd "$here"
# rate-limiter-flexible and ioredis live in the bench's own package.json, not in the package's.
npm ci --no-audit --no-fund --loglevel=error
echo "-- machine: $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg), $(redis-server --version | cut -d' ' -f1-3)"
exec "$root/target/debug/rl-harness" run -- node "$here/bench.mjs" "$@"
