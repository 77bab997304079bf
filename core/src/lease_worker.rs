//! A limiter's lease background work on one plain thread of its own, for standalone Redis over
//! plain TCP (where a blocking call can go on a socket of its own, `backend/in_place.rs`).
//!
//! Why: a hot key's lease cycle (a renewal ahead, then the refund of the lease it displaced,
//! every ~3/4 of `lease_ms`) made as runtime tasks woke the runtime's threads about 7 times:
//! the caller's spawn, tokio waking its second worker to search, the two replies, the hand-back
//! between the workers, and the displaced lease's refund timer (the wheel's cascade, then the
//! expiry, to find nothing to do). Measured at 250 decisions/s on one leased key, 973 wake-ups
//! in 10 s; in a Spring Cloud Gateway on a 2-cpu host each one took a cpu from the gateway's
//! event loops, and its P99 grew with the leases' background calls, not with the decisions.
//!
//! Here the caller that starts a renewal ahead queues it and wakes this thread (one wake-up);
//! the thread makes the call on its own socket and sleeps in `read` until the reply (one), then
//! sends the displaced lease's refund the same way (one). The refund timers live here too, in
//! due order: before it waits, the thread drops the timers of leases already displaced or
//! returned, so on a hot key no timer ever fires. A timer that does fire returns its lease as
//! the runtime's timer did.
//!
//! Only a lone job runs here: jobs queued behind the one being made (many hot keys at once)
//! go to the runtime as tasks, which pipeline them on the multiplexed connection, so one thread
//! never bounds how many leases a limiter can keep. The thread starts with the first job, runs
//! at `SCHED_BATCH` like the runtime's threads, and ends when its limiter is dropped. A forked
//! child gets a new instance (`redis_path.rs`), so a worker of its own.

use std::collections::VecDeque;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, Weak};
use std::time::Instant;

use crate::lease::Renewal;
use crate::redis_path::RedisPath;

/// Background lease work for one key.
pub(crate) enum Job {
    /// Take the key's next lease ahead (`Step::LeaseAhead`) under `rule` (`(window_ms, limit)`).
    Ahead {
        key: Vec<u8>,
        rule: (u64, u64),
        renewal: Renewal,
    },
    /// Return a lease that no longer grants.
    Refund { key: Vec<u8>, renewal: Renewal },
}

/// A lease's refund timer: return lease `seq` of `key` at `due` unless it was renewed.
struct Timer {
    due: Instant,
    key: Vec<u8>,
    seq: u64,
}

#[derive(Default)]
struct State {
    /// Each job holds its limiter, as a runtime task would: a displaced lease queued for its
    /// refund is returned even if the limiter is dropped meanwhile.
    jobs: VecDeque<(Arc<RedisPath>, Job)>,
    /// In due order (within the microseconds between arming ones at once): every lease's
    /// timer has the same delay.
    timers: VecDeque<Timer>,
    started: bool,
    /// The thread waits with no timer to wake it: a new timer must wake it.
    untimed: bool,
    closed: bool,
}

/// One limiter instance's lease thread.
#[derive(Default)]
pub(crate) struct Worker {
    state: Mutex<State>,
    ready: Condvar,
}

impl Worker {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Starts the thread if it has not started; false when it cannot run (it could not be
    /// started, or the limiter is closing).
    fn running(self: &Arc<Self>, s: &mut State, path: &Arc<RedisPath>) -> bool {
        if s.closed {
            return false;
        }
        if !s.started {
            let (worker, weak) = (Arc::clone(self), Arc::downgrade(path));
            let spawned = std::thread::Builder::new()
                .name("rl-leases".into())
                .spawn(move || run(worker, weak));
            if let Err(e) = spawned {
                tracing::debug!(error = %e, "rl: no lease thread; leases renew on the runtime");
                s.closed = true;
                return false;
            }
            s.started = true;
        }
        true
    }

    /// Queues `job`; gives it back when the thread cannot run: the caller then runs it as a
    /// runtime task.
    pub(crate) fn push(self: &Arc<Self>, path: &Arc<RedisPath>, job: Job) -> Result<(), Job> {
        let mut s = self.lock();
        if !self.running(&mut s, path) {
            return Err(job);
        }
        s.jobs.push_back((Arc::clone(path), job));
        drop(s);
        self.ready.notify_one();
        Ok(())
    }

    /// Arms the refund timer of lease `seq` of `key`; false when the thread cannot run.
    pub(crate) fn arm(
        self: &Arc<Self>,
        path: &Arc<RedisPath>,
        key: &[u8],
        seq: u64,
        due: Instant,
    ) -> bool {
        let mut s = self.lock();
        if !self.running(&mut s, path) {
            return false;
        }
        s.timers.push_back(Timer {
            due,
            key: key.to_vec(),
            seq,
        });
        // A thread waiting for an earlier timer wakes for it in time, and sees this one then.
        let wake = s.untimed;
        drop(s);
        if wake {
            self.ready.notify_one();
        }
        true
    }

    /// The limiter is dropped: the thread ends once its queued jobs are done (its timers do not
    /// fire: a lease of a dropped limiter ages out in Redis).
    pub(crate) fn close(&self) {
        self.lock().closed = true;
        self.ready.notify_one();
    }
}

/// What the thread does next.
enum Next {
    Job(Arc<RedisPath>, Job),
    Due(Timer),
}

fn run(worker: Arc<Worker>, path: Weak<RedisPath>) {
    crate::runtime::never_preempt_on_wakeup();
    loop {
        let next = {
            let mut s = worker.lock();
            loop {
                if let Some((p, job)) = s.jobs.pop_front() {
                    break Next::Job(p, job);
                }
                if s.closed {
                    return;
                }
                // Timers of leases no longer held never fire. The limiter is looked at with
                // this lock released: should this thread hold the last reference, dropping it
                // closes the worker, which takes the lock. Only this thread pops timers, so the
                // front is still the one looked at.
                if let Some((key, seq)) = s.timers.front().map(|t| (t.key.clone(), t.seq)) {
                    drop(s);
                    let held = match path.upgrade() {
                        Some(p) => p.holds_lease(&key, seq),
                        None => return,
                    };
                    s = worker.lock();
                    if !held {
                        s.timers.pop_front();
                        continue;
                    }
                    // A job queued, or the limiter closed, meanwhile.
                    if !s.jobs.is_empty() || s.closed {
                        continue;
                    }
                }
                let now = Instant::now();
                match s.timers.front().map(|t| t.due) {
                    Some(due) if due <= now => {
                        break Next::Due(s.timers.pop_front().expect("a timer is due"));
                    }
                    Some(due) => {
                        s.untimed = false;
                        s = worker
                            .ready
                            .wait_timeout(s, due - now)
                            .unwrap_or_else(|p| p.into_inner())
                            .0;
                    }
                    None => {
                        s.untimed = true;
                        s = worker.ready.wait(s).unwrap_or_else(|p| p.into_inner());
                        s.untimed = false;
                    }
                }
            }
        };
        match next {
            Next::Job(p, job) => {
                // Jobs queued behind this one go to the runtime, which makes them concurrently.
                let burst: Vec<_> = worker.lock().jobs.drain(..).collect();
                for (q, job) in burst {
                    q.spawn_lease_job(job);
                }
                p.run_lease_job_here(job);
            }
            Next::Due(t) => {
                if let Some(p) = path.upgrade() {
                    p.refund_due(&t.key, t.seq);
                }
            }
        }
    }
}
