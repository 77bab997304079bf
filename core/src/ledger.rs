//! What this instance admitted in the last window, per key: the local fallback limiter's state
//! and the failover repair's source.
//!
//! Every permit Redis admits for this instance is recorded here (at the Redis time of the
//! decision). While the limiter is `local`, decisions are made on this record with this
//! instance's share of the limit as budget, so what the instance admitted through Redis just
//! before counts against what it may admit locally: the window spanning the switch does not get
//! a fresh budget on top of a full one. Permits admitted locally are written back into Redis
//! before the limiter returns to `normal` (`fleet.rs`, `lua/repair.lua`).
//!
//! Bounded however many keys arrive: at most `max_keys` keys (least recently used ones are
//! forgotten) and at most `MAX_ENTRIES` buckets per key (the oldest merge into their successor,
//! which only ever keeps permits counted longer, never shorter).

use std::collections::hash_map::DefaultHasher;
use std::collections::VecDeque;
use std::hash::{Hash, Hasher};
use std::num::NonZeroUsize;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Mutex;

use lru::LruCache;

use crate::backend::Verdict;

const SHARDS: usize = 16;
pub(crate) const MAX_ENTRIES: usize = 4096;

/// `gen` 0: Redis has these permits. Otherwise: admitted locally, to be written to Redis; the
/// number is the flush generation, so a flush can mark exactly what it sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Entry {
    ms: u64,
    permits: u64,
    gen: u32,
}

#[derive(Debug)]
struct KeyLog {
    window_ms: u64,
    entries: VecDeque<Entry>,
}

impl KeyLog {
    fn prune(&mut self, now: u64) {
        let edge = now.saturating_sub(self.window_ms);
        while self.entries.front().is_some_and(|e| e.ms <= edge) {
            self.entries.pop_front();
        }
    }

    fn push(&mut self, e: Entry) {
        if let Some(last) = self.entries.back_mut() {
            if last.ms == e.ms && last.gen == e.gen {
                last.permits += e.permits;
                return;
            }
        }
        self.entries.push_back(e);
        if self.entries.len() > MAX_ENTRIES {
            let first = self.entries.pop_front().expect("over the cap");
            let second = self.entries.front_mut().expect("over the cap");
            second.permits += first.permits;
            second.gen = second.gen.max(first.gen);
        }
    }

    fn used(&self) -> u64 {
        self.entries.iter().map(|e| e.permits).sum()
    }
}

/// One key's share of a flush: its window and the buckets to send.
#[derive(Debug, Clone)]
pub(crate) struct Pending {
    pub key: Vec<u8>,
    pub window_ms: u64,
    /// Admitted locally, never seen by Redis.
    pub local: Vec<(u64, u64)>,
    /// Admitted by Redis (for a failover repair).
    pub admitted: Vec<(u64, u64)>,
}

pub(crate) struct Ledger {
    shards: Box<[Mutex<LruCache<Vec<u8>, KeyLog>>]>,
    /// The generation new local permits get; a flush takes the ones below it.
    gen: AtomicU32,
}

impl Ledger {
    pub(crate) fn new(max_keys: usize) -> Self {
        let per_shard = NonZeroUsize::new(max_keys.div_ceil(SHARDS).max(1)).expect("at least 1");
        Ledger { shards: (0..SHARDS).map(|_| Mutex::new(LruCache::new(per_shard))).collect(), gen: AtomicU32::new(1) }
    }

    fn shard(&self, key: &[u8]) -> std::sync::MutexGuard<'_, LruCache<Vec<u8>, KeyLog>> {
        let mut h = DefaultHasher::new();
        key.hash(&mut h);
        self.shards[h.finish() as usize % SHARDS].lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Records permits Redis admitted at `ms` (its time).
    pub(crate) fn record(&self, key: &[u8], window_ms: u64, ms: u64, permits: u64) {
        let mut shard = self.shard(key);
        let log = match shard.get_mut(key) {
            Some(l) => l,
            None => shard.get_or_insert_mut(key.to_vec(), || KeyLog { window_ms, entries: VecDeque::new() }),
        };
        log.window_ms = window_ms;
        // Out-of-order completions (coalesced batches) can bring an older time: count it at the
        // newest, which keeps it in the window at least as long.
        let ms = log.entries.back().map_or(ms, |b| b.ms.max(ms));
        log.prune(ms);
        log.push(Entry { ms, permits, gen: 0 });
    }

    /// Decides locally at `now` (estimated Redis time) against `budget`, this instance's share.
    pub(crate) fn decide(&self, key: &[u8], window_ms: u64, budget: u64, cost: u64, consume: bool, now: u64) -> Verdict {
        let mut shard = self.shard(key);
        let log = match shard.get_mut(key) {
            Some(l) => l,
            None => shard.get_or_insert_mut(key.to_vec(), || KeyLog { window_ms, entries: VecDeque::new() }),
        };
        log.window_ms = window_ms;
        let now = log.entries.back().map_or(now, |b| b.ms.max(now));
        log.prune(now);
        let used = log.used();
        if used + cost <= budget {
            let used = if consume {
                log.push(Entry { ms: now, permits: cost, gen: self.gen.load(Ordering::Acquire) });
                used + cost
            } else {
                used
            };
            let reset = if used == 0 { 0 } else { log.entries.back().map_or(0, |b| b.ms + window_ms - now) };
            return Verdict { allowed: true, used, retry_after_ms: 0, reset_after_ms: reset, now_ms: now };
        }
        // When the same request fits: after enough of the oldest buckets leave the window.
        let mut freed = 0;
        let mut retry = window_ms;
        if cost <= budget {
            for e in &log.entries {
                freed += e.permits;
                if used - freed + cost <= budget {
                    retry = e.ms + window_ms - now;
                    break;
                }
            }
        }
        let reset = log.entries.back().map_or(0, |b| b.ms + window_ms - now);
        Verdict { allowed: false, used, retry_after_ms: retry, reset_after_ms: reset, now_ms: now }
    }

