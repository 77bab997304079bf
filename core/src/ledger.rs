//! What this instance admitted in the last window, per key: the local fallback limiter's state
//! and the failover repair's source.
//!
//! Every permit Redis admits for this instance is recorded here (at the Redis time of the
//! decision). While the limiter is `local`, decisions are made on this record (the shared
//! sliding window, `window.rs`) with this instance's share of the limit as budget, so what the instance admitted through Redis just
//! before counts against what it may admit locally: the window spanning the switch does not get
//! a fresh budget on top of a full one. Permits admitted locally are written back into Redis
//! before the limiter returns to `normal` (`redis_path.rs`, `lua/repair.lua`).
//!
//! It also keeps, per key, what the other instances held in the window as of the last Redis
//! reply (that reply's `used` minus this instance's own permits, counted as if all admitted at
//! the reply's time, so they leave the window no sooner than they really do): a local decision
//! never lets this instance's permits plus those exceed the limit, so a window Redis had filled
//! is not filled again by the instances that carried little of it (see the README's bound).
//!
//! Bounded however many keys arrive: at most `max_keys` keys and at most `MAX_ENTRIES` buckets
//! per key (the oldest merge into a successor of the same generation, which only ever keeps
//! permits counted longer, never shorter). A key holding local permits not yet written to Redis
//! is never forgotten: keys Redis knows all about are forgotten least recently used first, and
//! when a shard holds only keys with unwritten permits a new key is denied locally until a flush
//! writes some back. Those keys are counted, so "anything to flush?" costs nothing.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};

use lru::LruCache;

use crate::backend::Verdict;
use crate::composite::{self, Plan};
use crate::keyed::{Shards, SHARDS};
use crate::window::{Rule, Seen, Share, Window};

pub(crate) const MAX_ENTRIES: usize = 4096;

/// One key's record. Bucket tags are flush generations: 0, Redis has these permits; otherwise
/// admitted locally, to be written to Redis, and the number is the flush generation, so a flush
/// can mark exactly what it sent.
#[derive(Debug)]
struct KeyLog {
    window_ms: u64,
    window: Window<u32>,
    /// The other instances' permits in the window at the last Redis reply: (its time, permits).
    others: Option<(u64, u64)>,
    /// Redis's whole count, read by the last repair of this key (`window.rs`, [`Seen`]).
    seen: Option<Seen>,
    /// Decided locally since the last flush: the next flush reads Redis's count for it, even
    /// with nothing to write.
    refresh: bool,
}

impl KeyLog {
    fn new(window_ms: u64) -> Self {
        KeyLog {
            window_ms,
            window: Window::default(),
            others: None,
            seen: None,
            refresh: false,
        }
    }

    /// Takes the call's window and forgets what left it; returns `now`, raised to the newest
    /// bucket's time (out-of-order completions of coalesced batches can bring an older time:
    /// counted at the newest, a permit stays in the window at least as long).
    fn advance(&mut self, window_ms: u64, now: u64) -> u64 {
        self.window_ms = window_ms;
        let now = self.window.now(now);
        self.window.prune(now, window_ms);
        now
    }

    /// Whether it holds local permits not yet written to Redis.
    fn local(&self) -> bool {
        self.window.has_tagged()
    }
}

/// One shard's keys: the ones Redis knows all about, forgotten least recently used first, and
/// the ones holding local permits not yet written to Redis, kept until a flush writes them.
struct Shard {
    clean: LruCache<Vec<u8>, KeyLog>,
    dirty: HashMap<Vec<u8>, KeyLog>,
    cap: usize,
}

impl Shard {
    /// The key's log, made if `create` and there is room (made by forgetting a clean key).
    fn log(&mut self, key: &[u8], window_ms: u64, create: bool) -> Option<&mut KeyLog> {
        if self.dirty.contains_key(key) {
            return self.dirty.get_mut(key);
        }
        if self.clean.contains(key) {
            return self.clean.get_mut(key);
        }
        if !create {
            return None;
        }
        if self.clean.len() + self.dirty.len() >= self.cap && self.clean.pop_lru().is_none() {
            return None;
        }
        Some(
            self.clean
                .get_or_insert_mut(key.to_vec(), || KeyLog::new(window_ms)),
        )
    }

