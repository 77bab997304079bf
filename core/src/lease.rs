//! Leases (the design's L2, made exact): for a hot key, an instance takes `k` permits from Redis
//! in one script call and grants them locally (mode `lease`) for `lease_ms`.
//!
//! Why it is exact: the script counts a lease granted at Redis time `t` in every span of the
//! window that meets `[t, t + lease_ms]` (see `lua/sliding_window.lua`, convention 3), so a grant
//! at any instant of that lifetime never makes a span hold more than the limit. The instance only
//! grants while it is sure Redis time has not passed `t + lease_ms`: Redis read `t` after this
//! instance sent the call, so Redis time now is at most `t + 1 + (time since sending)` (TIME is
//! truncated to the ms); leases are used while that is below the end, `SAFETY_MS` earlier. A
//! lease decision's `now_ms` is `t + (time since the reply)`, inside `[t, t + lease_ms)`, and
//! never later than the time of the refund that follows.
//!
//! The lease size follows this instance's demand, capped by the script at a fair share of what is
//! left, `(limit - used) / (2 * (holders + 1))`; below `MIN_LEASE` no lease is granted and the
//! plain per-request path decides (for `lease_ms`, then the instance asks again), so the last
//! permits of a window are decided by Redis, one request at a time.
//!
//! Renewing ahead: a hot key's lease is renewed before it runs out (a quarter of its permits or
//! of its life left), in the background, while the old lease keeps granting, so a request on a
//! hot key rarely waits for Redis. The new lease is taken under this instance's other lease slot
//! (the HASH field `<instance id>` or `<instance id>/1`, see `slot_id`), so both count in full in
//! Redis while both live (the script sees the other slot as one more holder, and sizes the new
//! lease's fair share with it counted); when the new one arrives the old one stops granting and is
//! returned (its `used`, final by then, stays counted as a bucket). Exactness is the same as for
//! any two holders.
//!
//! A limit changed online (limits are per call): a lease is used only by requests under the rule
//! it was taken under; a request under another rule returns it (its used part stays counted) and
//! asks again under the new one. So every decision is made under the limit its call passes,
//! counting every live lease in full, whatever limit that lease was taken under: once callers pass
//! a lower limit, every span whose last admission was decided under it holds at most that limit;
//! permits admitted under the higher limit before are not taken back, and a lease taken under it
//! counts in full until returned or aged out (`tests/leases.rs` checks this span by span).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::backend::redis::LeaseReply;
use crate::backend::{Request, Verdict};
use crate::error::{Error, Result};

/// The smallest lease worth a call; below it the plain path decides.
pub(crate) const MIN_LEASE: u64 = 2;
/// How much earlier than its end (on this instance's estimate of Redis time) a lease stops being
/// used: the TIME truncation (1 ms) and clock-rate drift over a lease's life.
const SAFETY_MS: u64 = 2;
/// Most keys a limiter tracks for leases; beyond that, new keys take the plain path.
const MAX_KEYS: usize = 10_000;
/// A lease is renewed ahead once no more than 1/AHEAD of its permits or of its life is left.
const AHEAD: u64 = 4;

/// The `leases` option.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Leases {
    /// Every decision is a script call (the default).
    Off,
    /// A key leases once this instance's demand for it passes `lease_hot_rate`, and stops when it
    /// falls below half of that.
    Auto,
    /// Every key leases.
    On,
}

impl Leases {
    pub fn as_str(self) -> &'static str {
        match self {
            Leases::Off => "off",
            Leases::Auto => "auto",
            Leases::On => "on",
        }
    }

    pub fn parse(name: &'static str, text: &str) -> Result<Leases> {
        match text {
            "off" => Ok(Leases::Off),
            "auto" => Ok(Leases::Auto),
            "on" => Ok(Leases::On),
            _ => Err(Error::invalid(
                name,
                format!("is {text:?}; must be off, auto or on"),
            )),
        }
    }
}

