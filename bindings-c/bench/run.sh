#!/usr/bin/env bash
# The C ABI's cost next to the Rust blocking facade it wraps, in one run, release builds:
#   1. memory backend, one thread: ns per acquire from C (rl_acquire, linked to librl.so and to
#      librl.a) and from Rust (rl_core::blocking::Limiter::acquire); ratio = rust_ns / c_ns
#      (>= 0.95: C adds <= ~5%); plus instructions per call under callgrind, which a busy machine
#      does not disturb;
#   2. one private local redis-server (started by rl-harness), THREADS threads sharing one limiter
#      on one key: decisions/s from C and from Rust; ratio = c / rust (target within 5%).
# Rounds alternate C and Rust so drift on a busy machine hits both; medians are compared (the
# best round of each is printed too: on a shared 2-core machine it is the least disturbed one).
#
#   bash bindings-c/bench/run.sh [MEM_ROUNDS] [ITERATIONS] [THREADS] [SECONDS] [REDIS_ROUNDS]
#   (defaults 9 1000000 8 3 5)
# Not part of the test suite.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
cd "$root"
target="${CARGO_TARGET_DIR:-$root/target}"
ROUNDS="${1:-9}" ITERS="${2:-1000000}" THREADS="${3:-8}" SECONDS_PER_RUN="${4:-3}" REDIS_ROUNDS="${5:-5}"

if [ -z "${RL_BENCH_INNER:-}" ]; then
  export CARGO_TERM_COLOR=never
  echo "== build (release): librl, bench_rust; rl-harness"
  cargo build --locked --release -p rl-c --lib --example bench_rust
  cargo build --locked -p rl-harness
  # -lrl programs ask for librl.so's SONAME, librl.so.<major> (bindings-c/build.rs).
  ln -sf librl.so "$target/release/$(readelf -d "$target/release/librl.so" | sed -n 's/.*Library soname: \[\(.*\)\]$/\1/p')"
  mkdir -p "$target/c-bench"
  ${CC:-cc} -std=c11 -O2 -Wall -Wextra -Werror -pthread -Iinclude -o "$target/c-bench/bench_c" \
    bindings-c/bench/bench_c.c -L"$target/release" -lrl -Wl,-rpath,"$target/release"
  ${CC:-cc} -std=c11 -O2 -Wall -Wextra -Werror -pthread -Iinclude -o "$target/c-bench/bench_c_static" \
    bindings-c/bench/bench_c.c "$target/release/librl.a" -lpthread -ldl -lm
  RL_BENCH_INNER=1 exec "$target/debug/rl-harness" run -- bash "$0" "$ROUNDS" "$ITERS" "$THREADS" "$SECONDS_PER_RUN" "$REDIS_ROUNDS"
fi