    /// Moves `key` to the map its state calls for; returns the change in dirty keys.
    fn settle(&mut self, key: &[u8]) -> isize {
        if let Some(log) = self.dirty.get(key) {
            if !log.local() {
                let (k, v) = self.dirty.remove_entry(key).expect("present");
                self.clean.put(k, v);
                return -1;
            }
        } else if self.clean.peek(key).is_some_and(KeyLog::local) {
            let (k, v) = self.clean.pop_entry(key).expect("present");
            self.dirty.insert(k, v);
            return 1;
        }
        0
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
    /// Decided locally since the last flush: read Redis's count even with nothing to send.
    pub refresh: bool,
}

pub(crate) struct Ledger {
    shards: Shards<Shard>,
    /// The generation new local permits get; a flush takes the ones below it.
    gen: AtomicU32,
    /// Keys holding local permits not yet written to Redis.
    dirty: AtomicUsize,
    /// Local decisions since the last flush took the keys to refresh.
    touched: AtomicUsize,
}

impl Ledger {
    pub(crate) fn new(max_keys: usize) -> Self {
        let cap = max_keys.div_ceil(SHARDS).max(1);
        Ledger {
            shards: Shards::new(|| Shard {
                clean: LruCache::unbounded(),
                dirty: HashMap::new(),
                cap,
            }),
            gen: AtomicU32::new(1),
            dirty: AtomicUsize::new(0),
            touched: AtomicUsize::new(0),
        }
    }

    fn settle(&self, shard: &mut Shard, key: &[u8]) {
        match shard.settle(key) {
            1 => self.dirty.fetch_add(1, Ordering::AcqRel),
            -1 => self.dirty.fetch_sub(1, Ordering::AcqRel),
            _ => 0,
        };
    }

    /// Records a Redis reply at `ms` (its time): `admitted` permits for this instance (0 for a
    /// denial or a peek), and `used`, what the window held after it.
    pub(crate) fn record(&self, key: &[u8], window_ms: u64, ms: u64, admitted: u64, used: u64) {
        let mut shard = self.shards.get(key);
        let Some(log) = shard.log(key, window_ms, true) else {
            return;
        };
        let ms = log.advance(window_ms, ms);
        if admitted > 0 {
            log.window.admit(ms, admitted, 0, MAX_ENTRIES);
        }
        if log.others.is_none_or(|(t, _)| t <= ms) {
            let redis = log.window.stored() - log.window.tagged_permits();
            log.others = Some((ms, used.saturating_sub(redis)));
        }
        self.settle(&mut shard, key);
    }

    /// Decides locally at `now` (estimated Redis time): this instance's permits within `budget`,
    /// its share, and with the other instances' last seen within `limit`.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn decide(
        &self,
        key: &[u8],
        window_ms: u64,
        limit: u64,
        budget: u64,
        cost: u64,
        consume: bool,
        now: u64,
    ) -> Verdict {
        let rule = Rule {
            window_ms,
            limit,
            cost,
            consume,
        };
        let mut shard = self.shards.get(key);
        let Some(log) = shard.log(key, window_ms, consume) else {
            if !consume {
                // A peek on a key never seen: decided on an empty record.
                let share = Share {
                    budget,
                    others: None,
                    seen: None,
                };
                return Window::<u32>::default().decide(now, &rule, share);
            }
            // Every key of this shard holds permits Redis has not seen yet: admitting one more
            // key would mean forgetting some. Denied until a flush writes them back.
            return Verdict {
                allowed: false,
                used: budget,
                retry_after_ms: window_ms,
                reset_after_ms: window_ms,
                now_ms: now,
            };
        };
        let now = log.advance(window_ms, now);
        let share = Share {
            budget,
            others: log.others,
            seen: log.seen,
        };
        let v = log.window.decide(now, &rule, share);
        if consume {
            log.refresh = true;
            self.touched.fetch_add(1, Ordering::AcqRel);
        }
        if v.allowed && consume {
            let gen = self.gen.load(Ordering::Acquire);
            log.window.admit(now, cost, gen, MAX_ENTRIES);
        }
        // A new local permit makes the key dirty; its last ones leaving the window, clean.
        self.settle(&mut shard, key);
        v
    }

