#!/usr/bin/env bash
# The long fuzz run (`make fuzz`): cargo-fuzz (libFuzzer, nightly) on each parser target for
# FUZZ_SECONDS (default 600) one after the other, then the script-protocol fuzz test for
# SCRIPT_FUZZ_CASES calls (default 100000) against a private redis-server. The short run of the
# same targets is part of `make test` (core/tests/fuzz_corpus.rs and script_fuzz.rs, stable Rust).
#
# The committed seeds (fuzz/corpus/<target>/) are read, never written: what libFuzzer learns goes
# to target/fuzz-corpus/<target>/, and a crash's input to target/fuzz-artifacts/<target>/. A crash
# fails the run; copy its input into fuzz/corpus/<target>/finding-<what> with the fix.
# FUZZ_TARGETS="url policy" picks targets.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
: "${FUZZ_SECONDS:=600}"
: "${SCRIPT_FUZZ_CASES:=100000}"
: "${FUZZ_TARGETS:=url options_text options_value policy serve_config}"
TARGET_DIR=${CARGO_TARGET_DIR:-$ROOT/target}
TOOLS=$TARGET_DIR/tools

if ! rustup run nightly rustc --version >/dev/null 2>&1; then
  echo "make fuzz needs a nightly toolchain: rustup toolchain install nightly" >&2
  exit 1
fi
if ! command -v cargo-fuzz >/dev/null 2>&1 && [ ! -x "$TOOLS/bin/cargo-fuzz" ]; then
  echo "== installing cargo-fuzz into $TOOLS"
  cargo install cargo-fuzz --locked --root "$TOOLS"
fi
export PATH="$TOOLS/bin:$PATH"

for t in $FUZZ_TARGETS; do
  echo "== cargo fuzz run $t for ${FUZZ_SECONDS}s"
  mkdir -p "$TARGET_DIR/fuzz-corpus/$t" "$TARGET_DIR/fuzz-artifacts/$t"
  (cd fuzz && env -u CARGO_TARGET_DIR cargo +nightly fuzz run "$t" \
    --target-dir "$TARGET_DIR/fuzz" \
    "$TARGET_DIR/fuzz-corpus/$t" "$ROOT/fuzz/corpus/$t" -- \
    -max_total_time="$FUZZ_SECONDS" -print_final_stats=1 -timeout=10 -rss_limit_mb=2048 \
    -artifact_prefix="$TARGET_DIR/fuzz-artifacts/$t/")
done

echo "== script protocols: $SCRIPT_FUZZ_CASES random calls against redis-server"
RL_SCRIPT_FUZZ_CASES=$SCRIPT_FUZZ_CASES cargo test -p rl-core --test script_fuzz -- --nocapture
echo "== fuzzing found nothing"
