#!/usr/bin/env bash
# The Java HTTP benchmark: wrk against a Spring Cloud Gateway (one route, one client key) in front
# of an in-process upstream that counts what it served, three ways in one run:
#   none   no limiter;
#   allow  SCG's RequestRateLimiter filter with a limiter that allows everything at once (what the
#          filter itself costs; not in the default MODES);
#   allow-fields  the same, answering with two fixed RateLimit fields shaped like rl's (what the
#          fields cost in the gateway; not in the default MODES);
#   rl     rl's RlRateLimiter (dev.rl:rl-spring-cloud-gateway): LIMIT per WINDOW_MS, exact;
#   rl-leases  the same with `rl.options.leases: on` (decisions from exact leases, few Redis calls);
#   rl-leases-MS  the same with `rl.options.lease-ms: MS` (not in the default MODES): how the
#          leases' background Redis calls (a renewal and a refund per lease) weigh on the gateway;
#   rl-memory  rl on its in-process backend (memory://): the middleware's own cost, no Redis (not in
#          the default MODES);
#   redis  SCG's RedisRateLimiter (token bucket: replenish LIMIT per second-equivalent, burst LIMIT).
# Load is wrk's closed loop (CONNS connections), far above LIMIT. Reported per way: req/s,
# P50/P99 latency, the most the upstream served in any WINDOW_MS (its own arrival timestamps), and
# Redis commands per request (INFO commandstats diff over the measured run; it counts the commands
# a script calls too), and wrk's timeouts (no answer in 2 s; not in the latencies). One private
# redis-server on a free loopback port (rl-harness start/stop). The upstream runs with TCP_NODELAY
# (sun.net.httpserver.nodelay): without it Nagle + delayed ACK add ~40 ms per response and the
# upstream, not the gateway, is measured. Not part of the test suite.
#
# Then, on the same warm gateways, a moderate load: vegeta's open loop at a fixed RATE below the
# limit (everything admitted) and far below capacity, which is what a limiter's added latency is
# judged by (a closed loop over capacity measures queueing instead). Reported per way: P50/P99,
# and the P99 each adds over `none` of the same run, in %, beside that of `none-again`, a second
# gateway without a limiter (the A/A control: the noise floor).
#
# All the ways' gateways run at once, each with its own key prefix; the ways take turns round by
# round (the order rotated each round), so a slow spell of a shared machine is shared by all.
#
# APP=servlet runs the same phases against embedded Jetty (../servlet: BenchServlet) with the ways
# none, rl, rl-leases and rl-memory: rl's RateLimitFilter (dev.rl:rl-servlet) in front of a servlet
# that counts what it served, the servlet being the app (no upstream, no peer limiter).
#
# With TIME=1 each gateway also times, in itself, the limiter per request (the filter's ask to its
# answer) and the whole request (first filter to response, upstream included), and the moderate
# phase reports their P50/P99/P99.9 in µs per way: where a way's added latency is spent.
#
#   bash bindings-java/bench/http/run.sh            (env: APP=scg SECONDS_PER_RUN=10 CONNS=32 LIMIT=500 WINDOW_MS=1000 MODES="none rl rl-leases redis" RATE=LIMIT/2 per s ROUNDS=6 WARMUP_SECONDS=3*SECONDS_PER_RUN MODERATE_WARMUP_ROUNDS=3 PHASES="over moderate" TIME=0)
#   APP=servlet bash bindings-java/bench/http/run.sh   (MODES="none rl rl-leases" by default)
#   JAVA_OPTS="..." adds JVM flags to every app (e.g. for perf: -XX:+PreserveFramePointer
#   -XX:+UnlockDiagnosticVMOptions -XX:+DumpPerfMapAtExit, then `perf record -g -p <pid>`).
#
# Builds and installs dev.rl:rl-java (release native library) and dev.rl:rl-spring-cloud-gateway
# (or dev.rl:rl-servlet) first, and loads the release library from the cargo target dir (rl.native.path), whatever jar a
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
app="${APP:-scg}"
case "$app" in
  scg) modes="${MODES:-none rl rl-leases redis}" ;;
  servlet)
    modes="${MODES:-none rl rl-leases}"
    for m in $modes; do
      case "$m" in none | rl | rl-leases | rl-memory) ;; *) echo "APP=servlet has no way $m (none, rl, rl-leases, rl-memory)" >&2; exit 2 ;; esac
    done ;;
  *) echo "APP is $app; use scg or servlet" >&2; exit 2 ;;