    /// A composite call decided locally at `now` (`composite.rs`): every rule checked like a peek
    /// of its cost against its share (`budgets[i]`, with the others' last seen permits within
    /// its limit), then, if all fit, the cost admitted once per key (`keys`: the Redis keys, in
    /// the plan's order). The keys' shards stay locked throughout (taken in one order, see
    /// `Shards::get_many`), so it is atomic against every other local decision. A key's record
    /// keeps its longest rule's window, so the shorter rules never prune what a longer one counts.
    pub(crate) fn decide_all(
        &self,
        keys: &[&[u8]],
        plan: &Plan<'_>,
        budgets: &[u64],
        now: u64,
    ) -> Vec<Verdict> {
        let longest = plan.longest();
        let (mut guards, at) = self.shards.get_many(keys);
        // Each key's time, raised to its newest bucket; None: no room for its record.
        let mut times: Vec<Option<u64>> = Vec::with_capacity(keys.len());
        for (k, key) in keys.iter().enumerate() {
            let window_ms = plan.rules[longest[k]].window_ms;
            let log = guards[at[k]].log(key, window_ms, true);
            times.push(log.map(|log| log.advance(window_ms, now)));
        }
        let mut out: Vec<Verdict> = plan
            .rules
            .iter()
            .zip(budgets)
            .map(|(r, &budget)| {
                let rule = Rule {
                    window_ms: r.window_ms,
                    limit: r.limit,
                    cost: r.cost,
                    consume: false,
                };
                let log = guards[at[r.key]].log(keys[r.key], r.window_ms, false);
                match (log, times[r.key]) {
                    (Some(log), Some(t)) => log.window.decide(
                        t,
                        &rule,
                        Share {
                            budget,
                            others: log.others,
                            seen: log.seen,
                        },
                    ),
                    // As for one call: denied until a flush makes room for the key's record.
                    _ => Verdict {
                        allowed: false,
                        used: budget,
                        retry_after_ms: r.window_ms,
                        reset_after_ms: r.window_ms,
                        now_ms: now,
                    },
                }
            })
            .collect();
        for (k, key) in keys.iter().enumerate() {
            if let Some(log) = guards[at[k]].log(key, 0, false) {
                log.refresh = true;
                self.touched.fetch_add(1, Ordering::AcqRel);
            }
        }
        if out.iter().all(|v| v.allowed) {
            let gen = self.gen.load(Ordering::Acquire);
            for (k, key) in keys.iter().enumerate() {
                let (log, t) = (guards[at[k]].log(key, 0, false), times[k]);
                if let (Some(log), Some(t)) = (log, t) {
                    log.window
                        .admit(t, plan.rules[longest[k]].cost, gen, MAX_ENTRIES);
                }
            }
            composite::admitted(&mut out, &plan.rules);
        }
        for (k, key) in keys.iter().enumerate() {
            self.settle(&mut guards[at[k]], key);
        }
        out
    }

    pub(crate) fn forget(&self, key: &[u8]) {
        let mut shard = self.shards.get(key);
        if shard.dirty.remove(key).is_some() {
            self.dirty.fetch_sub(1, Ordering::AcqRel);
        }
        shard.clean.pop(key);
    }

    pub(crate) fn keys(&self) -> usize {
        self.shards
            .iter()
            .map(|s| s.clean.len() + s.dirty.len())
            .sum()
    }

    /// Whether every key's kept counts match its buckets, and its map its state.
    #[cfg(test)]
    fn consistent(&self) -> bool {
        self.shards.iter().all(|s| {
            s.clean
                .iter()
                .all(|(_, l)| l.window.consistent() && !l.local())
                && s.dirty.values().all(|l| l.window.consistent() && l.local())
        }) && self.local_keys() == self.shards.iter().map(|s| s.dirty.len()).sum::<usize>()
    }

    /// Keys holding locally admitted permits that still wait to be written to Redis.
    pub(crate) fn local_keys(&self) -> usize {
        self.dirty.load(Ordering::Acquire)
    }

    /// Whether any locally admitted permits still wait to be written to Redis: a counter, read
    /// once a second by the background task without taking a lock.
    pub(crate) fn has_local(&self) -> bool {
        self.local_keys() > 0
    }

    /// Whether a flush has something to do: local permits to write, or keys decided locally
    /// since the last one, whose Redis count it reads.
    pub(crate) fn has_work(&self) -> bool {
        self.has_local() || self.touched.load(Ordering::Acquire) > 0
    }

    /// Keeps what a repair read of `key` in Redis: `held` permits in the window at Redis time
    /// `at`; `since`, the local time the flush began (this instance's permits after it may be
    /// missing from `held`).
    pub(crate) fn seen(&self, key: &[u8], since: u64, at: u64, held: u64) {
        let mut shard = self.shards.get(key);
        if let Some(log) = shard.log(key, 0, false) {
            // Local permits the flush did not send (admitted after it began) are all Redis
            // lacks of this instance's: counted too, however old.
            let unsent = log.window.buckets().find(|b| b.2 != 0).map(|b| b.0);
            let since = unsent.map_or(since, |ms| since.min(ms.saturating_sub(1)));
            if log.seen.is_none_or(|s| s.at <= at) {
                log.seen = Some(Seen { since, at, held });
            }
        }
    }

