//! The local denial cache (`denial_cache`) against a real redis-server: a denial replayed from
//! the cache is one Redis would make too, never outlives Redis's `retry_after_ms`, answers only a
//! cost no lower / a limit no higher / the same window, is cleared by this limiter's own `reset`
//! (not by anyone else's: the documented exception), is counted in `stats()`, is off while
//! `local`, and saves the Redis calls of a hot denied key.

mod common;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::*;
use rl_core::{Decision, Limiter, ManualClock, Mode, Options};

fn no_cache() -> Options {
    Options {
        denial_cache: false,
        ..strict()
    }
}

/// Script calls Redis has run so far (`EVALSHA`, `EVAL`, `FCALL`).
fn script_calls(server: &rl_harness::RedisServer) -> i64 {
    let info = cmd(server, &[b"INFO", b"commandstats"]);
    info.as_str()
        .unwrap()
        .lines()
        .filter(|l| {
            ["cmdstat_evalsha:", "cmdstat_eval:", "cmdstat_fcall:"]
                .iter()
                .any(|p| l.starts_with(p))
        })
        .map(|l| {
            let rest = l.split_once("calls=").unwrap().1;
            rest.split(',').next().unwrap().parse::<i64>().unwrap()
        })
        .sum()
}

/// Runs `f` and says whether the limiter answered it from the cache (its `denials_cached` grew).
async fn cached<T>(l: &Limiter, f: impl std::future::Future<Output = T>) -> (T, bool) {
    let before = l.stats().denials_cached;
    let out = f.await;
    (out, l.stats().denials_cached > before)
}

/// Fills `key` to `limit` under (limit, window) and returns Redis's first denial.
async fn fill(l: &Limiter, key: &str, limit: u64, window: u64) -> Decision {
    for _ in 0..limit {
        assert!(l.acquire(key, limit, window, 1).await.unwrap().allowed);
    }
    let d = l.acquire(key, limit, window, 1).await.unwrap();
    assert!(!d.allowed && d.mode == Mode::Normal, "{d:?}");
    d
}

/// Several tasks on two caching limiters offer far more than the limit on one key, with random
/// costs and three rules (two limits on one window, and a shorter window). Every denial, from
/// Redis or from a cache, is checked against the admitted history (every admission's Redis time
/// and cost): with the history as of the denial's `now_ms`, the request still does not fit at
/// `now_ms + retry_after_ms - 1`, the last millisecond the denial claims. A third limiter without
/// the cache peeks right after each cached denial: when Redis says the request fits by then, it
/// is after the instant the denial named.
#[test]
fn cached_denials_are_ones_redis_makes_and_end_by_its_retry_after() {
    let _heavy = heavy();
    runtime().block_on(offer_far_above_the_limit_and_check_every_denial());
}

/// A denial, its cost and its rule (limit, window).
type Denied = (Decision, u64, (u64, u64));

