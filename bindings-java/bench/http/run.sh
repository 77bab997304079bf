#!/usr/bin/env bash
# The Java HTTP benchmark: wrk against a Spring Cloud Gateway (one route, one client key) in front
# of an in-process upstream that counts what it served, three ways in one run:
#   none   no limiter;
#   rl     rl's RlRateLimiter (dev.rl:rl-spring-cloud-gateway): LIMIT per WINDOW_MS, exact;
#   rl-leases  the same with `rl.options.leases: on` (decisions from exact leases, few Redis calls);
#   redis  SCG's RedisRateLimiter (token bucket: replenish LIMIT per second-equivalent, burst LIMIT).
# Load is wrk's closed loop (CONNS connections), far above LIMIT. Reported per way: req/s,
# P50/P99 latency, the most the upstream served in any WINDOW_MS (its own arrival timestamps), and
# Redis commands per request (INFO commandstats diff over the measured run; it counts the commands
# a script calls too), and wrk's timeouts (no answer in 2 s; not in the latencies). One private
# redis-server on a free loopback port (rl-harness start/stop). The upstream runs with TCP_NODELAY
# (sun.net.httpserver.nodelay): without it Nagle + delayed ACK add ~40 ms per response and the
# upstream, not the gateway, is measured. Not part of the test suite.
#
# Then, on the same warm gateway, a moderate load: vegeta's open loop at a fixed RATE below the
# limit (everything admitted) and far below capacity, which is what a limiter's added latency is
# judged by (a closed loop over capacity measures queueing instead). Reported per way: P50/P99,
# and for rl and redis the P99 they add over `none` of the same run, in %.
#
#   bash bindings-java/bench/http/run.sh            (env: SECONDS_PER_RUN=10 CONNS=32 LIMIT=500 WINDOW_MS=1000 MODES="none rl rl-leases redis" RATE=LIMIT/2 per s ROUNDS=6 WARMUP_SECONDS=3*SECONDS_PER_RUN)
#
# Builds and installs dev.rl:rl-java (release native library) and dev.rl:rl-spring-cloud-gateway
# first, and loads the release library from the cargo target dir (rl.native.path), whatever jar a
# concurrent build may have put in ~/.m2 since; installs vegeta into $CARGO_TARGET_DIR/tools/bin (Go module proxy) if it is missing.
set -euo pipefail
root="$(cd "$(dirname "$0")/../../.." && pwd)"
cd "$root"
target="${CARGO_TARGET_DIR:-$root/target}"
export CARGO_TERM_COLOR=never
secs="${SECONDS_PER_RUN:-10}"
conns="${CONNS:-32}"
limit="${LIMIT:-500}"
window="${WINDOW_MS:-1000}"
modes="${MODES:-none rl rl-leases redis}"
rate="${RATE:-$((limit * 1000 / window / 2))}"
rounds="${ROUNDS:-6}"
warmup="${WARMUP_SECONDS:-$((secs * 3))}"
mvn_flags=(-q -B -ntp -Dstyle.color=never)
command -v wrk >/dev/null || { echo "wrk is missing: apt-get install -y wrk" >&2; exit 1; }
vegeta="$(command -v vegeta || echo "$target/tools/bin/vegeta")"
if [ ! -x "$vegeta" ]; then
  command -v go >/dev/null || { echo "vegeta is missing and so is go to install it" >&2; exit 1; }
  echo "== install vegeta into $target/tools/bin"
  GOBIN="$target/tools/bin" go install github.com/tsenart/vegeta/v12@v12.13.0
  vegeta="$target/tools/bin/vegeta"
fi

echo "== build: rl-java (release native library), rl-spring-cloud-gateway and the bench gateway"
mvn "${mvn_flags[@]}" -f bindings-java/pom.xml -DskipTests -Drl.cargo.target.dir="$target" install
mvn "${mvn_flags[@]}" -f bindings-java/spring-cloud-gateway/pom.xml -DskipTests install
mvn "${mvn_flags[@]}" -f bindings-java/bench/http/pom.xml package dependency:build-classpath -Dmdep.outputFile=target/cp.txt
[ -x "$target/debug/rl-harness" ] || cargo build --locked -p rl-harness
cp="bindings-java/bench/http/target/classes:$(cat bindings-java/bench/http/target/cp.txt)"