    pub(crate) fn forget(&self, key: &[u8]) {
        self.shard(key).pop(key);
    }

    pub(crate) fn keys(&self) -> usize {
        self.shards.iter().map(|s| s.lock().unwrap_or_else(|p| p.into_inner()).len()).sum()
    }

    /// Whether any locally admitted permits still wait to be written to Redis.
    pub(crate) fn has_local(&self) -> bool {
        self.shards.iter().any(|s| s.lock().unwrap_or_else(|p| p.into_inner()).iter().any(|(_, l)| l.entries.iter().any(|e| e.gen != 0)))
    }

    /// Starts a flush: local permits admitted from now on get a newer generation, so
    /// [`Ledger::flushed`] marks exactly what this flush sent. Returns the flush's generation.
    pub(crate) fn begin_flush(&self) -> u32 {
        self.gen.fetch_add(1, Ordering::AcqRel)
    }

    /// What a flush of generation `upto` sends: per key, the local buckets of generations
    /// `1..=upto` still in the window at `now`, and (for a failover repair) the Redis-admitted ones.
    pub(crate) fn pending(&self, upto: u32, now: u64, with_admitted: bool) -> Vec<Pending> {
        let mut out = Vec::new();
        for s in self.shards.iter() {
            let s = s.lock().unwrap_or_else(|p| p.into_inner());
            for (key, log) in s.iter() {
                let edge = now.saturating_sub(log.window_ms);
                let live = log.entries.iter().filter(|e| e.ms > edge);
                let local: Vec<_> = live.clone().filter(|e| e.gen != 0 && e.gen <= upto).map(|e| (e.ms, e.permits)).collect();
                let admitted: Vec<_> = if with_admitted { live.filter(|e| e.gen == 0).map(|e| (e.ms, e.permits)).collect() } else { Vec::new() };
                if !local.is_empty() || !admitted.is_empty() {
                    out.push(Pending { key: key.clone(), window_ms: log.window_ms, local, admitted });
                }
            }
        }
        out
    }

    /// Marks `key`'s local permits of generations `1..=upto` as written to Redis.
    pub(crate) fn flushed(&self, key: &[u8], upto: u32) {
        if let Some(log) = self.shard(key).peek_mut(key) {
            for e in log.entries.iter_mut() {
                if e.gen != 0 && e.gen <= upto {
                    e.gen = 0;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn local_budget_counts_what_redis_admitted() {
        let l = Ledger::new(100);
        l.record(b"k", 1000, 10_000, 7);
        let v = l.decide(b"k", 1000, 10, 3, true, 10_100);
        assert!(v.allowed);
        assert_eq!(v.used, 10);
        let v = l.decide(b"k", 1000, 10, 1, true, 10_200);
        assert!(!v.allowed);
        assert_eq!(v.retry_after_ms, 800, "the 7 admitted at 10000 leave at 11000");
        assert!(l.decide(b"k", 1000, 10, 1, true, 11_000).allowed, "window is (now-W, now]");
    }

    #[test]
    fn keys_are_bounded() {
        let l = Ledger::new(64);
        for i in 0..10_000u32 {
            l.record(&i.to_be_bytes(), 1000, 1, 1);
        }
        assert!(l.keys() <= 64 + SHARDS, "{} keys kept", l.keys());
    }

    #[test]
    fn entries_per_key_are_bounded_and_keep_their_permits() {
        let l = Ledger::new(1);
        for ms in 0..(MAX_ENTRIES as u64 * 3) {
            l.record(b"k", 1_000_000, ms + 1, 1);
        }
        let v = l.decide(b"k", 1_000_000, u64::MAX / 2, 1, false, MAX_ENTRIES as u64 * 3);
        assert_eq!(v.used, MAX_ENTRIES as u64 * 3);
    }

    #[test]
    fn a_flush_marks_exactly_what_it_sent() {
        let l = Ledger::new(10);
        assert!(l.decide(b"k", 1000, 10, 2, true, 100).allowed);
        let g = l.begin_flush();
        assert!(l.decide(b"k", 1000, 10, 3, true, 100).allowed, "same ms, newer generation");
        let p = l.pending(g, 100, false);
        assert_eq!(p[0].local, vec![(100, 2)]);
        l.flushed(b"k", g);
        assert!(l.has_local(), "the permits admitted after the flush began are still unsent");
        let g2 = l.begin_flush();
        assert_eq!(l.pending(g2, 100, false)[0].local, vec![(100, 3)]);
        l.flushed(b"k", g2);
        assert!(!l.has_local());
    }
}
