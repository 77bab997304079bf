//! The `serve_config` target's body: `rl serve`'s policies-file loader (envoyproxy/ratelimit's
//! YAML, `rl_serve::config::load_text`) on any bytes. Kept apart from `lib.rs` because it needs
//! `rl_serve`: cargo-fuzz builds it as part of `rl_fuzz`, and the stable test
//! `serve/tests/fuzz_corpus.rs` includes this file with `#[path]` to replay the seeds in
//! `fuzz/corpus/serve_config/`.
//!
//! Checks: no panic. A refusal is a `ConfigError` naming the file, with a non-empty reason and a
//! 1-based line and column when it has them. Loaded policies hold at least one named domain,
//! and looking descriptors up in them (built from the input's own `key: value` lines, so they
//! reach the wildcards and nested descriptors) never panics and only finds limits the file holds.

use std::path::Path;

use rl_serve::config::load_text;
use rl_serve::decide::Entry;
use rl_serve::metrics::Metrics;

pub fn serve_config(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let file = Path::new("fuzz.yaml");
    match load_text(file, &text, &Metrics::default()) {
        Ok(p) => {
            assert!(!p.domains.is_empty(), "{text:?}");
            let mut limits = 0;
            for (name, d) in &p.domains {
                assert!(!name.is_empty(), "{text:?}");
                assert_eq!(&d.name, name, "{text:?}");
                limits += d.limits();
            }
            assert_eq!(p.count(), limits, "{text:?}");
            if let Some(h) = &p.http_domain {
                assert!(p.domains.contains_key(h), "{text:?}");
            }
            let entries = entries(&text);
            for d in p.domains.values() {
                for n in 1..=entries.len() {
                    if let Some(m) = d.lookup(&entries[..n]) {
                        assert!(m.key.starts_with(d.name.as_bytes()), "{text:?}: {m:?}");
                    }
                }
            }
        }
        Err(e) => {
            assert_eq!(e.file, file, "{text:?}: {e}");
            assert!(!e.reason.trim().is_empty(), "{text:?}: {e:?}");
            assert!(e.line.is_none_or(|l| l >= 1), "{text:?}: {e:?}");
            assert!(e.column.is_none() || e.line.is_some(), "{text:?}: {e:?}");
            assert!(e.to_string().starts_with("fuzz.yaml"), "{text:?}: {e}");
        }
    }
}

/// Up to 8 descriptor entries: each `key: <k>` line's value, paired with the next `value: <v>`
/// line's (or the key again), in file order.
fn entries(text: &str) -> Vec<Entry> {
    let field = |line: &str, name: &str| {
        let t = line.trim().trim_start_matches("- ");
        t.strip_prefix(name)
            .and_then(|r| r.strip_prefix(':'))
            .map(|v| v.trim().trim_matches('"').to_string())
    };
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        if let Some(key) = field(line, "key") {
            let value = lines[i + 1..]
                .iter()
                .take(3)
                .find_map(|l| field(l, "value"))
                .map(|v| v.replace('*', "x"))
                .unwrap_or_else(|| key.clone());
            out.push(Entry { key, value });
            if out.len() == 8 {
                break;
            }
        }
    }
    out
}
