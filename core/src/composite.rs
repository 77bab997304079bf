//! Composite acquire: several rules, all-or-nothing, in one atomic decision
//! ([`crate::Limiter::acquire_all`]). Typical uses are per-IP + per-user + per-tenant limits on one
//! request, or a burst and a daily limit on one key (`"100/s; 5000/h"`, see `policy.rs`).
//!
//! **All or nothing.** Every rule is first decided like a peek of its cost; only if every rule
//! fits is the cost admitted, once per distinct key. A denied call takes nothing from any rule.
//! Rules on one key are one window checked against each of their `(limit, window_ms)`, so they
//! must share one cost (refused otherwise): `"100/s; 5000/h"` on a key admits `cost` once and
//! counts it in both.
//!
//! **One slot.** Redis runs one script call on one Cluster slot, so every key of a call must
//! share a slot. `group` names a hash tag for the call's keys (`keys::group_key`); without one,
//! keys on different slots are refused before any I/O, on every backend and topology, so code that
//! works on a standalone Redis (or in memory) works on a Cluster too. A grouped key is a
//! different window from the same key ungrouped or in another group, and a group is one slot,
//! served by one master: the trade-off the README spells out.
//!
//! **Sharded keys** (`key_shards` > 1) are refused: a sharded key is spread over several slots on
//! purpose, and its shards could not be checked in one atomic call.
//!
//! **Leases.** A composite call takes no lease. It is exact beside leases all the same: the script
//! counts every live lease on a key (this instance's too, whose unused permits Redis counts as
//! used), as it does for any decision.

use crate::backend::Verdict;
use crate::decision::{Decision, Mode};
use crate::error::{Error, Result};
use crate::keys;
use crate::policy::Policy;
use crate::validate;

/// Most rules in one composite call (the script refuses more, too).
pub const MAX_RULES: usize = 16;
/// Longest group name: a hash tag, and shipped with every key of the call.
pub const MAX_GROUP_BYTES: usize = 1024;

/// One rule of a composite call: at most `limit` permits in any `window_ms` span of `key`'s
/// window, and this call asks for `cost` of them.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Rule {
    /// The user key, as for [`crate::Limiter::acquire`] (inside `group` when the call has one).
    pub key: Vec<u8>,
    pub limit: u64,
    pub window_ms: u64,
    /// Permits this call takes; rules on the same key must ask the same cost.
    pub cost: u64,
}

impl Rule {
    pub fn new(key: impl Into<Vec<u8>>, limit: u64, window_ms: u64, cost: u64) -> Rule {
        Rule {
            key: key.into(),
            limit,
            window_ms,
            cost,
        }
    }

    /// The rule `policy` sets on `key` (a policy string's limits, `Policy::parse_many`).
    pub fn from_policy(policy: &Policy, key: impl Into<Vec<u8>>, cost: u64) -> Rule {
        Rule::new(key, policy.limit, policy.window_ms, cost)
    }
}

/// The answer to one composite call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CompositeDecision {
    /// Whether the cost was taken from every rule (if false, nothing was taken from any).
    pub allowed: bool,
    /// 0 if allowed; otherwise the wait after which every rule fits (the longest of the denying
    /// rules' waits), if nothing else is admitted meanwhile.
    pub retry_after_ms: u64,
    /// Which path decided (every rule is decided by the same one).
    pub mode: Mode,
    /// The latest of the rules' decision times.
    pub now_ms: u64,
    /// One decision per rule, in the order given. A rule's `allowed` says whether it alone would
    /// admit the cost; `used` and `remaining` count the cost only when the call was admitted.
    pub decisions: Vec<Decision>,
}

/// A rule after validation: its key as an index into [`Plan::keys`].
#[derive(Debug, Clone, Copy)]
pub(crate) struct Planned {
    pub key: usize,
    pub limit: u64,
    pub window_ms: u64,
    pub cost: u64,
}

/// A checked call: its distinct user keys (first-seen order) and its rules.
#[derive(Debug)]
pub(crate) struct Plan<'a> {
    pub keys: Vec<&'a [u8]>,
    pub rules: Vec<Planned>,
}

impl Plan<'_> {
    /// For each key, the rule with its longest window (the first such): the one its admission
    /// is made by, so the key keeps history for every window its rules count.
    pub(crate) fn longest(&self) -> Vec<usize> {
        let mut best: Vec<Option<usize>> = vec![None; self.keys.len()];
        for (i, r) in self.rules.iter().enumerate() {
            let b = &mut best[r.key];
            if b.is_none_or(|j| r.window_ms > self.rules[j].window_ms) {
                *b = Some(i);
            }
        }
        best.into_iter()
            .map(|b| b.expect("every key has a rule"))
            .collect()
    }
}