c="$target/c-bench/bench_c"
cs="$target/c-bench/bench_c_static"
rust="$target/release/examples/bench_rust"
field() { sed -n "s/.*$1=\([0-9.]*\).*/\1/p"; }
median() { sort -g | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'; }
best_low() { sort -g | head -1; }
best_high() { sort -g | tail -1; }

echo "== memory backend, 1 thread, $ITERS acquires per round, $ROUNDS rounds (ns per call)"
c_ns=() cs_ns=() rust_ns=()
for i in $(seq "$ROUNDS"); do
  # The order turns each round, so neither side always runs right after the other.
  if [ $((i % 2)) -eq 1 ]; then
    a="$("$c" memory "$ITERS" | field ns_per_call)"
    s="$("$cs" memory "$ITERS" | field ns_per_call)"
    b="$("$rust" memory "$ITERS" | field ns_per_call)"
  else
    b="$("$rust" memory "$ITERS" | field ns_per_call)"
    s="$("$cs" memory "$ITERS" | field ns_per_call)"
    a="$("$c" memory "$ITERS" | field ns_per_call)"
  fi
  echo "   round $i: C/librl.so $a ns, C/librl.a $s ns, Rust $b ns"
  c_ns+=("$a") cs_ns+=("$s") rust_ns+=("$b")
done
cm="$(printf '%s\n' "${c_ns[@]}" | median)" csm="$(printf '%s\n' "${cs_ns[@]}" | median)" rm="$(printf '%s\n' "${rust_ns[@]}" | median)"
cb="$(printf '%s\n' "${c_ns[@]}" | best_low)" csb="$(printf '%s\n' "${cs_ns[@]}" | best_low)" rb="$(printf '%s\n' "${rust_ns[@]}" | best_low)"

# Wall time on a shared machine is noisy; instruction counts are not. Calls made between a run of
# N and one of 2N iterations (each also warms up with N/10) give instructions per call.
if command -v valgrind >/dev/null 2>&1; then
  echo "== memory backend, instructions per call (callgrind: runs of 50000 and 100000 acquires)"
  instr() { valgrind --tool=callgrind --callgrind-out-file=/dev/null "$@" 2>&1 >/dev/null | sed -n 's/.*Collected : \([0-9]*\).*/\1/p'; }
  c_ir=$(( ($(instr "$c" memory 100000) - $(instr "$c" memory 50000)) / 55000 ))
  cs_ir=$(( ($(instr "$cs" memory 100000) - $(instr "$cs" memory 50000)) / 55000 ))
  rust_ir=$(( ($(instr "$rust" memory 100000) - $(instr "$rust" memory 50000)) / 55000 ))
  echo "   C/librl.so $c_ir, C/librl.a $cs_ir, Rust $rust_ir instructions per call"
fi

echo "== redis ($RL_TEST_REDIS_URL), $THREADS threads, ${SECONDS_PER_RUN}s per round, $REDIS_ROUNDS rounds (decisions/s)"
c_dps=() rust_dps=()
for i in $(seq "$REDIS_ROUNDS"); do
  if [ $((i % 2)) -eq 1 ]; then
    a="$("$c" redis "$RL_TEST_REDIS_URL" "$THREADS" "$SECONDS_PER_RUN" | field decisions_per_s)"
    b="$("$rust" redis "$RL_TEST_REDIS_URL" "$THREADS" "$SECONDS_PER_RUN" | field decisions_per_s)"
  else
    b="$("$rust" redis "$RL_TEST_REDIS_URL" "$THREADS" "$SECONDS_PER_RUN" | field decisions_per_s)"
    a="$("$c" redis "$RL_TEST_REDIS_URL" "$THREADS" "$SECONDS_PER_RUN" | field decisions_per_s)"
  fi
  echo "   round $i: C $a/s, Rust $b/s"
  c_dps+=("$a") rust_dps+=("$b")
done
cd_="$(printf '%s\n' "${c_dps[@]}" | median)" rd="$(printf '%s\n' "${rust_dps[@]}" | median)"
cdb="$(printf '%s\n' "${c_dps[@]}" | best_high)" rdb="$(printf '%s\n' "${rust_dps[@]}" | best_high)"

echo
awk -v cm="$cm" -v csm="$csm" -v rm="$rm" -v cb="$cb" -v csb="$csb" -v rb="$rb" 'BEGIN {
  printf "memory, ns per call, median: C/librl.so %.1f, C/librl.a %.1f, Rust %.1f -> rust/c %.3f (.so), %.3f (.a)\n", cm, csm, rm, rm / cm, rm / csm
  printf "memory, ns per call, best:   C/librl.so %.1f, C/librl.a %.1f, Rust %.1f -> rust/c %.3f (.so), %.3f (.a)\n", cb, csb, rb, rb / cb, rb / csb
}'
if [ -n "${c_ir:-}" ]; then
  awk -v c="$c_ir" -v cs="$cs_ir" -v r="$rust_ir" 'BEGIN {
    printf "memory, instructions per call: C/librl.so %d, C/librl.a %d, Rust %d -> rust/c %.3f (.so), %.3f (.a)\n", c, cs, r, r / c, r / cs
  }'
fi
awk -v cd="$cd_" -v rd="$rd" -v cdb="$cdb" -v rdb="$rdb" -v t="$THREADS" 'BEGIN {
  printf "redis, %d threads, decisions/s: median C %.0f, Rust %.0f -> c/rust %.3f; best C %.0f, Rust %.0f -> %.3f\n", t, cd, rd, cd / rd, cdb, rdb, cdb / rdb
}'
echo "targets: memory rust/c >= 0.95; redis c/rust within 0.95..1.05"
