//! Coalescing under faults, against a real redis-server: a caller that gave up (timed out, or was
//! decided locally) is never decided again by Redis after a freeze, and one flooded key is that
//! call's problem alone, never a reason to send the whole limiter local.

mod common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::*;
use rl_core::{Decision, ErrorKind, Limiter, Mode, Options};

const LIMIT: u64 = 1_000_000;
const WINDOW: u64 = 60_000;
/// Concurrent callers on one key: one call in flight, the others queued behind it.
const CALLERS: usize = 64;

/// What Redis holds for `key`, read by a second limiter without the fallback (a `peek` that
/// cannot be answered locally).
fn redis_used(server: &rl_harness::RedisServer, key: &str) -> u64 {
    let strict = limiter(server);
    runtime()
        .block_on(strict.peek(key, LIMIT, WINDOW))
        .expect("peek on Redis")
        .used
}

/// Once Redis answers again, a call on `l`'s own connection comes after every call `l` left on it
/// while Redis was frozen, so Redis has decided all of them when it returns.
fn drained(rt: &tokio::runtime::Runtime, l: &Limiter, key: &str) {
    wait_until("Redis answers again", Duration::from_secs(10), || {
        rt.block_on(l.peek(key, LIMIT, WINDOW)).is_ok()
    });
}

#[test]
fn callers_that_timed_out_during_a_freeze_are_not_decided_by_redis_afterwards() {
    let _heavy = heavy();
    let mut server = server();
    let rt = runtime();
    let timeout = Duration::from_millis(500);
    // No fallback, so callers time out; no retry (a delay as long as the timeout), because a
    // retry is a new caller, alive when it is sent, whose call Redis may rightly decide.
    let options = Options {
        local_fallback: false,
        request_timeout: timeout,
        retry_delay: timeout,
        ..Options::default()
    };
    let l = limiter_with(&server, options);
    let key = "gave-up";
    let warm = rt.block_on(l.acquire(key, LIMIT, WINDOW, 1)).unwrap();
    assert!(warm.allowed && warm.mode == Mode::Normal, "{warm:?}");

    // Frozen at a quiet moment: nothing is on the wire for the key when the callers arrive, so
    // the one call that reaches Redis is the first caller's own.
    server.freeze().unwrap();
    let results: Vec<(Duration, Result<Decision, rl_core::Error>)> = rt.block_on(async {
        let calls: Vec<_> = (0..CALLERS)
            .map(|_| {
                let l = l.clone();
                tokio::spawn(async move {
                    let started = Instant::now();
                    let r = l.acquire(key, LIMIT, WINDOW, 1).await;
                    (started.elapsed(), r)
                })
            })
            .collect();
        let mut out = Vec::new();
        for c in calls {
            out.push(c.await.unwrap());
        }
        out
    });
    std::thread::sleep(Duration::from_millis(300));
    server.thaw().unwrap();
    drained(&rt, &l, key);

    for (took, r) in &results {
        let e = r
            .as_ref()
            .expect_err("Redis was frozen: every caller must time out");
        assert_eq!(e.kind(), ErrorKind::BackendUnavailable, "{e}");
        assert!(
            *took < timeout + Duration::from_millis(250),
            "a caller waited {took:?}; request_timeout {timeout:?}"
        );
    }
    let told = 1 + results
        .iter()
        .filter(|(_, r)| r.as_ref().is_ok_and(|d| d.allowed))
        .count() as u64;
    let held = redis_used(&server, key);
    println!("REPORT {CALLERS} callers timed out on a frozen Redis: Redis holds {held} permits, callers were told {told}");
    // Only the first caller's call was on the wire when it gave up; none of the others may land.
    assert!(
        held <= told + 1,
        "Redis holds {held} permits; callers were told of {told} (+1 for the call already sent)"
    );
}