eval "$("$target/debug/rl-harness" start)"   # RL_TEST_REDIS_URL, _PORT, _PID, _DIR
gw_pid=""
results="$(mktemp -d)"   # each moderate round's vegeta results
cleanup() {
  [ -n "$gw_pid" ] && kill "$gw_pid" 2>/dev/null && wait "$gw_pid" 2>/dev/null
  rm -rf "$results"
  "$target/debug/rl-harness" stop --pid "$RL_TEST_REDIS_PID" --dir "$RL_TEST_REDIS_DIR" >/dev/null 2>&1 || true
}
trap cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
redis_calls() {
  redis-cli -p "$RL_TEST_REDIS_PORT" info commandstats | tr -d '\r' \
    | awk -F'[=,]' '/^cmdstat_/ && !/^cmdstat_info:/ {n += $2} END {print n+0}'
}
# wrk's latency in ms from "50%    1.23ms" style fields.
to_ms() { awk '{v=$1; if (v ~ /us$/) {sub(/us$/,"",v); v/=1000} else if (v ~ /ms$/) {sub(/ms$/,"",v)} else if (v ~ /s$/) {sub(/s$/,"",v); v*=1000}; printf "%.2f", v}'; }

rows=()
mrows=()
declare -A mp99
for mode in $modes; do
  port="$(free_port)"
  log="$(mktemp)"
  extra=()
  [ "$mode" = rl-leases ] && extra=(--rl.options.leases=on)
  java -Xms512m -Xmx512m -Dsun.net.httpserver.nodelay=true -Drl.native.path="$target/release/librl_java.so" -cp "$cp" dev.rl.bench.http.BenchGateway \
    --server.port="$port" --server.address=127.0.0.1 --bench.mode="$mode" --bench.limit="$limit" \
    --bench.window-ms="$window" --rl.url="$RL_TEST_REDIS_URL" \
    "--rl.routes.bench.policies=$limit per ${window}ms" \
    --spring.data.redis.host=127.0.0.1 --spring.data.redis.port="$RL_TEST_REDIS_PORT" \
    --logging.level.root=WARN "${extra[@]}" >"$log" 2>&1 &
  gw_pid=$!
  for _ in $(seq 1 120); do
    curl -s -o /dev/null "http://127.0.0.1:$port/__stats?window=$window" && break
    sleep 0.5
  done
  # The JIT is still warming for tens of seconds (req/s rose 3x from round to round after a 5 s
  # warm-up): WARMUP_SECONDS (default 3 x SECONDS_PER_RUN) of the same load first.
  echo "== $mode: warm-up ($warmup s), then $rounds x $secs s, $conns connections"
  wrk -t2 -c"$conns" -d"${warmup}s" "http://127.0.0.1:$port/bench/x" >/dev/null
  sleep 1.5   # let the warm-up's window pass
  curl -s "http://127.0.0.1:$port/__stats?window=$window" >/dev/null
  # ROUNDS runs over the limit too: req/s and P50/P99 are the rounds' medians, the most served in
  # any window the worst round's, Redis commands per request over all of them.
  before="$(redis_calls)"
  total=0; served=0; most=0; timeouts=0; orps=(); op50=(); op99=()
  for _ in $(seq 1 "$rounds"); do
    out="$(wrk -t2 -c"$conns" -d"${secs}s" --latency "http://127.0.0.1:$port/bench/x")"
    stats="$(curl -s "http://127.0.0.1:$port/__stats?window=$window")"
    total=$((total + $(awk '/requests in/ {print $1}' <<<"$out")))
    orps+=("$(awk '/^Requests\/sec/ {printf "%.0f", $2}' <<<"$out")")
    op50+=("$(awk '$1=="50%" {print $2}' <<<"$out" | to_ms)")
    op99+=("$(awk '$1=="99%" {print $2}' <<<"$out" | to_ms)")
    served=$((served + $(sed -E 's/.*served=([0-9]+).*/\1/' <<<"$stats")))
    m="$(sed -E 's/.*most_in_window=([0-9]+).*/\1/' <<<"$stats")"; [ "$m" -gt "$most" ] && most="$m"
    t="$(awk '/Socket errors/ {gsub(",", ""); print $NF}' <<<"$out")"; timeouts=$((timeouts + ${t:-0}))
    sleep 1.5   # this round's window passes before the next
  done
  after="$(redis_calls)"
  # ROUNDS rounds on the same gateway; P50/P99 are those of every round's requests together (one
  # round's P99 is a handful of requests, at the mercy of one GC pause or scheduler hiccup on a
  # shared machine), each round's P99 shown beside them.
  mfiles=()
  for i in $(seq 1 "$rounds"); do
    mfiles+=("$results/$mode.$i.vegeta")
    echo "GET http://127.0.0.1:$port/bench/x" \
      | "$vegeta" attack -rate="$rate/s" -duration="${secs}s" -timeout=2s >"${mfiles[-1]}"
  done
  mstats="$(curl -s "http://127.0.0.1:$port/__stats?window=$window")"
  mtrips=$(( $(sed -E 's/.*rl_normal=([0-9]+).*/\1/' <<<"$mstats") - $(sed -E 's/.*rl_normal=([0-9]+).*/\1/' <<<"$stats") ))
  kill "$gw_pid"; wait "$gw_pid" 2>/dev/null || true; gw_pid=""
  rm -f "$log"
  median() { printf '%s\n' "$@" | sort -g | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}'; }
  rps="$(median "${orps[@]}")"; p50="$(median "${op50[@]}")"; p99="$(median "${op99[@]}")"
  rps_all="$(IFS=/; echo "${orps[*]}")"
  per="$(awk -v a="$after" -v b="$before" -v n="$total" 'BEGIN {printf "%.2f", (a-b)/n}')"
  rows+=("$(printf '%-9s %9s %9s %9s %10s %12s %14s %9s  %s' "$mode" "$rps" "$p50" "$p99" "$served" "$most" "$per" "$timeouts" "$rps_all")")
  mall="$(for f in "${mfiles[@]}"; do "$vegeta" report -type=json "$f"; echo; done | python3 -c 'import json,sys
