//! The client's own scheduling lag, so that a saturated client is not mistaken for a slow Redis.
//!
//! A round trip as the caller measures it includes the time its runtime took to get round to the
//! connection's task (to write the request and to read the reply) and then to the caller's task:
//! on a CPU-bound client (measured: the 2-core `make hotkey` bench) that alone is several times
//! `degrade_rtt`, with Redis answering in microseconds. A probe task on the limiter's runtime
//! sleeps one millisecond at a time, then goes to the back of the run queue, and records how late
//! it runs again: a task woken on that runtime waits about that long before it runs, and a round
//! trip has up to [`WAITS`] such waits.
//! While the probe has not run since it was due, the overdue time counts as lag too (a runtime
//! whose threads are all busy or blocked cannot run the probe, nor the caller).
//!
//! Each Redis call also measures its own last wait: from the moment its reply woke it to the
//! moment its task ran again ([`Lag::timed`]); it judges that call, and the longest of the last
//! couple of milliseconds is kept for the calls still waiting for their replies.
//!
//! The probe runs only on demand: a call slower than `degrade_rtt` arms it, and it stops after
//! [`KEEP_FOR`] without one, so a healthy limiter pays nothing for it (no timer, no wake-up), and
//! the decision path only reads it for calls that were slow anyway.

use std::future::Future;
use std::pin::pin;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Wake, Waker};
use std::time::{Duration, Instant};

use tokio::sync::Notify;

/// The probe's period: tokio's timer resolution.
const TICK: Duration = Duration::from_millis(1);
/// How late a wake-up is on an idle runtime: the timer rounds a deadline up to its next tick.
const FLOOR: Duration = Duration::from_millis(1);
/// Scheduling waits in one round trip: the connection task's, to write the request and to read
/// the reply, and the caller's, to resume with it. Each is about one probe wake-up's lateness.
pub(crate) const WAITS: u32 = 3;
/// How long the probe keeps running after the last slow call asked for it.
const KEEP_FOR: Duration = Duration::from_secs(1);
/// Wake-ups kept: a few hundred milliseconds of ticks, more than a slow spell needs to be judged.
const KEPT: usize = 256;

/// Written by the probe alone, read by slow calls without a lock: times are micros since `base`
/// plus one (0: none). A reader lapped by the writer (a call longer than `KEPT` ticks) may read a
/// torn pair; the worst it does is excuse that one call by one tick's lag.
pub(crate) struct Lag {
    base: Instant,
    /// A probe task is running on the limiter's runtime (nothing is measured without one).
    alive: AtomicBool,
    /// The probe is ticking (armed); else it waits on `wake`.
    armed: AtomicBool,
    /// Micros since `base` of the last slow call that wanted the probe.
    wanted: AtomicU64,
    wake: Notify,
    /// (due, woke) of the last wake-ups, `KEPT` pairs in a ring; `next` is the next pair's index.
    done: Box<[AtomicU64]>,
    next: AtomicUsize,
    /// When the next wake-up is due, while armed.
    pending: AtomicU64,
    /// The longest recent wait of a call's own task ([`Lag::timed`]): the millisecond it ended
    /// (since `base`) in the high 40 bits, its micros in the low 24. Kept so that a call still
    /// waiting for its reply is judged with what the calls that just ended measured.
    recent: AtomicU64,
}

const WAIT_BITS: u32 = 24;
const WAIT_MASK: u64 = (1 << WAIT_BITS) - 1;

impl Lag {
    pub(crate) fn new() -> Self {
        Lag {
            base: Instant::now(),
            alive: AtomicBool::new(false),
            armed: AtomicBool::new(false),
            wanted: AtomicU64::new(0),
            wake: Notify::new(),
            done: (0..2 * KEPT).map(|_| AtomicU64::new(0)).collect(),
            next: AtomicUsize::new(0),
            pending: AtomicU64::new(0),
            recent: AtomicU64::new(0),
        }
    }

    fn us(&self, t: Instant) -> u64 {
        t.saturating_duration_since(self.base).as_micros() as u64 + 1
    }

    fn at(&self, us: u64) -> Option<Instant> {
        (us > 0).then(|| self.base + Duration::from_micros(us - 1))
    }

