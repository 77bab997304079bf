//! The local denial cache: when Redis denies a request and says it fits only after
//! `retry_after_ms`, this instance denies the same key again until then without asking Redis.
//!
//! Why that is exact: with the same window, a window's count at a later instant can only be
//! higher than Redis computed if something is admitted meanwhile, and admissions only push the
//! fit time further out; so a request of at least the denied cost, under a limit at most the
//! denied one, cannot fit before Redis's `now + retry_after_ms`. Only a `reset` of the key (or a
//! lost write: a failover, `FLUSHALL`) can make it fit earlier. A `reset` through this limiter
//! clears the entry, and a reply to a request sent before a reset through this limiter is not
//! cached; a reset by anyone else is the documented exception.
//!
//! Which rules an entry answers: the same key and the same `window_ms` (a different window counts
//! a different span, and the script keeps history for the longest window seen, so nothing from
//! one window's count is proven for another), a `limit` no higher and a `cost` no lower than the
//! denied request's (a denial for cost c says nothing about cost c' < c: those go to Redis).
//!
//! The deadline's clock. On Redis TIME (the default) it is this host's monotonic clock from the
//! instant the request was SENT: Redis read its clock after that instant, so `sent + retry_after`
//! is no later than Redis's own `now + retry_after`. Two corrections keep it from ever being
//! later: 1 ms, because Redis's `now_ms` is its clock rounded down (the real instant may be up to
//! 1 ms later than `now_ms` says), and 1 ms per second of `retry_after_ms` for clocks running at
//! different rates (NTP slews a clock by at most 0.5 ms per second). A Redis clock that steps
//! forward makes everything on it, this included, happen early. With a client clock
//! (`client_clock`) decisions are made on that clock, so the deadline is on it too, exactly.
//!
//! Bounded: at most `max_keys` keys (least recently used forgotten), per fork generation like the
//! rest of an instance's state (it lives in `redis_path::Instance`).

use std::num::NonZeroUsize;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use lru::LruCache;

use crate::backend::{Request, Verdict};
use crate::clock::Clock;
use crate::keyed::{Shards, SHARDS};

/// Until when an entry denies.
#[derive(Debug, Clone, Copy)]
enum Until {
    /// This host's monotonic clock (decisions on Redis TIME).
    Mono(Instant),
    /// The client clock's milliseconds (decisions on `client_clock`).
    Clock(u64),
}

/// A denial Redis made, and the rule it was made under.
#[derive(Debug, Clone, Copy)]
struct Entry {
    limit: u64,
    window_ms: u64,
    cost: u64,
    /// The denial as Redis gave it.
    verdict: Verdict,
    until: Until,
    /// When the request was sent (the deadline counts from here) and its reply arrived (the
    /// replay's clock counts from here: Redis decided in between).
    sent: Instant,
    received: Instant,
}

impl Entry {
    fn covers(&self, req: &Request<'_>) -> bool {
        req.window_ms == self.window_ms && req.limit <= self.limit && req.cost >= self.cost
    }

    /// The milliseconds elapsed since Redis's decision (at most), if the entry still denies.
    fn elapsed(&self, clock: Option<&dyn Clock>) -> Option<u64> {
        let v = &self.verdict;
        match (self.until, clock) {
            (Until::Mono(until), _) => {
                let now = Instant::now();
                if now >= until {
                    return None;
                }
                // Since the reply arrived, which is after Redis's `now`: the replayed `now_ms` is
                // at most Redis's clock, and `now_ms + retry_after_ms` is the instant Redis named
                // (so `retry_after_ms` is at most a round trip longer than the true wait, and a
                // caller that waits it finds the entry gone).
                Some((now - self.received).as_millis() as u64)
            }
            (Until::Clock(until), Some(c)) => {
                let now = c.now_ms().max(v.now_ms);
                (now < until).then(|| now - v.now_ms)
            }
            (Until::Clock(_), None) => None,
        }
    }
}

/// One shard: its keys, least recently used first out.
struct Shard {
    entries: LruCache<Vec<u8>, Entry>,
}

