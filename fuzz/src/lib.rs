//! The fuzz targets' bodies: each takes any bytes, feeds them to one of rl's text parsers and
//! checks what every caller relies on. A panic, or a failed `assert!`, is a finding.
//!
//! Compiled twice: by `cargo fuzz` (the binaries in `fuzz_targets/`), and by the stable test
//! `core/tests/fuzz_corpus.rs`, which replays every seed in `fuzz/corpus/<target>/` through these
//! same functions and adds a few seconds of random inputs. Depends on nothing but `rl_core`, so
//! the one target that needs `rl_serve` lives apart in `serve_config.rs`, included by path by its
//! fuzz binary and by `serve/tests/fuzz_corpus.rs` (rl-core's tests cannot link rl-serve).

use rl_core::options::{camel_case, snake_case, spec, Value, OPTIONS};
use rl_core::{ErrorKind, Options, Policy, MAX_PERMITS, MAX_WINDOW_MS};

/// A target's body: any bytes in, a panic on a finding.
pub type Target = fn(&[u8]);

/// Every target, by the name of its corpus directory.
pub const TARGETS: &[(&str, Target)] = &[
    ("url", url),
    ("options_text", options_text),
    ("options_value", options_value),
    ("policy", policy),
];

/// An `InvalidArgument`-kind error naming `argument` (or any argument, for `None`).
fn typed(e: &rl_core::Error, argument: Option<&str>, input: &dyn std::fmt::Debug) {
    assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{input:?}: {e}");
    let named = e.argument();
    assert!(named.is_some(), "{input:?}: {e} names no argument");
    if let Some(a) = argument {
        assert_eq!(named, Some(a), "{input:?}: {e}");
    }
    assert!(!e.to_string().is_empty());
}

/// `url::parse`, `redact` and `is_redis_url` on any text. A URL is parsed or refused as an
/// `InvalidArgument` on `url`, and a refusal never shows the password `redact` hides.
pub fn url(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let _ = rl_core::url::is_redis_url(text);
    let shown = rl_core::redact(text);
    match rl_core::url::parse(text) {
        Ok(u) => {
            // A parsed URL's nodes can be turned into connection settings.
            match &u.deployment {
                rl_core::url::Deployment::Sentinel { sentinels, .. } => {
                    assert!(!sentinels.is_empty(), "{text:?}");
                    for n in sentinels {
                        let _ = u.sentinel_info(n);
                        let _ = u.node_info(n);
                    }
                }
                rl_core::url::Deployment::Cluster { seeds } => {
                    assert!(!seeds.is_empty(), "{text:?}");
                    for n in seeds {
                        let _ = u.node_info(n);
                    }
                }
                _ => {}
            }
        }
        Err(e) => {
            typed(&e, Some("url"), &text);
            if let Some(secret) = hidden_password(text, &shown) {
                // Outside the redacted URL the message quotes: its tail and the separator after
                // it can spell the secret by chance (fuzz/README.md, `finding-url-quoted-tail`).
                assert!(
                    !e.to_string().replace(&shown, "\u{0}").contains(secret),
                    "{text:?}: the error shows the password: {e}"
                );
            }
        }
    }
}

/// The URL's password (the userinfo after its first `:`, in the authority: up to the first `/`,
/// `?` or `#` after `://`), when `redact` hid it, it is long enough to be recognised in a message,
/// and it does not also appear in what may be shown. (`redact` hides more: everything up to the
/// URL's last `@`, even one in the query. The first fuzz run flagged such text, a `protocol=`
/// value that redis-rs quotes in its error, which is no password: see fuzz/README.md.)
fn hidden_password<'a>(text: &'a str, shown: &str) -> Option<&'a str> {
    if shown == text {
        return None;
    }
    let s = text.find("://")? + 3;
    let rest = &text[s..];
    let authority = &rest[..rest.find(['/', '?', '#']).unwrap_or(rest.len())];
    let creds = &authority[..authority.rfind('@')?];
    let secret = &creds[creds.find(':')? + 1..];
    (secret.len() >= 6 && !shown.contains(secret)).then_some(secret)
}

/// `Options::set_text`, one `name=value` per line, on one `Options`. Each pair is set, or refused
/// as an `InvalidArgument` naming an option and leaving the options as they were; a value that
/// was set reads back and sets again to the same options; the result validates, or fails only
/// the rule between the RTT thresholds.
pub fn options_text(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let mut o = Options::default();
    for line in text.split('\n') {
        let before = format!("{o:?}");
        match o.set_text(line) {
            Ok(()) => {
                let name = line.split_once('=').expect("a set pair has '='").0.trim();
                reads_back(&o, name, line);
            }
            Err(e) => {
                typed(&e, None, &line);
                assert_eq!(format!("{o:?}"), before, "{line:?} was refused but changed");
            }
        }
    }
    validates(&o, &text);
}