    /// Starts a flush: local permits admitted from now on get a newer generation, so
    /// [`Ledger::flushed`] marks exactly what this flush sent. Returns the flush's generation.
    pub(crate) fn begin_flush(&self) -> u32 {
        self.gen.fetch_add(1, Ordering::AcqRel)
    }

    /// What a flush of generation `upto` sends: per key, the local buckets of generations
    /// `1..=upto` still in the window at `now`, and (for a failover repair) the Redis-admitted ones;
    /// and the keys decided locally since the last flush (whose Redis count the flush reads).
    /// Keys whose local permits all left the window count as written.
    pub(crate) fn pending(&self, upto: u32, now: u64, with_admitted: bool) -> Vec<Pending> {
        let mut out = Vec::new();
        let refresh = self.touched.swap(0, Ordering::AcqRel) > 0;
        for mut s in self.shards.iter() {
            let mut expired = Vec::new();
            for (k, l) in s.dirty.iter_mut() {
                l.advance(l.window_ms, now);
                if !l.local() {
                    expired.push(k.clone());
                }
            }
            for k in expired {
                self.settle(&mut s, &k);
            }
            let s = &mut *s;
            let logs: Box<dyn Iterator<Item = (&Vec<u8>, &mut KeyLog)>> =
                if with_admitted || refresh {
                    Box::new(s.dirty.iter_mut().chain(s.clean.iter_mut()))
                } else {
                    Box::new(s.dirty.iter_mut())
                };
            for (key, log) in logs {
                let fresh = std::mem::take(&mut log.refresh);
                let live = log
                    .window
                    .buckets()
                    .filter(|&(ms, _, _)| ms + log.window_ms > now);
                // A key read for its count only while it holds permits in the window: one
                // whose permits all left has nothing of this instance's for others to take.
                let fresh = fresh && live.clone().next().is_some();
                let local: Vec<_> = live
                    .clone()
                    .filter(|&(_, _, gen)| gen != 0 && gen <= upto)
                    .map(|(ms, permits, _)| (ms, permits))
                    .collect();
                let admitted: Vec<_> = if with_admitted {
                    live.filter(|&(_, _, gen)| gen == 0)
                        .map(|(ms, permits, _)| (ms, permits))
                        .collect()
                } else {
                    Vec::new()
                };
                if !local.is_empty() || !admitted.is_empty() || fresh {
                    out.push(Pending {
                        key: key.clone(),
                        window_ms: log.window_ms,
                        local,
                        admitted,
                        refresh: fresh,
                    });
                }
            }
        }
        out
    }