pub(crate) struct Denials {
    shards: Shards<Shard>,
    /// Entries held (so that a limiter with none skips the lookup's lock and hash).
    len: AtomicUsize,
    /// Bumped by every reset through this limiter: a reply to a request sent before a reset
    /// completed is not cached.
    resets: AtomicU64,
    /// Denials answered from the cache.
    pub hits: AtomicU64,
}

impl Denials {
    pub(crate) fn new(max_keys: usize) -> Self {
        let cap = NonZeroUsize::new(max_keys.div_ceil(SHARDS).max(1)).expect("at least 1");
        Denials {
            shards: Shards::new(|| Shard {
                entries: LruCache::new(cap),
            }),
            len: AtomicUsize::new(0),
            resets: AtomicU64::new(0),
            hits: AtomicU64::new(0),
        }
    }

    /// What a request's reply may be cached against: take it before sending.
    pub(crate) fn epoch(&self) -> u64 {
        self.resets.load(Ordering::Acquire)
    }

    /// A denial for `req` on `key` from the cache, with `retry_after_ms`, `reset_after_ms` and
    /// `now_ms` moved on by the time elapsed and `used` as Redis last said.
    pub(crate) fn check(
        &self,
        key: &[u8],
        req: &Request<'_>,
        clock: Option<&dyn Clock>,
    ) -> Option<Verdict> {
        if self.len.load(Ordering::Relaxed) == 0 {
            return None;
        }
        let mut shard = self.shards.get(key);
        let entry = *shard.entries.get(key)?;
        let Some(elapsed) = entry.elapsed(clock) else {
            shard.entries.pop(key);
            self.len.fetch_sub(1, Ordering::Relaxed);
            return None;
        };
        drop(shard);
        if !entry.covers(req) {
            return None;
        }
        self.hits.fetch_add(1, Ordering::Relaxed);
        let v = entry.verdict;
        Some(Verdict {
            allowed: false,
            used: v.used,
            retry_after_ms: v.retry_after_ms.saturating_sub(elapsed).max(1),
            reset_after_ms: v.reset_after_ms.saturating_sub(elapsed).max(1),
            now_ms: v.now_ms + elapsed,
        })
    }