async fn offer_far_above_the_limit_and_check_every_denial() {
    let server = server();
    let a = limiter_with(&server, strict());
    let c = limiter_with(&server, strict());
    let oracle = limiter_with(&server, no_cache());
    const KEY: &str = "hot";
    const RULES: [(u64, u64); 3] = [(20, 300), (15, 300), (8, 150)];
    let admitted: Arc<Mutex<Vec<(u64, u64)>>> = Arc::default();
    let denials: Arc<Mutex<Vec<Denied>>> = Arc::default();
    let late_peeks: Arc<Mutex<Vec<String>>> = Arc::default();
    let until = Instant::now() + Duration::from_secs(3);
    let tasks: Vec<_> = (0..6u64)
        .map(|t| {
            let l = if t % 2 == 0 { a.clone() } else { c.clone() };
            let oracle = oracle.clone();
            let (admitted, denials, late) = (admitted.clone(), denials.clone(), late_peeks.clone());
            tokio::spawn(async move {
                let mut seed = t * 7919 + 17;
                let mut next = move || {
                    seed ^= seed << 13;
                    seed ^= seed >> 7;
                    seed ^= seed << 17;
                    seed
                };
                while Instant::now() < until {
                    let (limit, window) = RULES[(next() % 3) as usize];
                    let cost = 1 + next() % 4;
                    let (d, from_cache) = cached(&l, l.acquire(KEY, limit, window, cost)).await;
                    let d = d.unwrap();
                    assert_eq!(d.mode, Mode::Normal, "{d:?}");
                    if d.allowed {
                        admitted.lock().unwrap().push((d.now_ms, cost));
                        continue;
                    }
                    assert!(d.retry_after_ms >= 1, "{d:?}");
                    denials.lock().unwrap().push((d, cost, (limit, window)));
                    if from_cache {
                        let p = oracle.peek(KEY, limit, window).await.unwrap();
                        if p.used + cost <= limit && p.now_ms < d.now_ms + d.retry_after_ms {
                            late.lock().unwrap().push(format!(
                                "cached {d:?} (cost {cost}, rule {limit}/{window}) but Redis has room at {}: {p:?}",
                                p.now_ms
                            ));
                        }
                    }
                    // A little pacing, so that windows turn over during the run.
                    if next() % 8 == 0 {
                        tokio::time::sleep(Duration::from_millis(1)).await;
                    }
                }
            })
        })
        .collect();
    for t in tasks {
        t.await.unwrap();
    }
    let admitted = admitted.lock().unwrap().clone();
    let denials = denials.lock().unwrap().clone();
    let late = late_peeks.lock().unwrap().clone();
    assert!(
        late.is_empty(),
        "{} late: {:#?}",
        late.len(),
        &late[..late.len().min(5)]
    );
    let mut wrong = Vec::new();
    for (d, cost, (limit, window)) in &denials {
        let last = d.now_ms + d.retry_after_ms - 1;
        let count: u64 = admitted
            .iter()
            .filter(|&&(t, _)| t <= d.now_ms && t + window > last)
            .map(|&(_, n)| n)
            .sum();
        if count + cost <= *limit {
            wrong.push(format!(
                "{d:?} cost {cost} rule {limit}/{window}: only {count} in the window at {last}"
            ));
        }
    }
    assert!(
        wrong.is_empty(),
        "{} of {} denials claim too long: {:#?}",
        wrong.len(),
        denials.len(),
        &wrong[..wrong.len().min(5)]
    );
    // A share, not a count: how many calls 3 s hold depends on the machine's speed and load
    // (about 30% of the denials came from the caches both at 2,250 and at 3,400 denials).
    let cached = a.stats().denials_cached + c.stats().denials_cached;
    assert!(
        denials.len() > 500 && cached * 5 > denials.len() as u64,
        "the cache answered only {cached} of {} denials",
        denials.len()
    );
    eprintln!(
        "{} admitted, {} denials, {cached} from the caches",
        admitted.len(),
        denials.len()
    );
}

