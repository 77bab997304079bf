#!/usr/bin/env bash
# The artifacts suite (issue 16): `make dist`, then each artifact installed the way a user would,
# in a fresh temporary place, with cargo and rustc NOT on PATH, and a short real program run
# against a real redis-server this script starts (free loopback port) and stops by pid:
# acquire to the limit, one denial with retry_after_ms, then stats().
#
#   python  venv + pip install --no-index <wheel> (and the sdist once, built with cargo present)
#   node    npm init -y + npm install <both tarballs> --offline, from an empty npm cache; ESM and CJS
#   java    a fresh Maven project with an ordinary <dependency> on dev.rl:rl-java, installed by
#           install:install-file into a private local repository; built with -o after a first resolve
#   c       the SDK tarball unpacked as a prefix: SONAME, exported symbols = rl.h's functions,
#           cc $(pkg-config --cflags --libs rl), runs with only the prefix's lib on its path;
#           `make install PREFIX=...` installs the same tree
#   cli     rl --version, rl acquire
#   version every runtime version (rl_version(), rl.__version__, `rl --version`, package.json, the
#           jar's manifest) equals the workspace version (scripts/check-versions.py checks the files)
#
# Prints each artifact's size and install time. Environment: CARGO_TARGET_DIR (default <repo>/target),
# RL_DIST_SKIP_BUILD=1 to test the artifacts already in dist/.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$root/target}"
export PIP_DISABLE_PIP_VERSION_CHECK=1 npm_config_update_notifier=false
suite_start=$(date +%s)
dist="$root/dist"
version="$(python3 scripts/check-versions.py --get)"
major="${version%%.*}"

echo "== dist: one version everywhere (files)"
python3 scripts/check-versions.py

if [ "${RL_DIST_SKIP_BUILD:-0}" != 1 ]; then
  echo "== dist: make dist"
  build_start=$(date +%s)
  make --no-print-directory dist
  build_secs=$(( $(date +%s) - build_start ))
fi

