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
//! Composite calls (`composite.rs`). A composite call is denied if any one of its rules is: its
//! phase 1 decides each rule exactly like a peek of its cost, and a denied call takes nothing. So
//! a rule an entry covers (its Redis key, as the call names it, grouped or not) proves the whole
//! call denied until that entry's deadline, whatever the other rules say, and the call is denied
//! here with no Redis call ([`Denials::check_all`]). The rules' denials in a composite answer are
//! learnt like any other ([`Denials::learn_all`]): each is what a single call of that rule would
//! have been told. The decision's other rules (those no entry denies) need figures too: the
//! answer's verdict for each of them is kept beside the entries ([`Seen`]), aged like a replayed
//! denial (`used` as Redis last said it) and kept no longer than the answer's longest denial; a
//! call with a rule that has neither an entry nor such a verdict goes to Redis. Nothing here ever
//! admits, and the call's `retry_after_ms` is the longest of its replayed denials, each at least
//! what Redis would say now (see above); a denying rule the cache does not know can only make the
//! true wait longer, never shorter.
//!
//! Bounded: at most `max_keys` keys (least recently used forgotten), per fork generation like the
//! rest of an instance's state (it lives in `redis_path::Instance`).

use std::num::NonZeroUsize;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use lru::LruCache;

use crate::backend::{Request, Verdict};
use crate::clock::Clock;
use crate::composite::Planned;
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

impl Until {
    /// Whether the deadline is still ahead (`None` for a client-clock deadline without a clock).
    fn holds(&self, clock: Option<&dyn Clock>) -> Option<bool> {
        match (self, clock) {
            (Until::Mono(until), _) => Some(Instant::now() < *until),
            (Until::Clock(until), Some(c)) => Some(c.now_ms() < *until),
            (Until::Clock(_), None) => None,
        }
    }
}

/// A rule of a denied composite call that did not deny, as Redis answered it: replayed for that
/// rule beside a denial from the same answer (same `sent`), until `until` (the answer's longest
/// denial), unless this limiter admits on the key meanwhile ([`Denials::admitted`]).
#[derive(Debug, Clone, Copy)]
struct Seen {
    limit: u64,
    window_ms: u64,
    cost: u64,
    verdict: Verdict,
    until: Until,
    sent: Instant,
    received: Instant,
}

impl Seen {
    /// The verdict aged by the time since Redis gave it, if it is still kept.
    fn replay(&self, clock: Option<&dyn Clock>) -> Option<Verdict> {
        if !self.until.holds(clock)? {
            return None;
        }
        let v = self.verdict;
        let elapsed = match (self.until, clock) {
            (Until::Clock(_), Some(c)) => c.now_ms().saturating_sub(v.now_ms),
            _ => self.received.elapsed().as_millis() as u64,
        };
        // Empty by now if nothing was admitted since: as a replayed denial's `used` assumes.
        let emptied = v.reset_after_ms <= elapsed;
        Some(Verdict {
            allowed: v.allowed,
            used: if emptied { 0 } else { v.used },
            retry_after_ms: 0,
            reset_after_ms: v.reset_after_ms.saturating_sub(elapsed),
            now_ms: v.now_ms + elapsed,
        })
    }
}

/// One shard: its keys, least recently used first out.
struct Shard {
    entries: LruCache<Vec<u8>, Entry>,
    /// Per key, the verdicts of its rules that did not deny in denied composite calls.
    seen: LruCache<Vec<u8>, Vec<Seen>>,
}