    /// Asks for measurements from now on (a call was slow). No-op without a probe task.
    pub(crate) fn arm(&self) {
        if !self.alive.load(Ordering::Acquire) {
            return;
        }
        let us = self.us(Instant::now());
        // One store a millisecond at most: every slow call passes here.
        if us > self.wanted.load(Ordering::Relaxed) + 1000 {
            self.wanted.store(us, Ordering::Relaxed);
        }
        if self.armed.load(Ordering::Relaxed) || self.armed.swap(true, Ordering::AcqRel) {
            return;
        }
        // Due now: the first wake-up's lateness is how long a woken task waits to run.
        let _ = self
            .pending
            .compare_exchange(0, us, Ordering::AcqRel, Ordering::Relaxed);
        self.wake.notify_one();
    }

    /// Runs `fut`; also returns how long its task took to run again after the last wake-up that
    /// completed it, less the floor. One allocation per call, no system call, no lock shared with
    /// other calls.
    pub(crate) async fn timed<T>(&self, fut: impl Future<Output = T>) -> (T, Duration) {
        let stamp = Arc::new(Stamp::default());
        let waker = Waker::from(stamp.clone());
        let mut fut = pin!(fut);
        std::future::poll_fn(|cx| {
            let woken = stamp.poll_with(cx.waker());
            fut.as_mut()
                .poll(&mut Context::from_waker(&waker))
                .map(|out| {
                    // The clock is read once per call, after the reply was taken (its parse is
                    // counted as waiting: microseconds).
                    let polled = Instant::now();
                    let waited = woken.map_or(Duration::ZERO, |w| polled.duration_since(w));
                    let waited = waited.saturating_sub(FLOOR);
                    if !waited.is_zero() {
                        self.note(polled, waited);
                    }
                    (out, waited)
                })
        })
        .await
    }

    /// Keeps a call's own wait (less the floor) that ended at `end`, if it is the longest of
    /// the last couple of milliseconds. Two atomic operations, no lock.
    fn note(&self, end: Instant, waited: Duration) {
        let ms = end.saturating_duration_since(self.base).as_millis() as u64;
        let us = (waited.as_micros() as u64).min(WAIT_MASK);
        let cur = self.recent.load(Ordering::Relaxed);
        if (cur >> WAIT_BITS) + 2 < ms || cur & WAIT_MASK < us {
            self.recent.store(ms << WAIT_BITS | us, Ordering::Relaxed);
        }
    }

    fn push(&self, from: Instant, to: Instant) {
        let i = self.next.load(Ordering::Relaxed) % KEPT;
        self.done[2 * i].store(self.us(from), Ordering::Relaxed);
        self.done[2 * i + 1].store(self.us(to), Ordering::Relaxed);
        self.next.store(i + 1, Ordering::Release);
    }

    /// How much of `from..to` a task woken on this runtime spent waiting to run: the longest
    /// overlap of one late wake-up (or of the one overdue now) with that span, less the timer's
    /// own rounding. Zero when nothing was measured.
    pub(crate) fn during(&self, from: Instant, to: Instant) -> Duration {
        let overlap = |due: Instant, woke: Instant| {
            woke.min(to)
                .saturating_duration_since(due.max(from))
                .saturating_sub(FLOOR)
        };
        let next = self.next.load(Ordering::Acquire);
        let mut most = Duration::ZERO;
        for k in 1..=KEPT {
            let i = (next + KEPT - k) % KEPT;
            let (due, woke) = (
                self.done[2 * i].load(Ordering::Relaxed),
                self.done[2 * i + 1].load(Ordering::Relaxed),
            );
            let (Some(due), Some(woke)) = (self.at(due), self.at(woke)) else {
                break;
            };
            if woke + TICK <= from {
                break;
            }
            most = most.max(overlap(due, woke));
        }
        let pending = self.at(self.pending.load(Ordering::Acquire));
        let most = most.max(pending.map_or(Duration::ZERO, |due| overlap(due, to)));
        // A call's own wait, already less the floor: the floor added back for `overlap`.
        let recent = self.recent.load(Ordering::Relaxed);
        if recent == 0 {
            return most;
        }
        let end = self.base + Duration::from_millis((recent >> WAIT_BITS) + 1);
        let waited = Duration::from_micros(recent & WAIT_MASK) + FLOOR;
        most.max(overlap(end.checked_sub(waited).unwrap_or(self.base), end))
    }