    /// Caches Redis's denial `v` of `req`, a request sent at `sent` when the reset epoch was
    /// `epoch`; anything else is ignored.
    pub(crate) fn learn(
        &self,
        key: &[u8],
        req: &Request<'_>,
        v: &Verdict,
        sent: Instant,
        epoch: u64,
        clock: Option<&dyn Clock>,
    ) {
        if v.allowed || v.retry_after_ms == 0 {
            return;
        }
        let until = match clock {
            Some(_) => Until::Clock(v.now_ms + v.retry_after_ms),
            None => {
                let safe = v
                    .retry_after_ms
                    .saturating_sub(1 + v.retry_after_ms.div_ceil(1000));
                if safe == 0 {
                    return;
                }
                Until::Mono(sent + Duration::from_millis(safe))
            }
        };
        let entry = Entry {
            limit: req.limit,
            window_ms: req.window_ms,
            cost: req.cost,
            verdict: *v,
            until,
            sent,
            received: Instant::now(),
        };
        let mut shard = self.shards.get(key);
        // Checked under the shard's lock, which `forget` takes after bumping the epoch: a reply
        // older than a reset either sees the bump here or is removed by `forget`.
        if self.resets.load(Ordering::Acquire) != epoch {
            return;
        }
        if let Some(old) = shard.entries.peek(key) {
            // Keep the entry that was sent last: it saw at least everything the other one did.
            if old.sent > sent {
                return;
            }
        }
        let before = shard.entries.len();
        shard.entries.put(key.to_vec(), entry);
        if shard.entries.len() > before {
            self.len.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Forgets `key` (a reset through this limiter) and refuses replies already on their way.
    pub(crate) fn forget(&self, key: &[u8]) {
        self.resets.fetch_add(1, Ordering::AcqRel);
        let mut shard = self.shards.get(key);
        if shard.entries.pop(key).is_some() {
            self.len.fetch_sub(1, Ordering::Relaxed);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::ManualClock;

    fn req(limit: u64, window_ms: u64, cost: u64) -> Request<'static> {
        Request {
            key: b"k",
            limit,
            window_ms,
            cost,
            consume: true,
        }
    }

    fn denial(now_ms: u64, retry_after_ms: u64) -> Verdict {
        Verdict {
            allowed: false,
            used: 7,
            retry_after_ms,
            reset_after_ms: retry_after_ms + 100,
            now_ms,
        }
    }

    #[test]
    fn holds_at_most_max_keys() {
        let d = Denials::new(64);
        for i in 0..10_000u32 {
            let key = i.to_be_bytes();
            d.learn(
                &key,
                &req(10, 1000, 1),
                &denial(0, 5000),
                Instant::now(),
                0,
                None,
            );
        }
        let held: usize = d.shards.iter().map(|s| s.entries.len()).sum();
        assert!(held <= 64, "{held}");
        assert_eq!(d.len.load(Ordering::Relaxed), held);
    }

    #[test]
    fn answers_only_rules_it_proves() {
        let d = Denials::new(10);
        d.learn(
            b"k",
            &req(10, 1000, 3),
            &denial(0, 5000),
            Instant::now(),
            0,
            None,
        );
        for (r, hit) in [
            (req(10, 1000, 3), true),
            (req(10, 1000, 4), true),
            (req(9, 1000, 3), true),
            (req(10, 1000, 2), false),
            (req(11, 1000, 3), false),
            (req(10, 999, 3), false),
            (req(10, 1001, 3), false),
        ] {
            assert_eq!(d.check(b"k", &r, None).is_some(), hit, "{r:?}");
        }
        assert!(d.check(b"other", &req(10, 1000, 3), None).is_none());
        assert_eq!(d.hits.load(Ordering::Relaxed), 3);
    }

    #[test]
    fn a_short_retry_is_not_worth_a_margin_and_is_not_cached() {
        let d = Denials::new(10);
        d.learn(
            b"k",
            &req(10, 1000, 1),
            &denial(0, 2),
            Instant::now(),
            0,
            None,
        );
        assert!(d.check(b"k", &req(10, 1000, 1), None).is_none());
    }

    #[test]
    fn a_reply_older_than_a_reset_is_refused_and_a_reset_forgets() {
        let d = Denials::new(10);
        let epoch = d.epoch();
        d.forget(b"k");
        d.learn(
            b"k",
            &req(10, 1000, 1),
            &denial(0, 5000),
            Instant::now(),
            epoch,
            None,
        );
        assert!(d.check(b"k", &req(10, 1000, 1), None).is_none());
        d.learn(
            b"k",
            &req(10, 1000, 1),
            &denial(0, 5000),
            Instant::now(),
            d.epoch(),
            None,
        );
        assert!(d.check(b"k", &req(10, 1000, 1), None).is_some());
        d.forget(b"k");
        assert!(d.check(b"k", &req(10, 1000, 1), None).is_none());
        assert_eq!(d.len.load(Ordering::Relaxed), 0);
    }

    #[test]
    fn on_a_client_clock_the_deadline_is_that_clocks() {
        let d = Denials::new(10);
        let clock = ManualClock::new(1_000);
        let c: Option<&dyn Clock> = Some(&clock);
        d.learn(
            b"k",
            &req(10, 1000, 1),
            &denial(1_000, 300),
            Instant::now(),
            0,
            c,
        );
        clock.advance(299);
        let v = d.check(b"k", &req(10, 1000, 1), c).expect("still denied");
        assert_eq!(
            (v.now_ms, v.retry_after_ms, v.reset_after_ms, v.used),
            (1_299, 1, 101, 7)
        );
        clock.advance(1);
        assert!(d.check(b"k", &req(10, 1000, 1), c).is_none());
    }
}