esac
rate="${RATE:-$((limit * 1000 / window / 2))}"
rounds="${ROUNDS:-6}"
phases="${PHASES:-over moderate}"
warmup="${WARMUP_SECONDS:-$((secs * 3))}"
time_it="${TIME:-0}"
mvn_flags=(-q -B -ntp -Dstyle.color=never)
command -v wrk >/dev/null || { echo "wrk is missing: apt-get install -y wrk" >&2; exit 1; }
vegeta="$(command -v vegeta || echo "$target/tools/bin/vegeta")"
if [ ! -x "$vegeta" ]; then
  command -v go >/dev/null || { echo "vegeta is missing and so is go to install it" >&2; exit 1; }
  echo "== install vegeta into $target/tools/bin"
  GOBIN="$target/tools/bin" go install github.com/tsenart/vegeta/v12@v12.13.0
  vegeta="$target/tools/bin/vegeta"
fi

if [ "$app" = scg ]; then
  echo "== build: rl-java (release native library), rl-spring-cloud-gateway and the bench gateway"
  mvn "${mvn_flags[@]}" -f bindings-java/pom.xml -DskipTests -Drl.cargo.target.dir="$target" install
  mvn "${mvn_flags[@]}" -f bindings-java/spring-cloud-gateway/pom.xml -DskipTests install
  bench_dir=bindings-java/bench/http
  mvn "${mvn_flags[@]}" -f $bench_dir/pom.xml package dependency:build-classpath -Dmdep.outputFile=target/cp.txt
else
  echo "== build: rl-java (release native library), rl-servlet and the bench app"
  mvn "${mvn_flags[@]}" -f bindings-java/pom.xml -DskipTests -Drl.cargo.target.dir="$target" install
  mvn "${mvn_flags[@]}" -f bindings-java/servlet/pom.xml -DskipTests install
  bench_dir=bindings-java/bench/servlet
  mvn "${mvn_flags[@]}" -f $bench_dir/pom.xml compile dependency:build-classpath -Dmdep.outputFile=target/cp.txt
fi
[ -x "$target/debug/rl-harness" ] || cargo build --locked -p rl-harness
cp="$bench_dir/target/classes:$(cat $bench_dir/target/cp.txt)"

