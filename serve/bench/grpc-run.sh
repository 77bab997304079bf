#!/usr/bin/env bash
# The body of serve/bench/grpc.sh, run by rl-harness with a private redis-server in
# RL_TEST_REDIS_URL / RL_TEST_REDIS_PORT. Starts both servers, loads each in turn, stops both.
set -euo pipefail
: "${RL_TEST_REDIS_PORT:?run through serve/bench/grpc.sh}"
TOOLS="$GRPC_BENCH_TOOLS"
DURATION="${GRPC_BENCH_DURATION:-5s}"
CONC="${GRPC_BENCH_CONCURRENCY:-32}"
CONNS="${GRPC_BENCH_CONNECTIONS:-4}"
LIMIT=200

work="$(mktemp -d)"
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$pid" 2>/dev/null || true
  done
  rm -rf "$work"
}
trap cleanup EXIT

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

# One policies file, in envoyproxy/ratelimit's format, read by both servers.
config="$work/runtime/ratelimit/config"
mkdir -p "$config"
cat > "$config/bench.yaml" <<YAML
domain: bench
descriptors:
  - key: client
    rate_limit:
      unit: second
      requests_per_unit: $LIMIT
  - key: open
    rate_limit:
      unit: second
      requests_per_unit: 1000000000
YAML

peer_grpc="$(free_port)"
REDIS_SOCKET_TYPE=tcp REDIS_URL="127.0.0.1:$RL_TEST_REDIS_PORT" \
  RUNTIME_ROOT="$work/runtime" RUNTIME_SUBDIRECTORY=ratelimit RUNTIME_WATCH_ROOT=false \
  USE_STATSD=false LOG_LEVEL=warn \
  HOST=127.0.0.1 PORT="$(free_port)" DEBUG_HOST=127.0.0.1 DEBUG_PORT="$(free_port)" \
  GRPC_HOST=127.0.0.1 GRPC_PORT="$peer_grpc" \
  "$TOOLS/service_cmd" > "$work/peer.log" 2>&1 &
pids+=($!)

rl_grpc="$(free_port)"
# Every rl decision is Redis's, as every peer decision is: no local fallback (which would answer
# alone while Redis is slow on this loaded machine). The denial cache stays on: it is exact.
RL_LOG=warn "$GRPC_BENCH_RL" serve --config "$config" --redis "$RL_TEST_REDIS_URL" \
  -o local_fallback=false \
  --listen "127.0.0.1:$(free_port)" --grpc "127.0.0.1:$rl_grpc" > "$work/rl.log" 2>&1 &
pids+=($!)

wait_ready() { # name port
  for _ in $(seq 100); do
    if "$TOOLS/rls-client" check -addr "127.0.0.1:$2" -domain bench -d open=ready >/dev/null 2>&1; then
      return 0
    fi
    sleep 0.1
  done
  echo "$1 did not answer on 127.0.0.1:$2" >&2
  cat "$work/peer.log" "$work/rl.log" >&2
  exit 1
}
wait_ready "envoyproxy/ratelimit" "$peer_grpc"
wait_ready "rl serve" "$rl_grpc"

load() { # port descriptor extra-args...
  local port="$1" desc="$2"
  shift 2
  "$TOOLS/rls-client" load -addr "127.0.0.1:$port" -domain bench -d "$desc" \
    -c "$CONC" -conns "$CONNS" "$@"
}

field() { python3 -c "import json,sys; d=json.loads(sys.argv[1]); print(d['$2'])" "$1"; }

report() { # label json
  python3 - "$1" "$2" <<'PY'
import json, sys
label, d = sys.argv[1], json.loads(sys.argv[2])
print(f"  {label:<34} {d['decisions_per_s']:>9.0f} decisions/s   P50 {d['p50_us']/1000:6.2f} ms"
      f"   P99 {d['p99_us']/1000:6.2f} ms   admitted {d['admitted']:>7}  denied {d['denied']:>7}"
      f"  errors {d['errors']}")
PY
}

echo "== load: rls-client, $CONC callers on $CONNS HTTP/2 connections, $DURATION per run; limit $LIMIT/s"
for server in "envoyproxy/ratelimit:$peer_grpc" "rl serve:$rl_grpc"; do
  name="${server%%:*}" port="${server##*:}"
  tag="$(echo "$name" | tr -c 'a-z' '-')"
  echo "-- $name"
  report "all admitted (open=...)" "$(load "$port" "open=$tag" -duration "$DURATION")"
  report "over the limit (client=..., $LIMIT/s)" "$(load "$port" "client=over-$tag" -duration "$DURATION")"
  # Start 0.8 s into a wall-clock second, the fixed window's boundary: the peer admits its
  # limit in the last 0.2 s of one window and again at the start of the next.
  edge="$(load "$port" "client=edge-$tag" -duration 3s -start-phase 0.8 -window 1s)"
  most="$(field "$edge" most_admitted_in_any_window)"
  python3 - "$name" "$most" "$LIMIT" "$edge" <<'PY'
import json, sys
name, most, limit, d = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), json.loads(sys.argv[4])
print(f"  {'window boundary (3 s from x.8 s)':<34} most admitted in any 1 s window: {most} "
      f"(limit {limit}, {most/limit:.2f}x; overshoot {max(0, most-limit)})"
      f"   {d['decisions_per_s']:.0f} decisions/s")
PY
done