pub(crate) struct Denials {
    shards: Shards<Shard>,
    /// Entries held (so that a limiter with none skips the lookup's lock and hash).
    len: AtomicUsize,
    /// Keys with kept verdicts ([`Seen`]), likewise for [`Denials::admitted`].
    seen_len: AtomicUsize,
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
                seen: LruCache::new(cap),
            }),
            len: AtomicUsize::new(0),
            seen_len: AtomicUsize::new(0),
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
        let (v, _) = self.replay(key, req, clock)?;
        self.hits.fetch_add(1, Ordering::Relaxed);
        Some(v)
    }

    /// A denial of a composite call from the cache: one verdict per rule of `rules` (rule `i` on
    /// `keys[rules[i].key]`, its Redis key as the call names it), if an entry covers at least one
    /// rule and every other rule has an entry or a kept verdict ([`Seen`]); else `None` (ask
    /// Redis). Counts one hit per call.
    pub(crate) fn check_all(
        &self,
        keys: &[&[u8]],
        rules: &[Planned],
        clock: Option<&dyn Clock>,
    ) -> Option<Vec<Verdict>> {
        if self.len.load(Ordering::Relaxed) == 0 {
            return None;
        }
        let mut out = Vec::with_capacity(rules.len());
        // The answers the replayed denials came from: a kept verdict must be from one of them.
        let mut answers: Vec<Instant> = Vec::new();
        let mut seen: Vec<Instant> = Vec::new();
        for r in rules {
            let key = keys[r.key];
            let req = Request {
                key,
                limit: r.limit,
                window_ms: r.window_ms,
                cost: r.cost,
                consume: true,
            };
            if let Some((v, sent)) = self.replay(key, &req, clock) {
                answers.push(sent);
                out.push(v);
                continue;
            }
            let mut shard = self.shards.get(key);
            let kept = shard
                .seen
                .get(key)?
                .iter()
                .find(|s| (s.limit, s.window_ms, s.cost) == (r.limit, r.window_ms, r.cost))?;
            out.push(kept.replay(clock)?);
            seen.push(kept.sent);
        }
        if answers.is_empty() || seen.iter().any(|sent| !answers.contains(sent)) {
            return None;
        }
        self.hits.fetch_add(1, Ordering::Relaxed);
        Some(out)
    }

    /// The entry's denial of `req` on `key`, aged, and when its request was sent, if one covers
    /// it (an expired one is dropped).
    fn replay(
        &self,
        key: &[u8],
        req: &Request<'_>,
        clock: Option<&dyn Clock>,
    ) -> Option<(Verdict, Instant)> {
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
        let v = entry.verdict;
        let aged = Verdict {
            allowed: false,
            used: v.used,
            retry_after_ms: v.retry_after_ms.saturating_sub(elapsed).max(1),
            reset_after_ms: v.reset_after_ms.saturating_sub(elapsed).max(1),
            now_ms: v.now_ms + elapsed,
        };
        Some((aged, entry.sent))
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

    /// Learns from a composite call's answer (`verdicts[i]` for rule `i`, on `keys[rules[i].key]`),
    /// sent at `sent` when the reset epoch was `epoch`: each denial as [`Denials::learn`] does,
    /// and, if the call was denied, the other rules' verdicts, kept as long as its longest denial.
    pub(crate) fn learn_all(
        &self,
        keys: &[&[u8]],
        rules: &[Planned],
        verdicts: &[Verdict],
        sent: Instant,
        epoch: u64,
        clock: Option<&dyn Clock>,
    ) {
        let Some(longest) = verdicts
            .iter()
            .filter(|v| !v.allowed)
            .map(|v| v.retry_after_ms)
            .max()
        else {
            return;
        };
        let received = Instant::now();
        for (r, v) in rules.iter().zip(verdicts) {
            let key = keys[r.key];
            let req = Request {
                key,
                limit: r.limit,
                window_ms: r.window_ms,
                cost: r.cost,
                consume: true,
            };
            if !v.allowed {
                self.learn(key, &req, v, sent, epoch, clock);
                continue;
            }
            let until = match clock {
                Some(_) => Until::Clock(v.now_ms + longest),
                None => Until::Mono(sent + Duration::from_millis(longest)),
            };
            let seen = Seen {
                limit: r.limit,
                window_ms: r.window_ms,
                cost: r.cost,
                verdict: *v,
                until,
                sent,
                received,
            };
            let mut shard = self.shards.get(key);
            if self.resets.load(Ordering::Acquire) != epoch {
                return;
            }
            if !shard.seen.contains(key) {
                // `push` hands back another key when it evicts one: the count stays.
                if shard.seen.push(key.to_vec(), Vec::new()).is_none() {
                    self.seen_len.fetch_add(1, Ordering::Relaxed);
                }
            }
            let list = shard.seen.get_mut(key).expect("just put");
            let same = |s: &Seen| (s.limit, s.window_ms, s.cost) == (r.limit, r.window_ms, r.cost);
            match list.iter_mut().find(|s| same(s)) {
                Some(old) if old.sent <= sent => *old = seen,
                Some(_) => {}
                None => {
                    // A key's rules in one call are at most MAX_RULES; more kinds than that on
                    // one key are rare: the oldest goes.
                    if list.len() >= crate::composite::MAX_RULES {
                        list.remove(0);
                    }
                    list.push(seen);
                }
            }
        }
    }

    /// Forgets `key` (a reset through this limiter) and refuses replies already on their way.
    pub(crate) fn forget(&self, key: &[u8]) {
        self.resets.fetch_add(1, Ordering::AcqRel);
        let mut shard = self.shards.get(key);
        if shard.entries.pop(key).is_some() {
            self.len.fetch_sub(1, Ordering::Relaxed);
        }
        if shard.seen.pop(key).is_some() {
            self.seen_len.fetch_sub(1, Ordering::Relaxed);
        }
    }

    /// This limiter admitted on `key`: the verdicts kept for it no longer say what Redis would.
    pub(crate) fn admitted(&self, key: &[u8]) {
        if self.seen_len.load(Ordering::Relaxed) == 0 {
            return;
        }
        let mut shard = self.shards.get(key);
        if shard.seen.pop(key).is_some() {
            self.seen_len.fetch_sub(1, Ordering::Relaxed);
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

    fn planned(key: usize, limit: u64, window_ms: u64, cost: u64) -> Planned {
        Planned {
            key,
            limit,
            window_ms,
            cost,
        }
    }

    fn allowed(used: u64) -> Verdict {
        Verdict {
            allowed: true,
            used,
            retry_after_ms: 0,
            reset_after_ms: 900,
            now_ms: 0,
        }
    }

    #[test]
    fn a_composite_call_is_denied_only_with_a_covering_entry_and_one_answers_figures() {
        let d = Denials::new(10);
        let keys: [&[u8]; 2] = [b"a", b"b"];
        let rules = [planned(0, 10, 1000, 1), planned(1, 50, 1000, 1)];
        let sent = Instant::now();
        d.learn_all(&keys, &rules, &[denial(0, 5000), allowed(3)], sent, 0, None);
        let v = d.check_all(&keys, &rules, None).expect("a covers the call");
        assert_eq!(
            (v[0].allowed, v[0].used, v[1].allowed, v[1].used),
            (false, 7, true, 3)
        );
        assert_eq!(d.hits.load(Ordering::Relaxed), 1);
        // A rule with no figures (another limit on b): ask Redis.
        assert!(d
            .check_all(&keys, &[rules[0], planned(1, 40, 1000, 1)], None)
            .is_none());
        // A newer answer's denial on a: b's figures are from an older answer, so ask Redis.
        let later = sent + Duration::from_millis(1);
        d.learn(b"a", &req(10, 1000, 1), &denial(0, 5000), later, 0, None);
        assert!(d.check_all(&keys, &rules, None).is_none());
        // Figures that prove nothing on their own never deny.
        d.forget(b"a");
        assert!(d.check_all(&keys, &rules, None).is_none());
    }

    #[test]
    fn an_admission_or_a_reset_drops_the_kept_figures() {
        let d = Denials::new(10);
        let keys: [&[u8]; 2] = [b"a", b"b"];
        let rules = [planned(0, 10, 1000, 1), planned(1, 50, 1000, 1)];
        let learn = || {
            d.learn_all(
                &keys,
                &rules,
                &[denial(0, 5000), allowed(3)],
                Instant::now(),
                d.epoch(),
                None,
            )
        };
        learn();
        assert!(d.check_all(&keys, &rules, None).is_some());
        d.admitted(b"b");
        assert!(d.check_all(&keys, &rules, None).is_none());
        learn();
        d.forget(b"b");
        assert!(d.check_all(&keys, &rules, None).is_none());
        assert_eq!(d.seen_len.load(Ordering::Relaxed), 0);
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