/// One limiter alone on a full key polls it every millisecond until it is admitted: the cache
/// answers until shortly before the instant Redis named, never at or after it, and the request is
/// admitted within a few milliseconds of that instant.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cache_stops_before_the_retry_instant_redis_named() {
    let server = server();
    let l = limiter_with(&server, strict());
    let first = fill(&l, "poll", 5, 400).await;
    let fits_at = first.now_ms + first.retry_after_ms;
    let mut cached_until = 0;
    let mut cached_n = 0;
    let admitted = loop {
        let before = wall_ms();
        let (d, from_cache) = cached(&l, l.acquire("poll", 5, 400, 1)).await;
        let d = d.unwrap();
        if from_cache {
            assert!(!d.allowed);
            assert!(
                before < fits_at,
                "denied from the cache at {before}, Redis said it fits at {fits_at}"
            );
            assert_eq!(
                d.now_ms + d.retry_after_ms,
                fits_at,
                "a replay names Redis's instant: {d:?}"
            );
            assert!(d.now_ms <= wall_ms(), "{d:?}");
            assert_eq!(d.used, first.used);
            cached_until = before;
            cached_n += 1;
        }
        if d.allowed {
            break d;
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    };
    assert!(cached_n > 50, "only {cached_n} cached denials");
    assert!(
        admitted.now_ms >= fits_at && admitted.now_ms <= fits_at + 20,
        "admitted at {}, Redis said {fits_at}",
        admitted.now_ms
    );
    // The cache gives up at most its margin (1 ms + 1 ms per second) plus the poll period early.
    assert!(
        cached_until + 10 >= fits_at,
        "the cache stopped at {cached_until}, {} ms early",
        fits_at - cached_until
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lower_cost_a_higher_limit_or_another_window_goes_to_redis() {
    let server = server();
    let l = limiter_with(&server, strict());
    for _ in 0..8 {
        assert!(l.acquire("rules", 10, 5000, 1).await.unwrap().allowed);
    }
    // 8 + 5 > 10: Redis denies and the cache learns cost 5 under 10/5000.
    let (d, hit) = cached(&l, l.acquire("rules", 10, 5000, 5)).await;
    assert!(!d.unwrap().allowed && !hit);
    for (cost, limit) in [(5, 10), (6, 10), (10, 10), (5, 9), (7, 8)] {
        let (d, hit) = cached(&l, l.acquire("rules", limit, 5000, cost)).await;
        let d = d.unwrap();
        assert!(
            !d.allowed && hit,
            "cost {cost} limit {limit}: {d:?} from cache {hit}"
        );
        assert_eq!((d.used, d.remaining), (8, limit - 8), "{d:?}");
    }
    // A lower cost fits: Redis is asked, and admits it.
    let (d, hit) = cached(&l, l.acquire("rules", 10, 5000, 2)).await;
    let d = d.unwrap();
    assert!(d.allowed && !hit, "{d:?}");
    // A higher limit: asked, and admitted.
    let (d, hit) = cached(&l, l.acquire("rules", 16, 5000, 5)).await;
    assert!(d.unwrap().allowed && !hit);
    // Another window on the same key: asked (here a 1 ms window, empty a few ms later, admits).
    tokio::time::sleep(Duration::from_millis(3)).await;
    let (d, hit) = cached(&l, l.acquire("rules", 10, 1, 5)).await;
    assert!(d.unwrap().allowed && !hit);
    // Another key: asked.
    let (d, hit) = cached(&l, l.acquire("other", 10, 5000, 5)).await;
    assert!(d.unwrap().allowed && !hit);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_peek_denial_answers_later_peeks_and_acquires() {
    let server = server();
    let l = limiter_with(&server, strict());
    fill(&l, "peeked", 3, 5000).await;
    // The acquire's denial (cost 1) answers a peek (cost 1) from the cache.
    let (p, hit) = cached(&l, l.peek("peeked", 3, 5000)).await;
    let p = p.unwrap();
    assert!(!p.allowed && hit && p.used == 3, "{p:?}");
    let other = limiter_with(&server, strict());
    let (p, hit) = cached(&other, other.peek("peeked", 3, 5000)).await;
    assert!(!p.unwrap().allowed && !hit);
    let (d, hit) = cached(&other, other.acquire("peeked", 3, 5000, 2)).await;
    assert!(
        !d.unwrap().allowed && hit,
        "the peek's denial covers cost 2"
    );
}

/// Another limiter's reset is the documented exception: this instance goes on denying until the
/// deadline Redis named, though Redis would now admit. Its own reset clears the entry at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reset_elsewhere_is_not_seen_until_the_deadline_but_an_own_reset_clears_it() {
    let server = server();
    let a = limiter_with(&server, strict());
    let b = limiter_with(&server, strict());
    let first = fill(&a, "reset", 4, 1500).await;
    let fits_at = first.now_ms + first.retry_after_ms;
    b.reset("reset").await.unwrap();
    // Redis has room now; `a` does not know.
    assert!(b.peek("reset", 4, 1500).await.unwrap().used == 0);
    let (d, hit) = cached(&a, a.acquire("reset", 4, 1500, 1)).await;
    let d = d.unwrap();
    assert!(!d.allowed && hit, "{d:?}");
    assert!(wall_ms() < fits_at);
    // Until the deadline (every denial until then from the cache), then Redis admits.
    let admitted = loop {
        let (d, hit) = cached(&a, a.acquire("reset", 4, 1500, 1)).await;
        let d = d.unwrap();
        if d.allowed {
            break d;
        }
        assert!(hit, "only the cache denies: Redis has room: {d:?}");
        tokio::time::sleep(Duration::from_millis(5)).await;
    };
    assert!(admitted.now_ms + 10 >= fits_at, "{admitted:?} vs {fits_at}");

    // Its own reset clears the entry: the next call goes to Redis and is admitted.
    fill(&a, "own", 4, 60_000).await;
    let (d, hit) = cached(&a, a.acquire("own", 4, 60_000, 1)).await;
    assert!(!d.unwrap().allowed && hit);
    a.reset("own").await.unwrap();
    let (d, hit) = cached(&a, a.acquire("own", 4, 60_000, 1)).await;
    let d = d.unwrap();
    assert!(d.allowed && !hit, "{d:?}");
    assert_eq!(d.used, 1);
}

/// A denial whose request was sent before this limiter's own reset and whose reply is handled
/// after the reset completed must not be cached (the reset's clearing came first). Redis is
/// frozen with the acquire and then the reset on the wire, so both replies arrive together and
/// their tasks race.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_denial_in_flight_across_an_own_reset_is_not_cached() {
    let mut server = server();
    let l = limiter_with(
        &server,
        Options {
            request_timeout: Duration::from_secs(10),
            ..strict()
        },
    );
    for round in 0..20 {
        fill(&l, "race", 2, 60_000).await;
        l.reset("race").await.unwrap();
        for _ in 0..2 {
            assert!(l.acquire("race", 2, 60_000, 1).await.unwrap().allowed);
        }
        server.freeze().unwrap();
        let (l1, l2) = (l.clone(), l.clone());
        let acquire = tokio::spawn(async move { l1.acquire("race", 2, 60_000, 1).await });
        tokio::time::sleep(Duration::from_millis(20)).await;
        let reset = tokio::spawn(async move { l2.reset("race").await });
        tokio::time::sleep(Duration::from_millis(20)).await;
        server.thaw().unwrap();
        let denied = acquire.await.unwrap().unwrap();
        reset.await.unwrap().unwrap();
        assert!(
            !denied.allowed,
            "round {round}: sent before the reset: {denied:?}"
        );
        let (d, hit) = cached(&l, l.acquire("race", 2, 60_000, 1)).await;
        let d = d.unwrap();
        assert!(
            d.allowed && !hit,
            "round {round}: the pre-reset denial was cached: {d:?}"
        );
        l.reset("race").await.unwrap();
    }
}

/// A hot denied key: 2000 acquires in a loop cost one script call with the cache, 2000 without.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hot_denied_key_costs_one_redis_call_and_is_counted_in_stats() {
    const N: u64 = 2000;
    let server = server();
    let mut per_mode = Vec::new();
    for (name, options) in [("cache", strict()), ("no cache", no_cache())] {
        let l = limiter_with(&server, options);
        let key = format!("hot-{name}");
        fill(&l, &key, 10, 60_000).await;
        let before = (script_calls(&server), l.stats());
        let started = Instant::now();
        for _ in 0..N {
            assert!(!l.acquire(&key, 10, 60_000, 1).await.unwrap().allowed);
        }
        let took = started.elapsed();
        let after = (script_calls(&server), l.stats());
        let calls = after.0 - before.0;
        let cached = after.1.denials_cached - before.1.denials_cached;
        let normal = after.1.decisions_normal - before.1.decisions_normal;
        eprintln!(
            "{name}: {N} denied acquires, {calls} script calls, {cached} cached, {:.1} µs each",
            took.as_secs_f64() * 1e6 / N as f64
        );
        per_mode.push((calls, cached, normal));
    }
    let (with, without) = (per_mode[0], per_mode[1]);
    assert_eq!(
        with,
        (0, N, 0),
        "with the cache: (script calls, cached, decisions_normal)"
    );
    assert_eq!(without, (N as i64, 0, N), "without the cache");
}

