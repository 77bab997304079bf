#!/usr/bin/env bash
# Installs Toxiproxy's server (a real TCP fault proxy; Go module github.com/Shopify/toxiproxy/v2)
# as $TOOLS/bin/toxiproxy-server (default: target/tools), with the machine's Go; skips it when
# present. core/tests/net_faults.rs finds it there (or through RL_TOXIPROXY_SERVER).
set -euo pipefail
cd "$(dirname "$0")/.."

VERSION=v2.5.0
TOOLS=${TOOLS:-${CARGO_TARGET_DIR:-$PWD/target}/tools}
BIN=$TOOLS/bin/toxiproxy-server
if [ ! -x "$BIN" ]; then
  command -v go >/dev/null 2>&1 || { echo "toxiproxy: go is missing" >&2; exit 1; }
  echo "toxiproxy: go install github.com/Shopify/toxiproxy/v2/cmd/server@$VERSION" >&2
  mkdir -p "$TOOLS/bin" "$TOOLS/go-build"
  tmp=$(mktemp -d "$TOOLS/go-build/XXXXXX")
  GOBIN=$tmp GOFLAGS=-buildvcs=false go install "github.com/Shopify/toxiproxy/v2/cmd/server@$VERSION"
  mv "$tmp/server" "$BIN"
  rm -rf "$tmp"
fi
echo "toxiproxy: $BIN ($("$BIN" -version 2>&1 | head -1))"
