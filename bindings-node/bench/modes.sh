#!/usr/bin/env bash
# Run by run.sh inside `rl-harness run` (RL_TEST_REDIS_URL / RL_TEST_REDIS_PID are the server's):
# runs bench.mjs once per pinning mode in RL_BENCH_PINS, appending JSON lines to RL_BENCH_OUT.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
last=${RL_BENCH_PINS##* }
for mode in $RL_BENCH_PINS; do
  extra=()
  [ "$mode" = "$last" ] && extra=(--memory)
  case "$mode" in
    pinned)
      # -a: every thread of the server (its I/O and background threads too).
      taskset -a -p -c 1 "$RL_TEST_REDIS_PID" >/dev/null
      taskset -c 0 node "$here/bench.mjs" --label "node cpu 0, redis cpu 1" --json-out "$RL_BENCH_OUT" "${extra[@]}" "$@"
      ;;
    unpinned)
      taskset -a -p -c "0-$(($(nproc) - 1))" "$RL_TEST_REDIS_PID" >/dev/null
      node "$here/bench.mjs" --label unpinned --json-out "$RL_BENCH_OUT" "${extra[@]}" "$@"
      ;;
    *) echo "modes.sh: unknown mode $mode (pinned or unpinned)" >&2; exit 2 ;;
  esac
done