#[test]
fn callers_that_went_local_during_a_freeze_are_not_decided_by_redis_afterwards() {
    let _heavy = heavy();
    let mut server = server();
    let rt = runtime();
    let l = limiter_with(&server, Options::default());
    let key = "went-local";
    let warm = rt.block_on(l.acquire(key, LIMIT, WINDOW, 1)).unwrap();
    assert!(warm.allowed && warm.mode == Mode::Normal, "{warm:?}");

    server.freeze().unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let told: Arc<Mutex<Vec<Decision>>> = Arc::default();
    let tasks: Vec<_> = (0..CALLERS)
        .map(|_| {
            let (l, stop, told) = (l.clone(), stop.clone(), told.clone());
            rt.spawn(async move {
                while !stop.load(Ordering::Relaxed) {
                    let d = l
                        .acquire(key, LIMIT, WINDOW, 1)
                        .await
                        .expect("with the fallback on, a decision");
                    told.lock().unwrap().push(d);
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
            })
        })
        .collect();
    wait_until("the limiter goes local", Duration::from_secs(5), || {
        l.stats().mode == Mode::Local
    });
    std::thread::sleep(Duration::from_millis(1000));
    server.thaw().unwrap();
    wait_until("back to normal", Duration::from_secs(20), || {
        l.stats().mode == Mode::Normal
    });
    std::thread::sleep(Duration::from_millis(200));
    stop.store(true, Ordering::Relaxed);
    rt.block_on(async {
        for t in tasks {
            t.await.unwrap();
        }
    });

    let told = told.lock().unwrap();
    let count = |m: Mode| told.iter().filter(|d| d.allowed && d.mode == m).count() as u64;
    let (normal, local) = (1 + count(Mode::Normal), count(Mode::Local));
    assert!(local > 0, "no caller was decided locally: {:?}", l.stats());
    wait_until(
        "the local permits are written back",
        Duration::from_secs(10),
        || l.stats().repaired_permits >= local,
    );
    drained(&rt, &l, key);
    let held = redis_used(&server, key);
    println!(
        "REPORT {CALLERS} callers on one key through a 1 s freeze: Redis holds {held} permits; callers were told {normal} normal + \
         {local} local; repaired {}",
        l.stats().repaired_permits
    );
    assert!(
        held <= normal + local + 1,
        "Redis holds {held} permits; callers were told of {normal} normal + {local} local (+1 for the call already sent)"
    );
}

/// More callers than may queue for one key (`MAX_WAITING` = 10 000 in `coalesce.rs`).
const FLOOD: usize = 10_000 + 200;

/// Floods `key` on a frozen Redis and returns the overflowing calls' results, with every call
/// still queued for it.
fn flood(
    server: &mut rl_harness::RedisServer,
    rt: &tokio::runtime::Runtime,
    l: &Limiter,
    key: &'static str,
) -> Flood {
    server.freeze().unwrap();
    let done: Arc<Mutex<Vec<Result<Decision, rl_core::Error>>>> = Arc::default();
    let calls: Vec<_> = (0..FLOOD)
        .map(|_| {
            let (l, done) = (l.clone(), done.clone());
            rt.spawn(async move {
                let r = l.acquire(key, LIMIT, WINDOW, 1).await;
                done.lock().unwrap().push(r.clone());
                r
            })
        })
        .collect();
    // Everything that could queue is queued; what returns while Redis is frozen overflowed.
    wait_until(
        "calls beyond the queue's bound return",
        Duration::from_secs(10),
        || done.lock().unwrap().len() >= FLOOD - 10_001,
    );
    std::thread::sleep(Duration::from_millis(300));
    let overflow = std::mem::take(&mut *done.lock().unwrap());
    Flood { overflow, calls }
}

struct Flood {
    overflow: Vec<Result<Decision, rl_core::Error>>,
    calls: Vec<tokio::task::JoinHandle<Result<Decision, rl_core::Error>>>,
}

#[test]
fn a_flooded_key_is_decided_locally_for_the_overflowing_calls_only() {
    let _heavy = heavy();
    let mut server = server();
    let rt = runtime();
    // Slow enough never to go local over the freeze: only a full queue could send it there.
    let patient = Duration::from_secs(30);
    let l = limiter_with(
        &server,
        Options {
            request_timeout: patient,
            degrade_after: patient,
            ..Options::default()
        },
    );
    for key in ["flooded", "other"] {
        assert_eq!(
            rt.block_on(l.acquire(key, LIMIT, WINDOW, 1)).unwrap().mode,
            Mode::Normal
        );
    }

    let Flood { overflow, calls } = flood(&mut server, &rt, &l, "flooded");
    let s = l.stats();
    server.thaw().unwrap();
    assert!(
        !overflow.is_empty() && overflow.len() < FLOOD - 10_000 + 10,
        "{} calls overflowed",
        overflow.len()
    );
    for r in &overflow {
        let d = r
            .as_ref()
            .expect("an overflowing call is decided locally, not failed");
        assert_eq!(d.mode, Mode::Local, "{d:?}");
    }
    assert_eq!(
        (s.mode, s.transitions_to_local, s.retries),
        (Mode::Normal, 0, 0),
        "a full queue changed the limiter's state: {s:?}"
    );

    let rest = rt.block_on(async {
        let mut rest = Vec::new();
        for c in calls {
            rest.push(c.await.unwrap());
        }
        rest
    });
    let queued: Vec<_> = rest
        .iter()
        .filter(|r| r.as_ref().is_ok_and(|d| d.mode == Mode::Normal))
        .collect();
    assert_eq!(
        queued.len(),
        10_001,
        "every queued call (and the one in flight) is decided by Redis"
    );
    let other = rt.block_on(l.acquire("other", LIMIT, WINDOW, 1)).unwrap();
    assert_eq!(
        other.mode,
        Mode::Normal,
        "another key still decides on Redis"
    );
    let s = l.stats();
    assert_eq!(s.transitions_to_local, 0, "{s:?}");
    println!("REPORT {FLOOD} callers on one frozen key: {} overflowed and were decided locally; stats {s:?}", overflow.len());
}

#[test]
fn a_flooded_key_without_the_fallback_fails_the_overflowing_calls_at_once() {
    let _heavy = heavy();
    let mut server = server();
    let rt = runtime();
    let patient = Duration::from_secs(30);
    let l = limiter_with(
        &server,
        Options {
            request_timeout: patient,
            local_fallback: false,
            ..Options::default()
        },
    );
    assert!(
        rt.block_on(l.acquire("flooded", LIMIT, WINDOW, 1))
            .unwrap()
            .allowed
    );

    let started = Instant::now();
    let Flood { overflow, calls } = flood(&mut server, &rt, &l, "flooded");
    let took = started.elapsed();
    let s = l.stats();
    server.thaw().unwrap();
    assert!(!overflow.is_empty(), "nothing overflowed");
    for r in &overflow {
        let e = r
            .as_ref()
            .expect_err("no fallback: an overflowing call fails");
        assert_eq!(e.kind(), ErrorKind::BackendUnavailable, "{e}");
    }
    assert_eq!(s.retries, 0, "an overflowing call is not retried: {s:?}");
    assert!(took < patient, "the overflowing calls waited {took:?}");
    let rest = rt.block_on(async {
        let mut n = 0;
        for c in calls {
            n += c
                .await
                .unwrap()
                .is_ok_and(|d| d.allowed && d.mode == Mode::Normal) as usize;
        }
        n
    });
    assert_eq!(rest, 10_001, "every queued call is decided by Redis");
}
