//! A CPU-saturated client is not a slow Redis (issue 13). The client's runtime is kept busy by
//! tasks that burn CPU while decisions run against a healthy redis-server on loopback: every round
//! trip, as the caller measures it, is far above `degrade_rtt` (the REPORT line shows it), but the
//! wait is the client's own run queue, and the limiter must stay `normal`. The same limiter must
//! still go `local` when Redis itself stops answering (SIGSTOP) on an idle client.

mod common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::*;
use rl_core::{Limiter, Mode, Options};

/// Burns the CPU in slices of `slice`, yielding between them, until `stop`: with many of these a
/// task woken on the runtime waits for a whole round of slices before it runs.
async fn burn(slice: Duration, stop: Arc<AtomicBool>) {
    while !stop.load(Ordering::Relaxed) {
        let until = Instant::now() + slice;
        while Instant::now() < until {
            std::hint::spin_loop();
        }
        tokio::task::yield_now().await;
    }
}

/// Concurrent callers, each deciding one call after another.
const CALLERS: usize = 8;

/// Runs [`CALLERS`] closed loops of acquires on `l` for `for_` while `burners` tasks keep the runtime's two
/// workers busy in slices of `slice`; returns every decision's (latency, mode).
fn under_load(
    rt: &tokio::runtime::Runtime,
    l: &Limiter,
    burners: usize,
    slice: Duration,
    for_: Duration,
) -> Vec<(Duration, Option<Mode>)> {
    let stop = Arc::new(AtomicBool::new(false));
    let tasks: Vec<_> = (0..burners)
        .map(|_| rt.spawn(burn(slice, stop.clone())))
        .collect();
    // The callers are tasks on the same runtime, as a server's handlers are.
    let callers: Vec<_> = (0..CALLERS)
        .map(|_| {
            let l = l.clone();
            rt.spawn(async move {
                let mut out = Vec::new();
                let until = Instant::now() + for_;
                while Instant::now() < until {
                    let t = Instant::now();
                    let d = l.acquire("saturated", 1_000_000_000, 1000, 1).await;
                    out.push((t.elapsed(), d.ok().map(|d| d.mode)));
                }
                out
            })
        })
        .collect();
    let out: Vec<_> = callers
        .into_iter()
        .flat_map(|c| rt.block_on(c).unwrap())
        .collect();
    stop.store(true, Ordering::Relaxed);
    for t in tasks {
        let _ = rt.block_on(t);
    }
    out
}

#[test]
fn a_saturated_client_stays_normal_and_a_frozen_redis_still_goes_local() {
    let _heavy = heavy();
    let mut server = server();
    let rt = runtime();
    let options = Options {
        instances: Some(1),
        ..Options::default()
    };
    let l = Limiter::open(Some(&server.url()), options.clone()).unwrap();
    rt.block_on(l.acquire("warm-up", 1000, 1000, 1)).unwrap();
    // 400 tasks of 100 µs slices: one round of the run queue is about 20 ms per worker.
    let records = under_load(
        &rt,
        &l,
        400,
        Duration::from_micros(100),
        Duration::from_secs(3),
    );
    let s = l.stats();
    let mut latencies: Vec<Duration> = records.iter().map(|r| r.0).collect();
    latencies.sort();
    let slow = latencies
        .iter()
        .filter(|d| **d > options.degrade_rtt)
        .count();
    let local = records.iter().filter(|r| r.1 == Some(Mode::Local)).count();
    println!(
        "REPORT saturated client: {} decisions, {slow} slower than degrade_rtt ({} ms); latency p50 {:?}, \
         max {:?}; RTT p50 {} us, p99 {} us; transitions to local {}; local decisions {local}",
        records.len(),
        options.degrade_rtt.as_millis(),
        latencies[latencies.len() / 2],
        latencies.last().unwrap(),
        s.rtt_p50_us,
        s.rtt_p99_us,
        s.transitions_to_local
    );
    assert_eq!(
        s.transitions_to_local, 0,
        "a saturated client went local: {s:?}"
    );
    // The load did what the test is about: round trips as the caller measures them were slow,
    // for far longer than degrade_after.
    assert!(
        s.rtt_p50_us > options.degrade_rtt.as_micros() as u64,
        "the runtime was not saturated: {s:?}"
    );
    assert_eq!(local, 0);
    assert!(records.iter().all(|r| r.1 == Some(Mode::Normal)));

    // The rule still sees a Redis that stops answering, once the client is idle again.
    server.freeze().unwrap();
    let stopped = Instant::now();
    let d = rt.block_on(l.acquire("frozen", 1000, 1000, 1)).unwrap();
    let took = stopped.elapsed();
    server.thaw().unwrap();
    println!(
        "REPORT frozen Redis after the load: decided {:?} in {took:?}",
        d.mode
    );
    assert_eq!(d.mode, Mode::Local);
    assert!(
        took < options.request_timeout,
        "went local by the slow-RTT rule, not the timeout: {took:?}"
    );
    assert_eq!(l.stats().transitions_to_local, 1);
}
