#!/usr/bin/env bash
# Installs what the test suite needs and a fresh Debian machine lacks: redis-server (the tests
# start their own), valgrind (the C suite), nginx (rl serve's auth_request test). Toolchains (cargo, python3, node, java, mvn) are
# expected on the machine; this script says so clearly when one is missing.
set -euo pipefail

need_apt=()
command -v redis-server >/dev/null 2>&1 || need_apt+=(redis-server)
command -v redis-cli >/dev/null 2>&1 || need_apt+=(redis-tools)
command -v valgrind >/dev/null 2>&1 || need_apt+=(valgrind)
command -v openssl >/dev/null 2>&1 || need_apt+=(openssl) # the TLS tests' throwaway certificates
# rl serve's auth_request test runs Debian's nginx (its own config, its own port; the system
# service the package installs is never used). /usr/sbin is off some users' PATH.
command -v nginx >/dev/null 2>&1 || [ -x /usr/sbin/nginx ] || need_apt+=(nginx)
# `rl soak` draws its plot's text in DejaVu Sans (read at run time; no fontconfig needed).
[ -f /usr/share/fonts/truetype/dejavu/DejaVuSans.ttf ] || need_apt+=(fonts-dejavu-core)

if [ ${#need_apt[@]} -gt 0 ]; then
  echo "ensure-deps: installing ${need_apt[*]} from Debian's packages"
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${need_apt[@]}" >/dev/null
fi

# The test command checks formatting and lints first.
for component in rustfmt clippy; do
  cargo "${component/rustfmt/fmt}" --version >/dev/null 2>&1 || rustup component add "$component"
done

# The tests start their own servers; Debian's package also starts a system one we do not use.
for tool in cargo redis-server; do
  command -v "$tool" >/dev/null 2>&1 || { echo "ensure-deps: $tool is missing" >&2; exit 1; }
done
# rl serve's gRPC tests build Go clients and envoyproxy/ratelimit from the Go module proxy
# (serve/tools/build-go-tools.sh); Go itself comes with the machine.
command -v go >/dev/null 2>&1 || { echo "ensure-deps: go is missing (rl serve's gRPC tests)" >&2; exit 1; }
echo "ensure-deps: $(redis-server --version | cut -d' ' -f1-3), $(cargo --version)"
