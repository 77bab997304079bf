//! A domain's descriptors as a lookup tree, matched exactly as envoyproxy/ratelimit's
//! `GetLimit` does: at each level the entry's `key_value` first, then a `*` wildcard value, then
//! the `key` alone (any value); a limit applies only when the request's descriptor ends at the
//! level that holds it.

use std::collections::HashMap;
use std::sync::Arc;

use rl_core::Policy;

use super::http::RawHttp;
use super::raw::{Descriptors, RawDescriptor, RawDomain, RawRateLimit};
use crate::decide::{Entry, Unit};
use crate::metrics::{Metrics, PolicyCounters};

/// One leaf's limit, compiled.
#[derive(Debug)]
pub struct Limit {
    /// Name (the config's `name`, else the descriptor path `domain.key_value.key`), limit and
    /// window, as the headers and the problem body show them. `limit` 0 denies everything.
    pub policy: Policy,
    pub unit: Unit,
    pub unlimited: bool,
    pub shadow: bool,
    pub quota: bool,
    /// The config's own `name` (what other limits' `replaces` refer to).
    pub config_name: Option<String>,
    pub replaces: Vec<String>,
    pub counters: Arc<PolicyCounters>,
}

#[derive(Debug, Default)]
struct Node {
    children: HashMap<String, Node>,
    /// `(map key, its parts split on '*')` of the children whose value holds a `*`.
    wildcards: Vec<(String, Vec<String>)>,
    limit: Option<Arc<Limit>>,
    share_threshold: bool,
}

/// A compiled domain.
#[derive(Debug)]
pub struct Domain {
    pub name: String,
    /// The composite `group` (Cluster hash tag) of this domain's counters: the domain's name
    /// unless `key_group` says otherwise (`none`: no group, each counter its own slot).
    pub group: Option<Vec<u8>>,
    pub http: Option<RawHttp>,
    root: Node,
}

/// A descriptor's limit and the counter it is counted in.
#[derive(Debug, Clone)]
pub struct Match {
    pub limit: Arc<Limit>,
    /// `<domain>_<key>_<value>_...` over the request's entries (`_` and `%` in values escaped,
    /// so distinct descriptors never share a counter).
    pub key: Vec<u8>,
}

pub fn compile(raw: RawDomain, metrics: &Metrics) -> Result<Domain, String> {
    let mut root = Node::default();
    let prefix = raw.domain.clone();
    add(&mut root, &prefix, raw.descriptors, metrics)?;
    let group = match raw.key_group.as_deref() {
        None => Some(raw.domain.clone().into_bytes()),
        Some("none") => None,
        Some(g) if g.len() > rl_core::composite::MAX_GROUP_BYTES => {
            return Err(format!(
                "key_group is {} bytes; at most {}",
                g.len(),
                rl_core::composite::MAX_GROUP_BYTES
            ))
        }
        Some(g) => Some(g.as_bytes().to_vec()),
    };
    Ok(Domain {
        name: raw.domain,
        group,
        http: raw.http,
        root,
    })
}

fn add(
    node: &mut Node,
    path: &str,
    descriptors: Option<Descriptors>,
    metrics: &Metrics,
) -> Result<(), String> {
    for d in descriptors.map(|d| d.0).unwrap_or_default() {
        let key = d.map_key();
        let here = format!("{path}.{key}");
        let mut child = Node {
            share_threshold: d.share_threshold,
            limit: limit_of(&d, &here, metrics)?,
            ..Node::default()
        };
        add(&mut child, &here, d.descriptors, metrics)?;
        if key.contains('*') {
            node.wildcards
                .push((key.clone(), key.split('*').map(str::to_string).collect()));
        }
        node.children.insert(key, child);
    }
    Ok(())
}

