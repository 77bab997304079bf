#!/usr/bin/env bash
# The gRPC peer benchmark (issue 15): envoyproxy/ratelimit (fixed window, built from the Go
# module proxy) beside `rl serve --grpc` (sliding window), both deciding on the same private
# redis-server, both loaded by the same Go load generator (rls-client on go-control-plane's
# generated RLS v3 stubs), one after the other, with the same policies file.
#   bash serve/bench/grpc.sh            (or: make bench-grpc)
#   GRPC_BENCH_DURATION=10s GRPC_BENCH_CONCURRENCY=64 bash serve/bench/grpc.sh
# Reports, for each server: decisions/s and latency (P50/P99) with every request admitted and
# with the load far over the limit, and the overshoot at a window boundary: the most admitted
# in any 1 s sliding window vs the limit (a fixed window lets up to 2x through). Not a test.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
cd "$ROOT"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$ROOT/target}"

echo "== building the Go tools (rls-client, envoyproxy/ratelimit's service_cmd) and rl (release)"
TOOLS="$(bash serve/tools/build-go-tools.sh --peer | tail -n 1)"
cargo build --release -q -p rl-cli
RL="$CARGO_TARGET_DIR/release/rl"
[ -x "$CARGO_TARGET_DIR/debug/rl-harness" ] || cargo build -q -p rl-harness
export GRPC_BENCH_TOOLS="$TOOLS" GRPC_BENCH_RL="$RL"
echo "== machine: $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg)"
exec "$CARGO_TARGET_DIR/debug/rl-harness" run -- bash serve/bench/grpc-run.sh
