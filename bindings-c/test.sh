#!/usr/bin/env bash
# The C binding's test suite: builds librl (debug), checks include/rl.h against a fresh cbindgen
# run, compiles the C suite, the conformance table's suite (tests/test_conformance.c) and the
# example with -Wall -Wextra -Werror, and runs them against a real redis-server (started and stopped by rl-harness) and against the memory backend, natively
# and under valgrind. Ends with one line `bindings-c: N passed, M failed`; exits non-zero on any
# failure.
#
#   bash bindings-c/test.sh             from anywhere
#
# Environment: CC (default cc), CARGO_TARGET_DIR (default <repo>/target).
set -uo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
target="${CARGO_TARGET_DIR:-$root/target}"
lib_dir="$target/debug"
out="$target/c-tests"
CC="${CC:-cc}"
export CARGO_TERM_COLOR=never

die() { echo "bindings-c/test.sh: $*" >&2; echo "bindings-c: 0 passed, 1 failed"; exit 1; }
command -v valgrind >/dev/null 2>&1 || die "valgrind is missing (bash scripts/ensure-deps.sh installs it)"
command -v "$CC" >/dev/null 2>&1 || die "no C compiler ($CC)"

echo "== build librl (debug) and rl-harness"
# A no-op after scripts/test-all.sh's workspace build; --locked: never touch Cargo.lock.
cargo build --locked -p rl-c -p rl-harness || die "cargo build failed"
harness="$lib_dir/rl-harness"
[ -f "$lib_dir/librl.so" ] && [ -f "$lib_dir/librl.a" ] && [ -x "$harness" ] || die "build outputs missing in $lib_dir"
# librl.so's SONAME is librl.so.<major> (bindings-c/build.rs): what -lrl programs ask for at run time.
soname="$(readelf -d "$lib_dir/librl.so" | sed -n 's/.*Library soname: \[\(.*\)\]$/\1/p')"
[ -n "$soname" ] || die "librl.so has no SONAME"
ln -sf librl.so "$lib_dir/$soname"

echo "== header"
bash bindings-c/regen-header.sh --check || die "include/rl.h is stale"

echo "== compile"
mkdir -p "$out"
cflags=(-std=c11 -Wall -Wextra -Werror -Wpedantic -pthread -Iinclude)
link_so=(-L"$lib_dir" -lrl -Wl,-rpath,"$lib_dir")
# The header is valid C++ too (extern "C", no C-only constructs).
if command -v c++ >/dev/null 2>&1; then
  echo '#include "rl.h"' | c++ -std=c++11 -Wall -Wextra -Werror -Iinclude -fsyntax-only -x c++ - ||
    die "rl.h does not compile as C++"
else
  echo "(no c++ compiler: skipped compiling rl.h as C++)"
fi
# The suite: main.c (settings, helpers, the list of tests) and one file per concern.
suite=(main.c test_api.c test_options.c test_backend.c test_leases.c test_composite.c test_fork.c test_threads.c test_fuzz.c)
"$CC" "${cflags[@]}" -Ibindings-c/tests -o "$out/test_rl" "${suite[@]/#/bindings-c/tests/}" "${link_so[@]}" ||
  die "compiling the suite in tests/ failed"
# The conformance table becomes a C header here (python3, stdlib only): see tests/gen_conformance.py.
command -v python3 >/dev/null 2>&1 || die "python3 is needed to read tests/conformance/invalid.json"
python3 bindings-c/tests/gen_conformance.py tests/conformance/invalid.json include/rl.h >"$out/conformance_rows.h" ||
  die "tests/gen_conformance.py failed"
"$CC" "${cflags[@]}" -I"$out" -o "$out/test_conformance" bindings-c/tests/test_conformance.c "${link_so[@]}" ||
  die "compiling tests/test_conformance.c failed"
"$CC" "${cflags[@]}" -o "$out/getting_started" bindings-c/examples/getting_started.c "${link_so[@]}" ||
  die "compiling examples/getting_started.c failed"
# The static library links with nothing but libc's usual companions.
"$CC" "${cflags[@]}" -o "$out/getting_started_static" bindings-c/examples/getting_started.c "$lib_dir/librl.a" \
  -lpthread -ldl -lm || die "linking examples/getting_started.c against librl.a failed"

