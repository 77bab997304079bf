#!/usr/bin/env bash
# Runs the fault-scenario tests (real redis-server, Sentinel trio and Cluster started by rl-harness,
# network faults through Toxiproxy) in release mode and prints their measured figures (the REPORT
# lines); the tests assert the bounds.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/ensure-deps.sh >/dev/null
bash scripts/toxiproxy.sh >/dev/null # the network faults' proxy
out=$(cargo test --release -p rl-core --test resilience --test topologies --test net_faults \
  --test net_faults_cluster -- --nocapture --test-threads 1 2>&1) || { echo "$out"; exit 1; }
echo "$out" | grep -E '^test result|REPORT' | sed 's/^.*REPORT /- /'
