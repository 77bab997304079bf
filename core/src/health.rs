//! The degradation state machine, one per limiter (diagram in the README):
//!
//! ```text
//!            errors after the retry, or RTT > slow_rtt for slow_for (real calls)
//!   normal ──────────────────────────────────────────────────────────────────▶ local
//!     ▲                                                                          │
//!     └──────────── probes (off the request path) see RTT < recover_rtt ─────────┘
//!                   for recover_for; then admitted permits are repaired
//! ```
//!
//! Two thresholds and two periods make it hysteretic: a Redis hovering around one threshold
//! cannot flip the limiter back and forth. On Cluster the probes' median is taken over the
//! slowest master's answers, so one slow master cannot be outvoted by fast ones
//! (`core/tests/net_faults_cluster.rs`). Leaving `local` is decided by the probe task alone
//! (`redis_path.rs`), never by a caller, so callers in `local` never wait on Redis at all.
//!
//! "RTT" is Redis's part of a round trip: what the caller measured less the client's own
//! scheduling lag over the same span (`lag.rs`: [`crate::lag::WAITS`] times the longest a task
//! woken on the limiter's runtime waited to run meanwhile). A CPU-saturated client sees round
//! trips far above `degrade_rtt` from its own run queue alone (measured: the `make hotkey` bench
//! on 2 cores, Redis answering in microseconds), and going `local` there would trade Redis's exact
//! decisions for the local budget's bounded ones without helping anyone. Errors and the request
//! timeout still send the limiter `local` whatever the lag; a slow Redis on a saturated client
//! still does once its part alone stays above `degrade_rtt`.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::lag::{Lag, WAITS};

/// Thresholds and periods of the state machine (see [`crate::Options`]).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Thresholds {
    pub slow_rtt: Duration,
    pub slow_for: Duration,
    pub recover_rtt: Duration,
    pub recover_for: Duration,
}

/// Round-trip times of the last `RTT_SAMPLES` real calls, for `stats()`.
const RTT_SAMPLES: usize = 1024;

pub(crate) struct Health {
    pub t: Thresholds,
    base: Instant,
    local: AtomicBool,
    /// Micros since `base` + 1 when calls started being slow without a fast one since; 0 = not slow.
    slow_since: AtomicU64,
    pub counters: Counters,
    rtt: Mutex<RttRing>,
    /// When the current state began, and why.
    since: Mutex<(Instant, String)>,
    /// The client's own scheduling lag, measured while calls are slow.
    pub lag: Arc<Lag>,
}

#[derive(Default)]
pub(crate) struct Counters {
    pub normal: AtomicU64,
    pub local: AtomicU64,
    /// Of those, the denials.
    pub denied_normal: AtomicU64,
    pub denied_local: AtomicU64,
    pub to_local: AtomicU64,
    pub to_normal: AtomicU64,
    pub retries: AtomicU64,
    pub errors: AtomicU64,
    pub repairs: AtomicU64,
    pub repaired_permits: AtomicU64,
    pub failovers: AtomicU64,
    pub probes: AtomicU64,
}

struct RttRing {
    samples: Vec<u32>,
    next: usize,
    last_us: u64,
    max_us: u64,
}

/// Round-trip figures in microseconds over the last 1024 real calls.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RttStats {
    pub samples: u64,
    pub last_us: u64,
    pub p50_us: u64,
    pub p99_us: u64,
    pub max_us: u64,
}

impl Health {
    pub(crate) fn new(t: Thresholds) -> Self {
        let now = Instant::now();
        Health {
            t,
            base: now,
            local: AtomicBool::new(false),
            slow_since: AtomicU64::new(0),
            counters: Counters::default(),
            rtt: Mutex::new(RttRing {
                samples: Vec::with_capacity(RTT_SAMPLES),
                next: 0,
                last_us: 0,
                max_us: 0,
            }),
            since: Mutex::new((now, "start".into())),
            lag: Arc::new(Lag::new()),
        }
    }

    #[inline]
    pub(crate) fn is_local(&self) -> bool {
        self.local.load(Ordering::Acquire)
    }

