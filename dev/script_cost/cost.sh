#!/usr/bin/env bash
# Redis CPU per call of lua/sliding_window.lua against lua/baseline_zset.lua (the raw 4-command
# ZSET script `rl throughput` compares with), one call at a time, in one run:
#   instructions  redis-server under `valgrind --tool=callgrind`, counting only inside the
#                 EVALSHA/FCALL commands (deterministic up to how many calls share a millisecond)
#   usec          INFO commandstats usec_per_call on a plain redis-server (noisy, machine-bound)
# usage: dev/script_cost/cost.sh [N calls per case, default 2000] [LUA_FILE, default lua/sliding_window.lua]
# RL_COST_CLOCK=fixed: rl's calls on a client clock moving 1 ms per 4 calls (see gen.py): admissions
# priced independently of machine speed and load. RL_COST_REPLY=array: rl's calls ask for the array
# reply ('rl1') instead of the packed one rl-core asks for ('rl1P').
# The FCALL cases load the library made from LUA_FILE as core/src/backend/functions.rs makes it
# (the file up to its EVAL-only tail, then register_function of `entry`).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
lua=$here/../../lua
n=${1:-2000}
window=${2:-$lua/sliding_window.lua}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
port=$((20000 + RANDOM % 20000))
lib=$tmp/library.lua
{
  echo '#!lua name=rl_cost'
  sed '/^-- rl: the lines below run only under EVAL/,$d' "$window"
  echo "redis.register_function{function_name='rl_window_cost', callback=entry}"
} >"$lib"

cases="raw:admit fcall:admit rl:admit raw:deny fcall:deny rl:deny design:deny"

run() { # kind scenario valgrind(0|1) -> prints "instructions_per_call usec_per_call"
  local kind=$1 scen=$2 vg=$3 file=$window
  [ "$kind" = raw ] && file=$lua/baseline_zset.lua
  [ "$kind" = fcall ] && file=$lib
  python3 "$here/gen.py" "$kind" "$scen" "$n" "$file" rl_window_cost >"$tmp/cmds"
  local pre=()
  if [ "$vg" = 1 ]; then
    pre=(valgrind --tool=callgrind --callgrind-out-file="$tmp/cg.out" --collect-atstart=no
         --toggle-collect=evalShaCommand --toggle-collect=fcallCommand)
  fi
  "${pre[@]}" redis-server --port "$port" --save '' --appendonly no >"$tmp/server.log" 2>&1 &
  local pid=$!
  for _ in $(seq 100); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.1; done
  redis-cli -p "$port" <"$tmp/cmds" >"$tmp/replies"
  local usec
  usec=$(grep -aE '^cmdstat_(evalsha|fcall):' "$tmp/replies" | sed 's/.*usec_per_call=\([0-9.]*\).*/\1/')
  redis-cli -p "$port" shutdown nosave >/dev/null 2>&1 || true
  wait "$pid" || true
  local ins=-
  if [ "$vg" = 1 ]; then
    ins=$(( $(grep '^summary:' "$tmp/cg.out" | awk '{print $2}') / n ))
  fi
  echo "$ins $usec"
}

printf '%-14s %14s %12s\n' case instr/call usec/call
# raw: baseline_zset.lua by EVALSHA; fcall: the library by FCALL; rl: the file by EVALSHA (native
# convention, what rl does where functions are refused); design: the design's EVALSHA convention.
for c in $cases; do
  k=${c%:*} s=${c#*:}
  read -r ins _ < <(run "$k" "$s" 1)
  read -r _ usec < <(run "$k" "$s" 0)
  printf '%-14s %14s %12s\n' "$c" "$ins" "$usec"
done
