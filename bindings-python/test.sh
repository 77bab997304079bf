#!/usr/bin/env bash
# The Python binding's suite: builds the wheel, installs it into a private venv the way a user
# would, type-checks the installed package (stubtest + mypy --strict on an example), then runs
# pytest against real redis-server processes (rl-harness). Exits with pytest's status.
#   bash bindings-python/test.sh [pytest args...]
# Env: PYTHON (interpreter for the venv, default python3), CARGO_TARGET_DIR (default <repo>/target).
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
cd "$ROOT"
PY="${PYTHON:-python3}"
PYVER="$("$PY" -c 'import sys; print("%d.%d" % sys.version_info[:2])')"
VENV="$ROOT/target/py-venv-$PYVER"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$ROOT/target}"
export PIP_DISABLE_PIP_VERSION_CHECK=1

echo "== python: venv ($("$PY" --version 2>&1)) and test tools"
if ! "$VENV/bin/python" -c 'import sys' >/dev/null 2>&1; then
  rm -rf "$VENV"
  "$PY" -m venv "$VENV"
fi
"$VENV/bin/python" -m pip install -q -r bindings-python/requirements-dev.txt

echo "== python: build the wheel (debug, shared build cache, with core/src/unwind.rs's test-panic hook), install it"
WHEELS="$CARGO_TARGET_DIR/wheels/rl-python-test"
rm -rf "$WHEELS"
"$VENV/bin/maturin" build --quiet --locked -m bindings-python/Cargo.toml -i "$VENV/bin/python" -o "$WHEELS" --features test-panic
# The distribution was called rl-python before 0.1.0's packaging: a venv made then has it too.
"$VENV/bin/python" -m pip uninstall -q -y rl-python >/dev/null 2>&1 || true
"$VENV/bin/python" -m pip install -q --force-reinstall --no-deps "$WHEELS"/*.whl

echo "== python: type checks (stubtest on the installed package, mypy --strict on an example)"
# From a directory without the sources, so the installed wheel (with its stubs) is what is checked.
(cd "$ROOT/target" && "$VENV/bin/python" -m mypy.stubtest rl && \
  "$VENV/bin/python" -m mypy --strict --no-incremental "$ROOT/bindings-python/tests/typing_example.py")

[ -x "$CARGO_TARGET_DIR/debug/rl-harness" ] || cargo build --quiet --locked -p rl-harness
echo "== python: pytest (real redis-server via rl-harness)"
exec "$CARGO_TARGET_DIR/debug/rl-harness" run -- "$VENV/bin/python" -m pytest bindings-python/tests -q -p no:cacheprovider "$@"
