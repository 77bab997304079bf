#!/usr/bin/env bash
# The design's section-4 benchmark, as written: wrk -t8 -c100 --latency against rl serve in
# proxy mode in front of a trivial upstream, with 1, 2 and 4 rl serve processes (one port,
# SO_REUSEPORT) sharing one local redis-server, the limit well below the offered rate; and the
# nginx auth_request path the same way. `make bench-serve`; DURATION (s, default 10), LIMIT
# (admitted per second, default 2000) override. Needs wrk, nginx, redis-server
# (scripts/ensure-deps.sh installs nginx and redis; `apt-get install wrk`).
#
# Reported per run: req/s and P99 (wrk), admitted QPS and its deviation from LIMIT, overshoot
# (the most admitted in any 1 s span - LIMIT) counted by the upstream on the decisions' Redis
# times (rl serve --decision-time-header; nginx passes /check's RL-Decided-At on) and, for
# comparison, on its own arrival clock, and Redis commands per admitted request (INFO
# commandstats, all commands but INFO/CONFIG).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
DURATION=${DURATION:-10}
LIMIT=${LIMIT:-2000}
# Limiter options for every rl serve (e.g. OPTS="-o local_fallback=false").
OPTS=${OPTS:-}
# Worker threads per rl serve process (--threads; default: one per core).
SERVE_THREADS=${SERVE_THREADS:-}
# The upstream stamps arrivals after the proxy's queueing; overshoot is also shown for spans this
# much shorter than the window, which a few ms of delay jitter cannot fake.
SLACK_MS=${SLACK_MS:-20}
TARGET=${CARGO_TARGET_DIR:-$ROOT/target}
WORK=$(mktemp -d /tmp/rl-bench-serve.XXXXXX)
NGINX=$(command -v nginx || echo /usr/sbin/nginx)
for tool in wrk redis-server redis-cli "$NGINX"; do
  command -v "$tool" >/dev/null 2>&1 || { echo "bench-serve: $tool is missing" >&2; exit 1; }
done

echo "bench-serve: building rl-serve and the upstream (release)" >&2
(cd "$ROOT" && cargo build -q --release -p rl-serve --bin rl-serve --example bench-upstream)
SERVE=$TARGET/release/rl-serve
UPSTREAM=$TARGET/release/examples/bench-upstream

PIDS=()
cleanup() {
  for p in "${PIDS[@]:-}"; do [ -n "$p" ] && kill "$p" 2>/dev/null || true; done
  for p in "${PIDS[@]:-}"; do [ -n "$p" ] && wait "$p" 2>/dev/null || true; done
  rm -rf "$WORK"
}
trap cleanup EXIT

