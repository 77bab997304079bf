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

#[derive(Debug, Default)]
struct Window {
    used: u64,
    /// `(ms, permits)` oldest first, one per millisecond that admitted something.
    buckets: VecDeque<(u64, u64)>,
    /// When the newest bucket leaves the window of the call that made it.
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
        MemoryBackend { shards: ForkLocal::new(), clock }
    }

    fn shard(&self, key: &[u8]) -> std::sync::MutexGuard<'_, Shard> {
        let mut h = DefaultHasher::new();
        key.hash(&mut h);
        let i = (h.finish() as usize) % SHARDS;
        // A panic while holding a shard cannot leave a window half-updated in a way that matters
        // more than refusing service forever, so a poisoned lock is taken over.
        self.shards.get().0[i].lock().unwrap_or_else(|p| p.into_inner())
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

/// The script's `decide`, step for step. Returns the verdict and whether the window still holds
/// anything worth keeping.
fn decide(w: &mut Window, now: u64, req: &Request<'_>) -> (Verdict, bool) {
    let window = req.window_ms;
    let newest = w.buckets.back().copied();
    let now = match newest {
        Some((t, _)) if t > now => t,
        _ => now,
    };
    // Signed: early in a manual clock's life `now - window` is below zero.
    let edge = now as i64 - window as i64;
    let live = matches!(newest, Some((t, _)) if t as i64 > edge);

    if !live {
        if !req.consume {
            // Like the script, a peek writes nothing: a later call with a longer window may still
            // count these buckets.
            let keep = !w.buckets.is_empty();
            return (Verdict { allowed: true, used: 0, retry_after_ms: 0, reset_after_ms: 0, now_ms: now }, keep);
        }
        w.buckets.clear();
        w.buckets.push_back((now, req.cost));
        w.used = req.cost;
        w.expires_at_ms = now + window + TTL_SLACK_MS;
        let v = Verdict { allowed: true, used: req.cost, retry_after_ms: 0, reset_after_ms: window, now_ms: now };
        return (v, true);
    }
    let (newest_t, _) = newest.expect("live implies a bucket");

    let mut expired = 0usize;
    let mut freed = 0u64;
    let mut fits_at = None;
    let mut need: Option<u64> = None;
    let mut acc = 0u64;
    for &(t, c) in &w.buckets {
        if need.is_none() {
            if t as i64 <= edge {
                expired += 1;
                freed += c;
                continue;
            }
            let over = (w.used - freed + req.cost).saturating_sub(req.limit);
            if over == 0 {
                break;
            }
            need = Some(over);
        }
        acc += c;
        if acc >= need.unwrap_or(0) {
            fits_at = Some(t);
            break;
        }
    }
    let used = w.used - freed;
    if used + req.cost > req.limit {
        // Unreachable `None`: cost <= limit, so the live buckets always hold enough to free.
        let retry_after_ms = fits_at.map_or(window, |t| t + window - now);
        let v = Verdict { allowed: false, used, retry_after_ms, reset_after_ms: newest_t + window - now, now_ms: now };
        return (v, true);
    }
    if !req.consume {
        return (Verdict { allowed: true, used, retry_after_ms: 0, reset_after_ms: newest_t + window - now, now_ms: now }, true);
    }
    // Like the script, only an admission writes: it drops what left the window and adds itself.
    w.buckets.drain(..expired);
    match w.buckets.back_mut() {
        Some((t, c)) if *t == now => *c += req.cost,
        _ => w.buckets.push_back((now, req.cost)),
    }
    w.used = used + req.cost;
    w.expires_at_ms = now + window + TTL_SLACK_MS;
    (Verdict { allowed: true, used: w.used, retry_after_ms: 0, reset_after_ms: window, now_ms: now }, true)
}