/// `Options::set` with values of every type a binding hands over: names from the table, their
/// camelCase spellings brought back by `snake_case`, or any text.
pub fn options_value(data: &[u8]) {
    let mut r = Bytes(data);
    let mut o = Options::default();
    while let Some(sel) = r.byte() {
        let name: String = match sel % 4 {
            0 | 1 => OPTIONS[usize::from(sel / 4) % OPTIONS.len()].name.into(),
            2 => {
                let n = OPTIONS[usize::from(sel / 4) % OPTIONS.len()].name;
                let back = snake_case(&camel_case(n));
                assert_eq!(back, n, "camelCase does not map back");
                back
            }
            _ => r.text(),
        };
        let value = match r.byte().unwrap_or(0) % 6 {
            0 => Value::Null,
            1 => Value::Bool(r.byte().unwrap_or(0) & 1 == 1),
            2 => Value::Int(i128::from_le_bytes(r.array())),
            3 => Value::Int(i128::from(
                i64::from_le_bytes(r.array()) >> (r.byte().unwrap_or(0) % 64),
            )),
            4 => Value::Float(f64::from_le_bytes(r.array())),
            _ => Value::Text(r.text()),
        };
        let before = format!("{o:?}");
        let shown = format!("{name:?} = {value:?}");
        match o.set(&name, value.clone()) {
            Ok(()) => {
                let s = spec(&name).expect("an unknown name was accepted");
                match (&value, s.get(&o)) {
                    (Value::Int(n), Value::Int(m)) => assert_eq!(*n, m, "{shown}"),
                    (Value::Float(f), Value::Int(m)) => assert_eq!(*f, m as f64, "{shown}"),
                    (Value::Bool(b), got) => assert_eq!(got, Value::Bool(*b), "{shown}"),
                    _ => {}
                }
                reads_back(&o, &name, &shown);
            }
            Err(e) => {
                typed(&e, None, &shown);
                assert_eq!(format!("{o:?}"), before, "{shown} was refused but changed");
            }
        }
    }
    validates(&o, &data);
}

/// Setting an option to the value it reads back changes nothing.
fn reads_back(o: &Options, name: &str, input: &str) {
    let s = spec(name).expect("an unknown name was accepted");
    let mut again = o.clone();
    again
        .set(name, s.get(o))
        .unwrap_or_else(|e| panic!("{input:?}: {name} does not take back its own value: {e}"));
    assert_eq!(format!("{again:?}"), format!("{o:?}"), "{input:?}");
}

/// Options built only through `set` are valid but for the rule between the RTT thresholds.
fn validates(o: &Options, input: &dyn std::fmt::Debug) {
    if let Err(e) = o.validate() {
        typed(&e, Some("recover_rtt_ms"), input);
        assert!(o.recover_rtt > o.degrade_rtt, "{input:?}: {e}");
    }
}

/// `Policy::parse_many` and `Policy::parse` (and `parse_duration_ms`) on any text. Policies are
/// in range, uniquely named and print back to text that parses to the same policies; a refusal is
/// an `InvalidArgument` on `policy`.
pub fn policy(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let _ = rl_core::parse_duration_ms(text);
    let many = Policy::parse_many(text);
    match &many {
        Ok(ps) => {
            assert!(!ps.is_empty(), "{text:?}");
            for (i, p) in ps.iter().enumerate() {
                assert!((1..=MAX_PERMITS).contains(&p.limit), "{text:?}: {p:?}");
                assert!(
                    (1..=MAX_WINDOW_MS).contains(&p.window_ms),
                    "{text:?}: {p:?}"
                );
                assert!(!p.name.is_empty() && p.name.len() <= 64, "{text:?}: {p:?}");
                assert!(
                    ps[..i].iter().all(|q| q.name != p.name),
                    "{text:?}: two policies named {:?}",
                    p.name
                );
            }
            let printed: Vec<String> = ps.iter().map(Policy::to_string).collect();
            let again = Policy::parse_many(&printed.join("; "))
                .unwrap_or_else(|e| panic!("{text:?} printed as {printed:?} does not parse: {e}"));
            assert_eq!(&again, ps, "{text:?} printed as {printed:?}");
        }
        Err(e) => typed(e, Some("policy"), &text),
    }
    match Policy::parse(text) {
        Ok(p) => assert_eq!(many.as_deref().ok(), Some(&[p][..]), "{text:?}"),
        Err(e) => {
            typed(&e, Some("policy"), &text);
            assert!(!matches!(&many, Ok(ps) if ps.len() == 1), "{text:?}: {e}");
        }
    }
}

/// Reads a fuzzer's bytes as a sequence of small values (zeros once they run out).
struct Bytes<'a>(&'a [u8]);

impl Bytes<'_> {
    fn byte(&mut self) -> Option<u8> {
        let (&b, rest) = self.0.split_first()?;
        self.0 = rest;
        Some(b)
    }

    fn array<const N: usize>(&mut self) -> [u8; N] {
        let mut out = [0u8; N];
        let n = N.min(self.0.len());
        out[..n].copy_from_slice(&self.0[..n]);
        self.0 = &self.0[n..];
        out
    }

    /// A length byte, then that many bytes as (lossy) UTF-8.
    fn text(&mut self) -> String {
        let n = usize::from(self.byte().unwrap_or(0)).min(self.0.len());
        let (t, rest) = self.0.split_at(n);
        self.0 = rest;
        String::from_utf8_lossy(t).into_owned()
    }
}
