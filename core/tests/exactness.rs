//! Exactness under concurrency, measured from the decisions' own server times.

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::*;
use rl_core::{audit::max_in_any_window, Limiter, Mode, Options};

/// 16 concurrent callers offer 3x the limit, evenly paced, for 3 windows. Returns the admitted
/// (now_ms, cost) pairs and how many were offered.
async fn offer_three_times_the_limit(
    limiter: Limiter,
    limit: u64,
    window_ms: u64,
) -> (Vec<(u64, u64)>, usize) {
    const CALLERS: u64 = 16;
    let total = 3 * 3 * limit; // 3x the limit per window, for 3 windows
    let per_caller = total / CALLERS;
    let gap = Duration::from_micros(3 * window_ms * 1000 / per_caller);
    limiter.reset("exact").await.unwrap();
    let start = Instant::now();
    let mut tasks = Vec::new();
    for c in 0..CALLERS {
        let l = limiter.clone();
        tasks.push(tokio::spawn(async move {
            let mut admitted = Vec::new();
            // Stagger callers so the offered load is smooth, not 16-request bursts.
            let offset = gap * c as u32 / CALLERS as u32;
            for i in 0..per_caller {
                tokio::time::sleep_until((start + offset + gap * i as u32).into()).await;
                let d = l.acquire("exact", limit, window_ms, 1).await.unwrap();
                assert_eq!(d.used + d.remaining, limit, "{d:?}");
                if d.allowed {
                    admitted.push((d.now_ms, 1));
                }
            }
            admitted
        }));
    }
    let mut all = Vec::new();
    for t in tasks {
        all.extend(t.await.unwrap());
    }
    (all, (per_caller * CALLERS) as usize)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_admits_exactly_the_limit_in_any_window_under_16_callers() {
    let server = server();
    let limiter = limiter(&server);
    let (limit, window) = (200, 500);
    let (admitted, offered) = offer_three_times_the_limit(limiter, limit, window).await;
    let max = max_in_any_window(&admitted, window);
    assert_eq!(
        max,
        limit,
        "max admitted in any {window} ms window ({} admitted of {offered})",
        admitted.len()
    );
    // Three windows' worth of time admit about three limits, never more than four.
    assert!(
        admitted.len() as u64 >= 2 * limit && admitted.len() as u64 <= 4 * limit,
        "{}",
        admitted.len()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_admits_exactly_the_limit_in_any_window_under_16_callers() {
    let limiter = Limiter::memory(Options::default()).unwrap();
    let (limit, window) = (200, 500);
    let (admitted, _) = offer_three_times_the_limit(limiter.clone(), limit, window).await;
    assert_eq!(max_in_any_window(&admitted, window), limit);
    assert_eq!(
        limiter.peek("exact", limit, window).await.unwrap().mode,
        Mode::Memory
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn burst_of_concurrent_weighted_acquires_never_overshoots() {
    let server = server();
    let limiter = limiter(&server);
    let mut tasks = Vec::new();
    for i in 0..64u64 {
        let l = limiter.clone();
        let cost = 1 + i % 3;
        tasks.push(tokio::spawn(async move {
            (cost, l.acquire("burst", 100, 60_000, cost).await.unwrap())
        }));
    }
    let mut granted = 0;
    for t in tasks {
        let (cost, d) = t.await.unwrap();
        if d.allowed {
            granted += cost;
        }
    }
    let state = limiter.peek("burst", 100, 60_000).await.unwrap();
    // Every granted permit is counted, and no more than the limit were granted.
    assert_eq!(state.used, granted, "{state:?}");
    assert!(granted <= 100);
    // 64 requests of cost 1..3 offer 127 permits; the window fills to within one request's cost.
    assert!(granted >= 98, "granted {granted}");
}

fn evalsha_calls(server: &rl_harness::RedisServer) -> i64 {
    let info = cmd(server, &[b"INFO", b"commandstats"]);
    let text = info.as_str().unwrap().to_string();
    text.lines()
        .find_map(|l| l.strip_prefix("cmdstat_evalsha:calls="))
        .map(|rest| rest.split(',').next().unwrap().parse().unwrap())
        .unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_requests_for_one_key_share_script_calls_and_stay_exact() {
    let server = server();
    // The first call waits out the pause below, so it must not time out meanwhile.
    let limiter = limiter_with(
        &server,
        Options {
            request_timeout: Duration::from_secs(30),
            ..strict()
        },
    );
    limiter.acquire("warm", 1, 1000, 1).await.unwrap(); // connect and load the script first
    let before = evalsha_calls(&server);
    // Redis holds every script call until all 512 requests are queued, so how many calls they
    // take is the design's, not the scheduler's: the first request's call is in flight, the other
    // 511 wait behind it and go in batches of at most 128.
    cmd(&server, &[b"CLIENT", b"PAUSE", b"30000", b"WRITE"]);
    let started = Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for i in 0..512u64 {
        let (l, started) = (limiter.clone(), started.clone());
        // Mixed limits, windows and costs on one key: each is decided by its own rules, in order.
        tasks.push(tokio::spawn(async move {
            // Counted in the same poll that queues the request (nothing awaits before the queue).
            started.fetch_add(1, Ordering::SeqCst);
            l.acquire("hot", 300, 60_000 + i % 2, 1 + i % 2)
                .await
                .unwrap()
        }));
    }
    while started.load(Ordering::SeqCst) < 512 {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    cmd(&server, &[b"CLIENT", b"UNPAUSE"]);
    let mut granted = 0;
    for (i, t) in tasks.into_iter().enumerate() {
        let d = t.await.unwrap();
        if d.allowed {
            granted += 1 + i as u64 % 2;
        }
    }
    let calls = evalsha_calls(&server) - before;
    eprintln!("512 queued requests took {calls} script calls");
    assert!(
        calls <= 1 + 511u64.div_ceil(128) as i64,
        "512 queued requests took {calls} script calls"
    );
    let state = limiter.peek("hot", 300, 60_000).await.unwrap();
    assert_eq!(state.used, granted);
    assert!((299..=300).contains(&granted), "granted {granted}");
}
