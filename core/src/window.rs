//! The sliding window, written once for the in-process backend (`backend/memory.rs`) and the
//! local fallback's ledger (`ledger.rs`): a request of `cost` fits while the permits in
//! (now - window, now] plus `cost` stay within the limit.
//!
//! Buckets hold running totals, as the Lua script's do, so a window's count and a denied
//! request's retry time are each one binary search under the shard lock, not a scan. Each bucket
//! carries a tag: the ledger's flush generation (`T::default()`, 0, means Redis has the permits),
//! `()` for the memory backend. What to keep (the longest window seen, or the call's own) is the
//! caller's policy ([`Window::prune`]); so is a bound on buckets, past which the oldest merge into
//! a successor, which only ever counts permits longer, never shorter.

use std::collections::VecDeque;

use crate::backend::Verdict;

/// Running totals wrap here, as in the script (where they are doubles that must stay exact).
pub(crate) const MOD: u64 = 1 << 52;

/// Permits between two running totals (a later minus an earlier one).
fn between(later: u64, earlier: u64) -> u64 {
    (later + MOD - earlier) % MOD
}

#[derive(Debug, Clone, Copy)]
struct Bucket<T> {
    ms: u64,
    /// Permits admitted through this bucket, modulo [`MOD`].
    total: u64,
    tag: T,
}

/// One key's admitted permits: a bucket per millisecond (and tag) that admitted something,
/// oldest first.
#[derive(Debug, Clone)]
pub(crate) struct Window<T = ()> {
    buckets: VecDeque<Bucket<T>>,
    /// The running total just before the oldest stored bucket.
    base: u64,
    /// Buckets whose tag is not the default, and their permits: kept, not summed per call.
    tagged: usize,
    tagged_permits: u64,
}

impl<T> Default for Window<T> {
    fn default() -> Self {
        Window {
            buckets: VecDeque::new(),
            base: 0,
            tagged: 0,
            tagged_permits: 0,
        }
    }
}

/// One decision's request.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Rule {
    pub window_ms: u64,
    pub limit: u64,
    pub cost: u64,
    /// `false` for a peek: decided as if acquiring.
    pub consume: bool,
}

/// How much of the limit this window may hold: `budget`, and with `others` (permits held
/// elsewhere, as `(ms, permits)`: all counted at that time) within the limit. The memory backend
/// holds the whole limit ([`Share::whole`]); the ledger an instance's share.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Share {
    pub budget: u64,
    pub others: Option<(u64, u64)>,
    /// What Redis held in the window when last read while this window decided on its own
    /// ([`Seen`]).
    pub seen: Option<Seen>,
}

/// Redis's whole count for the key (this window's permits Redis had included), read by a repair
/// while the instance decided locally and Redis answered again: `held` permits, all counted
/// until `at + window`. A local decision then fits only if `held`, plus this window's permits
/// newer than `since` (which Redis may not have), plus the cost stay within the limit. A permit
/// of this window leaving it frees no room until Redis shows the room: instances back on Redis
/// take such a permit's place at once, and this one taking it too was the overshoot of a window
/// in which some instances had returned to Redis and others were still local.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Seen {
    pub since: u64,
    pub at: u64,
    pub held: u64,
}

impl Share {
    pub(crate) fn whole(limit: u64) -> Self {
        Share {
            budget: limit,
            others: None,
            seen: None,
        }
    }
}

impl<T: Copy + Ord + Default> Window<T> {
    pub(crate) fn is_empty(&self) -> bool {
        self.buckets.is_empty()
    }

    pub(crate) fn newest(&self) -> Option<u64> {
        self.buckets.back().map(|b| b.ms)
    }

    /// `now`, raised to the newest bucket's time: time never runs backwards for a window, so a
    /// bucket is never in the future.
    pub(crate) fn now(&self, now: u64) -> u64 {
        self.newest().map_or(now, |t| t.max(now))
    }

    fn total(&self) -> u64 {
        self.total_before(self.buckets.len())
    }

