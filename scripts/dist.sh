#!/usr/bin/env bash
# `make dist`: the installable artifacts for linux-x86_64, written into dist/ (ignored by git):
#
#   rl_limiter-V-cp39-abi3-manylinux_*_x86_64.whl, rl_limiter-V.tar.gz   Python wheel + sdist (maturin)
#   rl-limiter-V.tgz, rl-limiter-linux-x64-gnu-V.tgz                     npm: main + prebuilt addon
#   rl-java-V.jar, -sources.jar, -javadoc.jar, rl-java-V.pom              Maven (native lib inside)
#   rl-V-linux-x86_64.tar.gz                                              C SDK (lib/, include/, pkg-config)
#   rl-V-linux-x86_64                                                     the `rl` command
#   SHA256SUMS
#
#   bash scripts/dist.sh            everything
#   bash scripts/dist.sh c          the C SDK only (what `make install` needs); python, node, java,
#                                   cli: that part only
#
# One release build serves everything but the wheel: the C, Java and Node libraries and the `rl`
# binary come from one `cargo build --release` of their four crates (one rl-core build, features
# unified). maturin builds the wheel with its own cargo call (its features differ, so rl-core is
# built once more for it). The libraries keep the workspace's release profile and have their
# debug line tables stripped here (a profile of their own would rebuild every dependency).
# Environment: CARGO_TARGET_DIR (default <repo>/target).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$root/target}"
export CARGO_TERM_COLOR=never PIP_DISABLE_PIP_VERSION_CHECK=1
target="$CARGO_TARGET_DIR"
release="$target/release"
stage="$target/dist-stage"
dist="$root/dist"
what="${1:-all}"

python3 scripts/check-versions.py >/dev/null
version="$(python3 scripts/check-versions.py --get)"
major="${version%%.*}"
platform=linux-x86_64
[ "$(uname -s)-$(uname -m)" = "Linux-x86_64" ] || { echo "dist.sh: builds $platform artifacts only (this is $(uname -s)-$(uname -m))" >&2; exit 1; }
mkdir -p "$dist" "$stage"

step() { echo "== dist: $* (at ${SECONDS} s)"; }

build_native() {
  step "cargo build --release (rl-cli, rl-c, rl-java, rl-node: one rl-core build)"
  cargo build --release --locked -p rl-cli -p rl-c -p rl-java -p rl-node
}

# c: the SDK tree under $stage/c/<name>/, tarred; `make install` copies the same tree.
dist_c() {
  local name="rl-$version-$platform" tree="$stage/c/rl-$version-$platform"
  step "C SDK $name.tar.gz"
  rm -rf "$stage/c" && mkdir -p "$tree/lib/pkgconfig" "$tree/include"
  strip --strip-unneeded -o "$tree/lib/librl.so.$version" "$release/librl.so"
  ln -s "librl.so.$version" "$tree/lib/librl.so.$major"
  ln -s "librl.so.$major" "$tree/lib/librl.so"
  strip --strip-debug -o "$tree/lib/librl.a" "$release/librl.a"
  cp include/rl.h "$tree/include/rl.h"
  # ${pcfiledir}: the file finds its prefix wherever the tree is unpacked or installed.
  # Libs.private: what librl.a needs besides libc (rustc --print native-static-libs).
  cat >"$tree/lib/pkgconfig/rl.pc" <<EOF
prefix=\${pcfiledir}/../..
libdir=\${prefix}/lib
includedir=\${prefix}/include

Name: rl
Description: Exact distributed sliding-window rate limiter (Redis or in-process), C API
Version: $version
URL: https://github.com/rl-limiter/rl
Libs: -L\${libdir} -lrl
Libs.private: -lgcc_s -lutil -lrt -lpthread -lm -ldl -lc
Cflags: -I\${includedir}
EOF
  tar -C "$stage/c" --owner=0 --group=0 --numeric-owner -czf "$dist/$name.tar.gz" "$name"
}

dist_cli() {
  step "rl-$version-$platform (the rl command)"
  strip --strip-unneeded -o "$dist/rl-$version-$platform" "$release/rl"
}

# python: maturin builds, audits and tags the wheel (abi3, the manylinux policy the .so really
# meets); auditwheel, run separately, must agree. maturin and auditwheel live in a venv under target/.
dist_python() {
  local venv="$target/dist-venv"
  step "Python wheel and sdist (maturin)"
  if ! "$venv/bin/python" -c 'import maturin, auditwheel' >/dev/null 2>&1; then
    rm -rf "$venv"
    python3 -m venv "$venv"
    "$venv/bin/python" -m pip install -q "$(grep '^maturin==' bindings-python/requirements-dev.txt)" auditwheel==6.4.2
  fi
  rm -f "$dist"/rl_limiter-*
  "$venv/bin/maturin" build --quiet --release --locked -m bindings-python/Cargo.toml -i "$venv/bin/python" -o "$dist"
  "$venv/bin/maturin" sdist -m bindings-python/Cargo.toml -o "$dist"
  local wheel
  wheel="$(ls "$dist"/rl_limiter-"$version"-cp39-abi3-manylinux_*_x86_64.whl)"
  local tag="${wheel##*-abi3-}"; tag="${tag%.whl}"
  "$venv/bin/auditwheel" show "$wheel" | tee "$stage/auditwheel.txt"
  # auditwheel names the most compatible policy the wheel meets; maturin's tag must be that one.
  grep -q "consistent with the following platform tag: \"$tag\"" <<<"$(tr -s ' \n' ' ' <"$stage/auditwheel.txt")" ||
    { echo "dist.sh: the wheel is tagged $tag, auditwheel disagrees (above)" >&2; exit 1; }
}

