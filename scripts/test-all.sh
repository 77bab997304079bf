#!/usr/bin/env bash
# Every test of the project, in one go: installs what is missing, builds the workspace once, then
# runs the Rust tests and each language's suite against real redis-server processes that the
# suites start and stop themselves. Exits non-zero if any suite fails.
set -euo pipefail
cd "$(dirname "$0")/.."
# Each step's start, in seconds since the suite began: where CI's time goes.
step() { echo "== $* (at ${SECONDS} s)"; }

bash scripts/ensure-deps.sh
# The server matrix's Redis 7.4, Redis 8.2 and Valkey 8.1, and the fault proxy (target/tools).
bash scripts/servers.sh
bash scripts/toxiproxy.sh

export CARGO_TERM_COLOR=never
step "format and lints (cargo fmt --check, clippy -D warnings)"
cargo fmt --all --check
cargo clippy --workspace --all-targets --locked -- -D warnings
step "generated files are current (rl-gen --check)"
cargo run -q --locked -p rl-gen -- --check
step "one version everywhere (scripts/check-versions.py)"
python3 scripts/check-versions.py

step "build (workspace, debug)"
cargo build --workspace --all-targets --locked

step "Go programs for rl serve's gRPC tests (built once into target/tools)"
bash serve/tools/build-go-tools.sh --peer >/dev/null

step "Rust tests"
cargo test --workspace --locked

# The soak's short version (`make soak` is the long one): 60 s of mixed load with a fault every 4 s
# (every kind at least once), asserting flat resources and exact windows; writes its plot.
step "soak (60 s)"
cargo run -q --locked -p rl-cli -- soak --duration 60s --fault-every 4s \
  --plot "${CARGO_TARGET_DIR:-target}/soak/short.png"

# The server matrix (scripts/matrix.sh): the core and topology suites against Redis 7.4 and Valkey
# 8.1; Debian's Redis 7.0 ran them above. `make matrix` adds Redis 8.2.
step "server matrix (Redis 7.4, Valkey 8.1)"
bash scripts/matrix.sh redis-7.4 valkey-8.1

# Each binding adds its suite here as it lands; each script builds only its own thin layer.
for suite in bindings-c/test.sh bindings-python/test.sh bindings-node/test.sh bindings-java/test.sh; do
  if [ -f "$suite" ]; then
    step "$suite"
    bash "$suite"
  fi
done
# Last: the installable artifacts (make dist), each installed without cargo and run against Redis.
step "scripts/test-dist.sh"
bash scripts/test-dist.sh
step "all suites passed"