    /// A real call completed after `rtt`. A fast one ends any slow spell; a slow one extends it
    /// and says whether it has now lasted `slow_for` (time to go local). Fast or slow is Redis's
    /// part of the round trip (see the module's doc).
    /// `waited`: how long the call's own task took to run once its reply had woken it.
    pub(crate) fn observe(&self, started: Instant, rtt: Duration, waited: Duration) -> bool {
        {
            let mut r = self.rtt.lock().unwrap_or_else(|p| p.into_inner());
            let us = rtt.as_micros().min(u32::MAX as u128) as u32;
            if r.samples.len() < RTT_SAMPLES {
                r.samples.push(us);
            } else {
                let i = r.next;
                r.samples[i] = us;
            }
            r.next = (r.next + 1) % RTT_SAMPLES;
            r.last_us = us as u64;
            r.max_us = r.max_us.max(us as u64);
        }
        if rtt <= self.t.slow_rtt {
            self.slow_since.store(0, Ordering::Relaxed);
            return false;
        }
        self.lag.arm();
        // The call's own wait alone often accounts for it: then no need to read the probe's.
        let excused = match (waited * WAITS).min(rtt) {
            own if rtt - own <= self.t.slow_rtt => own,
            _ => self.excused(started, started + rtt, waited),
        };
        if rtt - excused <= self.t.slow_rtt {
            self.slow_since.store(0, Ordering::Relaxed);
            return false;
        }
        let since = self.mark_slow(started + self.t.slow_rtt + excused);
        started + rtt >= since + self.t.slow_for
    }

    /// The part of a call from `from` to `to` that the client's own scheduling accounts for;
    /// `waited`: the call's own measured wait, if known.
    pub(crate) fn excused(&self, from: Instant, to: Instant, waited: Duration) -> Duration {
        (self.lag.during(from, to).max(waited) * WAITS).min(to.saturating_duration_since(from))
    }

    /// Records that calls have been slow since `at` (keeps an earlier start); returns the start.
    pub(crate) fn mark_slow(&self, at: Instant) -> Instant {
        let mine = at.saturating_duration_since(self.base).as_micros() as u64 + 1;
        let prev = self
            .slow_since
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |cur| {
                (cur == 0 || cur > mine).then_some(mine)
            });
        let v = match prev {
            Ok(_) => mine,
            Err(cur) => cur,
        };
        self.base + Duration::from_micros(v - 1)
    }

    /// When the current slow spell began, if one is going on.
    #[cfg(test)]
    pub(crate) fn slow_since(&self) -> Option<Instant> {
        match self.slow_since.load(Ordering::Relaxed) {
            0 => None,
            v => Some(self.base + Duration::from_micros(v - 1)),
        }
    }

    /// normal → local. Returns true for the one caller that made the transition.
    pub(crate) fn to_local(&self, reason: &str) -> bool {
        if self
            .local
            .compare_exchange(false, true, Ordering::AcqRel, Ordering::Acquire)
            .is_err()
        {
            return false;
        }
        self.counters.to_local.fetch_add(1, Ordering::Relaxed);
        let mut since = self.since.lock().unwrap_or_else(|p| p.into_inner());
        tracing::warn!(
            from = "normal",
            to = "local",
            reason,
            after_ms = since.0.elapsed().as_millis() as u64,
            "rl: Redis unhealthy; deciding locally"
        );
        *since = (Instant::now(), reason.to_string());
        true
    }

    /// local → normal, by the probe task after the recovery period and the repair.
    pub(crate) fn to_normal(&self, reason: &str) {
        self.slow_since.store(0, Ordering::Relaxed);
        if self
            .local
            .compare_exchange(true, false, Ordering::AcqRel, Ordering::Acquire)
            .is_err()
        {
            return;
        }
        self.counters.to_normal.fetch_add(1, Ordering::Relaxed);
        let mut since = self.since.lock().unwrap_or_else(|p| p.into_inner());
        tracing::info!(
            from = "local",
            to = "normal",
            reason,
            after_ms = since.0.elapsed().as_millis() as u64,
            "rl: Redis healthy again; deciding on Redis"
        );
        *since = (Instant::now(), reason.to_string());
    }

    /// How long the current state has lasted, and why it began.
    pub(crate) fn state_age(&self) -> (Duration, String) {
        let since = self.since.lock().unwrap_or_else(|p| p.into_inner());
        (since.0.elapsed(), since.1.clone())
    }

    pub(crate) fn rtt(&self) -> RttStats {
        let r = self.rtt.lock().unwrap_or_else(|p| p.into_inner());
        let mut sorted = r.samples.clone();
        drop(r);
        sorted.sort_unstable();
        let pick = |q: f64| {
            sorted
                .get(((sorted.len() as f64 - 1.0) * q).round() as usize)
                .copied()
                .unwrap_or(0) as u64
        };
        let r = self.rtt.lock().unwrap_or_else(|p| p.into_inner());
        RttStats {
            samples: sorted.len() as u64,
            last_us: r.last_us,
            p50_us: pick(0.5),
            p99_us: pick(0.99),
            max_us: r.max_us,
        }
    }
}

