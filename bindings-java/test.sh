#!/usr/bin/env bash
# The Java binding's test suite, run by scripts/test-all.sh (after its workspace build):
#
#   1. `mvn install` of bindings-java under rl-harness: Maven builds librl_java through cargo
#      (the debug build, with the `test-panic` feature the panic tests need: never in a release
#      or default build), bundles
#      it in the jar, runs the JUnit 5 suite against a real redis-server on a free loopback port
#      (the Redis-down test starts and kills its own), and installs dev.rl:rl-java into ~/.m2;
#   2. micrometer/ (dev.rl:rl-micrometer, the Micrometer MeterBinder), built and tested against
#      that installed artifact and a real redis-server;
#   3. servlet/ (dev.rl:rl-servlet, the Jakarta Servlet Filter), tested in embedded Jetty against
#      that installed artifact and a real redis-server;
#   4. spring-cloud-gateway/ (dev.rl:rl-spring-cloud-gateway, the SCG RateLimiter): a Spring Boot
#      gateway on a random loopback port routing to a JDK HTTP server, against a real redis-server;
#   5. the consumer project examples/gateway, built against that installed artifact and run
#      against a real redis-server.
#
#   bash bindings-java/test.sh          from anywhere
#
# Environment: CARGO_TARGET_DIR (default <repo>/target); RL_JAVA_CARGO_PROFILE=release to test the
# release library instead of the debug one.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
target="${CARGO_TARGET_DIR:-$root/target}"
export CARGO_TERM_COLOR=never

for tool in java mvn cargo; do
  command -v "$tool" >/dev/null 2>&1 || { echo "bindings-java/test.sh: $tool is missing" >&2; exit 1; }
done

harness="$target/debug/rl-harness"
if [ ! -x "$harness" ]; then
  cargo build --locked -p rl-harness
fi

case "${RL_JAVA_CARGO_PROFILE:-dev}" in
  release) native=(-Drl.cargo.profile=release -Drl.cargo.outdir=release) ;;
  *) native=(-Drl.cargo.profile=dev -Drl.cargo.outdir=debug) ;;
esac
mvn_flags=(-B -ntp -Dstyle.color=never -Drl.cargo.target.dir="$target" "-Drl.cargo.args=--locked --features test-panic" -Drl.test.requireRedis=true "${native[@]}")

echo "== bindings-java: mvn install (native build, JUnit suite against a real redis-server, install to ~/.m2)"
"$harness" run -- mvn "${mvn_flags[@]}" -f bindings-java/pom.xml install

echo "== bindings-java: rl-micrometer (micrometer/, the MeterBinder) against the installed dev.rl:rl-java and a real redis-server"
"$harness" run -- mvn -B -ntp -Dstyle.color=never -Drl.test.requireRedis=true -f bindings-java/micrometer/pom.xml verify

echo "== bindings-java: rl-servlet (servlet/, the Jakarta Servlet Filter) in embedded Jetty against the installed dev.rl:rl-java and a real redis-server"
"$harness" run -- mvn -B -ntp -Dstyle.color=never -Drl.test.requireRedis=true -f bindings-java/servlet/pom.xml verify

echo "== bindings-java: rl-spring-cloud-gateway (spring-cloud-gateway/, the SCG RateLimiter) in a real gateway against the installed dev.rl:rl-java and a real redis-server"
"$harness" run -- mvn -B -ntp -Dstyle.color=never -Drl.test.requireRedis=true -f bindings-java/spring-cloud-gateway/pom.xml verify

echo "== bindings-java: consumer project examples/gateway against the installed dev.rl:rl-java"
out="$("$harness" run -- mvn -q -B -ntp -Dstyle.color=never -f bindings-java/examples/gateway/pom.xml package exec:java 2>&1)" || {
  echo "$out"
  echo "bindings-java: the consumer example failed" >&2
  exit 1
}
echo "$out"
grep -q "rl native library: bundled:/native/" <<<"$out" || { echo "bindings-java: the example did not load the library bundled in the jar" >&2; exit 1; }
grep -q "example: ok$" <<<"$out" || { echo "bindings-java: the example did not finish" >&2; exit 1; }
echo "== bindings-java: all passed"