/// While `local`, the local path decides: the cache neither answers nor learns.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cache_is_off_while_local() {
    let mut server = server();
    let l = limiter_with(
        &server,
        Options {
            instances: Some(1),
            ..Options::default()
        },
    );
    fill(&l, "down", 6, 60_000).await;
    let (d, hit) = cached(&l, l.acquire("down", 6, 60_000, 1)).await;
    assert!(!d.unwrap().allowed && hit);
    server.kill().unwrap();
    // A call the cache cannot answer meets the dead Redis and sends the limiter local.
    let d = l.peek("elsewhere", 6, 60_000).await.unwrap();
    assert_eq!(d.mode, Mode::Local);
    for _ in 0..20 {
        let (d, hit) = cached(&l, l.acquire("down", 6, 60_000, 1)).await;
        let d = d.unwrap();
        assert_eq!(d.mode, Mode::Local, "{d:?}");
        assert!(
            !d.allowed && !hit,
            "the local record denies, not the cache: {d:?}"
        );
    }
}

#[test]
fn off_by_option_and_on_the_client_clock_when_one_is_given() {
    let server = server();
    let t0 = wall_ms();
    let clock = Arc::new(ManualClock::new(t0));
    let l = blocking_with(&server, client_clock(clock.clone()));
    for _ in 0..3 {
        assert!(l.acquire("clocked", 3, 1000, 1).unwrap().allowed);
    }
    let first = l.acquire("clocked", 3, 1000, 1).unwrap();
    assert!(!first.allowed);
    assert_eq!(first.retry_after_ms, 1000);
    let cached_before = l.stats().denials_cached;
    // The client clock has not moved: still denied from the cache, however much real time passes.
    std::thread::sleep(Duration::from_millis(30));
    clock.advance(999);
    let d = l.acquire("clocked", 3, 1000, 1).unwrap();
    assert!(!d.allowed);
    assert_eq!((d.now_ms, d.retry_after_ms), (t0 + 999, 1), "{d:?}");
    assert_eq!(l.stats().denials_cached, cached_before + 1);
    // On the clock's instant Redis named, the request goes to Redis and fits.
    clock.advance(1);
    let d = l.acquire("clocked", 3, 1000, 1).unwrap();
    assert!(d.allowed, "{d:?}");
    assert_eq!(l.stats().denials_cached, cached_before + 1);

    let off = blocking_with(&server, no_cache());
    assert!(!off.as_async().options().denial_cache);
    for _ in 0..3 {
        assert!(off.acquire("plain", 3, 60_000, 1).unwrap().allowed);
    }
    for _ in 0..5 {
        assert!(!off.acquire("plain", 3, 60_000, 1).unwrap().allowed);
    }
    assert_eq!(off.stats().denials_cached, 0);
    assert_eq!(off.stats().decisions_normal, 8);
    assert_eq!(off.stats().denied_normal, 5);
}