work="$(mktemp -d "${TMPDIR:-/tmp}/rl-dist-test.XXXXXX")"
redis_pid=""
cleanup() {
  [ -n "$redis_pid" ] && kill "$redis_pid" 2>/dev/null && wait "$redis_pid" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT

# The clean PATH: /usr/bin:/bin, plus the directory of any tool the tests need that lives elsewhere
# on this machine. It must not reach cargo or rustc.
clean_path=/usr/bin:/bin
for tool in python3 node npm java mvn cc pkg-config redis-server redis-cli tar; do
  if ! PATH="$clean_path" command -v "$tool" >/dev/null 2>&1; then
    found="$(command -v "$tool")" || { echo "test-dist.sh: $tool is missing" >&2; exit 1; }
    clean_path="$clean_path:$(dirname "$found")"
  fi
done
for tool in cargo rustc rustup; do
  if PATH="$clean_path" command -v "$tool" >/dev/null 2>&1; then
    echo "test-dist.sh: $tool is reachable from the clean PATH ($clean_path): cannot test a Rust-free install" >&2
    exit 1
  fi
done
echo "== dist: clean PATH=$clean_path (no cargo, no rustc)"
clean() { env -u CARGO_TARGET_DIR -u RUSTUP_HOME -u CARGO_HOME PATH="$clean_path" HOME="$work/home" "$@"; }
mkdir -p "$work/home"

port="$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
redis-server --port "$port" --bind 127.0.0.1 --save "" --appendonly no --daemonize no >"$work/redis.log" 2>&1 &
redis_pid=$!
for _ in $(seq 50); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.1; done
redis-cli -p "$port" ping >/dev/null || { echo "test-dist.sh: redis-server did not start" >&2; cat "$work/redis.log" >&2; exit 1; }
url="redis://127.0.0.1:$port/"
echo "== dist: redis-server pid $redis_pid on $url"

size() { du -h --apparent-size "$1" | cut -f1; }
# timed LABEL CMD...: runs CMD, records its wall time under LABEL.
timed() {
  local label="$1"; shift
  local t0 t1
  t0=$(date +%s.%N)
  "$@"
  t1=$(date +%s.%N)
  # A file, not a variable: some steps run in subshells.
  printf '  %-64s %6.1f s\n' "$label" "$(awk -v a="$t0" -v b="$t1" 'BEGIN { print b - a }')" >>"$work/timings.txt"
}

# ---------------------------------------------------------------- Python
wheel="$(ls "$dist"/rl_limiter-"$version"-cp39-abi3-manylinux_*_x86_64.whl)"
sdist="$dist/rl_limiter-$version.tar.gz"
cat >"$work/program.py" <<'EOF'
import sys

import rl

url, key, version, venv = sys.argv[1:5]
assert rl.__file__.startswith(venv), rl.__file__  # the installed package, not a checkout
assert rl.__version__ == version, (rl.__version__, version)
limiter = rl.Limiter(url)
for i in range(3):
    d = limiter.acquire(key, limit=3, window_ms=60_000)
    assert d.allowed and d.mode == "normal", d
d = limiter.acquire(key, limit=3, window_ms=60_000)
assert not d.allowed and 0 < d.retry_after_ms <= 60_000, d
s = limiter.stats()
assert s.decisions_normal == 4 and s.mode == "normal", s
limiter.close()
print(f"python ok: rl {rl.__version__}, denied with retry_after_ms={d.retry_after_ms}, decisions_normal={s.decisions_normal}")
EOF
py_install() { # VENV ARTIFACT [pip args]
  local venv="$1" artifact="$2"; shift 2
  clean python3 -m venv "$venv"
  timed "python: pip install --no-index $(basename "$artifact")" clean "$venv/bin/pip" install -q --no-index "$@" "$artifact"
}
echo "== dist: python wheel $(basename "$wheel") ($(size "$wheel"))"
py_install "$work/venv-wheel" "$wheel"
(cd "$work" && clean "$work/venv-wheel/bin/python" program.py "$url" "py-wheel" "$version" "$work/venv-wheel")
# abi3: the same wheel on the oldest CPython it claims, when this machine has one.
py39=""
for c in "$(command -v python3.9 || true)" "$HOME"/.pyenv/versions/3.9*/bin/python3.9 /usr/bin/python3.9; do
  if [ -x "$c" ] && "$c" -c 'import sys; assert sys.version_info[:2] == (3, 9)' 2>/dev/null; then py39="$c"; break; fi
done
if [ -n "$py39" ]; then
  echo "abi3: the same wheel on $("$py39" --version)"
  "$py39" -m venv "$work/venv-39"
  "$work/venv-39/bin/pip" install -q --no-index "$wheel"
  (cd "$work" && clean "$work/venv-39/bin/python" program.py "$url" "py-wheel-39" "$version" "$work/venv-39")
else
  echo "(no CPython 3.9 here: the abi3 wheel was run on $(clean python3 --version) only)"
fi
echo "== dist: python sdist $(basename "$sdist") ($(size "$sdist")), built from source once, with cargo on PATH"
# Built from the sdist's own files: unpacked, its Rust sources made newer than any build in the
# shared target dir, so cargo compiles rl-core and the extension from them (the crates.io
# dependencies are reused: they are the same crates either way). The build backend (maturin)
# comes from the dist venv and --no-build-isolation keeps pip offline.
mkdir -p "$work/sdist-src"
tar -C "$work/sdist-src" -xzf "$sdist"
src="$work/sdist-src/rl_limiter-$version"
find "$src" -name '*.rs' -exec touch {} +
timed "python: pip wheel <sdist> (maturin + cargo, from source)" \
  env PATH="$CARGO_TARGET_DIR/dist-venv/bin:$PATH" "$CARGO_TARGET_DIR/dist-venv/bin/pip" wheel -v --no-index --no-deps \
  --no-build-isolation -w "$work/sdist-wheel" "$src" >"$work/sdist-build.log" 2>&1 || { cat "$work/sdist-build.log" >&2; exit 1; }
for crate in rl-core rl-python; do
  grep -q "Compiling $crate v$version ($src/" "$work/sdist-build.log" ||
    { cat "$work/sdist-build.log" >&2; echo "test-dist.sh: $crate was not compiled from the sdist's sources" >&2; exit 1; }
done
clean python3 -m venv "$work/venv-sdist"
clean "$work/venv-sdist/bin/pip" install -q --no-index "$work"/sdist-wheel/*.whl
(cd "$work" && clean "$work/venv-sdist/bin/python" program.py "$url" "py-sdist" "$version" "$work/venv-sdist")

# ---------------------------------------------------------------- Node
node_main="$dist/rl-limiter-$version.tgz"
node_plat="$dist/rl-limiter-linux-x64-gnu-$version.tgz"
echo "== dist: npm $(basename "$node_main") ($(size "$node_main")) + $(basename "$node_plat") ($(size "$node_plat"))"
tar -tzf "$node_main" >"$work/node-main.txt"
for f in index.d.ts index.js limiter.js limiter.mjs limiter.d.ts limiter.d.mts package.json; do
  grep -qx "package/$f" "$work/node-main.txt" || { echo "test-dist.sh: $f missing from $node_main" >&2; exit 1; }
done
if grep -q '\.node$' "$work/node-main.txt"; then echo "test-dist.sh: $node_main carries an addon" >&2; exit 1; fi
if grep -q '"scripts"' <<<"$(tar -xzOf "$node_main" package/package.json)"; then echo "test-dist.sh: $node_main has scripts (an install must not build)" >&2; exit 1; fi
mkdir -p "$work/node-app"
(
  cd "$work/node-app"
  clean npm init -y >/dev/null
  # --offline from an empty cache: nothing can come from a registry.
  timed "node: npm install --offline <2 tarballs>" \
    clean npm install --offline --no-audit --no-fund --loglevel=error --cache "$work/npm-cache" "$node_main" "$node_plat"
  [ -f node_modules/rl-limiter-linux-x64-gnu/rl-limiter.linux-x64-gnu.node ] || { echo "test-dist.sh: the platform package was not installed" >&2; exit 1; }
  cat >program.cjs <<'EOF'
const assert = require('node:assert')
const { Limiter } = require('rl-limiter')
const [url, key, version] = process.argv.slice(2)
assert.strictEqual(require('rl-limiter/package.json').version, version)
assert.strictEqual(require('rl-limiter-linux-x64-gnu/package.json').version, version)
assert.ok(require.resolve('rl-limiter').startsWith(process.cwd()))
;(async () => {
  const limiter = new Limiter(url)
  for (let i = 0; i < 3; i++) {
    const d = await limiter.acquire(key, { limit: 3, windowMs: 60000 })
    assert.ok(d.allowed && d.mode === 'normal', JSON.stringify(d))
  }
  const d = await limiter.acquire(key, { limit: 3, windowMs: 60000 })
  assert.ok(!d.allowed && d.retryAfterMs > 0 && d.retryAfterMs <= 60000, JSON.stringify(d))
  const s = limiter.stats()
  assert.strictEqual(s.decisionsNormal, 4)
  await limiter.close()
  console.log(`node (CJS) ok: denied with retryAfterMs=${d.retryAfterMs}, decisionsNormal=${s.decisionsNormal}`)
})().catch((e) => { console.error(e); process.exit(1) })
EOF
  cat >program.mjs <<'EOF'
import assert from 'node:assert'
import { createRequire } from 'node:module'
import { Limiter } from 'rl-limiter'
const [url, key, version] = process.argv.slice(2)
assert.strictEqual(createRequire(import.meta.url)('rl-limiter/package.json').version, version)
const limiter = new Limiter(url)
for (let i = 0; i < 3; i++) {
  const d = await limiter.acquire(key, { limit: 3, windowMs: 60000 })
  assert.ok(d.allowed && d.mode === 'normal', JSON.stringify(d))
}
const d = await limiter.acquire(key, { limit: 3, windowMs: 60000 })
assert.ok(!d.allowed && d.retryAfterMs > 0 && d.retryAfterMs <= 60000, JSON.stringify(d))
const s = limiter.stats()
assert.strictEqual(s.decisionsNormal, 4)
await limiter.close()
console.log(`node (ESM) ok: denied with retryAfterMs=${d.retryAfterMs}, decisionsNormal=${s.decisionsNormal}`)
EOF
  clean node program.cjs "$url" node-cjs "$version"
  clean node program.mjs "$url" node-esm "$version"
)

# ---------------------------------------------------------------- Java
jar="$dist/rl-java-$version.jar"
echo "== dist: maven $(basename "$jar") ($(size "$jar")), -sources ($(size "${jar%.jar}-sources.jar")), -javadoc ($(size "${jar%.jar}-javadoc.jar"))"
grep -q "<scm>" "$dist/rl-java-$version.pom" && grep -q "<developers>" "$dist/rl-java-$version.pom" &&
  grep -q "<name>Apache-2.0</name>" "$dist/rl-java-$version.pom" || { echo "test-dist.sh: the pom lacks scm/developers/licence" >&2; exit 1; }
# A private local repository, so the dev.rl:rl-java that bindings-java/test.sh installs into ~/.m2
# (a debug build) is never what the consumer gets. Its first resolve reads Maven's plugins from
# ~/.m2 as a file mirror (no network); then the consumer is built with -o.
mkdir -p "$work/java-app/src/main/java/app"
cat >"$work/settings.xml" <<EOF
<settings>
  <localRepository>$work/m2</localRepository>
  <mirrors><mirror><id>seed</id><mirrorOf>*</mirrorOf><url>file://$HOME/.m2/repository</url></mirror></mirrors>
</settings>
EOF
# (Maven 3.8 prints colour resets even in batch mode; they are dropped.)
mvn_clean() { clean mvn -B -ntp -q -Dstyle.color=never -s "$work/settings.xml" "$@" 2>&1 | sed 's/\x1b\[0m//g'; }
timed "java: mvn install:install-file (jar + pom + sources + javadoc)" \
  mvn_clean org.apache.maven.plugins:maven-install-plugin:3.1.2:install-file -Dfile="$jar" -DpomFile="$dist/rl-java-$version.pom" \
    -Dsources="${jar%.jar}-sources.jar" -Djavadoc="${jar%.jar}-javadoc.jar"
cat >"$work/java-app/pom.xml" <<EOF
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>app</groupId>
  <artifactId>consumer</artifactId>
  <version>1.0</version>
  <properties>
    <maven.compiler.release>17</maven.compiler.release>
    <project.build.sourceEncoding>UTF-8</project.build.sourceEncoding>
  </properties>
  <dependencies>
    <dependency>
      <groupId>dev.rl</groupId>
      <artifactId>rl-java</artifactId>
      <version>$version</version>
    </dependency>
  </dependencies>
  <build>
    <plugins>
      <plugin><groupId>org.apache.maven.plugins</groupId><artifactId>maven-resources-plugin</artifactId><version>3.3.1</version></plugin>
      <plugin><groupId>org.apache.maven.plugins</groupId><artifactId>maven-compiler-plugin</artifactId><version>3.13.0</version></plugin>
      <plugin><groupId>org.apache.maven.plugins</groupId><artifactId>maven-surefire-plugin</artifactId><version>3.5.2</version></plugin>
      <plugin><groupId>org.apache.maven.plugins</groupId><artifactId>maven-jar-plugin</artifactId><version>3.4.2</version></plugin>
      <plugin><groupId>org.codehaus.mojo</groupId><artifactId>exec-maven-plugin</artifactId><version>3.6.1</version></plugin>
    </plugins>
  </build>
</project>
EOF
cat >"$work/java-app/src/main/java/app/Main.java" <<'EOF'
package app;

import dev.rl.Decision;
import dev.rl.NativeLoader;
import dev.rl.RateLimiter;
import dev.rl.Stats;

public final class Main {
    public static void main(String[] args) {
        String url = args[0], key = args[1], version = args[2];
        String jarVersion = RateLimiter.class.getPackage().getImplementationVersion();
        check(version.equals(jarVersion), "jar version " + jarVersion);
        try (RateLimiter limiter = RateLimiter.open(url)) {
            for (int i = 0; i < 3; i++) {
                Decision d = limiter.acquire(key, 3, 60_000);
                check(d.allowed(), "allowed " + d);
            }
            Decision d = limiter.acquire(key, 3, 60_000);
            check(!d.allowed() && d.retryAfterMs() > 0 && d.retryAfterMs() <= 60_000, "denied " + d);
            Stats s = limiter.stats();
            check(s.decisionsNormal() == 4, "stats " + s);
            check(NativeLoader.source().equals("bundled:/native/linux-x86_64/librl_java.so"), NativeLoader.source());
            System.out.println("java ok: rl-java " + jarVersion + ", native " + NativeLoader.source()
                    + ", denied with retryAfterMs=" + d.retryAfterMs() + ", decisionsNormal=" + s.decisionsNormal());
        }
    }

    private static void check(boolean ok, String what) {
        if (!ok) {
            throw new AssertionError(what);
        }
    }
}
EOF
(
  cd "$work/java-app"
  exec_java=(org.codehaus.mojo:exec-maven-plugin:3.6.1:java -Dexec.mainClass=app.Main)
  timed "java: first resolve + build + run (from the ~/.m2 mirror)" mvn_clean package "${exec_java[@]}" "-Dexec.args=$url java-1 $version"
  rm -rf target
  timed "java: mvn -o package + run (offline)" mvn_clean -o package "${exec_java[@]}" "-Dexec.args=$url java-2 $version"
)

# ---------------------------------------------------------------- C
ctar="$dist/rl-$version-linux-x86_64.tar.gz"
echo "== dist: C SDK $(basename "$ctar") ($(size "$ctar"))"
mkdir -p "$work/c-sdk"
timed "c: tar -xzf the SDK" tar -C "$work/c-sdk" -xzf "$ctar"
prefix="$work/c-sdk/rl-$version-linux-x86_64"
(cd "$prefix" && find . | sort) >"$work/c-tree.txt"
cat "$work/c-tree.txt"
for f in include/rl.h lib/librl.a lib/pkgconfig/rl.pc "lib/librl.so.$version"; do
  [ -f "$prefix/$f" ] || { echo "test-dist.sh: $f missing from the SDK" >&2; exit 1; }
done
[ "$(readlink "$prefix/lib/librl.so")" = "librl.so.$major" ] && [ "$(readlink "$prefix/lib/librl.so.$major")" = "librl.so.$version" ] ||
  { echo "test-dist.sh: lib/librl.so -> librl.so.$major -> librl.so.$version symlinks wrong" >&2; exit 1; }
so="$prefix/lib/librl.so.$version"
grep -q "(SONAME) *Library soname: \[librl.so.$major\]" <<<"$(readelf -d "$so")" || { echo "test-dist.sh: SONAME is not librl.so.$major" >&2; readelf -d "$so" >&2; exit 1; }
# Exactly the functions rl.h declares are exported: no Rust, no dependency symbols.
nm -D --defined-only "$so" | awk '{print $3}' | sort >"$work/exported.txt"
grep -oE '\brl_[a-z0-9_]+\(' "$prefix/include/rl.h" | tr -d '(' | sort -u >"$work/declared.txt"
diff "$work/declared.txt" "$work/exported.txt" || { echo "test-dist.sh: nm -D exports differ from rl.h's functions (diff above: declared vs exported)" >&2; exit 1; }
echo "exports: $(wc -l <"$work/exported.txt") rl_ functions, nothing else"
cat >"$work/program.c" <<'EOF'
#include <rl.h>
#include <stdio.h>
#include <string.h>

#define CHECK(cond, what) do { if (!(cond)) { fprintf(stderr, "c: %s failed\n", what); return 1; } } while (0)

int main(int argc, char **argv) {
    const char *url = argv[1], *key = argv[2], *version = argv[3];
    CHECK(argc == 4, "argc");
    CHECK(strcmp(rl_version(), version) == 0 && strcmp(RL_VERSION, version) == 0, "rl_version() == RL_VERSION == workspace version");
    rl_limiter *lim = NULL;
    rl_error *err = NULL;
    if (rl_limiter_open(url, NULL, &lim, &err) != RL_OK) { fprintf(stderr, "open: %s\n", rl_error_message(err)); return 1; }
    rl_decision d;
    for (int i = 0; i < 3; i++) {
        CHECK(rl_acquire(lim, (const uint8_t *)key, strlen(key), 3, 60000, 1, &d, NULL) == RL_OK && d.allowed, "acquire allowed");
    }
    CHECK(rl_acquire(lim, (const uint8_t *)key, strlen(key), 3, 60000, 1, &d, NULL) == RL_OK, "acquire");
    CHECK(!d.allowed && d.retry_after_ms > 0 && d.retry_after_ms <= 60000, "denied with retry_after_ms");
    rl_stats s;
    memset(&s, 0, sizeof s);
    s.struct_size = sizeof s;
    CHECK(rl_stats_get(lim, &s, NULL) == RL_OK && s.decisions_normal == 4, "stats");
    printf("c ok: librl %s, denied with retry_after_ms=%llu, decisions_normal=%llu\n", rl_version(),
           (unsigned long long)d.retry_after_ms, (unsigned long long)s.decisions_normal);
    rl_limiter_free(lim);
    return 0;
}
EOF
(
  export PKG_CONFIG_PATH="$prefix/lib/pkgconfig"
  [ "$(clean pkg-config --modversion rl)" = "$version" ] || { echo "test-dist.sh: pkg-config --modversion rl is not $version" >&2; exit 1; }
  # shellcheck disable=SC2046
  clean cc -Wall -Wextra -Werror -o "$work/c-program" "$work/program.c" $(clean pkg-config --cflags --libs rl)
  grep -q "(NEEDED) *Shared library: \[librl.so.$major\]" <<<"$(readelf -d "$work/c-program")" || { echo "test-dist.sh: the program does not need librl.so.$major" >&2; exit 1; }
  clean env LD_LIBRARY_PATH="$prefix/lib" "$work/c-program" "$url" c-shared "$version"
  # The static library, with pkg-config's --static companions.
  # shellcheck disable=SC2046
  clean cc -Wall -Wextra -Werror -o "$work/c-program-static" "$work/program.c" $(clean pkg-config --cflags rl) "$prefix/lib/librl.a" $(clean pkg-config --static --libs-only-l rl | sed 's/-lrl //')
  clean "$work/c-program-static" "$url" c-static "$version"
)
# `make install PREFIX=...` installs the same tree (DESTDIR too).
make --no-print-directory install PREFIX="$work/c-installed" >/dev/null
(cd "$work/c-installed" && find . | sort) | diff "$work/c-tree.txt" - || { echo "test-dist.sh: make install's tree differs from the tarball's (diff above)" >&2; exit 1; }
PKG_CONFIG_PATH="$work/c-installed/lib/pkgconfig" clean cc -o "$work/c-program-installed" "$work/program.c" \
  $(PKG_CONFIG_PATH="$work/c-installed/lib/pkgconfig" clean pkg-config --cflags --libs rl)
clean env LD_LIBRARY_PATH="$work/c-installed/lib" "$work/c-program-installed" "$url" c-installed "$version"

# ---------------------------------------------------------------- CLI
cli="$dist/rl-$version-linux-x86_64"
echo "== dist: $(basename "$cli") ($(size "$cli"))"
echo "ldd:"; ldd "$cli" | sed 's/^/  /'
if grep -Eqi 'libssl|libcrypto' <<<"$(ldd "$cli")"; then echo "test-dist.sh: the rl binary links OpenSSL" >&2; exit 1; fi
mkdir -p "$work/bin" && cp "$cli" "$work/bin/rl"
[ "$(clean "$work/bin/rl" --version)" = "rl $version" ] || { echo "test-dist.sh: rl --version is not 'rl $version'" >&2; exit 1; }
echo "rl --version: $(clean "$work/bin/rl" --version)"
for i in 1 2; do clean "$work/bin/rl" acquire cli-key --limit 2 --window 60s --redis "$url" >/dev/null; done
rc=0; out="$(clean "$work/bin/rl" acquire cli-key --limit 2 --window 60s --redis "$url")" || rc=$?
echo "$out"
[ "$rc" -eq 1 ] && grep -q "retry after" <<<"$out" || { echo "test-dist.sh: the third rl acquire was not denied with a retry (exit $rc)" >&2; exit 1; }

echo
echo "== dist: sizes"
(cd "$dist" && for f in *.whl *.tar.gz *.tgz *.jar "rl-$version-linux-x86_64"; do printf '  %-60s %s\n' "$f" "$(size "$f")"; done)
echo "== dist: install times"
cat "$work/timings.txt"
[ -n "${build_secs:-}" ] && echo "== dist: make dist took ${build_secs} s"
echo "== dist: suite took $(( $(date +%s) - suite_start )) s"
echo "dist: all artifacts installed and used without cargo or rustc"
