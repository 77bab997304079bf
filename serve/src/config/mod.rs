//! The policies file: envoyproxy/ratelimit's YAML (one domain per YAML document; several
//! documents, `---`-separated, or a directory of `*.yaml` files for several domains), compiled
//! into the lookup tree [`Policies`] that `Engine::check` matches descriptors against.
//!
//! Errors name the file, the line and column, and the reason; the caller keeps the policies it
//! had (see `reload.rs`).

pub mod http;
mod raw;
mod tree;

use std::collections::HashMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::Deserialize;

use crate::metrics::Metrics;
pub use http::{Action, Cidr, HttpRateLimit, RawHttp};
pub use tree::{Domain, Limit, Match};

/// Why a policies file was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    pub file: PathBuf,
    /// 1-based; `None` when the error is about the file as a whole.
    pub line: Option<usize>,
    pub column: Option<usize>,
    pub reason: String,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.file.display())?;
        if let Some(l) = self.line {
            write!(f, ":{l}")?;
            if let Some(c) = self.column {
                write!(f, ":{c}")?;
            }
        }
        write!(f, ": {}", self.reason)
    }
}

impl std::error::Error for ConfigError {}

/// Every domain's compiled tree: what one reload swaps in whole.
#[derive(Debug)]
pub struct Policies {
    pub domains: HashMap<String, Domain>,
    /// The domain whose `http:` section the HTTP front ends use (at most one has one).
    pub http_domain: Option<String>,
    /// The files read, for the watcher.
    pub files: Vec<PathBuf>,
}

impl Policies {
    pub fn domain(&self, name: &str) -> Option<&Domain> {
        self.domains.get(name)
    }

    /// The domain HTTP requests are checked in, with its `http:` section.
    pub fn http(&self) -> Option<(&Domain, &RawHttp)> {
        let d = self.domains.get(self.http_domain.as_deref()?)?;
        Some((d, d.http.as_ref()?))
    }

    /// Every policy's name, for the log line of a (re)load.
    pub fn count(&self) -> usize {
        self.domains.values().map(Domain::limits).sum()
    }
}

/// Reads `path` (a file, or a directory whose `*.yaml` / `*.yml` files are read in name order).
pub fn load(path: &Path, metrics: &Metrics) -> Result<Policies, ConfigError> {
    let whole = |reason: String| ConfigError {
        file: path.to_path_buf(),
        line: None,
        column: None,
        reason,
    };
    let files = if path.is_dir() {
        let mut v: Vec<PathBuf> = std::fs::read_dir(path)
            .map_err(|e| whole(format!("cannot list the directory: {e}")))?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| matches!(p.extension().and_then(|e| e.to_str()), Some("yaml" | "yml")))
            .collect();
        v.sort();
        v
    } else {
        vec![path.to_path_buf()]
    };
    let mut set = Set::default();
    for file in &files {
        let text = std::fs::read_to_string(file).map_err(|e| ConfigError {
            file: file.clone(),
            line: None,
            column: None,
            reason: format!("cannot read: {e}"),
        })?;
        set.add(file, &text, metrics)?;
    }
    set.finish(path, files)
}

/// Compiles one file's `text` as if it were read from `file` (the name errors carry): `load`
/// without the file system, for the fuzz target (`fuzz/fuzz_targets/serve_config.rs`) and tests.
pub fn load_text(file: &Path, text: &str, metrics: &Metrics) -> Result<Policies, ConfigError> {
    let mut set = Set::default();
    set.add(file, text, metrics)?;
    set.finish(file, vec![file.to_path_buf()])
}

/// The domains compiled so far, across the files of one load.
#[derive(Default)]
struct Set {
    domains: HashMap<String, Domain>,
    http_domain: Option<String>,
}

impl Set {
    fn add(&mut self, file: &Path, text: &str, metrics: &Metrics) -> Result<(), ConfigError> {
        for (raw, line) in parse(file, text)? {
            let at = |reason: String| ConfigError {
                file: file.to_path_buf(),
                line: Some(line),
                column: None,
                reason,
            };
            if raw.domain.is_empty() {
                return Err(at("the domain is empty".into()));
            }
            if self.domains.contains_key(&raw.domain) {
                return Err(at(format!("duplicate domain {:?}", raw.domain)));
            }
            if raw.http.is_some() {
                if let Some(other) = &self.http_domain {
                    return Err(at(format!(
                        "domain {:?} has an http: section, and so does {other:?}; the HTTP front ends check one domain",
                        raw.domain
                    )));
                }
                self.http_domain = Some(raw.domain.clone());
            }
            let d = tree::compile(raw, metrics).map_err(at)?;
            self.domains.insert(d.name.clone(), d);
        }
        Ok(())
    }

    fn finish(self, path: &Path, files: Vec<PathBuf>) -> Result<Policies, ConfigError> {
        if self.domains.is_empty() {
            return Err(ConfigError {
                file: path.to_path_buf(),
                line: None,
                column: None,
                reason: "holds no domain".into(),
            });
        }
        Ok(Policies {
            domains: self.domains,
            http_domain: self.http_domain,
            files,
        })
    }
}

/// The documents of one file, each with the line it starts on.
fn parse(file: &Path, text: &str) -> Result<Vec<(raw::RawDomain, usize)>, ConfigError> {
    let mut out = Vec::new();
    let starts = doc_lines(text);
    for (i, doc) in serde_yaml_ng::Deserializer::from_str(text).enumerate() {
        let raw = raw::RawDomain::deserialize(doc).map_err(|e| {
            let loc = e.location();
            let reason = e.to_string();
            // The location is in the message too; keep the reason itself.
            let reason = match reason.rfind(" at line ") {
                Some(at) => reason[..at].to_string(),
                None => reason,
            };
            ConfigError {
                file: file.to_path_buf(),
                line: loc.as_ref().map(|l| l.line()),
                column: loc.as_ref().map(|l| l.column()),
                reason,
            }
        })?;
        out.push((raw, starts.get(i).copied().unwrap_or(1)));
    }
    Ok(out)
}

/// The first line of each YAML document (after a `---` line, or line 1).
fn doc_lines(text: &str) -> Vec<usize> {
    let mut v = Vec::new();
    let mut open = true;
    for (n, line) in text.lines().enumerate() {
        let t = line.trim();
        if t.starts_with("---") {
            open = true;
            continue;
        }
        if open && !t.is_empty() && !t.starts_with('#') {
            v.push(n + 1);
            open = false;
        }
    }
    v
}

/// The policies, shared: what the engine reads per request and a reload replaces.
pub type Shared = Arc<arc_swap::ArcSwap<Policies>>;