eval "$("$target/debug/rl-harness" start)"   # RL_TEST_REDIS_URL, _PORT, _PID, _DIR
gw_pid=""
results="$(mktemp -d)"   # each moderate round's vegeta results
cleanup() {
  for p in $gw_pid; do kill "$p" 2>/dev/null && wait "$p" 2>/dev/null; done
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

# Every way's gateway at once, each with its own key prefix (rl and rl-leases never share a
# window); `none-again` (the A/A control) in the moderate phase only.
ways=($modes)
mways=()
for m in $modes; do
  mways+=("$m")
  if [ "$m" = none ] && [[ " $phases " == *" moderate "* ]]; then mways+=(none-again); fi
done
all=("${mways[@]}")
declare -A gw_port gw_pids
start_gateway() {  # way
  local way="$1" mode="${1%-again}" port extra=() url="$RL_TEST_REDIS_URL"
  port="$(free_port)"
  [ "$mode" = rl-leases ] && extra=(--rl.options.leases=on)
  if [[ "$mode" =~ ^rl-leases-([0-9]+)$ ]]; then
    extra=(--rl.options.leases=on "--rl.options.lease-ms=${BASH_REMATCH[1]}ms")
    mode=rl-leases
  fi
  if [ "$mode" = rl-memory ]; then mode=rl; url=memory://; fi
  if [ "$app" = servlet ]; then
    local leases=off
    [ "$mode" = rl-leases ] && { mode=rl; leases=on; }
    # shellcheck disable=SC2086 # JAVA_OPTS: several flags
    java -Xms512m -Xmx512m ${JAVA_OPTS:-} -Drl.native.path="$target/release/librl_java.so" -cp "$cp" dev.rl.bench.servlet.BenchServlet \
      --port="$port" --mode="$mode" --url="$url" --limit="$limit" --window-ms="$window" --prefix="bench-$way:" \
      --leases="$leases" --time="$([ "$time_it" = 1 ] && echo true || echo false)" >"$results/$way.log" 2>&1 &
    gw_pids[$way]=$!
    gw_pid="${gw_pids[*]}"
    gw_port[$way]="$port"
    return
  fi
  # shellcheck disable=SC2086 # JAVA_OPTS: several flags
  java -Xms512m -Xmx512m ${JAVA_OPTS:-} -Dsun.net.httpserver.nodelay=true -Drl.native.path="$target/release/librl_java.so" -cp "$cp" dev.rl.bench.http.BenchGateway \
    --server.port="$port" --server.address=127.0.0.1 --bench.mode="$mode" --bench.limit="$limit" \
    --bench.window-ms="$window" --rl.url="$url" "--rl.options.key_prefix=bench-$way:" \
    "--rl.routes.bench.policies=$limit per ${window}ms" \
    --spring.data.redis.host=127.0.0.1 --spring.data.redis.port="$RL_TEST_REDIS_PORT" \
    --logging.level.root=WARN --bench.time="$([ "$time_it" = 1 ] && echo true || echo false)" "${extra[@]}" >"$results/$way.log" 2>&1 &
  gw_pids[$way]=$!
  gw_pid="${gw_pids[*]}"
  gw_port[$way]="$port"
}
stats_of() { curl -s "http://127.0.0.1:${gw_port[$1]}/__stats?window=$window"; }
field() { sed -E "s/.*$1=([0-9]+).*/\1/" <<<"$2"; }
# Round r's order: the ways rotated by r.
turns() {  # round, ways...
  local r="$1"; shift
  local n=$# i
  local w=("$@")
  for ((i = 0; i < n; i++)); do echo "${w[$(((i + r) % n))]}"; done
}
for way in "${all[@]}"; do start_gateway "$way"; done
for way in "${all[@]}"; do
  for _ in $(seq 1 240); do
    stats_of "$way" >/dev/null 2>&1 && break
    kill -0 "${gw_pids[$way]}" 2>/dev/null || { cat "$results/$way.log" >&2; exit 1; }
    sleep 0.5
  done
done
# The JIT is still warming for tens of seconds (req/s rose 3x from round to round after a 5 s
# warm-up): WARMUP_SECONDS (default 3 x SECONDS_PER_RUN) of the over-limit load first, each
# gateway alone.
for way in "${all[@]}"; do
  echo "== $way: warm-up ($warmup s)"
  wrk -t2 -c"$conns" -d"${warmup}s" "http://127.0.0.1:${gw_port[$way]}/bench/x" >/dev/null
done
sleep 1.5   # let the warm-up's window pass
for way in "${all[@]}"; do stats_of "$way" >/dev/null; done

# Over the limit: ROUNDS wrk runs per way, in turns. req/s and P50/P99 are the rounds' medians,
# the most served in any window the worst round's, Redis commands per request over all of them
# (each counted from just before its run to just before the next, so a lease refunded after a
# run is its way's).
declare -A total served most timeouts cmds orps op50 op99
for way in "${ways[@]}"; do total[$way]=0; served[$way]=0; most[$way]=0; timeouts[$way]=0; cmds[$way]=0; done
if [[ " $phases " == *" over "* ]]; then
  echo "== over the limit: $rounds rounds of $secs s per way, in turns, $conns connections"
  for r in $(seq 1 "$rounds"); do
    for way in $(turns "$r" "${ways[@]}"); do
      before="$(redis_calls)"
      out="$(wrk -t2 -c"$conns" -d"${secs}s" --latency "http://127.0.0.1:${gw_port[$way]}/bench/x")"
      sleep 1.5   # this round's window passes before the next
      st="$(stats_of "$way")"
      after="$(redis_calls)"
      cmds[$way]=$((cmds[$way] + after - before))
      total[$way]=$((total[$way] + $(awk '/requests in/ {print $1}' <<<"$out")))
      orps[$way]+=" $(awk '/^Requests\/sec/ {printf "%.0f", $2}' <<<"$out")"
      op50[$way]+=" $(awk '$1=="50%" {print $2}' <<<"$out" | to_ms)"
      op99[$way]+=" $(awk '$1=="99%" {print $2}' <<<"$out" | to_ms)"
      served[$way]=$((served[$way] + $(field served "$st")))
      m="$(field most_in_window "$st")"; [ "$m" -gt "${most[$way]}" ] && most[$way]="$m"
      t="$(awk '/Socket errors/ {gsub(",", ""); print $NF}' <<<"$out")"; timeouts[$way]=$((timeouts[$way] + ${t:-0}))
    done
  done
fi

# Moderate load: ROUNDS vegeta runs per way (none-again included), in turns. P50/P99 are those
# of every round's requests together (one round's P99 is a handful of requests, at the mercy of
# one GC pause or scheduler hiccup on a shared machine), each round's P99 shown beside them.
declare -A mfiles normal0 mstats mcmds
if [[ " $phases " == *" moderate "* ]]; then
  echo "== moderate: $rate req/s, $rounds rounds of $secs s per way, in turns"
  # First MODERATE_WARMUP_ROUNDS (default 3) rounds of the same load per way, in turns, not
  # measured: after the closed-loop warm-up, every way's first moderate rounds had a P99 of
  # 3-5 ms (against 0.8-2 ms after), limiter or not, for about two rounds of all ways on
  # Spring Cloud Gateway, and they alone set the pooled P99.
  for r in $(seq 1 "${MODERATE_WARMUP_ROUNDS:-3}"); do
    for way in $(turns "$r" "${mways[@]}"); do
      echo "GET http://127.0.0.1:${gw_port[$way]}/bench/x" \
        | GOGC=off "$vegeta" attack -rate="$rate/s" -duration="${secs}s" -timeout=2s >/dev/null
    done
  done
  for way in "${mways[@]}"; do normal0[$way]="$(field rl_normal "$(stats_of "$way")")"; done
  for r in $(seq 1 "$rounds"); do
    for way in $(turns "$r" "${mways[@]}"); do
      f="$results/$way.$r.vegeta"
      mfiles[$way]+=" $f"
      before="$(redis_calls)"
      echo "GET http://127.0.0.1:${gw_port[$way]}/bench/x" \
        | GOGC=off "$vegeta" attack -rate="$rate/s" -duration="${secs}s" -timeout=2s >"$f"
      mcmds[$way]=$(( ${mcmds[$way]:-0} + $(redis_calls) - before ))
    done
  done
  for way in "${mways[@]}"; do mstats[$way]="$(stats_of "$way")"; done
fi
for pid in "${gw_pids[@]}"; do kill "$pid" 2>/dev/null || true; done
for pid in "${gw_pids[@]}"; do wait "$pid" 2>/dev/null || true; done
gw_pid=""

median() { printf '%s\n' "$@" | sort -g | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}'; }
rows=()
if [[ " $phases " == *" over "* ]]; then
  for way in "${ways[@]}"; do
    read -ra rr <<<"${orps[$way]}"; read -ra r50 <<<"${op50[$way]}"; read -ra r99 <<<"${op99[$way]}"
    per="$(awk -v c="${cmds[$way]}" -v n="${total[$way]}" 'BEGIN {printf "%.2f", c/n}')"
    rps_all="$(IFS=/; echo "${rr[*]}")"
    rows+=("$(printf '%-10s %9s %9s %9s %10s %12s %14s %9s  %s' "$way" "$(median "${rr[@]}")" "$(median "${r50[@]}")" "$(median "${r99[@]}")" "${served[$way]}" "${most[$way]}" "$per" "${timeouts[$way]}" "$rps_all")")
  done
fi
mrows=()
declare -A mp99 mmed
if [[ " $phases " == *" moderate "* ]]; then
  for way in "${mways[@]}"; do
    read -ra fs <<<"${mfiles[$way]}"
    mall="$(for f in "${fs[@]}"; do "$vegeta" report -type=json "$f"; echo; done | python3 -c 'import json,sys
print("/".join("%.2f" % (json.loads(l)["latencies"]["99th"]/1e6) for l in sys.stdin if l.strip()))')"
    read -r mreq m50 m99 mok < <("$vegeta" report -type=json "${fs[@]}" | python3 -c 'import json,sys
r=json.load(sys.stdin); l=r["latencies"]
print(r["requests"], "%.2f" % (l["50th"]/1e6), "%.2f" % (l["99th"]/1e6), r["status_codes"].get("200", 0))')
    mp99[$way]="$m99"
    mmed[$way]="$(median $(tr / ' ' <<<"$mall"))"
    mtrips="-"
    case "$way" in rl | rl-leases | rl-leases-*) mtrips=$(( $(field rl_normal "${mstats[$way]}") - ${normal0[$way]} )) ;; esac
    mcr="$(awk -v c="${mcmds[$way]}" -v n="$mreq" 'BEGIN {printf "%.3f", c/n}')"
    mrows+=("$way $mreq $m50 $m99 $mok $(field served "${mstats[$way]}") $mcr $mall $mtrips")
  done
fi

if [ ${#rows[@]} -gt 0 ]; then
  echo
  echo "limit $limit per $window ms, one key, $conns connections, $rounds rounds of $secs s per way in turns (wrk closed loop); req/s, P50, P99: the rounds' medians"
  printf '%-10s %9s %9s %9s %10s %12s %14s %9s  %s\n' way "req/s" "P50 ms" "P99 ms" served "most/window" "redis cmd/req" "timeouts" "req/s per round"
  printf '%s\n' "${rows[@]}"
fi
if [ ${#mrows[@]} -gt 0 ]; then
  echo
  echo "moderate load: $rate req/s, $rounds rounds of $secs s per way in turns (vegeta, open loop; all below the limit, so all admitted); P50/P99: of all rounds' requests together; none-again: the A/A control"
  echo "(round P99 median: the median of the rounds' P99s, which one bad round cannot move; added: over none's, in %)"
  printf '%-10s %9s %9s %9s %9s %10s %10s %10s %12s %12s %14s  %s\n' way requests "P50 ms" "P99 ms" "200s" served "added P99" "round P99" "added" "rl by Redis" "redis cmd/req" "P99 per round"
  printf '%-10s %9s %9s %9s %9s %10s %10s %10s %12s %12s %14s\n' "" "" "" "" "" "" "" "median ms" "" "" ""
  for r in "${mrows[@]}"; do
    read -r way mreq m50 m99 mok mserved mcr mall mtrips <<<"$r"
    added="-" added_med="-"
    if [ "$way" != none ] && [ -n "${mp99[none]:-}" ]; then
      added="$(awk -v a="$m99" -v b="${mp99[none]}" 'BEGIN {printf "%+.0f%%", (a-b)/b*100}')"
      added_med="$(awk -v a="${mmed[$way]}" -v b="${mmed[none]}" 'BEGIN {printf "%+.0f%%", (a-b)/b*100}')"
    fi
    printf '%-10s %9s %9s %9s %9s %10s %10s %10s %12s %12s %14s  %s\n' "$way" "$mreq" "$m50" "$m99" "$mok" "$mserved" "$added" "${mmed[$way]}" "$added_med" "$mtrips" "$mcr" "$mall"
  done
  if [ "$time_it" = 1 ]; then
    echo
    echo "timed inside each gateway over the moderate rounds, µs: the limiter (ask to answer) and the whole request (first filter to response); leases taken / refunds since the gateway started"
    printf '%-10s %8s %8s %8s %8s %8s %8s %8s\n' way "lim P50" "lim P99" "lim P999" "gw P50" "gw P99" "gw P999" "leases"
    for way in "${mways[@]}"; do
      st="${mstats[$way]}"
      get() { grep -oE "(^| )$1=[0-9]+" <<<"$st" | cut -d= -f2 || true; }
      printf '%-10s %8s %8s %8s %8s %8s %8s %8s\n' "$way" "$(get limiter_p50_us)" "$(get limiter_p99_us)" "$(get limiter_p999_us)" \
        "$(get gateway_p50_us)" "$(get gateway_p99_us)" "$(get gateway_p999_us)" "$(get leases_taken)/$(get lease_refunds)"
    done
  fi
fi