/// Checks a call once, before any I/O, naming the bad value and the rule it is in.
pub(crate) fn plan<'a>(
    rules: &'a [Rule],
    group: Option<&[u8]>,
    key_shards: u64,
) -> Result<Plan<'a>> {
    if rules.is_empty() {
        return Err(Error::invalid("rules", "is empty; give at least one rule"));
    }
    if rules.len() > MAX_RULES {
        return Err(Error::invalid(
            "rules",
            format!(
                "holds {} rules; at most {MAX_RULES} are allowed",
                rules.len()
            ),
        ));
    }
    if let Some(g) = group {
        if g.is_empty() || g.len() > MAX_GROUP_BYTES {
            return Err(Error::invalid(
                "group",
                format!(
                    "is {} bytes; must be 1 to {MAX_GROUP_BYTES} (or no group)",
                    g.len()
                ),
            ));
        }
    }
    if key_shards > 1 {
        return Err(Error::invalid(
            "key_shards",
            format!(
                "is {key_shards}: a sharded key spreads over several Cluster slots, so a composite call, one atomic script on one slot, cannot check it; use key_shards 1 for keys in composite calls"
            ),
        ));
    }
    let mut plan = Plan {
        keys: Vec::new(),
        rules: Vec::with_capacity(rules.len()),
    };
    for (i, r) in rules.iter().enumerate() {
        validate::acquire(&r.key, r.limit, r.window_ms, r.cost).map_err(|e| in_rule(e, i, r))?;
        let key = match plan.keys.iter().position(|k| *k == &r.key[..]) {
            Some(k) => {
                let first = plan.rules.iter().position(|p| p.key == k).expect("seen");
                if plan.rules[first].cost != r.cost {
                    return Err(Error::invalid(
                        "cost",
                        format!(
                            "rules {first} and {i} are on the same key {} with different costs ({} and {}); one call admits one cost per key",
                            show(&r.key),
                            plan.rules[first].cost,
                            r.cost
                        ),
                    ));
                }
                k
            }
            None => {
                plan.keys.push(&r.key);
                plan.keys.len() - 1
            }
        };
        plan.rules.push(Planned {
            key,
            limit: r.limit,
            window_ms: r.window_ms,
            cost: r.cost,
        });
    }
    if group.is_none() {
        check_slots(&plan.keys)?;
    }
    Ok(plan)
}

/// Refuses ungrouped keys that would sit on different Cluster slots: checked on every topology
/// and backend, so a call that works on one Redis works on a Cluster too.
fn check_slots(user_keys: &[&[u8]]) -> Result<()> {
    let slot = |k: &[u8]| keys::slot(&keys::redis_key("", k));
    let first = user_keys[0];
    for k in &user_keys[1..] {
        if slot(k) != slot(first) {
            return Err(Error::invalid(
                "rules",
                format!(
                    "keys {} (Cluster slot {}) and {} (slot {}) do not share a slot; one call's keys must, so that one atomic script call can check them all: pass a group (it becomes the keys' hash tag)",
                    show(first),
                    slot(first),
                    show(k),
                    slot(k)
                ),
            ));
        }
    }
    Ok(())
}

/// The same error, its message saying which rule holds the value.
fn in_rule(e: Error, i: usize, r: &Rule) -> Error {
    match e {
        Error::InvalidArgument { name, message } => Error::InvalidArgument {
            name,
            message: format!("{message} (rule {i}, key {})", show(&r.key)),
        },
        e => e,
    }
}

/// A key for an error message: quoted, cut to a readable length.
fn show(key: &[u8]) -> String {
    let text = String::from_utf8_lossy(&key[..key.len().min(64)]);
    if key.len() > 64 {
        format!("{text:?}...")
    } else {
        format!("{text:?}")
    }
}

/// The call's decision from one verdict per rule (`caps[i]`: what rule i's `remaining` counts
/// down from: its limit, or in `local` mode this instance's budget).
pub(crate) fn decision(verdicts: &[Verdict], caps: &[u64], mode: Mode) -> CompositeDecision {
    let allowed = verdicts.iter().all(|v| v.allowed);
    let decisions: Vec<Decision> = verdicts
        .iter()
        .zip(caps)
        .map(|(v, &cap)| Decision {
            allowed: v.allowed,
            remaining: cap.saturating_sub(v.used),
            used: v.used,
            retry_after_ms: v.retry_after_ms,
            reset_after_ms: v.reset_after_ms,
            mode,
            now_ms: v.now_ms,
        })
        .collect();
    CompositeDecision {
        allowed,
        retry_after_ms: if allowed {
            0
        } else {
            verdicts.iter().map(|v| v.retry_after_ms).max().unwrap_or(0)
        },
        mode,
        now_ms: verdicts.iter().map(|v| v.now_ms).max().unwrap_or(0),
        decisions,
    }
}