free_port() { python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])'; }
wait_port() { for _ in $(seq 200); do (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0; sleep 0.05; done; echo "port $1 never opened" >&2; exit 1; }

RPORT=$(free_port); UPORT=$(free_port)
redis-server --port "$RPORT" --save "" --appendonly no --daemonize no >"$WORK/redis.log" 2>&1 &
PIDS+=($!)
"$UPSTREAM" "$UPORT" &
PIDS+=($!)
wait_port "$RPORT"; wait_port "$UPORT"
REDIS="redis://127.0.0.1:$RPORT/"

policies() { # $1 limit per second, $2 extra top-level lines
  cat >"$WORK/p.yaml" <<YAML
domain: bench
$2
http:
  rate_limits:
    - actions:
        - generic_key: {descriptor_value: order}
descriptors:
  - key: generic_key
    value: order
    rate_limit: {unit: second, requests_per_unit: $1, name: order}
YAML
}

SERVE_PIDS=()
start_serve() { # $1 processes, $2 port, $3... extra args
  local n=$1 port=$2; shift 2
  : >"$WORK/serve.log"
  for _ in $(seq "$n"); do
    RL_LOG=warn "$SERVE" ${SERVE_THREADS:+--threads "$SERVE_THREADS"} --config "$WORK/p.yaml" --listen "127.0.0.1:$port" --reuse-port \
      --redis "$REDIS" --decision-time-header "$@" >>"$WORK/serve.log" 2>&1 &
    SERVE_PIDS+=($!); PIDS+=($!)
  done
  wait_port "$port"
}
stop_serve() {
  for p in "${SERVE_PIDS[@]}"; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
  SERVE_PIDS=()
}

# The commands clients sent since the last reset: script calls and connection commands.
# (INFO commandstats also counts the commands a script runs inside, which are not round trips;
# INFO and CONFIG are this script's own.)
commands() {
  redis-cli -p "$RPORT" INFO commandstats | tr -d '\r' |
    awk -F'[:=,]' '$1 ~ /^cmdstat_(fcall|fcall_ro|eval|evalsha|eval_ro|evalsha_ro|ping|role|hello|select|auth|client|function|script)([|].*)?$/ {s+=$3} END {print s+0}'
}

# Runs wrk with $2 (flags) on $1; prints one table row named $3 (admitted counted upstream).
row() {
  local url=$1 flags=$2 name=$3
  redis-cli -p "$RPORT" CONFIG RESETSTAT >/dev/null
  curl -s "http://127.0.0.1:$UPORT/_stats?window_ms=1000" >/dev/null
  # shellcheck disable=SC2086
  wrk $flags -d"${DURATION}s" --latency "$url" >"$WORK/wrk.txt"
  local rps p99 non2xx stats admitted most cmds
  rps=$(awk '/^Requests\/sec/ {print $2}' "$WORK/wrk.txt")
  p99=$(awk '$1=="99%" {print $2}' "$WORK/wrk.txt")
  non2xx=$(awk '/Non-2xx/ {print $5}' "$WORK/wrk.txt"); non2xx=${non2xx:-0}
  cmds=$(commands)
  local whole=$((DURATION - 1))
  stats=$(curl -s "http://127.0.0.1:$UPORT/_stats?window_ms=1000&slack_ms=$SLACK_MS&windows=$whole")
  read -r admitted most most_slack in_whole most_decided n_decided <<<"$stats"
  local fallbacks
  fallbacks=$(grep -c "deciding locally" "$WORK/serve.log" 2>/dev/null || true)
  python3 - "$name" "$rps" "$p99" "$admitted" "$most" "$most_slack" "$in_whole" "$whole" "$cmds" "$non2xx" "$LIMIT" "$DURATION" "${4:-limited}" "$fallbacks" "$most_decided" "$n_decided" <<'PY'
import sys
(name, rps, p99, admitted, most, most_slack, in_whole, whole, cmds, non2xx, limit, dur, kind,
 fallbacks, most_decided, n_decided) = sys.argv[1:]
admitted, most, most_slack, in_whole, whole, cmds, limit, dur, most_decided, n_decided = (
    int(admitted), int(most), int(most_slack), int(in_whole), int(whole), int(cmds), int(limit),
    float(dur), int(most_decided), int(n_decided))
if kind == "limited":
    qps = in_whole / whole
    dev = f"{100 * (qps - limit) / limit:+.2f}%"
    # Every admitted request must have carried its decision time, or the figure is not one.
    by_decision = str(most_decided - limit) if n_decided == admitted else f"n/a ({n_decided}/{admitted} stamped)"
    over = f"{by_decision} | {max(0, most - limit)} / {max(0, most_slack - limit)}"
elif kind == "control":
    qps = float(rps)
    dev, over = "-", "- | -"
else:
    qps = admitted / dur
    dev, over = "-", "- | -"
per = f"{cmds / admitted:.3f}" if admitted and kind != "control" else "-"
print(f"| {name} | {float(rps):,.0f} | {p99} | {qps:,.1f} | {dev} | {over} | {per} | {non2xx} | {fallbacks} |")
PY
}

header() {
  echo
  echo "$1"
  echo
  echo "| run | req/s | P99 | admitted/s | deviation | overshoot by decision time (1 s) | by arrival (1 s / 1 s - ${SLACK_MS} ms) | Redis cmds / admitted | non-2xx | to local |"
  echo "|---|---|---|---|---|---|---|---|---|---|"
}

PORT=$(free_port)
echo "# rl serve benchmark ($(date -u +%FT%TZ), $(nproc) cores, DURATION=${DURATION}s, LIMIT=$LIMIT/s, OPTS=${OPTS:-none}, SERVE_THREADS=${SERVE_THREADS:-one per core})"

MODERATE="-t1 -c2"
UP="--upstream http://127.0.0.1:$UPORT"
header "## Added latency at moderate load (wrk $MODERATE; every request admitted and proxied)"
row "http://127.0.0.1:$UPORT/api/order/create" "$MODERATE" "bare upstream" unlimited
policies 1000000000 ""
start_serve 1 "$PORT" $UP $OPTS
row "http://127.0.0.1:$PORT/api/order/create" "$MODERATE" "rl serve proxy, 1 process" unlimited
stop_serve
policies 1000000000 "key_group: none"
start_serve 1 "$PORT" $UP $OPTS
row "http://127.0.0.1:$PORT/api/order/create" "$MODERATE" "rl serve proxy, 1 process, key_group: none" unlimited
stop_serve

header "## The machine's floor: the bare upstream under the design's flags (wrk -t8 -c100), as many processes as rl serve below"
# The machine's floor under the same load and process count: the bare upstream alone, 1, 2 and 4
# processes on one port (every request served, nothing limited). On a small machine wrk's 8
# threads and the servers share the cores, and the run queue, not the gateway, sets the tail.
CPORT=$(free_port)
for n in 1 2 4; do
  CPIDS=()
  for _ in $(seq "$n"); do "$UPSTREAM" "$CPORT" reuse-port & CPIDS+=($!); PIDS+=($!); done
  wait_port "$CPORT"
  row "http://127.0.0.1:$CPORT/api/order/create" "-t8 -c100" "bare upstream, $n process(es) (no limiter)" control
  for p in "${CPIDS[@]}"; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
done

header "## Proxy mode, the design's flags (wrk -t8 -c100), limit $LIMIT/s, one domain group (default: composite calls, concurrent ones sharing a script call per slot; repeated denials answered by the denial cache)"
policies "$LIMIT" ""
for n in 1 2 4; do
  start_serve "$n" "$PORT" $UP $OPTS
  row "http://127.0.0.1:$PORT/api/order/create" "-t8 -c100" "$n process(es)"
  stop_serve
done

header "## Same, key_group: none (the acquire path: denial cache, coalescing)"
policies "$LIMIT" "key_group: none"
for n in 1 2 4; do
  start_serve "$n" "$PORT" $UP $OPTS
  row "http://127.0.0.1:$PORT/api/order/create" "-t8 -c100" "$n process(es)"
  stop_serve
done

header "## Same, key_group: none and -o leases=on"
for n in 1 2 4; do
  start_serve "$n" "$PORT" $UP $OPTS -o leases=on
  row "http://127.0.0.1:$PORT/api/order/create" "-t8 -c100" "$n process(es), leases"
  stop_serve
done

header "## nginx auth_request -> rl serve /check (1 process, key_group: none) -> upstream (wrk -t8 -c100)"
NPORT=$(free_port)
mkdir -p "$WORK/nginx/tmp"
cat >"$WORK/nginx/nginx.conf" <<NGINX
daemon off;
worker_processes 1;
pid $WORK/nginx/nginx.pid;
error_log $WORK/nginx/error.log warn;
events { worker_connections 4096; }
http {
  access_log off;
  client_body_temp_path $WORK/nginx/tmp/body;
  proxy_temp_path $WORK/nginx/tmp/proxy;
  fastcgi_temp_path $WORK/nginx/tmp/fastcgi;
  uwsgi_temp_path $WORK/nginx/tmp/uwsgi;
  scgi_temp_path $WORK/nginx/tmp/scgi;
  upstream rl { server 127.0.0.1:$PORT; keepalive 64; }
  upstream app { server 127.0.0.1:$UPORT; keepalive 64; }
  server {
    listen 127.0.0.1:$NPORT;
    location = /_rl {
      internal;
      proxy_pass http://rl/check?deny_status=403;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_pass_request_body off;
      proxy_set_header Content-Length "";
      proxy_set_header X-Original-URI \$request_uri;
      proxy_set_header X-Original-Method \$request_method;
    }
    location / {
      auth_request /_rl;
      auth_request_set \$rl_state \$upstream_http_ratelimit;
      auth_request_set \$rl_retry \$upstream_http_retry_after;
      auth_request_set \$rl_decided_at \$upstream_http_rl_decided_at;
      add_header RateLimit \$rl_state always;
      error_page 403 = @over_limit;
      proxy_pass http://app;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_set_header RL-Decided-At \$rl_decided_at;
    }
    location @over_limit {
      add_header RateLimit \$rl_state always;
      add_header Retry-After \$rl_retry always;
      return 429;
    }
  }
}
NGINX
policies "$LIMIT" "key_group: none"
start_serve 1 "$PORT" $OPTS
"$NGINX" -p "$WORK/nginx" -c "$WORK/nginx/nginx.conf" -e "$WORK/nginx/error.log" &
NGINX_PID=$!; PIDS+=($NGINX_PID)
wait_port "$NPORT"
row "http://127.0.0.1:$NPORT/api/order/create" "-t8 -c100" "nginx + rl serve"
kill -QUIT "$NGINX_PID"; wait "$NGINX_PID" 2>/dev/null || true
stop_serve
echo
echo "to local: transitions of rl-core's local fallback (Redis round trips over degrade_rtt_ms,"
echo "5 ms by default, for degrade_after_ms): while local, each instance decides its share alone."
echo "A request admitted just before a window's end and delayed (queueing in the proxy, the"
echo "upstream) lands in the next window on the upstream's clock, so without local fallbacks the"
echo "apparent overshoot is bounded by the requests in flight (wrk -t8 -c100 keeps 96 connections)."
echo "Overshoot by decision time: the most requests the upstream received whose RL-Decided-At (the"
echo "Redis time rl serve decided them at) fall in any 1 s span, less the limit (0 = exact; negative:"
echo "no span reached the limit). By arrival: the same on the upstream's own clock at arrival (and any"
echo "span ${SLACK_MS} ms shorter), which queueing blurs. Admitted/s and deviation: what"
echo "the upstream got in the first DURATION-1 whole windows from its first arrival, vs the limit."
echo "Redis cmds / admitted: commands clients sent (script calls, connection commands) per request"
echo "the upstream got; the script's own inner commands are not round trips and are not counted."