print("/".join("%.2f" % (json.loads(l)["latencies"]["99th"]/1e6) for l in sys.stdin if l.strip()))')"
  read -r mreq m50 m99 mok < <("$vegeta" report -type=json "${mfiles[@]}" | python3 -c 'import json,sys
r=json.load(sys.stdin); l=r["latencies"]
print(r["requests"], "%.2f" % (l["50th"]/1e6), "%.2f" % (l["99th"]/1e6), r["status_codes"].get("200", 0))')
  mp99[$mode]="$m99"
  [ "$mode" = rl ] || [ "$mode" = rl-leases ] || mtrips="-"
  mrows+=("$mode $mreq $m50 $m99 $mok $(sed -E 's/.*served=([0-9]+).*/\1/' <<<"$mstats") $mall $mtrips")
done

echo
echo "limit $limit per $window ms, one key, $conns connections, $rounds rounds of $secs s per way (wrk closed loop); req/s, P50, P99: the rounds' medians"
printf '%-9s %9s %9s %9s %10s %12s %14s %9s  %s\n' way "req/s" "P50 ms" "P99 ms" served "most/window" "redis cmd/req" "timeouts" "req/s per round"
printf '%s\n' "${rows[@]}"

echo
echo "moderate load: $rate req/s, $rounds rounds of $secs s (vegeta, open loop; all below the limit, so all admitted); P50/P99: of all rounds' requests together"
printf '%-9s %9s %9s %9s %9s %10s %14s %14s  %s\n' way requests "P50 ms" "P99 ms" "200s" served "added P99" "rl by Redis" "P99 per round"
for r in "${mrows[@]}"; do
  read -r mode mreq m50 m99 mok mserved mall mtrips <<<"$r"
  added="-"
  if [ "$mode" != none ] && [ -n "${mp99[none]:-}" ]; then
    added="$(awk -v a="$m99" -v b="${mp99[none]}" 'BEGIN {printf "%+.0f%%", (a-b)/b*100}')"
  fi
  printf '%-9s %9s %9s %9s %9s %10s %14s %14s  %s\n' "$mode" "$mreq" "$m50" "$m99" "$mok" "$mserved" "$added" "$mtrips" "$mall"
done