    /// The running total just before bucket `i`.
    fn total_before(&self, i: usize) -> u64 {
        if i == 0 {
            self.base
        } else {
            self.buckets[i - 1].total
        }
    }

    fn permits(&self, i: usize) -> u64 {
        between(self.buckets[i].total, self.total_before(i))
    }

    /// The first bucket inside (now - window, now].
    fn first_live(&self, now: u64, window: u64) -> usize {
        self.buckets.partition_point(|b| b.ms + window <= now)
    }

    /// Permits in (now - window, now].
    pub(crate) fn used(&self, now: u64, window: u64) -> u64 {
        between(
            self.total(),
            self.total_before(self.first_live(now, window)),
        )
    }

    /// Every stored permit, and those with a tag other than the default.
    pub(crate) fn stored(&self) -> u64 {
        between(self.total(), self.base)
    }

    pub(crate) fn tagged_permits(&self) -> u64 {
        self.tagged_permits
    }

    /// Whether any bucket has a tag other than the default.
    pub(crate) fn has_tagged(&self) -> bool {
        self.tagged > 0
    }

    /// How long until `need` of the permits in (now - window, now] have left it (`None`: they
    /// never hold that many).
    fn frees(&self, need: u64, now: u64, window: u64) -> Option<u64> {
        if need == 0 {
            return Some(0);
        }
        let e = self.first_live(now, window);
        let before = self.total_before(e);
        let j = self
            .buckets
            .partition_point(|b| b.ms + window <= now || between(b.total, before) < need);
        self.buckets.get(j).map(|b| b.ms + window - now)
    }

    /// How long until the newest permit in (now - window, now] leaves it (0: none is in it).
    fn reset_after(&self, now: u64, window: u64) -> u64 {
        self.newest()
            .filter(|&t| t + window > now)
            .map_or(0, |t| t + window - now)
    }

    /// The decision at `now` (already raised by [`Window::now`]): admitted if this window's
    /// permits plus `cost` stay within the budget, and with the others' within the limit. Writes
    /// nothing: an admission is [`Window::admit`]ted by the caller, after its own pruning.
    ///
    /// `used` counts this window's permits and the others' beyond the limit's room for the other
    /// shares; `retry_after_ms` is the least wait after which the same request fits if nothing
    /// else is admitted (a full window if it never can).
    pub(crate) fn decide(&self, now: u64, rule: &Rule, share: Share) -> Verdict {
        let Rule {
            window_ms: window,
            limit,
            cost,
            consume,
        } = *rule;
        let budget = share.budget;
        debug_assert!(budget <= limit, "a share is at most the whole limit");
        let used = self.used(now, window);
        // The others' permits still in the window, and when they leave it.
        let (others, others_leave) = match share.others {
            Some((t, n)) if t + window > now => (n, t + window - now),
            _ => (0, 0),
        };
        let counted = |own: u64| own + others.saturating_sub(limit.saturating_sub(budget));
        // Redis's last seen count, and this window's permits it may lack.
        let (seen, seen_leave) = match share.seen {
            Some(s) if s.at + window > now => (
                s.held + self.used(now, now.saturating_sub(s.since)),
                s.at + window - now,
            ),
            _ => (0, 0),
        };
        if used + cost <= budget && used + others + cost <= limit && seen + cost <= limit {
            let (used, reset_after_ms) = if consume {
                (used + cost, window)
            } else {
                (used, self.reset_after(now, window))
            };
            return Verdict {
                allowed: true,
                used: counted(used),
                retry_after_ms: 0,
                reset_after_ms,
                now_ms: now,
            };
        }
        let retry_after_ms = if cost > budget || cost > limit {
            window
        } else {
            // Each rule, once met, stays met (permits only leave): the request fits at the
            // later of the two. The limit's is met once enough of this window's permits leave
            // with the others still in, or once the others leave (then the budget's rule is the
            // stricter one, as budget <= limit).
            let frees = |need: u64| self.frees(need, now, window);
            let for_budget = frees((used + cost).saturating_sub(budget)).unwrap_or(window);
            let for_limit = frees((used + others + cost).saturating_sub(limit))
                .map_or(others_leave, |t| t.min(others_leave));
            let for_seen = if seen + cost > limit { seen_leave } else { 0 };
            for_budget.max(for_limit).max(for_seen).max(1)
        };
        Verdict {
            allowed: false,
            used: counted(used),
            retry_after_ms,
            reset_after_ms: self.reset_after(now, window),
            now_ms: now,
        }
    }

