//! The in-process backend: the same sliding window as the Lua script, for single-process use (the
//! default without a Redis URL) and as the model the Redis backend is tested against.
//!
//! Windows live in a sharded map so threads deciding on different keys rarely contend. A window
//! whose last bucket has left it is dropped when next touched, and every shard sweeps its stale
//! windows now and then, so memory follows the keys in use, not every key ever seen.

use std::collections::hash_map::DefaultHasher;
use std::collections::{HashMap, VecDeque};
use std::hash::{Hash, Hasher};
use std::sync::{Arc, Mutex};

use super::{Request, Verdict};
use crate::clock::Clock;
use crate::fork::ForkLocal;

const SHARDS: usize = 16;
const SWEEP_EVERY: u32 = 4096;
/// Kept as long as the script's key TTL past the last admission, so a call with a longer window
/// sees the same history on both backends.
const TTL_SLACK_MS: u64 = 1000;
/// Running totals wrap here, as in the script (where they are doubles that must stay exact).
const MOD: u64 = 1 << 52;

/// Permits between two running totals (a later minus an earlier one).
fn between(later: u64, earlier: u64) -> u64 {
    (later + MOD - earlier) % MOD
}

/// The script's window: running totals per bucket, so a window's count and a denied request's
/// retry time are each one binary search, not a scan, under the shard lock.
#[derive(Debug, Default)]
struct Window {
    /// `(ms, permits admitted through this bucket, modulo 2^52)` oldest first, one per millisecond
    /// that admitted something; the last one is the open bucket.
    buckets: VecDeque<(u64, u64)>,
    /// The running total just before the oldest stored bucket.
    base: u64,
    /// The longest window any call brought while this window lived: history is kept for it.
    longest: u64,
    /// When the newest bucket leaves the longest window (plus the script's TTL slack).
    expires_at_ms: u64,
}

#[derive(Debug, Default)]
struct Shard {
    windows: HashMap<Vec<u8>, Window>,
    ops: u32,
}

struct Shards([Mutex<Shard>; SHARDS]);

impl Default for Shards {
    fn default() -> Self {
        Shards(std::array::from_fn(|_| Mutex::default()))
    }
}

pub(crate) struct MemoryBackend {
    /// Per fork generation: a forked child starts with empty windows (it is a new process, and
    /// the memory backend is per process), and never waits on a shard lock that a parent thread
    /// held at the instant of `fork()`.
    shards: ForkLocal<Shards>,
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
            clock,
        }
    }

    fn shard(&self, key: &[u8]) -> std::sync::MutexGuard<'_, Shard> {
        let mut h = DefaultHasher::new();
        key.hash(&mut h);
        let i = (h.finish() as usize) % SHARDS;
        // A panic while holding a shard cannot leave a window half-updated in a way that matters
        // more than refusing service forever, so a poisoned lock is taken over.
        self.shards.get().0[i]
            .lock()
            .unwrap_or_else(|p| p.into_inner())
    }

    pub(crate) fn decide(&self, req: &Request<'_>) -> Verdict {
        let now = self.clock.now_ms();
        let mut shard = self.shard(req.key);
        shard.ops = shard.ops.wrapping_add(1);
        if shard.ops.is_multiple_of(SWEEP_EVERY) {
            shard.windows.retain(|_, w| w.expires_at_ms > now);
        }
        match shard.windows.get_mut(req.key) {
            Some(w) => {
                let (verdict, keep) = decide(w, now, req);
                if !keep {
                    shard.windows.remove(req.key);
                }
                verdict
            }
            None => {
                let mut w = Window::default();
                let (verdict, keep) = decide(&mut w, now, req);
                if keep {
                    shard.windows.insert(req.key.to_vec(), w);
                }
                verdict
            }
        }
    }

    pub(crate) fn reset(&self, key: &[u8]) {
        self.shard(key).windows.remove(key);
    }
}

/// The script's `decide`, rule for rule. Returns the verdict and whether the window still holds
/// anything worth keeping.
fn decide(w: &mut Window, now: u64, req: &Request<'_>) -> (Verdict, bool) {
    let window = req.window_ms;
    let newest = w.buckets.back().copied();
    let now = match newest {
        Some((t, _)) if t > now => t,
        _ => now,
    };
    let longest = if newest.is_some() {
        w.longest.max(window)
    } else {
        window
    };
    // Signed: early in a manual clock's life `now - window` is below zero.
    let edge = now as i64 - window as i64;
    let keep_edge = now as i64 - longest as i64;

    let Some((newest_t, total)) = newest.filter(|&(t, _)| t as i64 > keep_edge) else {
        // Nothing inside even the longest window.
        if !req.consume {
            // Like the script, a peek writes nothing.
            let keep = !w.buckets.is_empty();
            return (
                Verdict {
                    allowed: true,
                    used: 0,
                    retry_after_ms: 0,
                    reset_after_ms: 0,
                    now_ms: now,
                },
                keep,
            );
        }
        *w = Window {
            buckets: VecDeque::from([(now, req.cost)]),
            base: 0,
            longest: window,
            expires_at_ms: now + window + TTL_SLACK_MS,
        };
        let v = Verdict {
            allowed: true,
            used: req.cost,
            retry_after_ms: 0,
            reset_after_ms: window,
            now_ms: now,
        };
        return (v, true);
    };
    // A call on a live window records its window, as the script does.
    w.longest = longest;
    w.expires_at_ms = w.expires_at_ms.max(newest_t + longest + TTL_SLACK_MS);
    let live = newest_t as i64 > edge;
    // e: how many buckets are at or before the edge; the total through the last of them.
    let e = w.buckets.partition_point(|&(t, _)| t as i64 <= edge);
    let total_at = |w: &Window, i: usize| if i == 0 { w.base } else { w.buckets[i - 1].1 };
    let total_e = total_at(w, e);
    let used = if live { between(total, total_e) } else { 0 };
    let reset_after_ms = if live { newest_t + window - now } else { 0 };
    if used + req.cost > req.limit {
        // The bucket whose leaving frees enough: cost <= limit, so the live buckets hold it.
        let need = used + req.cost - req.limit;
        let j = w
            .buckets
            .partition_point(|&(t, c)| t as i64 <= edge || between(c, total_e) < need);
        let retry_after_ms = w.buckets[j].0 + window - now;
        return (
            Verdict {
                allowed: false,
                used,
                retry_after_ms,
                reset_after_ms,
                now_ms: now,
            },
            true,
        );
    }
    if !req.consume {
        return (
            Verdict {
                allowed: true,
                used,
                retry_after_ms: 0,
                reset_after_ms,
                now_ms: now,
            },
            true,
        );
    }
    // Like the script, only an admission drops what left the longest window, then adds itself.
    let mut cut = w.buckets.partition_point(|&(t, _)| t as i64 <= keep_edge);
    if between(total, total_at(w, cut)) + req.cost >= MOD {
        // The stored totals would stop being exact: keep only this call's window.
        w.longest = window;
        cut = e;
    }
    w.base = total_at(w, cut);
    w.buckets.drain(..cut);
    let total = (total + req.cost) % MOD;
    match w.buckets.back_mut() {
        Some((t, c)) if *t == now => *c = total,
        _ => w.buckets.push_back((now, total)),
    }
    w.expires_at_ms = now + w.longest + TTL_SLACK_MS;
    (
        Verdict {
            allowed: true,
            used: used + req.cost,
            retry_after_ms: 0,
            reset_after_ms: window,
            now_ms: now,
        },
        true,
    )
}