/// A lease this instance holds for one key.
#[derive(Debug, Clone, Copy)]
struct Active {
    seq: u64,
    /// The lease slot it was taken under (0 or 1): this instance's HASH field in Redis.
    slot: u8,
    window_ms: u64,
    limit: u64,
    granted: u64,
    used: u64,
    /// When the call that took it was sent, and when its reply came.
    sent: Instant,
    got: Instant,
    /// The script's now at the grant, the window's count with the lease, and its reset_after.
    t: u64,
    used_at_grant: u64,
    reset_after_ms: u64,
}

#[derive(Debug)]
struct Holder {
    lease: Option<Active>,
    renewing: bool,
    /// No new lease before this (the last ask was refused: the window is nearly full).
    quiet_until: Option<Instant>,
    hot: bool,
    /// Permits asked for this key since `since`: the demand the next lease is sized from.
    since: Instant,
    demand: u64,
}

/// What a lease call returns, and asks for.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Renewal {
    /// The lease slot the call is made under: the new lease's, and the returned one's (a call
    /// that returns a lease and takes one uses the same slot for both).
    pub slot: u8,
    pub seq: u64,
    pub old_seq: u64,
    pub old_used: u64,
    pub old_granted: u64,
    /// The returned lease's rule: a refund-only call is made under it.
    pub old_window_ms: u64,
    pub old_limit: u64,
    pub want: u64,
    pub min: u64,
}

pub(crate) enum Step {
    /// Granted from a lease.
    Lease(Verdict),
    /// Granted from a lease that is nearly used up or nearly over: take the next one now, in the
    /// background, under the other slot (the old one keeps granting until it arrives).
    LeaseAhead(Verdict, Renewal),
    /// Ask Redis for a lease (returning the old one), then try again.
    Renew(Renewal),
    /// Decide by the plain path.
    Plain,
}

#[derive(Debug, Default)]
pub(crate) struct Counters {
    pub decisions: AtomicU64,
    pub taken: AtomicU64,
    pub refunds: AtomicU64,
    pub leased_permits: AtomicU64,
    pub refunded_permits: AtomicU64,
}

/// One instance's leases, per Redis key.
#[derive(Debug)]
pub(crate) struct Table {
    pub mode: Leases,
    pub lease_ms: u64,
    hot_rate: u64,
    keys: Mutex<HashMap<Vec<u8>, Holder>>,
    next_seq: AtomicU64,
    pub counters: Counters,
}

