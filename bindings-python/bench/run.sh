#!/usr/bin/env bash
# rl vs `limits` (MovingWindowRateLimiter, redis-py + hiredis), side by side in one run: 1 and 16
# threads on one key and on random keys out of 100,000, client pinned to CPU 0 and Redis to CPU 1,
# then both unpinned; plus Redis bytes per idle key. Against a private redis-server started (and
# stopped) by rl-harness.
#   bash bindings-python/bench/run.sh [bench.py options, e.g. --duration 10 --pinning pinned]
# Builds rl in release mode into its own venv (target/py-bench-venv); not part of the tests.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
cd "$ROOT"
PY="${PYTHON:-python3}"
VENV="$ROOT/target/py-bench-venv"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$ROOT/target}"

[ -x "$VENV/bin/python" ] || "$PY" -m venv "$VENV"
"$VENV/bin/pip" install -q --disable-pip-version-check maturin==1.16.0 "limits[redis]==5.8.0" redis==7.4.1 hiredis==3.5.0

echo "== building rl (release wheel)"
rm -rf "$ROOT/target/wheels/rl-bench"
"$VENV/bin/maturin" build --release --quiet -m bindings-python/Cargo.toml -o "$ROOT/target/wheels/rl-bench" -i "$VENV/bin/python"
"$VENV/bin/pip" install -q --disable-pip-version-check --force-reinstall --no-deps "$ROOT"/target/wheels/rl-bench/*.whl

[ -x target/debug/rl-harness ] || cargo build -q -p rl-harness
echo "== benchmark (machine: $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg))"
exec target/debug/rl-harness run -- "$VENV/bin/python" bindings-python/bench/bench.py "$@"