#[test]
fn on_by_default_and_zero_on_the_memory_backend() {
    assert!(Options::default().denial_cache);
    let m = rl_core::blocking::Limiter::open(None, Options::default()).unwrap();
    for _ in 0..3 {
        m.acquire("m", 1, 1000, 1).unwrap();
    }
    assert_eq!(m.stats().denials_cached, 0);
    assert_eq!(
        (m.stats().decisions_memory, m.stats().denied_memory),
        (3, 2)
    );
}

/// A task looping on a denied key gets every answer at once from the cache; it must still yield
/// now and then, or the Redis calls of other tasks on the same runtime thread never run (a
/// 16-task closed loop timed every Redis call out before the cached path spent tokio's budget).
#[test]
fn a_task_spinning_on_a_cached_denial_does_not_starve_redis_calls() {
    let server = server();
    let limiter = limiter(&server);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        assert!(limiter.acquire("spin", 1, 60_000, 1).await.unwrap().allowed);
        assert!(!limiter.acquire("spin", 1, 60_000, 1).await.unwrap().allowed);
        let spinning = limiter.clone();
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let stop2 = stop.clone();
        // Never awaits anything but the limiter: only the limiter can let others run.
        let spinner = tokio::spawn(async move {
            let mut n = 0u64;
            while !stop2.load(std::sync::atomic::Ordering::Relaxed) {
                assert!(
                    !spinning
                        .acquire("spin", 1, 60_000, 1)
                        .await
                        .unwrap()
                        .allowed
                );
                n += 1;
            }
            n
        });
        tokio::task::yield_now().await;
        let started = Instant::now();
        for i in 0..20 {
            let d = limiter.acquire(format!("other-{i}"), 10, 60_000, 1).await;
            assert!(
                d.as_ref().is_ok_and(|d| d.allowed),
                "call {i} on another key beside the spinner: {d:?} after {:?}",
                started.elapsed()
            );
        }
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        let spun = spinner.await.unwrap();
        assert!(spun > 0, "the spinner ran");
        assert!(limiter.stats().denials_cached >= spun);
    });
}