impl Table {
    pub(crate) fn new(mode: Leases, lease_ms: u64, hot_rate: u64) -> Self {
        Table {
            mode,
            lease_ms,
            hot_rate,
            keys: Mutex::new(HashMap::new()),
            next_seq: AtomicU64::new(1),
            counters: Counters::default(),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<Vec<u8>, Holder>> {
        self.keys.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn live(&self, a: &Active, now: Instant) -> bool {
        (now.saturating_duration_since(a.sent).as_millis() as u64) + SAFETY_MS < self.lease_ms
    }

    /// A lease decision for `req`, or what to do instead. Only for acquires.
    pub(crate) fn take(&self, key: &[u8], req: &Request<'_>, now: Instant) -> Step {
        let mut keys = self.lock();
        if !keys.contains_key(key) {
            if keys.len() >= MAX_KEYS {
                keys.retain(|_, h| h.lease.is_some() || h.renewing);
                if keys.len() >= MAX_KEYS {
                    return Step::Plain;
                }
            }
            keys.insert(
                key.to_vec(),
                Holder {
                    lease: None,
                    renewing: false,
                    quiet_until: None,
                    hot: self.mode == Leases::On,
                    since: now,
                    demand: 0,
                },
            );
        }
        let h = keys.get_mut(key).expect("inserted above");
        h.demand += req.cost;
        if let Some(a) = &mut h.lease {
            if a.window_ms == req.window_ms
                && a.limit == req.limit
                && a.used + req.cost <= a.granted
                && self.live(a, now)
            {
                a.used += req.cost;
                let v = verdict(a, now);
                self.counters.decisions.fetch_add(1, Ordering::Relaxed);
                let age = now.saturating_duration_since(a.sent).as_millis() as u64;
                let ahead = h.hot
                    && !h.renewing
                    && ((a.granted - a.used) * AHEAD <= a.granted
                        || (age + SAFETY_MS) * AHEAD >= self.lease_ms * (AHEAD - 1));
                if !ahead {
                    return Step::Lease(v);
                }
                let slot = 1 - a.slot;
                let elapsed = now.saturating_duration_since(h.since).as_millis().max(1) as u64;
                let want = want(h.demand, elapsed, self.lease_ms, req);
                h.renewing = true;
                h.since = now;
                h.demand = 0;
                return Step::LeaseAhead(
                    v,
                    Renewal {
                        slot,
                        seq: self.next_seq.fetch_add(1, Ordering::Relaxed),
                        old_seq: 0,
                        old_used: 0,
                        old_granted: 0,
                        old_window_ms: req.window_ms,
                        old_limit: req.limit,
                        want,
                        min: MIN_LEASE.max(req.cost),
                    },
                );
            }
        }
        if h.renewing {
            return Step::Plain;
        }
        let elapsed = now.saturating_duration_since(h.since).as_millis().max(1) as u64;
        // Permits per second this instance asked for this key since the last lease call.
        let rate = h.demand.saturating_mul(1000) / elapsed;
        if self.mode == Leases::Auto && elapsed >= self.lease_ms.max(100) {
            if !h.hot && rate >= self.hot_rate {
                h.hot = true;
            } else if h.hot && rate < self.hot_rate / 2 {
                h.hot = false;
            } else if !h.hot {
                // A fresh measurement period.
                h.since = now;
                h.demand = 0;
            }
        }
        if h.lease.is_none() && (!h.hot || h.quiet_until.is_some_and(|t| now < t)) {
            return Step::Plain;
        }
        let old = h.lease.take();
        let want = if h.hot {
            want(h.demand, elapsed, self.lease_ms, req)
        } else {
            0
        };
        h.renewing = true;
        h.since = now;
        h.demand = 0;
        Step::Renew(Renewal {
            slot: old.map_or(0, |a| a.slot),
            seq: if h.hot {
                self.next_seq.fetch_add(1, Ordering::Relaxed)
            } else {
                0
            },
            old_seq: old.map_or(0, |a| a.seq),
            old_used: old.map_or(0, |a| a.used),
            old_granted: old.map_or(0, |a| a.granted),
            old_window_ms: old.map_or(req.window_ms, |a| a.window_ms),
            old_limit: old.map_or(req.limit, |a| a.limit),
            want,
            min: MIN_LEASE.max(req.cost),
        })
    }

    /// Takes the lease of `key` out if it is still `seq` and not being renewed: a refund is due
    /// (its time is up and no request renewed it).
    pub(crate) fn expire(&self, key: &[u8], seq: u64) -> Option<Renewal> {
        let mut keys = self.lock();
        let h = keys.get_mut(key)?;
        if h.renewing || h.lease.is_none_or(|a| a.seq != seq) {
            return None;
        }
        let a = h.lease.take()?;
        h.renewing = true;
        Some(refund_of(&a))
    }

    /// Records a lease call's outcome under `rule` (`(window_ms, limit)`; `None` for a refund
    /// alone). Returns the new lease's seq if one was granted (then the caller takes its request
    /// from it with [`Table::take`]), and the lease it displaced, if one was still held (a renewal
    /// ahead): that one no longer grants and is due back to Redis.
    pub(crate) fn renewed(
        &self,
        key: &[u8],
        rule: Option<(u64, u64)>,
        r: &Renewal,
        reply: &Result<LeaseReply>,
        sent: Instant,
    ) -> (Option<u64>, Option<Renewal>) {
        let now = Instant::now();
        let mut keys = self.lock();
        let Some(h) = keys.get_mut(key) else {
            return (None, None);
        };
        h.renewing = false;
        let Ok(reply) = reply else {
            return (None, None);
        };
        self.returned(r);
        let Some((window_ms, limit)) = rule else {
            return (None, None);
        };
        if r.seq == 0 {
            return (None, None);
        }
        if reply.granted == 0 {
            h.quiet_until = Some(now + Duration::from_millis(self.lease_ms));
            return (None, None);
        }
        h.quiet_until = None;
        self.counters.taken.fetch_add(1, Ordering::Relaxed);
        self.counters
            .leased_permits
            .fetch_add(reply.granted, Ordering::Relaxed);
        let displaced = h.lease.take().map(|a| refund_of(&a));
        h.lease = Some(Active {
            seq: r.seq,
            slot: r.slot,
            window_ms,
            limit,
            granted: reply.granted,
            used: 0,
            sent,
            got: now,
            t: reply.now_ms,
            used_at_grant: reply.used,
            reset_after_ms: reply.reset_after_ms,
        });
        (Some(r.seq), displaced)
    }

    /// Whether this instance still holds lease `seq` of `key` (its refund timer is live).
    pub(crate) fn holds(&self, key: &[u8], seq: u64) -> bool {
        self.lock()
            .get(key)
            .is_some_and(|h| h.lease.is_some_and(|a| a.seq == seq))
    }

    /// Counts a lease returned by a call that succeeded.
    pub(crate) fn returned(&self, r: &Renewal) {
        if r.old_seq != 0 {
            self.counters.refunds.fetch_add(1, Ordering::Relaxed);
            self.counters
                .refunded_permits
                .fetch_add(r.old_granted - r.old_used, Ordering::Relaxed);
        }
    }

    /// A renewal ahead that could not be sent: the key may renew again.
    pub(crate) fn abandon(&self, key: &[u8]) {
        if let Some(h) = self.lock().get_mut(key) {
            h.renewing = false;
        }
    }

    /// This instance's lease on `key` is forgotten (a reset deletes it in Redis).
    pub(crate) fn forget(&self, key: &[u8]) {
        self.lock().remove(key);
    }

    /// Every lease held, taken out for a refund (the limiter closes).
    pub(crate) fn drain(&self) -> Vec<(Vec<u8>, Renewal)> {
        let mut keys = self.lock();
        let mut out = Vec::new();
        for (k, h) in keys.iter_mut() {
            if let Some(a) = h.lease.take() {
                out.push((k.clone(), refund_of(&a)));
            }
        }
        out
    }
}

/// The call that returns `a` (and takes nothing), under the slot and rule it was taken under.
fn refund_of(a: &Active) -> Renewal {
    Renewal {
        slot: a.slot,
        seq: 0,
        old_seq: a.seq,
        old_used: a.used,
        old_granted: a.granted,
        old_window_ms: a.window_ms,
        old_limit: a.limit,
        want: 0,
        min: MIN_LEASE,
    }
}

/// How many permits to ask for: this instance's demand over a lease's life (`demand` permits in
/// the last `elapsed_ms`), with half again as headroom.
fn want(demand: u64, elapsed_ms: u64, lease_ms: u64, req: &Request<'_>) -> u64 {
    let rate = demand.saturating_mul(1000) / elapsed_ms.max(1);
    (rate.saturating_mul(lease_ms) / 1000)
        .saturating_mul(3)
        .div_ceil(2)
        .clamp(MIN_LEASE.max(req.cost), req.limit)
}

/// A lease decision, as far as this instance knows: the window held `used_at_grant` with the
/// whole lease counted, and the lease's unused permits are this instance's to grant.
fn verdict(a: &Active, now: Instant) -> Verdict {
    let since = now.saturating_duration_since(a.got).as_millis() as u64;
    Verdict {
        allowed: true,
        used: a.used_at_grant.saturating_sub(a.granted - a.used),
        retry_after_ms: 0,
        reset_after_ms: a.reset_after_ms.saturating_sub(since),
        now_ms: a.t + since,
    }
}

/// A lease lives for `lease_ms` from its call: the refund timer's delay (a quarter more, so a
/// request usually renews it first).
pub(crate) fn refund_after(lease_ms: u64) -> Duration {
    Duration::from_millis(lease_ms + lease_ms / 4 + 1)
}