passed=0
failed=0
failures=()
# "Possibly lost"/"still reachable" blocks are the shared runtime's threads and thread-locals, alive
# until exit by design; only definite leaks and memory errors fail a run.
valgrind=(valgrind --error-exitcode=1 --leak-check=full --errors-for-leak-kinds=definite --show-leak-kinds=definite
  --suppressions="$root/bindings-c/tests/valgrind.supp" -q)

# run NAME CMD...: runs one suite process, adds its RESULT line (or one failure) to the totals.
run() {
  local name="$1"; shift
  echo "== $name"
  local log="$out/$(echo "$name" | tr ' /,()' '_____').log"
  "$@" 2>&1 | tee "$log"
  local rc=${PIPESTATUS[0]}
  local result p f
  result="$(grep -E '^RESULT passed=[0-9]+ failed=[0-9]+$' "$log" | tail -1)"
  if [ -n "$result" ]; then
    p="${result#RESULT passed=}"; p="${p%% *}"
    f="${result##*failed=}"
  else
    p=0; f=1
  fi
  # A clean RESULT with a non-zero exit: valgrind found errors or definite leaks.
  if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then
    echo "   $name: exit status $rc (valgrind errors or leaks: see above)"
    f=1
  fi
  passed=$((passed + p))
  failed=$((failed + f))
  [ "$f" -eq 0 ] || failures+=("$name")
}

# example NAME CMD...: the getting-started program must print 3 allowed, then 1 denied.
example() {
  shift
  local text rc
  text="$("$@" 2>&1)"; rc=$?
  echo "$text"
  if [ "$rc" -eq 0 ] && [ "$(grep -c 'allowed=1' <<<"$text")" -eq 3 ] && [ "$(grep -c 'allowed=0' <<<"$text")" -eq 1 ]; then
    echo "RESULT passed=1 failed=0"
    return 0
  fi
  echo "RESULT passed=0 failed=1"
  return 1
}

# Natively, the 8-thread exactness test offers 3 x 500 per 500 ms window for 3 windows; under
# valgrind (~200 Redis calls/s in all) 3 x 20 per 1000 ms.
native=(--limit 500 --window-ms 500)
slow=(--limit 20 --window-ms 1000)
with_redis=("$harness" run --)

# tests/test_fuzz.c: 1000 random calls per kind natively, its default (60) under valgrind.
run "native/redis" "${with_redis[@]}" env RL_FUZZ_RUNS=1000 "$out/test_rl" --backend redis "${native[@]}"
run "native/memory" env RL_FUZZ_RUNS=1000 "$out/test_rl" --backend memory "${native[@]}"
# Natively only: in a fork()ed child the core abandons the parent's runtime and Redis connection on
# purpose (their threads do not exist there, so they cannot be shut down), and valgrind, which
# follows the child, counts those as definite leaks. (The 200 forks would also take minutes there.)
slow+=(--skip fork_child_uses_handle --skip fork_child_is_a_new_instance --skip fork_while_threads_mid_call --skip fork_while_threads_mid_call_local)
run "valgrind/redis" "${with_redis[@]}" "${valgrind[@]}" "$out/test_rl" --backend redis "${slow[@]}"
run "valgrind/memory" "${valgrind[@]}" "$out/test_rl" --backend memory "${slow[@]}"
run "conformance/redis" "${with_redis[@]}" "$out/test_conformance" --backend redis
run "conformance/memory" "$out/test_conformance" --backend memory
run "conformance/valgrind/memory" "${valgrind[@]}" "$out/test_conformance" --backend memory
export -f example
run "example (librl.so, memory)" bash -c 'example "$0" "$@"' example "$out/getting_started"
run "example (librl.so, redis)" "${with_redis[@]}" bash -c 'example "$0" "$1" "$RL_TEST_REDIS_URL"' example "$out/getting_started"
run "example (librl.a, memory)" bash -c 'example "$0" "$@"' example "$out/getting_started_static"
run "example (valgrind, memory)" bash -c 'example "$0" "$@"' example "${valgrind[@]}" "$out/getting_started"

echo
if [ "$failed" -ne 0 ]; then
  echo "failed: ${failures[*]}"
fi
echo "bindings-c: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
