//! The parsers' fuzz targets on stable Rust: every seed committed in `fuzz/corpus/<target>/`
//! (conformance rows, README examples, and each finding's input) goes through the same checks
//! that `cargo fuzz` runs (`fuzz/src/lib.rs`), then a few seconds of proptest inputs: random
//! bytes, text from the parsers' own alphabet, and seeds with random edits. The long run is
//! `make fuzz` (nightly, libFuzzer).

#[path = "../../fuzz/src/lib.rs"]
mod targets;

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};

fn corpus(target: &str) -> Vec<(PathBuf, Vec<u8>)> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../fuzz/corpus")
        .join(target);
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

#[test]
fn every_committed_seed_passes_its_target() {
    for (name, run) in targets::TARGETS {
        let seeds = corpus(name);
        assert!(
            seeds.len() >= 5,
            "fuzz/corpus/{name} holds {} seeds",
            seeds.len()
        );
        for (path, bytes) in seeds {
            if let Err(e) = catch_unwind(|| run(&bytes)) {
                let why = e
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string()))
                    .unwrap_or_default();
                panic!("{name}: seed {} fails: {why}", path.display());
            }
        }
    }
}

/// Characters the parsers give meaning to, plus a few multi-byte ones (the kind of input that
/// finds a slice cut inside a character).
const ALPHABET: &[&str] = &[
    "redis://",
    "rediss://",
    "redis+sentinel://",
    "redis+cluster://",
    "unix://",
    "memory://",
    ":",
    "@",
    "/",
    "[",
    "]",
    ",",
    "?",
    "&",
    "=",
    "%",
    "%4",
    "%40",
    "tls_ca",
    "tls_cert",
    "tls_key",
    "::1",
    "127.0.0.1",
    "6379",
    "0",
    "1",
    "9",
    "99999999999999999999",
    "-",
    ".",
    " ",
    "\n",
    ";",
    "|",
    "per",
    "PER",
    "s",
    "ms",
    "m",
    "h",
    "d",
    "day",
    "month",
    "year",
    "ms",
    "default",
    "true",
    "false",
    "key_prefix",
    "request_timeout_ms",
    "recover_rtt_ms",
    "degrade_rtt_ms",
    "leases",
    "instances",
    "\"",
    "\\",
    "é",
    "€",
    "😀",
    "\u{0}",
    "{",
    "}",
];

fn inputs(seeds: Vec<Vec<u8>>) -> impl Strategy<Value = Vec<u8>> {
    let text = proptest::collection::vec(proptest::sample::select(ALPHABET), 0..24)
        .prop_map(|parts| parts.concat().into_bytes());
    let edited = (
        proptest::sample::select(seeds),
        proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>(), 0u8..3), 1..6),
    )
        .prop_map(|(mut s, edits)| {
            for (at, byte, how) in edits {
                let i = if s.is_empty() {
                    0
                } else {
                    at.index(s.len() + 1)
                };
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
    prop_oneof![proptest::collection::vec(any::<u8>(), 0..64), text, edited,]
}

#[test]
fn random_inputs_for_a_few_seconds_per_target() {
    let budget = Duration::from_secs(3);
    for (name, run) in targets::TARGETS {
        let seeds: Vec<Vec<u8>> = corpus(name).into_iter().map(|(_, b)| b).collect();
        let strategy = inputs(seeds);
        let started = Instant::now();
        let mut cases = 0u64;
        while started.elapsed() < budget {
            let mut runner = TestRunner::new(Config {
                cases: 256,
                failure_persistence: None,
                ..Config::default()
            });
            runner
                .run(&strategy, |bytes| {
                    catch_unwind(AssertUnwindSafe(|| run(&bytes))).map_err(|_| {
                        TestCaseError::fail(format!(
                            "{name} fails on {:?}",
                            String::from_utf8_lossy(&bytes)
                        ))
                    })
                })
                .unwrap_or_else(|e| panic!("{e}"));
            cases += 256;
        }
        eprintln!("{name}: {cases} random inputs in {:?}", started.elapsed());
    }
}
