#!/usr/bin/env bash
# Builds the Go programs rl serve's gRPC tests and benchmark talk to, into $TARGET/tools
# ($CARGO_TARGET_DIR or the repo's target/), and skips what is already there:
#   rls-client   our own client on envoyproxy/go-control-plane's generated RLS v3 stubs
#                (serve/tools/rls-client: main.go + go.mod/go.sum; rebuilt when its source is newer)
#   client_cmd   envoyproxy/ratelimit's own client, from the Go module proxy
#   service_cmd  envoyproxy/ratelimit itself (only with --peer: the benchmark's peer)
# Nothing fetched is kept in the repo: the Go module cache holds it ($GOPATH/pkg/mod).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
target="${CARGO_TARGET_DIR:-$repo/target}"
tools="$target/tools"
# The version `go list -m github.com/envoyproxy/ratelimit@latest` answered when this was written
# (the project tags no releases on the module proxy).
RATELIMIT_VERSION="${RATELIMIT_VERSION:-v1.4.1-0.20260122083618-3fb702589d36}"
mkdir -p "$tools"
export GOFLAGS="${GOFLAGS:-} -mod=mod" GOTOOLCHAIN="${GOTOOLCHAIN:-local}"

if ! command -v go >/dev/null; then
  echo "build-go-tools: go is not installed" >&2
  exit 1
fi

client="$tools/rls-client"
if [[ ! -x "$client" || "$here/rls-client/main.go" -nt "$client" || "$here/rls-client/go.sum" -nt "$client" ]]; then
  (cd "$here/rls-client" && GOBIN="$tools" go install .)
fi

wanted=(client_cmd)
[[ "${1:-}" == "--peer" ]] && wanted+=(service_cmd)
for cmd in "${wanted[@]}"; do
  stamp="$tools/.$cmd.version"
  if [[ ! -x "$tools/$cmd" || "$(cat "$stamp" 2>/dev/null)" != "$RATELIMIT_VERSION" ]]; then
    (cd "$tools" && GOBIN="$tools" go install "github.com/envoyproxy/ratelimit/src/$cmd@$RATELIMIT_VERSION")
    echo "$RATELIMIT_VERSION" > "$stamp"
  fi
done
echo "$tools"
