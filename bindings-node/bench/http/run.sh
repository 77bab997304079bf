#!/usr/bin/env bash
# The HTTP benchmark (issue 14): Express and Fastify, each without a limiter, with rl-limiter's
# middleware and with the ecosystem's Redis-backed limiter (express-rate-limit + rate-limit-redis,
# @fastify/rate-limit), the same tiny app, one key, wrk's load far above the limit. Reports req/s,
# P50/P99, the most the app served in any window (its own clock) and Redis commands per request,
# against one private redis-server that rl-harness starts and stops. Then a moderate load: vegeta
# (installed into $CARGO_TARGET_DIR/tools/bin with `go install` if missing) at a fixed rate, half
# the limit: P50/P99 and what each limiter adds to the app's P99. Not part of the tests.
#
#   bash bindings-node/bench/http/run.sh    (env: BENCH_SECONDS=10 BENCH_CONNECTIONS=64 LIMIT=1000
#     WINDOW_MS=1000 BENCH_RATE=LIMIT/2 per second BENCH_MODERATE_SECONDS=5 BENCH_ROUNDS=6
#     BENCH_WARMUP_SECONDS=15 BENCH_PHASES=over,moderate BENCH_FRAMEWORKS=express,fastify
#     BENCH_VARIANTS=none,rl,rl-leases,peer[,stub,rl-memory] BENCH_TIME=1 (time the limiter's step
#     and the request inside the app) BENCH_BASELINE=<bindings-node dir>: see bench.mjs)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
node_dir="$(cd "$here/../.." && pwd)"
root="$(cd "$node_dir/.." && pwd)"

command -v wrk >/dev/null || { echo "bench/http/run.sh: wrk is missing (apt-get install -y wrk)" >&2; exit 1; }
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$root/target}"
VEGETA="$(command -v vegeta || echo "$CARGO_TARGET_DIR/tools/bin/vegeta")"
if [ ! -x "$VEGETA" ]; then
  command -v go >/dev/null || { echo "bench/http/run.sh: vegeta is missing and so is go to install it" >&2; exit 1; }
  echo "-- go install vegeta into $CARGO_TARGET_DIR/tools/bin"
  GOBIN="$CARGO_TARGET_DIR/tools/bin" go install github.com/tsenart/vegeta/v12@v12.12.0
fi
export VEGETA
(cd "$root" && cargo build -p rl-harness --locked -q)
cd "$node_dir"
[ -d node_modules/@napi-rs/cli ] || npm ci --ignore-scripts --no-audit --no-fund --loglevel=error
echo "-- release build of the addon"
npm run --silent build
cd "$here"
[ -d node_modules/express-rate-limit ] || npm ci --ignore-scripts --no-audit --no-fund --loglevel=error
echo "-- machine: $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg), $(redis-server --version | cut -d' ' -f1-3), node $(node --version)"
"$CARGO_TARGET_DIR/debug/rl-harness" run -- node "$here/bench.mjs"
