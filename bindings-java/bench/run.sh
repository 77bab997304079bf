#!/usr/bin/env bash
# The Java benchmark: one key, limit 5000 per 1000 ms, one private local redis-server (started and
# stopped by rl-harness), 32 threads; the native RateLimiter beside the design's Redisson EVALSHA
# path and Redisson's RRateLimiter, in the same run. Not part of the test suite.
#
#   bash bindings-java/bench/run.sh [Bench options: --seconds 10 --threads 32 --rounds 1 --only native,evalsha,rratelimiter ...]
#   MAIN=dev.rl.bench.ColdCall bash bindings-java/bench/run.sh [ColdCall arguments]   (one call every few
#     ms, caches cold: see ColdCall.java)
#
# Builds and installs dev.rl:rl-java with the release library first (mvn install -DskipTests).
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
cd "$root"
target="${CARGO_TARGET_DIR:-$root/target}"
export CARGO_TERM_COLOR=never
mvn_flags=(-q -B -ntp -Dstyle.color=never)

echo "== build: rl-java (release native library) and the benchmark"
mvn "${mvn_flags[@]}" -f bindings-java/pom.xml -DskipTests -Drl.cargo.target.dir="$target" install
mvn "${mvn_flags[@]}" -f bindings-java/bench/pom.xml package dependency:build-classpath -Dmdep.outputFile=target/cp.txt
[ -x "$target/debug/rl-harness" ] || cargo build --locked -p rl-harness

main=("${MAIN:-dev.rl.bench.Bench}")
[ -z "${MAIN:-}" ] && main+=(--script lua/sliding_window.lua)
echo "== run (a private redis-server on a free loopback port)"
"$target/debug/rl-harness" run -- java -Xms1g -Xmx1g -XX:+UseParallelGC \
  -cp "bindings-java/bench/target/classes:$(cat bindings-java/bench/target/cp.txt)" \
  "${main[@]}" "$@"