# node: napi-rs's layout. rl-limiter (the JavaScript, the types, the generated loader index.js)
# lists rl-limiter-linux-x64-gnu as an optional dependency; that package holds only the prebuilt
# addon, with os/cpu/libc fields so npm installs it on matching machines only (the fields
# `napi create-npm-dirs` writes). Neither has an install script.
dist_node() {
  local main="$stage/node/rl-limiter" plat="$stage/node/rl-limiter-linux-x64-gnu"
  step "npm tarballs rl-limiter-$version.tgz, rl-limiter-linux-x64-gnu-$version.tgz"
  rm -rf "$stage/node" && mkdir -p "$main" "$plat"
  strip --strip-unneeded -o "$plat/rl-limiter.linux-x64-gnu.node" "$release/librl_node.so"
  node - "$root/bindings-node/package.json" "$main" "$plat" <<'EOF'
const fs = require('fs'), path = require('path')
const [src, main, plat] = process.argv.slice(2)
const pkg = JSON.parse(fs.readFileSync(src, 'utf8'))
const from = path.dirname(src)
const platName = `${pkg.name}-linux-x64-gnu`
const common = {
  version: pkg.version, license: pkg.license, engines: pkg.engines,
  repository: { type: 'git', url: 'git+https://github.com/rl-limiter/rl.git', directory: 'bindings-node' },
}
// The main package: its files without any locally built addon; no build or prepare scripts
// (an installed package must not build), no dev dependencies.
const files = pkg.files.filter((f) => !f.endsWith('.node'))
for (const f of [...files, 'README.md']) fs.copyFileSync(path.join(from, f), path.join(main, f))
const out = { ...pkg, ...common, files, optionalDependencies: { [platName]: pkg.version } }
delete out.scripts; delete out.devDependencies
fs.writeFileSync(path.join(main, 'package.json'), JSON.stringify(out, null, 2) + '\n')
const node = 'rl-limiter.linux-x64-gnu.node'
fs.writeFileSync(path.join(plat, 'package.json'), JSON.stringify({
  name: platName, ...common, description: `The ${pkg.name} addon prebuilt for Linux x64 (glibc)`,
  os: ['linux'], cpu: ['x64'], libc: ['glibc'], main: node, files: [node],
}, null, 2) + '\n')
fs.writeFileSync(path.join(plat, 'README.md'), `# ${platName}\n\nThe prebuilt native addon of [\`${pkg.name}\`](https://www.npmjs.com/package/${pkg.name}) for Linux x64 (glibc). Install \`${pkg.name}\`, not this package: npm picks it as an optional dependency on matching machines.\n`)
EOF
  cp LICENSE "$main/" && cp LICENSE "$plat/"
  rm -f "$dist"/rl-limiter-*.tgz
  (cd "$main" && npm pack --silent --pack-destination "$dist" >/dev/null)
  (cd "$plat" && npm pack --silent --pack-destination "$dist" >/dev/null)
}

# java: the jar bundles the stripped librl_java.so at /native/linux-x86_64/ (where NativeLoader
# looks); Maven's `dist` profile adds -sources and -javadoc jars and builds in target/dist, apart
# from the test suite's build. The pom is the project's own (dependencies: none at run time).
dist_java() {
  local native="$stage/java-native"
  step "Maven rl-java-$version.jar, -sources.jar, -javadoc.jar, .pom"
  rm -rf "$native" && mkdir -p "$native"
  strip --strip-unneeded -o "$native/librl_java.so" "$release/librl_java.so"
  mvn -B -ntp -q -Dstyle.color=never -f bindings-java/pom.xml -P dist -Drl.cargo.skip=true \
    -Drl.cargo.target.dir="$native" -Drl.cargo.outdir=. -Dmaven.test.skip=true clean package >"$stage/mvn.log" 2>&1 ||
    { cat "$stage/mvn.log" >&2; exit 1; }
  local out=bindings-java/target/dist
  rm -f "$dist"/rl-java-*
  for f in "rl-java-$version.jar" "rl-java-$version-sources.jar" "rl-java-$version-javadoc.jar"; do
    cp "$out/$f" "$dist/$f"
  done
  cp bindings-java/pom.xml "$dist/rl-java-$version.pom"
  grep -q " native/linux-x86_64/librl_java.so$" <<<"$(unzip -l "$dist/rl-java-$version.jar")" ||
    { echo "dist.sh: the jar lacks native/linux-x86_64/librl_java.so" >&2; exit 1; }
}

case "$what" in
  all)
    build_native
    dist_c; dist_cli; dist_node; dist_java; dist_python
    step "SHA256SUMS"
    (cd "$dist" && rm -f SHA256SUMS && sha256sum -- *.whl *.tar.gz *.tgz *.jar *.pom "rl-$version-$platform" >SHA256SUMS)
    ls -l "$dist"
    echo "== dist: done in ${SECONDS} s"
    ;;
  c)
    build_native # the same build as `all` (a no-op after it): a lone -p rl-c would unify other features
    dist_c
    ;;
  python|node|java|cli)
    build_native
    "dist_$what"
    ;;
  *) echo "usage: scripts/dist.sh [all|c|python|node|java|cli]" >&2; exit 2 ;;
esac