    /// Marks `key`'s local permits of generations `1..=upto` as written to Redis.
    pub(crate) fn flushed(&self, key: &[u8], upto: u32) {
        let mut shard = self.shards.get(key);
        if let Some(log) = shard.dirty.get_mut(key) {
            log.window.settle(|gen| gen <= upto);
        }
        self.settle(&mut shard, key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn local_budget_counts_what_redis_admitted() {
        let l = Ledger::new(100);
        l.record(b"k", 1000, 10_000, 7, 7);
        let v = l.decide(b"k", 1000, 40, 10, 3, true, 10_100);
        assert!(v.allowed);
        assert_eq!(v.used, 10);
        let v = l.decide(b"k", 1000, 40, 10, 1, true, 10_200);
        assert!(!v.allowed);
        assert_eq!(
            v.retry_after_ms, 800,
            "the 7 admitted at 10000 leave at 11000"
        );
        assert!(
            l.decide(b"k", 1000, 40, 10, 1, true, 11_000).allowed,
            "window is (now-W, now]"
        );
    }

    #[test]
    fn local_decisions_count_what_the_others_held_at_the_last_reply() {
        let l = Ledger::new(100);
        // Redis admitted 1 for this instance; the window then held 95 of 100: 94 are the others'.
        l.record(b"k", 1000, 10_000, 1, 95);
        let v = l.decide(b"k", 1000, 100, 25, 1, true, 10_100);
        assert!(
            v.allowed && v.used == 21,
            "own 2, and 94 - 75 of the others' beyond the other shares: {v:?}"
        );
        for _ in 0..4 {
            assert!(l.decide(b"k", 1000, 100, 25, 1, true, 10_100).allowed);
        }
        let v = l.decide(b"k", 1000, 100, 25, 1, true, 10_200);
        assert!(
            !v.allowed && v.used == 25,
            "own 6 + others 94 + 1 > 100, though 6 < the budget 25: {v:?}"
        );
        assert_eq!(
            v.retry_after_ms, 800,
            "the others' permits leave by 11000 at the latest"
        );
        assert!(l.decide(b"k", 1000, 100, 25, 1, true, 11_000).allowed);
        // A denial's reply tells too: the window held 100 at 12000, none of them this instance's.
        l.record(b"j", 1000, 12_000, 0, 100);
        assert!(!l.decide(b"j", 1000, 100, 25, 1, true, 12_500).allowed);
        assert!(
            !l.decide(b"j", 1000, 100, 25, 1, false, 12_500).allowed,
            "a peek sees the same"
        );
        assert!(l.consistent());
    }

    #[test]
    fn a_permit_leaving_frees_no_room_until_redis_shows_it() {
        let l = Ledger::new(100);
        // Limit 10, 2 instances: this one admitted its 5 locally at 1000 and 1100.
        for ms in [1000, 1000, 1000, 1100, 1100] {
            assert!(l.decide(b"k", 1000, 10, 5, 1, true, ms).allowed);
        }
        let g = l.begin_flush();
        assert_eq!(l.pending(g, 1150, false).len(), 1);
        l.flushed(b"k", g);
        // The repair read 10: the other instance, back on Redis, holds the other 5.
        l.seen(b"k", 1150, 1160, 10);
        let v = l.decide(b"k", 1000, 10, 5, 1, true, 2050);
        assert!(
            !v.allowed,
            "the 3 permits of 1000 left, but Redis held 10 at 1160: the others may have taken \
             their places: {v:?}"
        );
        assert_eq!(
            v.retry_after_ms, 110,
            "until what Redis held at 1160 leaves"
        );
        // A later read shows the room, and this instance's newer permits count on top of it.
        l.seen(b"k", 2060, 2070, 7);
        assert!(l.decide(b"k", 1000, 10, 5, 1, true, 2080).allowed);
        assert!(l.decide(b"k", 1000, 10, 5, 1, true, 2080).allowed);
        assert!(l.decide(b"k", 1000, 10, 5, 1, true, 2080).allowed);
        assert!(
            !l.decide(b"k", 1000, 10, 5, 1, true, 2080).allowed,
            "7 seen + 3 newer"
        );
        assert!(l.consistent());
    }

    #[test]
    fn keys_are_bounded() {
        let l = Ledger::new(64);
        for i in 0..10_000u32 {
            l.record(&i.to_be_bytes(), 1000, 1, 1, 1);
        }
        assert!(l.keys() <= 64 + SHARDS, "{} keys kept", l.keys());
    }

    #[test]
    fn keys_with_unwritten_permits_are_never_forgotten() {
        let l = Ledger::new(SHARDS); // one key per shard
        let (mut admitted, mut denied) = (Vec::new(), 0);
        for i in 0..1000u32 {
            let key = i.to_be_bytes();
            if l.decide(&key, 1000, 10, 10, 1, true, 100).allowed {
                admitted.push(key);
            } else {
                denied += 1;
            }
        }
        assert_eq!(admitted.len(), SHARDS, "one key per shard, then denials");
        assert_eq!(
            (denied, l.keys(), l.local_keys()),
            (1000 - SHARDS, SHARDS, SHARDS)
        );
        // A Redis reply for a new key does not push one out either.
        l.record(b"new", 1000, 100, 1, 1);
        assert_eq!(l.keys(), SHARDS);
        let g = l.begin_flush();
        let p = l.pending(g, 100, false);
        assert_eq!(p.len(), SHARDS, "every admitted key is written back");
        assert!(p.iter().all(|p| p.local == vec![(100, 1)]));
        for key in &admitted {
            l.flushed(key, g);
        }
        assert_eq!(l.local_keys(), 0);
        // Written back, they may go: a new key now has room.
        assert!(l.decide(b"later", 1000, 10, 10, 1, true, 200).allowed);
        assert_eq!(l.keys(), SHARDS);
        assert!(l.consistent());
    }

    #[test]
    fn the_count_of_keys_to_flush_follows_every_change() {
        let l = Ledger::new(SHARDS);
        l.record(b"a", 1000, 100, 1, 1);
        assert_eq!(
            (l.local_keys(), l.has_local()),
            (0, false),
            "after a Redis admission"
        );
        assert!(l.decide(b"a", 1000, 10, 10, 1, true, 150).allowed);
        assert_eq!(
            (l.local_keys(), l.has_local()),
            (1, true),
            "after a local admission"
        );
        assert!(l.decide(b"a", 1000, 10, 10, 1, true, 160).allowed);
        assert!(l.decide(b"a", 1000, 10, 10, 1, false, 170).allowed);
        assert_eq!(l.local_keys(), 1, "same key, and a peek adds nothing");
        let g = l.begin_flush();
        assert!(l.decide(b"b", 1000, 10, 10, 1, true, 180).allowed);
        assert_eq!(l.local_keys(), 2);
        l.flushed(b"a", g);
        assert_eq!(l.local_keys(), 1, "after a flush");
        l.flushed(b"b", g);
        assert_eq!(l.local_keys(), 1, "b's permit came after the flush began");
        // Permits that left the window unwritten need no writing: the next flush drops them.
        assert!(l.pending(l.begin_flush(), 5000, false).is_empty());
        assert_eq!(
            (l.local_keys(), l.has_local()),
            (0, false),
            "after they expired"
        );
        // Eviction: a clean key goes, and the count stays.
        for i in 0..(SHARDS as u32 * 8) {
            l.record(&i.to_be_bytes(), 1000, 6000, 1, 1);
        }
        assert!(l.decide(b"c", 1000, 10, 10, 1, true, 6000).allowed);
        for i in 0..(SHARDS as u32 * 8) {
            l.record(&(i + 1000).to_be_bytes(), 1000, 6000, 1, 1);
        }
        assert_eq!(l.local_keys(), 1, "after evictions");
        l.forget(b"c");
        assert_eq!(l.local_keys(), 0, "after forget");
        assert!(l.consistent());
    }

    #[test]
    fn entries_per_key_are_bounded_and_keep_their_permits() {
        let l = Ledger::new(1);
        for ms in 0..(MAX_ENTRIES as u64 * 3) {
            l.record(b"k", 1_000_000, ms + 1, 1, 0);
        }
        let v = l.decide(
            b"k",
            1_000_000,
            u64::MAX / 2,
            u64::MAX / 2,
            1,
            false,
            MAX_ENTRIES as u64 * 3,
        );
        assert_eq!(v.used, MAX_ENTRIES as u64 * 3);
        assert!(l.consistent());
    }

    #[test]
    fn merging_buckets_keeps_local_and_redis_permits_apart() {
        let l = Ledger::new(1);
        for ms in 1..=MAX_ENTRIES as u64 {
            l.record(b"k", 1_000_000, ms, 1, 0);
        }
        // Local permits, one bucket each: every push merges the oldest two, all Redis's.
        for ms in 1..=100u64 {
            assert!(
                l.decide(
                    b"k",
                    1_000_000,
                    u64::MAX / 2,
                    u64::MAX / 2,
                    1,
                    true,
                    MAX_ENTRIES as u64 + ms
                )
                .allowed
            );
        }
        let p = l.pending(l.begin_flush(), MAX_ENTRIES as u64 + 100, true);
        assert_eq!(
            p[0].local.iter().map(|b| b.1).sum::<u64>(),
            100,
            "exactly the local permits are sent as local"
        );
        assert_eq!(
            p[0].admitted.iter().map(|b| b.1).sum::<u64>(),
            MAX_ENTRIES as u64
        );
        assert!(l.consistent());
    }

    #[test]
    fn a_flush_marks_exactly_what_it_sent() {
        let l = Ledger::new(10);
        assert!(l.decide(b"k", 1000, 10, 10, 2, true, 100).allowed);
        let g = l.begin_flush();
        assert!(
            l.decide(b"k", 1000, 10, 10, 3, true, 100).allowed,
            "same ms, newer generation"
        );
        let p = l.pending(g, 100, false);
        assert_eq!(p[0].local, vec![(100, 2)]);
        l.flushed(b"k", g);
        assert!(
            l.has_local(),
            "the permits admitted after the flush began are still unsent"
        );
        let g2 = l.begin_flush();
        assert_eq!(l.pending(g2, 100, false)[0].local, vec![(100, 3)]);
        l.flushed(b"k", g2);
        assert!(!l.has_local());
        assert!(l.consistent());
    }
}
