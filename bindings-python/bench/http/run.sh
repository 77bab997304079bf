#!/usr/bin/env bash
# HTTP benchmark (issue 14): wrk against FastAPI under uvicorn (no limiter / rl.starlette /
# slowapi) and Flask under gunicorn (no limiter / rl.flask / Flask-Limiter with Redis storage),
# one key, load above the limit, against a private redis-server from rl-harness; rl also with
# leases=on; then a moderate load (vegeta, open loop, below the limit): what each adds to the P99.
#   bash bindings-python/bench/http/run.sh [bench.py options, e.g. --duration 5 --only flask-rl]
# (--only also takes fastapi-rl-memory and flask-rl-memory, not run by default: the middleware on
# the memory backend, its own cost with no Redis and no lease bookkeeping; flask-rl-stub: the
# middleware with a limiter that repeats its first answer, the Flask glue alone; and
# flask-spin50/100/200: bare Flask plus that many µs of busy CPU per request, a control for how
# much a fixed in-app cost moves the P99. --time: times each Flask request, its limiter call and
# the garbage collector's runs inside the app.)
# Needs wrk (Debian: apt-get install -y wrk). Builds rl in release mode into its own venv
# (target/py-http-bench-venv); not part of the tests.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/../../.." && pwd)"
cd "$ROOT"
PY="${PYTHON:-python3}"
VENV="$ROOT/target/py-http-bench-venv"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$ROOT/target}"
command -v wrk >/dev/null || { echo "wrk is missing: apt-get install -y wrk" >&2; exit 2; }
# The moderate phase's open-loop load generator: vegeta, installed with `go install` if missing.
VEGETA="$(command -v vegeta || echo "$CARGO_TARGET_DIR/tools/bin/vegeta")"
if [ ! -x "$VEGETA" ]; then
  command -v go >/dev/null || { echo "vegeta is missing and so is go to install it" >&2; exit 2; }
  GOBIN="$CARGO_TARGET_DIR/tools/bin" go install github.com/tsenart/vegeta/v12@v12.12.0
fi
export VEGETA

[ -x "$VENV/bin/python" ] || "$PY" -m venv "$VENV"
"$VENV/bin/python" -m pip install -q --disable-pip-version-check -r bindings-python/bench/http/requirements.txt

echo "== building rl (release wheel)"
rm -rf "$ROOT/target/wheels/rl-http-bench"
"$VENV/bin/maturin" build --release --quiet -m bindings-python/Cargo.toml -o "$ROOT/target/wheels/rl-http-bench" -i "$VENV/bin/python"
"$VENV/bin/python" -m pip install -q --disable-pip-version-check --force-reinstall --no-deps "$ROOT"/target/wheels/rl-http-bench/*.whl

[ -x target/debug/rl-harness ] || cargo build -q -p rl-harness
echo "== HTTP benchmark (machine: $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg))"
exec target/debug/rl-harness run -- "$VENV/bin/python" bindings-python/bench/http/bench.py "$@"
