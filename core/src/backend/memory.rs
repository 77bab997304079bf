//! The in-process backend: the same sliding window as the Lua script (`window.rs`), for
//! single-process use (the default without a Redis URL) and as the model the Redis backend is
//! tested against.
//!
//! A window whose last bucket has left it is dropped when next touched, and every shard sweeps
//! its stale windows now and then, so memory follows the keys in use, not every key ever seen.

use std::collections::HashMap;
use std::sync::Arc;

use super::{Request, Verdict};
use crate::clock::Clock;
use crate::composite::{self, Plan, Planned};
use crate::fork::ForkLocal;
use crate::keyed::Shards;
use crate::window::{Rule, Share, Window, MOD};

const SWEEP_EVERY: u32 = 4096;
/// Kept as long as the script's key TTL past the last admission, so a call with a longer window
/// sees the same history on both backends.
const TTL_SLACK_MS: u64 = 1000;

/// One key, as the script keeps it: its window, with history for the longest window any call
/// brought while it lived.
#[derive(Debug, Default)]
struct Key {
    window: Window,
    longest: u64,
    /// When the newest bucket leaves the longest window (plus the script's TTL slack).
    expires_at_ms: u64,
}

#[derive(Debug, Default)]
struct Shard {
    keys: HashMap<Vec<u8>, Key>,
    ops: u32,
}

pub(crate) struct MemoryBackend {
    /// Per fork generation: a forked child starts with empty windows (it is a new process, and
    /// the memory backend is per process), and never waits on a shard lock that a parent thread
    /// held at the instant of `fork()`.
    shards: ForkLocal<Shards<Shard>>,
    /// The keys of composite calls with a group, by `keys::group_key("", group, key)`: apart from
    /// the plain keys, as in Redis (any bytes are a plain key, so one map could not keep them apart).
    grouped: ForkLocal<Shards<Shard>>,
    clock: Arc<dyn Clock>,
}

impl std::fmt::Debug for MemoryBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemoryBackend").finish_non_exhaustive()
    }
}

impl MemoryBackend {
    pub(crate) fn new(clock: Arc<dyn Clock>) -> Self {
        MemoryBackend {
            shards: ForkLocal::new(),
            grouped: ForkLocal::new(),
            clock,
        }
    }

    pub(crate) fn decide(&self, req: &Request<'_>) -> Verdict {
        let now = self.clock.now_ms();
        let mut shard = self.shards.get().get(req.key);
        shard.ops = shard.ops.wrapping_add(1);
        if shard.ops.is_multiple_of(SWEEP_EVERY) {
            shard.keys.retain(|_, k| k.expires_at_ms > now);
        }
        match shard.keys.get_mut(req.key) {
            Some(k) => {
                let (verdict, keep) = decide(k, now, req);
                if !keep {
                    shard.keys.remove(req.key);
                }
                verdict
            }
            None => {
                let mut k = Key::default();
                let (verdict, keep) = decide(&mut k, now, req);
                if keep {
                    shard.keys.insert(req.key.to_vec(), k);
                }
                verdict
            }
        }
    }

    pub(crate) fn reset(&self, key: &[u8]) {
        self.shards.get().get(key).keys.remove(key);
    }

    /// Forgets a grouped key (see [`MemoryBackend::decide_all`]).
    pub(crate) fn reset_grouped(&self, key: &[u8]) {
        self.grouped.get().get(key).keys.remove(key);
    }

    /// A composite call (`composite.rs`) on `keys` (plain user keys, or with `grouped` the
    /// `keys::group_key` names), all-or-nothing: every rule decided like a peek of its cost, then,
    /// if all fit, the cost admitted once per key by its longest-window rule, as the script does.
    /// The keys' shards stay locked from the first check to the last admission (taken in one
    /// order, see `Shards::get_many`), so no other call sees or changes them in between.
    pub(crate) fn decide_all(
        &self,
        grouped: bool,
        keys: &[&[u8]],
        plan: &Plan<'_>,
    ) -> Vec<Verdict> {
        let now = self.clock.now_ms();
        let shards = if grouped { &self.grouped } else { &self.shards }.get();
        let (mut guards, at) = shards.get_many(keys);
        let mut held: Vec<Key> = keys
            .iter()
            .zip(&at)
            .map(|(k, &g)| guards[g].keys.remove(*k).unwrap_or_default())
            .collect();
        let request = |r: &Planned, consume| Request {
            key: keys[r.key],
            limit: r.limit,
            window_ms: r.window_ms,
            cost: r.cost,
            consume,
        };
        let mut out: Vec<Verdict> = plan
            .rules
            .iter()
            .map(|r| decide(&mut held[r.key], now, &request(r, false)).0)
            .collect();
        if out.iter().all(|v| v.allowed) {
            for (k, &i) in plan.longest().iter().enumerate() {
                let r = &plan.rules[i];
                let (v, _) = decide(&mut held[k], now, &request(r, true));
                debug_assert!(v.allowed, "nothing changed since the check");
            }
            composite::admitted(&mut out, &plan.rules);
        }
        for ((k, &g), key) in keys.iter().zip(&at).zip(held) {
            if !key.window.is_empty() {
                guards[g].keys.insert(k.to_vec(), key);
            }
        }
        out
    }
}

/// The script's `decide`, rule for rule. Returns the verdict and whether the key still holds
/// anything worth keeping.
fn decide(k: &mut Key, now: u64, req: &Request<'_>) -> (Verdict, bool) {
    let window = req.window_ms;
    let now = k.window.now(now);
    // A call on a live key records its window, as the script does; a key with nothing inside
    // even the longest window starts afresh with the next admission.
    let live = k
        .window
        .newest()
        .filter(|&t| t + k.longest.max(window) > now);
    let longest = match live {
        Some(newest) => {
            k.longest = k.longest.max(window);
            k.expires_at_ms = k.expires_at_ms.max(newest + k.longest + TTL_SLACK_MS);
            k.longest
        }
        None => window,
    };
    let rule = Rule {
        window_ms: window,
        limit: req.limit,
        cost: req.cost,
        consume: req.consume,
    };
    let verdict = k.window.decide(now, &rule, Share::whole(req.limit));
    if !(verdict.allowed && req.consume) {
        // Like the script, a peek or a denial writes nothing.
        return (verdict, !k.window.is_empty());
    }
    // Like the script, only an admission drops what left the longest window, then adds itself;
    // if the stored totals would stop being exact, it keeps only this call's window.
    k.longest = if k.window.used(now, longest) + req.cost >= MOD {
        window
    } else {
        longest
    };
    k.window.prune(now, k.longest);
    k.window.admit(now, req.cost, (), usize::MAX);
    k.expires_at_ms = now + k.longest + TTL_SLACK_MS;
    (verdict, true)
}
