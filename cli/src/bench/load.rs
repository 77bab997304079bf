//! The open-loop load: each instance sends on its own schedule and never waits for an answer before
//! the next send. A request that finds its instance at the in-flight bound is shed and counted,
//! never queued, because queueing would quietly turn the offered load into a closed loop.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use indicatif::ProgressBar;
use tokio::sync::{mpsc, Semaphore};

use super::contender::{Contender, Verdict};
use super::schedule::Plan;
use crate::latency;

/// Everything observed during one run.
pub struct Tally {
    /// Send to answer, µs.
    pub latency: Histogram<u64>,
    /// How late each send was against its schedule, µs: large values mean the generator, not the
    /// limiter, was the bottleneck and the offered load was not what it claims.
    pub send_lag: Histogram<u64>,
    /// `(now_ms, cost)` of every admitted request, for the exactness audit.
    pub admitted: Vec<(u64, u64)>,
    /// The same, without the local fallback's decisions: what Redis (directly or through a
    /// lease) admitted, whose bound is exact; the fallback's is limit / instances per instance.
    pub admitted_redis: Vec<(u64, u64)>,
    pub allowed: u64,
    pub denied: u64,
    pub errors: u64,
    pub shed: u64,
    pub first_error: Option<String>,
    pub modes: BTreeMap<&'static str, u64>,
    /// Call to answer per deciding path, µs: the time `acquire` itself took, from its call (in
    /// the request's own task) to its answer, what a handler awaiting it inline waits. Unlike
    /// `latency`, it leaves out the request task's wait for a worker before the call, which on
    /// a saturated client is this harness's run queue, not the limiter's.
    pub latency_by_mode: BTreeMap<&'static str, Histogram<u64>>,
}

enum Sample {
    Done {
        latency: Duration,
        call: Duration,
        lag: Duration,
        verdict: Result<Verdict, String>,
    },
    Shed {
        lag: Duration,
    },
}

pub struct Drive {
    pub limit: u64,
    pub window_ms: u64,
    pub max_in_flight: usize,
}

/// Runs every instance's schedule from `start` and returns once every request has been answered.
pub async fn drive(
    contenders: Vec<Contender>,
    plan: Plan,
    start: Instant,
    cfg: Drive,
    pb: ProgressBar,
) -> Tally {
    let (tx, mut rx) = mpsc::unbounded_channel::<Sample>();
    for (contender, offsets) in contenders.into_iter().zip(plan.offsets_us) {
        let tx = tx.clone();
        let in_flight = Arc::new(Semaphore::new(cfg.max_in_flight));
        let (limit, window_ms) = (cfg.limit, cfg.window_ms);
        tokio::spawn(async move {
            for off in offsets {
                let at = start + Duration::from_micros(off);
                if Instant::now() < at {
                    tokio::time::sleep_until(at.into()).await;
                }
                let sent = Instant::now();
                let lag = sent.saturating_duration_since(at);
                let Ok(permit) = in_flight.clone().try_acquire_owned() else {
                    let _ = tx.send(Sample::Shed { lag });
                    continue;
                };
                let (c, tx) = (contender.clone(), tx.clone());
                tokio::spawn(async move {
                    let called = Instant::now();
                    let verdict = c.acquire(limit, window_ms).await;
                    let call = called.elapsed();
                    let latency = sent.elapsed();
                    drop(permit);
                    let _ = tx.send(Sample::Done {
                        latency,
                        call,
                        lag,
                        verdict,
                    });
                });
            }
        });
    }
    // The channel closes when the last in-flight request has reported.
    drop(tx);

    let mut t = Tally {
        latency: latency::histogram(),
        send_lag: latency::histogram(),
        admitted: Vec::with_capacity(pb.length().unwrap_or(0) as usize),
        admitted_redis: Vec::new(),
        allowed: 0,
        denied: 0,
        errors: 0,
        shed: 0,
        first_error: None,
        modes: BTreeMap::new(),
        latency_by_mode: BTreeMap::new(),
    };
    let mut seen: u64 = 0;
    while let Some(s) = rx.recv().await {
        pb.inc(1);
        seen += 1;
        match s {
            Sample::Shed { lag } => {
                t.shed += 1;
                latency::record(&mut t.send_lag, lag);
            }
            Sample::Done {
                latency: lat,
                call,
                lag,
                verdict,
            } => {
                latency::record(&mut t.latency, lat);
                latency::record(&mut t.send_lag, lag);
                match verdict {
                    Ok(v) => {
                        *t.modes.entry(v.mode).or_default() += 1;
                        latency::record(
                            t.latency_by_mode
                                .entry(v.mode)
                                .or_insert_with(latency::histogram),
                            call,
                        );
                        if v.allowed {
                            t.allowed += 1;
                            t.admitted.push((v.now_ms, 1));
                            if v.mode != "local" {
                                t.admitted_redis.push((v.now_ms, 1));
                            }
                        } else {
                            t.denied += 1;
                        }
                    }
                    Err(e) => {
                        t.errors += 1;
                        t.first_error.get_or_insert(e);
                    }
                }
                if seen.is_multiple_of(500) {
                    pb.set_message(format!("admitted {}", t.allowed));
                }
            }
        }
    }
    pb.finish_and_clear();
    t
}