fn limit_of(
    d: &RawDescriptor,
    path: &str,
    metrics: &Metrics,
) -> Result<Option<Arc<Limit>>, String> {
    let Some(RawRateLimit {
        requests_per_unit,
        unit,
        window_ms,
        unlimited,
        name,
        replaces,
    }) = d.rate_limit.clone()
    else {
        return Ok(None);
    };
    let shown = name.clone().unwrap_or_else(|| label(path));
    Ok(Some(Arc::new(Limit {
        counters: metrics.policy(&shown),
        policy: Policy {
            name: shown,
            limit: requests_per_unit,
            window_ms,
        },
        unit,
        unlimited,
        shadow: d.shadow_mode,
        quota: d.quota_mode,
        config_name: name,
        replaces,
    })))
}

/// A descriptor path as a policy name: printable ASCII without `"` or `\`, at most 64 bytes
/// (the rule `rl_core::Policy` sets for names that travel in headers and metric labels).
fn label(path: &str) -> String {
    let mut s: String = path
        .chars()
        .map(|c| match c {
            ' '..='~' if c != '"' && c != '\\' => c,
            _ => '?',
        })
        .collect();
    if s.len() > rl_core::policy::MAX_POLICY_NAME {
        s.truncate(rl_core::policy::MAX_POLICY_NAME);
    }
    s
}

impl Domain {
    /// How many limits the domain holds.
    pub fn limits(&self) -> usize {
        fn count(n: &Node) -> usize {
            usize::from(n.limit.is_some()) + n.children.values().map(count).sum::<usize>()
        }
        count(&self.root)
    }

    /// The limit `entries` match, as ratelimit's `GetLimit` finds it, and its counter key.
    pub fn lookup(&self, entries: &[Entry]) -> Option<Match> {
        let mut node = &self.root;
        let mut found: Option<&Arc<Limit>> = None;
        let mut shared: Vec<Option<&str>> = vec![None; entries.len()];
        for (i, e) in entries.iter().enumerate() {
            let full = format!("{}_{}", e.key, e.value);
            let mut next = node.children.get(&full);
            let mut wild: Option<&str> = None;
            if next.is_none() {
                if let Some((k, _)) = node.wildcards.iter().find(|(_, p)| wildcard(p, &full)) {
                    next = node.children.get(k);
                    wild = Some(k);
                }
            }
            if next.is_none() {
                next = node.children.get(&e.key);
            }
            let Some(n) = next else { break };
            if let (Some(k), true) = (wild, n.share_threshold) {
                shared[i] = k.strip_prefix(&format!("{}_", e.key));
            }
            if i == entries.len() - 1 {
                found = n.limit.as_ref();
            }
            if n.children.is_empty() {
                break;
            }
            node = n;
        }
        let limit = found?.clone();
        let mut key = self.name.as_bytes().to_vec();
        for (e, s) in entries.iter().zip(&shared) {
            key.push(b'_');
            key.extend_from_slice(e.key.as_bytes());
            key.push(b'_');
            escape(&mut key, s.unwrap_or(&e.value));
        }
        Some(Match { limit, key })
    }
}

fn escape(out: &mut Vec<u8>, value: &str) {
    for b in value.bytes() {
        match b {
            b'%' => out.extend_from_slice(b"%25"),
            b'_' => out.extend_from_slice(b"%5F"),
            _ => out.push(b),
        }
    }
}

/// ratelimit's `wildcardMatch`: each `*` matches zero or more bytes.
fn wildcard(parts: &[String], value: &str) -> bool {
    if parts.len() == 1 {
        return parts[0] == value;
    }
    let (first, last) = (&parts[0], &parts[parts.len() - 1]);
    if !value.starts_with(first.as_str()) || !value.ends_with(last.as_str()) {
        return false;
    }
    if value.len() < parts.iter().map(String::len).sum::<usize>() {
        return false;
    }
    let mut rest = &value[first.len()..value.len() - last.len()];
    for p in &parts[1..parts.len() - 1] {
        match rest.find(p.as_str()) {
            Some(i) => rest = &rest[i + p.len()..],
            None => return false,
        }
    }
    true
}