/// The probes' side of the hysteresis: Redis counts as recovered once probes have, for
/// `recover_for`, all succeeded, none been as slow as `slow_rtt`, and kept a median round trip
/// below `recover_rtt`. The median (not every single probe) makes one scheduling hiccup on a busy
/// host not restart the period; a failed or slow probe does.
#[derive(Debug, Default)]
pub(crate) struct Streak {
    since: Option<Instant>,
    rtts: Vec<Duration>,
}

impl Streak {
    /// Feeds one probe (`None`: it failed); true when the limiter may return to `normal`.
    #[cfg(test)]
    pub(crate) fn probe(&mut self, now: Instant, rtt: Option<Duration>, t: &Thresholds) -> bool {
        self.probe_all(now, rtt.map(|r| (r, r)), t)
    }

    /// [`Streak::probe`] with the probe's two round trips: the heartbeat's as measured, and the
    /// slowest server's (on Cluster, a PING to every master; elsewhere the heartbeat's again),
    /// less the client's scheduling lag. A heartbeat as slow as `slow_rtt` as measured restarts
    /// the period whatever the lag: the lag excuses a slow call on the way to `local` (a busy
    /// client is not a slow Redis), but it is no proof of a fast Redis on the way back (measured:
    /// probes through an 8 ms fault proxy on a busy host, less three times the lag, read under
    /// `recover_rtt` and started the period before the fault ended). The slowest server's round trips count in the
    /// median, so one master that stays slow holds the limiter `local` (no flapping while it
    /// is), while the odd spike of the slowest of several answers on a busy host does not
    /// restart the period (measured: with every spike restarting it, recovery on a loaded
    /// 2-core host took up to 12 s instead of about 0.5 s).
    pub(crate) fn probe_all(
        &mut self,
        now: Instant,
        rtts: Option<(Duration, Duration)>,
        t: &Thresholds,
    ) -> bool {
        let Some((_, worst)) = rtts.filter(|(beat, _)| *beat < t.slow_rtt) else {
            self.reset();
            return false;
        };
        let since = *self.since.get_or_insert(now);
        self.rtts.push(worst);
        let mut sorted = self.rtts.clone();
        sorted.sort_unstable();
        if sorted[sorted.len() / 2] >= t.recover_rtt {
            self.reset();
            return false;
        }
        now.duration_since(since) >= t.recover_for
    }

