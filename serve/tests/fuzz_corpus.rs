//! The `serve_config` fuzz target on stable Rust: every seed in `fuzz/corpus/serve_config/`
//! (envoyproxy/ratelimit's vendored examples, the shapes serve's own tests load or refuse, and
//! each finding's input) goes through the same checks `cargo fuzz run serve_config` runs
//! (`fuzz/src/serve_config.rs`), then a few seconds of seeds with random edits and of YAML-ish
//! text from the loader's own vocabulary. The long run is `make fuzz` (nightly, libFuzzer).

#[path = "../../fuzz/src/serve_config.rs"]
mod target;

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};

fn seeds() -> Vec<(PathBuf, Vec<u8>)> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../fuzz/corpus/serve_config");
    let mut out: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_file())
        .map(|p| {
            let bytes = std::fs::read(&p).unwrap();
            (p, bytes)
        })
        .collect();
    out.sort();
    out
}

fn why(e: Box<dyn std::any::Any + Send>) -> String {
    e.downcast_ref::<String>()
        .cloned()
        .or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_default()
}

#[test]
fn every_committed_policies_file_seed_passes_the_target() {
    let seeds = seeds();
    assert!(seeds.len() >= 10, "{} seeds", seeds.len());
    let mut loaded = 0;
    for (path, bytes) in &seeds {
        if let Err(e) = catch_unwind(|| target::serve_config(bytes)) {
            panic!("seed {} fails: {}", path.display(), why(e));
        }
        let text = String::from_utf8_lossy(bytes);
        let m = rl_serve::metrics::Metrics::default();
        loaded += usize::from(rl_serve::config::load_text("s.yaml".as_ref(), &text, &m).is_ok());
    }
    // Both outcomes are exercised: the vendored examples load, the refusal shapes do not.
    assert!(
        loaded >= 4 && loaded < seeds.len(),
        "{loaded} of {} loaded",
        seeds.len()
    );
}

/// Words and punctuation the loader gives meaning to.
const VOCABULARY: &[&str] = &[
    "domain: ",
    "descriptors:",
    "\n",
    "  ",
    "- ",
    "key: ",
    "value: ",
    "rate_limit:",
    "{",
    "}",
    "[",
    "]",
    ", ",
    ": ",
    "unit: ",
    "second",
    "minute",
    "hour",
    "day",
    "MINUTE",
    "requests_per_unit: ",
    "window_ms: ",
    "name: ",
    "unlimited: ",
    "true",
    "false",
    "shadow_mode: ",
    "share_threshold: ",
    "replaces:",
    "http:",
    "trusted_proxies: ",
    "rate_limits:",
    "actions:",
    "remote_address: {}",
    "request_headers: ",
    "header_name: ",
    "descriptor_key: ",
    "---\n",
    "*",
    "0",
    "1",
    "4294967296",
    "-1",
    "1e400",
    "\"",
    "'",
    "&a",
    "*a",
    "!!binary ",
    "é",
    "😀",
    "\u{0}",
    "#",
];

#[test]
fn random_policies_files_for_a_few_seconds() {
    let seeds: Vec<Vec<u8>> = seeds().into_iter().map(|(_, b)| b).collect();
    let text = proptest::collection::vec(proptest::sample::select(VOCABULARY), 0..40)
        .prop_map(|parts| parts.concat().into_bytes());
    let edited = (
        proptest::sample::select(seeds),
        proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>(), 0u8..3), 1..6),
    )
        .prop_map(|(mut s, edits)| {
            for (at, byte, how) in edits {
                let i = at.index(s.len() + 1);
                match how {
                    0 => s.insert(i, byte),
                    1 if i < s.len() => s[i] = byte,
                    _ if i < s.len() => {
                        s.remove(i);
                    }
                    _ => s.push(byte),
                }
            }
            s
        });
    let strategy = prop_oneof![text, edited];
    let started = Instant::now();
    let mut cases = 0u64;
    while started.elapsed() < Duration::from_secs(3) {
        let mut runner = TestRunner::new(Config {
            cases: 256,
            failure_persistence: None,
            ..Config::default()
        });
        runner
            .run(&strategy, |bytes| {
                catch_unwind(AssertUnwindSafe(|| target::serve_config(&bytes))).map_err(|e| {
                    TestCaseError::fail(format!(
                        "{} on {:?}",
                        why(e),
                        String::from_utf8_lossy(&bytes)
                    ))
                })
            })
            .unwrap_or_else(|e| panic!("{e}"));
        cases += 256;
    }
    eprintln!(
        "serve_config: {cases} random inputs in {:?}",
        started.elapsed()
    );
}