    /// Adds `permits` at `now` (not before the newest bucket) with `tag`, into the newest bucket
    /// if it has the same time and tag. Past `max_buckets`, two buckets merge into the newer one:
    /// a pair of the same tag (so a flush neither resends settled permits nor misses tagged
    /// ones), or, only if every neighbour differs (never seen: local and Redis admissions do not
    /// interleave bucket by bucket), the oldest two into the larger tag, which can only count
    /// permits twice, never drop them.
    pub(crate) fn admit(&mut self, now: u64, permits: u64, tag: T, max_buckets: usize) {
        debug_assert!(self.newest().is_none_or(|t| t <= now), "time ran backwards");
        let total = (self.total() + permits) % MOD;
        let untagged = T::default();
        if tag != untagged {
            self.tagged_permits += permits;
        }
        match self.buckets.back_mut() {
            Some(b) if b.ms == now && b.tag == tag => b.total = total,
            _ => {
                self.tagged += usize::from(tag != untagged);
                self.buckets.push_back(Bucket {
                    ms: now,
                    total,
                    tag,
                });
            }
        }
        if self.buckets.len() > max_buckets {
            let i = (0..self.buckets.len() - 1)
                .find(|&i| self.buckets[i].tag == self.buckets[i + 1].tag)
                .unwrap_or(0);
            let (first, second) = (self.buckets[i].tag, self.buckets[i + 1].tag);
            if first != untagged && second != untagged {
                self.tagged -= 1;
            } else if first != second {
                // The untagged half becomes tagged.
                let half = if first == untagged { i } else { i + 1 };
                self.tagged_permits += self.permits(half);
            }
            // The next bucket's running total already counts the removed one's permits.
            self.buckets.remove(i);
            self.buckets[i].tag = first.max(second);
        }
    }

    /// Forgets the buckets that left (now - window, now].
    pub(crate) fn prune(&mut self, now: u64, window: u64) {
        while let Some(&b) = self.buckets.front().filter(|b| b.ms + window <= now) {
            if b.tag != T::default() {
                self.tagged -= 1;
                self.tagged_permits -= between(b.total, self.base);
            }
            self.base = b.total;
            self.buckets.pop_front();
        }
    }

    /// Gives the default tag to the buckets whose tag `settles`.
    pub(crate) fn settle(&mut self, settles: impl Fn(T) -> bool) {
        for i in 0..self.buckets.len() {
            let tag = self.buckets[i].tag;
            if tag != T::default() && settles(tag) {
                self.tagged -= 1;
                self.tagged_permits -= self.permits(i);
                self.buckets[i].tag = T::default();
            }
        }
    }

    /// Every bucket, oldest first: `(ms, permits, tag)`.
    pub(crate) fn buckets(&self) -> impl Iterator<Item = (u64, u64, T)> + Clone + '_ {
        (0..self.buckets.len()).map(|i| {
            let b = self.buckets[i];
            (b.ms, self.permits(i), b.tag)
        })
    }

    /// Whether the kept counts match the buckets.
    #[cfg(test)]
    pub(crate) fn consistent(&self) -> bool {
        let tagged = self.buckets().filter(|b| b.2 != T::default());
        self.tagged == tagged.clone().count()
            && self.tagged_permits == tagged.map(|b| b.1).sum::<u64>()
            && self.stored() == self.buckets().map(|b| b.1).sum::<u64>()
    }
}

#[cfg(test)]
#[path = "window_tests.rs"]
mod tests;