    pub(crate) fn reset(&mut self) {
        self.since = None;
        self.rtts.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recovery_needs_the_whole_period_of_good_probes() {
        let h = health();
        let mut s = Streak::default();
        let t0 = Instant::now();
        let ms = Duration::from_millis;
        for i in 0..20 {
            assert!(
                !s.probe(t0 + ms(25 * i), Some(ms(1)), &h.t),
                "probe {i} is inside the period"
            );
        }
        // One hiccup above recover_rtt (but below degrade_rtt) does not restart the period...
        assert!(!s.probe(t0 + ms(25 * 20 - 1), Some(ms(3)), &h.t));
        assert!(
            s.probe(t0 + ms(25 * 20 + 1), Some(ms(1)), &h.t),
            "500 ms of fast probes"
        );
        // ...a failed or slow probe does.
        let mut s = Streak::default();
        assert!(!s.probe(t0, Some(ms(1)), &h.t));
        assert!(!s.probe(t0 + ms(400), None, &h.t));
        assert!(
            !s.probe(t0 + ms(600), Some(ms(1)), &h.t),
            "the period restarted at 600 ms"
        );
        assert!(
            !s.probe(t0 + ms(700), Some(ms(6)), &h.t),
            "slower than degrade_rtt"
        );
        assert!(!s.probe(t0 + ms(1100), Some(ms(1)), &h.t));
        assert!(s.probe(t0 + ms(1600), Some(ms(1)), &h.t));
        // A median above recover_rtt restarts it.
        let mut s = Streak::default();
        assert!(!s.probe(t0, Some(ms(3)), &h.t));
        assert!(
            !s.probe(t0 + ms(600), Some(ms(1)), &h.t),
            "the 3 ms probe was a streak of its own"
        );
    }

    #[test]
    fn a_slow_server_holds_recovery_by_the_median_and_a_spike_does_not() {
        let h = health();
        let ms = Duration::from_millis;
        let t0 = Instant::now();
        // One master at 300 ms, the heartbeat's fast: never back.
        let mut s = Streak::default();
        for i in 0..40 {
            assert!(!s.probe_all(t0 + ms(25 * i), Some((ms(1), ms(300))), &h.t));
        }
        // Every master fast but one spike of the slowest answer: back after the whole period.
        let mut s = Streak::default();
        for i in 0..20 {
            let worst = if i == 7 { ms(30) } else { ms(1) };
            assert!(!s.probe_all(t0 + ms(25 * i), Some((ms(1), worst)), &h.t));
        }
        assert!(s.probe_all(t0 + ms(501), Some((ms(1), ms(1))), &h.t));
    }

    #[test]
    fn a_heartbeat_slow_as_measured_restarts_recovery_whatever_the_lag_excuses() {
        let h = health();
        let ms = Duration::from_millis;
        let t0 = Instant::now();
        // 8 ms as measured, 0.5 ms once the client's lag is taken off: not a fast probe.
        let mut s = Streak::default();
        for i in 0..40 {
            assert!(!s.probe_all(t0 + ms(25 * i), Some((ms(8), ms(0))), &h.t));
        }
        // Fast as measured from 1 s on: back only a whole period after that.
        for i in 0..20 {
            assert!(!s.probe_all(t0 + ms(1000 + 25 * i), Some((ms(1), ms(1))), &h.t));
        }
        assert!(s.probe_all(t0 + ms(1500), Some((ms(1), ms(1))), &h.t));
    }

    fn health() -> Health {
        Health::new(Thresholds {
            slow_rtt: Duration::from_millis(5),
            slow_for: Duration::from_millis(100),
            recover_rtt: Duration::from_millis(2),
            recover_for: Duration::from_millis(500),
        })
    }

    #[test]
    fn slow_calls_must_last_the_whole_period() {
        let h = health();
        let t0 = Instant::now();
        assert!(
            !h.observe(t0, Duration::from_millis(20), Duration::ZERO),
            "one slow call is not a slow period"
        );
        let since = h.slow_since().expect("slow").duration_since(t0);
        assert!(
            since.abs_diff(Duration::from_millis(5)) < Duration::from_micros(2),
            "{since:?}"
        );
        assert!(!h.observe(
            t0 + Duration::from_millis(50),
            Duration::from_millis(20),
            Duration::ZERO
        ));
        assert!(
            h.observe(
                t0 + Duration::from_millis(90),
                Duration::from_millis(20),
                Duration::ZERO
            ),
            "slow from 5 ms to 110 ms"
        );
    }

    #[test]
    fn a_fast_call_ends_the_slow_spell() {
        let h = health();
        let t0 = Instant::now();
        h.observe(t0, Duration::from_millis(20), Duration::ZERO);
        assert!(!h.observe(
            t0 + Duration::from_millis(30),
            Duration::from_millis(1),
            Duration::ZERO
        ));
        assert_eq!(h.slow_since(), None);
        assert!(
            !h.observe(
                t0 + Duration::from_millis(90),
                Duration::from_millis(20),
                Duration::ZERO
            ),
            "the spell restarted at 95 ms"
        );
    }

    #[test]
    fn transitions_happen_once_and_are_counted() {
        let h = health();
        assert!(h.to_local("test"));
        assert!(!h.to_local("test"), "already local");
        assert!(h.is_local());
        h.to_normal("test");
        h.to_normal("test");
        assert!(!h.is_local());
        assert_eq!(h.counters.to_local.load(Ordering::Relaxed), 1);
        assert_eq!(h.counters.to_normal.load(Ordering::Relaxed), 1);
    }
}