    /// The probe: runs for as long as its limiter lives (the caller selects it against the
    /// limiter's background task), ticking while armed.
    pub(crate) async fn run(&self) {
        let _alive = Alive(self);
        self.alive.store(true, Ordering::Release);
        loop {
            if !self.armed.load(Ordering::Acquire) {
                self.wake.notified().await;
                continue;
            }
            let Some(due) = self.at(self.pending.load(Ordering::Acquire)) else {
                // Armed, but a disarm raced with it: due now.
                let now = self.us(Instant::now());
                let _ = self
                    .pending
                    .compare_exchange(0, now, Ordering::AcqRel, Ordering::Relaxed);
                continue;
            };
            tokio::time::sleep_until(tokio::time::Instant::from_std(due)).await;
            // A task the timer wakes may run at once, ahead of the queue; one that wakes itself
            // goes to the back of it, where a woken caller or connection task can find itself.
            Requeue(false).await;
            let woke = Instant::now();
            self.push(due, woke);
            let wanted = self.at(self.wanted.load(Ordering::Relaxed));
            if wanted.is_none_or(|w| woke.saturating_duration_since(w) > KEEP_FOR) {
                self.pending.store(0, Ordering::Release);
                self.armed.store(false, Ordering::Release);
            } else {
                self.pending.store(self.us(woke + TICK), Ordering::Release);
            }
        }
    }
}

/// Pending once, waking itself: tokio puts a task that woke itself while running at the back of
/// its worker's run queue, so the next poll comes after every task queued before it.
struct Requeue(bool);

impl Future for Requeue {
    type Output = ();

    fn poll(mut self: std::pin::Pin<&mut Self>, cx: &mut Context<'_>) -> std::task::Poll<()> {
        if self.0 {
            return std::task::Poll::Ready(());
        }
        self.0 = true;
        cx.waker().wake_by_ref();
        std::task::Poll::Pending
    }
}

/// A call's waker: notes when the reply woke it, then wakes the caller's task.
#[derive(Default)]
struct Stamp(Mutex<(Option<Instant>, Option<Waker>)>);

impl Stamp {
    /// Keeps the caller's current waker; returns (and clears) when the call was last woken.
    fn poll_with(&self, caller: &Waker) -> Option<Instant> {
        let mut s = self.0.lock().unwrap_or_else(|p| p.into_inner());
        if !s.1.as_ref().is_some_and(|w| w.will_wake(caller)) {
            s.1 = Some(caller.clone());
        }
        s.0.take()
    }
}

impl Wake for Stamp {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        let mut s = self.0.lock().unwrap_or_else(|p| p.into_inner());
        s.0 = Some(Instant::now());
        if let Some(w) = &s.1 {
            w.wake_by_ref();
        }
    }
}

/// Marks the probe gone when its task ends (the runtime shut down): without measurements, a slow
/// call is judged on its round trip alone.
struct Alive<'a>(&'a Lag);

impl Drop for Alive<'_> {
    fn drop(&mut self) {
        self.0.alive.store(false, Ordering::Release);
        self.0.armed.store(false, Ordering::Release);
        self.0.pending.store(0, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn without_a_probe_nothing_is_excused() {
        let lag = Lag::new();
        lag.arm();
        let t0 = Instant::now();
        assert_eq!(lag.during(t0, t0 + Duration::from_secs(1)), Duration::ZERO);
    }

    #[test]
    fn a_late_wake_up_counts_where_it_overlaps_the_call() {
        let lag = Lag::new();
        let t0 = lag.base;
        let ms = Duration::from_millis;
        for (due, woke) in [
            (t0, t0 + ms(1)),
            (t0 + ms(2), t0 + ms(12)),
            (t0 + ms(13), t0 + ms(14)),
        ] {
            lag.push(due, woke);
        }
        assert_eq!(
            lag.during(t0, t0 + ms(20)),
            ms(9),
            "10 ms late, less the floor"
        );
        assert_eq!(
            lag.during(t0 + ms(8), t0 + ms(20)),
            ms(3),
            "4 ms of it inside the call"
        );
        assert_eq!(lag.during(t0 + ms(15), t0 + ms(20)), Duration::ZERO);
        lag.pending.store(lag.us(t0 + ms(15)), Ordering::Relaxed);
        assert_eq!(
            lag.during(t0 + ms(10), t0 + ms(25)),
            ms(9),
            "overdue for 10 ms"
        );
    }
}