/// Phase 2 of a call every rule allowed: the rules' verdicts, from their peeks of the cost, as
/// they read once the cost is admitted (counted, and the window not empty before `window_ms`).
pub(crate) fn admitted(verdicts: &mut [Verdict], rules: &[Planned]) {
    for (v, r) in verdicts.iter_mut().zip(rules) {
        v.used += r.cost;
        v.reset_after_ms = v.reset_after_ms.max(r.window_ms);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(key: &str, limit: u64, window_ms: u64, cost: u64) -> Rule {
        Rule::new(key, limit, window_ms, cost)
    }

    #[test]
    fn one_key_with_several_windows_is_one_key() {
        let rules = [rule("k", 100, 1000, 2), rule("k", 5000, 3_600_000, 2)];
        let p = plan(&rules, None, 1).unwrap();
        assert_eq!(p.keys, vec![&b"k"[..]]);
        assert_eq!(p.longest(), vec![1]);
    }

    /// Rules, group, key_shards, the argument named and a part of the message.
    type Bad = (
        Vec<Rule>,
        Option<&'static [u8]>,
        u64,
        &'static str,
        &'static str,
    );

    #[test]
    fn bad_calls_are_refused_naming_the_value() {
        let many: Vec<Rule> = (0..17).map(|_| rule("k", 1, 1, 1)).collect();
        let cases: Vec<Bad> = vec![
            (vec![], None, 1, "rules", "empty"),
            (many, None, 1, "rules", "at most 16"),
            (vec![rule("k", 1, 1, 1)], Some(b""), 1, "group", "1 to 1024"),
            (vec![rule("k", 1, 1, 1)], None, 4, "key_shards", "sharded"),
            (
                vec![rule("k", 1, 1, 1), rule("", 1, 1, 1)],
                None,
                1,
                "key",
                "rule 1",
            ),
            (vec![rule("k", 0, 1, 1)], None, 1, "limit", "rule 0"),
            (vec![rule("k", 1, 0, 1)], None, 1, "window_ms", "rule 0"),
            (vec![rule("k", 1, 1, 2)], None, 1, "cost", "above the limit"),
            (
                vec![rule("k", 9, 1, 1), rule("k", 9, 2, 2)],
                Some(b"g"),
                1,
                "cost",
                "different costs",
            ),
        ];
        for (rules, group, shards, name, text) in cases {
            let e = plan(&rules, group, shards).unwrap_err();
            assert_eq!(e.argument(), Some(name), "{e}");
            assert!(e.to_string().contains(text), "{e}");
        }
    }

    #[test]
    fn keys_on_different_slots_are_refused_without_a_group() {
        let (a, b) = ("ip:1.2.3.4", "user:42");
        assert_ne!(keys::slot(a.as_bytes()), keys::slot(b.as_bytes()));
        let rules = [rule(a, 10, 1000, 1), rule(b, 10, 1000, 1)];
        let e = plan(&rules, None, 1).unwrap_err();
        assert_eq!(e.argument(), Some("rules"));
        let text = e.to_string();
        for part in [a, b, "pass a group", &keys::slot(b.as_bytes()).to_string()] {
            assert!(text.contains(part), "{text}");
        }
        assert!(plan(&rules, Some(b"tenant"), 1).is_ok());
        // One key (a burst and a daily limit) needs no group.
        let one = [rule(a, 10, 1000, 1), rule(a, 100, 86_400_000, 1)];
        assert!(plan(&one, None, 1).is_ok());
    }

    #[test]
    fn the_decision_is_all_or_nothing_with_the_longest_wait() {
        let v = |allowed, retry| Verdict {
            allowed,
            used: 1,
            retry_after_ms: retry,
            reset_after_ms: 5,
            now_ms: 7,
        };
        let d = decision(
            &[v(true, 0), v(false, 30), v(false, 10)],
            &[3, 3, 3],
            Mode::Normal,
        );
        assert!(!d.allowed);
        assert_eq!(d.retry_after_ms, 30);
        assert_eq!(d.decisions[0].remaining, 2);
        let d = decision(&[v(true, 0)], &[3], Mode::Memory);
        assert_eq!((d.allowed, d.retry_after_ms, d.now_ms), (true, 0, 7));
    }
}
