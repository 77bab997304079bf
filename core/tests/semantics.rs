//! The window's edges, weighted cost, retry_after and the other Decision fields, on an explicit
//! client clock so every millisecond is chosen by the test. Each test runs on Redis and on the
//! memory backend.

mod common;

use std::sync::Arc;

use common::*;
use rl_core::{blocking, ErrorKind, Limiter, ManualClock, Mode, Options};

fn both(clock: &Arc<ManualClock>, server: &rl_harness::RedisServer) -> Vec<blocking::Limiter> {
    vec![
        blocking_with(server, client_clock(clock.clone())),
        blocking::Limiter::from_async(Limiter::memory(client_clock(clock.clone())).unwrap()),
    ]
}

#[test]
fn window_is_half_open_now_minus_w_to_now() {
    let server = server();
    let t0 = wall_ms();
    let clock = Arc::new(ManualClock::new(t0));
    for l in both(&clock, &server) {
        clock.set(t0);
        for _ in 0..3 {
            assert!(l.acquire("edge", 3, 1000, 1).unwrap().allowed);
        }
        clock.set(t0 + 999);
        let d = l.acquire("edge", 3, 1000, 1).unwrap();
        assert!(
            !d.allowed,
            "t0 is still inside (t0-1+999-1000, t0+999]: {d:?}"
        );
        assert_eq!(d.retry_after_ms, 1);
        assert_eq!(d.now_ms, t0 + 999);
        clock.set(t0 + 1000);
        let d = l.acquire("edge", 3, 1000, 1).unwrap();
        assert!(d.allowed, "t0 left the window at t0+1000: {d:?}");
        assert_eq!(d.used, 1);
        assert_eq!(d.remaining, 2);
        assert_eq!(d.reset_after_ms, 1000);
        l.reset("edge").unwrap();
    }
}

#[test]
fn denied_request_succeeds_after_exactly_retry_after_and_not_1ms_earlier() {
    let server = server();
    let t0 = wall_ms();
    let clock = Arc::new(ManualClock::new(t0));
    for l in both(&clock, &server) {
        clock.set(t0);
        assert!(l.acquire("retry", 5, 1000, 2).unwrap().allowed); // t0: 2
        clock.set(t0 + 100);
        assert!(l.acquire("retry", 5, 1000, 1).unwrap().allowed); // t0+100: 1
        clock.set(t0 + 300);
        assert!(l.acquire("retry", 5, 1000, 2).unwrap().allowed); // t0+300: 2 -> used 5
        clock.set(t0 + 400);
        // Cost 3 needs 3 permits to leave: t0's 2 then t0+100's 1, so it fits at t0+1100.
        let d = l.acquire("retry", 5, 1000, 3).unwrap();
        assert!(!d.allowed);
        assert_eq!((d.used, d.remaining), (5, 0));
        assert_eq!(d.retry_after_ms, 700);
        assert_eq!(
            d.reset_after_ms, 900,
            "the newest permit (t0+300) leaves at t0+1300"
        );
        clock.set(t0 + 400 + d.retry_after_ms - 1);
        let early = l.acquire("retry", 5, 1000, 3).unwrap();
        assert!(!early.allowed, "1 ms early: {early:?}");
        assert_eq!(early.retry_after_ms, 1);
        clock.set(t0 + 400 + d.retry_after_ms);
        let on_time = l.acquire("retry", 5, 1000, 3).unwrap();
        assert!(on_time.allowed, "{on_time:?}");
        assert_eq!(on_time.used, 5);
        assert_eq!(on_time.retry_after_ms, 0);
        l.reset("retry").unwrap();
    }
}

#[test]
fn weighted_cost_counts_permits_not_requests() {
    let server = server();
    let clock = Arc::new(ManualClock::new(wall_ms()));
    for l in both(&clock, &server) {
        let d = l.acquire("w", 10, 60_000, 7).unwrap();
        assert!(d.allowed && d.used == 7 && d.remaining == 3);
        let d = l.acquire("w", 10, 60_000, 4).unwrap();
        assert!(
            !d.allowed && d.used == 7 && d.remaining == 3,
            "denied requests take nothing: {d:?}"
        );
        let d = l.acquire("w", 10, 60_000, 3).unwrap();
        assert!(d.allowed && d.used == 10 && d.remaining == 0);
        l.reset("w").unwrap();
    }
}

#[test]
fn peek_reports_without_consuming() {
    let server = server();
    let clock = Arc::new(ManualClock::new(wall_ms()));
    for l in both(&clock, &server) {
        let empty = l.peek("p", 2, 1000).unwrap();
        assert!(
            empty.allowed && empty.used == 0 && empty.remaining == 2 && empty.reset_after_ms == 0
        );
        l.acquire("p", 2, 1000, 2).unwrap();
        for _ in 0..3 {
            let d = l.peek("p", 2, 1000).unwrap();
            assert!(
                !d.allowed && d.used == 2 && d.remaining == 0 && d.retry_after_ms == 1000,
                "{d:?}"
            );
        }
        l.reset("p").unwrap();
        assert_eq!(
            l.peek("p", 2, 1000).unwrap().used,
            0,
            "reset forgets the window"
        );
    }
}

#[test]
fn limit_and_window_change_online_per_call() {
    let server = server();
    let clock = Arc::new(ManualClock::new(wall_ms()));
    for l in both(&clock, &server) {
        for _ in 0..5 {
            assert!(l.acquire("online", 5, 1000, 1).unwrap().allowed);
        }
        assert!(!l.acquire("online", 5, 1000, 1).unwrap().allowed);
        // The operator raises the limit: the same window now has room.
        let d = l.acquire("online", 8, 1000, 1).unwrap();
        assert!(d.allowed && d.used == 6 && d.remaining == 2, "{d:?}");
        l.reset("online").unwrap();
    }
}

#[test]
fn modes_name_the_deciding_path() {
    let server = server();
    let redis = limiter(&server);
    let memory = Limiter::memory(Options::default()).unwrap();
    let rt = runtime();
    assert_eq!(
        rt.block_on(redis.acquire("m", 1, 1000, 1)).unwrap().mode,
        Mode::Normal
    );
    assert_eq!(
        rt.block_on(memory.acquire("m", 1, 1000, 1)).unwrap().mode,
        Mode::Memory
    );
    assert_eq!(Mode::Normal.as_str(), "normal");
}

#[test]
fn server_time_is_used_by_default() {
    let server = server();
    let l = blocking_with(&server, strict());
    let before = wall_ms();
    let d = l.acquire("t", 1, 1000, 1).unwrap();
    let after = wall_ms();
    // Same host: Redis TIME and the wall clock agree to within the call.
    assert!(
        d.now_ms + 5 >= before && d.now_ms <= after + 5,
        "{before} <= {} <= {after}",
        d.now_ms
    );
}

#[test]
fn client_clock_further_than_max_skew_is_refused_with_a_typed_error() {
    let server = server();
    let clock = Arc::new(ManualClock::new(wall_ms() + 2000));
    let l = blocking_with(
        &server,
        Options {
            clock: Some(clock.clone()),
            max_clock_skew_ms: 1000,
            ..strict()
        },
    );
    let e = l.acquire("skew", 10, 1000, 1).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::ClockSkew, "{e}");
    assert_eq!(dbsize(&server), 0, "a refused call writes nothing");
    clock.set(wall_ms() + 200);
    assert!(
        l.acquire("skew", 10, 1000, 1).unwrap().allowed,
        "within the allowance it works"
    );
}

#[test]
fn time_never_runs_backwards_for_a_window() {
    let server = server();
    let t0 = wall_ms();
    let clock = Arc::new(ManualClock::new(t0));
    for l in both(&clock, &server) {
        clock.set(t0 + 500);
        assert!(l.acquire("back", 1, 1000, 1).unwrap().allowed);
        clock.set(t0); // a client clock stepping back must not reopen the window
        let d = l.acquire("back", 1, 1000, 1).unwrap();
        assert!(!d.allowed);
        assert_eq!(d.now_ms, t0 + 500);
        l.reset("back").unwrap();
    }
}

#[test]
fn a_short_window_call_keeps_what_a_longer_window_on_the_key_counts() {
    let server = server();
    let t0 = wall_ms();
    let clock = Arc::new(ManualClock::new(t0));
    for l in both(&clock, &server) {
        clock.set(t0);
        for i in 0..5 {
            clock.set(t0 + i);
            assert!(l.acquire("mixed", 5, 10_000, 1).unwrap().allowed);
        }
        // A 10 ms rule on the same key admits: its own window is empty.
        clock.set(t0 + 100);
        assert!(l.acquire("mixed", 5, 10, 1).unwrap().allowed);
        // The 10 s rule still counts all six permits admitted within its span, so it is full.
        clock.set(t0 + 200);
        let d = l.acquire("mixed", 5, 10_000, 1).unwrap();
        assert!(
            !d.allowed,
            "the short window's admission dropped the long window's history: {d:?}"
        );
        assert_eq!(d.used, 6);
        assert_eq!(
            d.retry_after_ms,
            10_000 - 200 + 1,
            "two permits must leave: t0 and t0+1"
        );
        l.reset("mixed").unwrap();
    }
}

/// Redis TTL in ms and the server's clock, read together.
fn pttl_and_time(server: &rl_harness::RedisServer, key: &[u8]) -> (i64, u64) {
    let ttl = cmd(server, &[b"PTTL", key]).as_int().unwrap();
    let rl_harness::RespValue::Array(t) = cmd(server, &[b"TIME"]) else {
        panic!("TIME")
    };
    let secs: u64 = t[0].as_str().unwrap().parse().unwrap();
    let micros: u64 = t[1].as_str().unwrap().parse().unwrap();
    (ttl, secs * 1000 + micros / 1000)
}

#[test]
fn the_ttl_outlives_every_live_bucket_after_a_client_clock_ran_ahead() {
    let server = server();
    // A legacy caller's clock runs 50 s ahead of Redis, inside its 60 s allowance.
    let ahead = Arc::new(ManualClock::new(wall_ms() + 50_000));
    let legacy = blocking_with(
        &server,
        Options {
            clock: Some(ahead.clone()),
            max_clock_skew_ms: 60_000,
            ..strict()
        },
    );
    let native = blocking_with(&server, strict());
    assert!(legacy.acquire("ttl", 10, 1000, 1).unwrap().allowed);
    // A server-clock caller with a 200 s window admits into the same key; time never runs
    // backwards for a window, so its bucket sits at the legacy caller's (later) millisecond.
    let d = native.acquire("ttl", 10, 200_000, 1).unwrap();
    assert!(d.allowed, "{d:?}");
    let (ttl, server_now) = pttl_and_time(&server, &native.redis_key("ttl"));
    // That bucket counts for server-clock callers until d.now_ms + 200 s (server time).
    let live_until = d.now_ms + 200_000;
    assert!(
        server_now + ttl as u64 >= live_until,
        "the key expires at {} but holds a bucket live until {live_until} (server time {server_now})",
        server_now + ttl as u64
    );
}

const REPAIR_LUA: &str = include_str!("../../lua/repair.lua");

#[test]
fn a_repair_keeps_the_longest_window_and_never_shortens_the_ttl() {
    let server = server();
    let l = blocking_with(&server, strict());
    let key = l.redis_key("rep");
    let t = l.acquire("rep", 100, 600_000, 5).unwrap().now_ms;
    std::thread::sleep(std::time::Duration::from_millis(1200));
    let (ttl_before, _) = pttl_and_time(&server, &key);
    // An instance with a 1 s rule on the same key flushes 2 local permits.
    let mut marker = key.clone();
    marker.extend_from_slice(b":repair");
    let pack = |v: &[u64]| {
        v.iter()
            .flat_map(|&x| (x as f64).to_be_bytes())
            .collect::<Vec<u8>>()
    };
    let (window, local) = (pack(&[1000, 2000]), pack(&[wall_ms(), 2]));
    let args: Vec<&[u8]> = vec![
        b"EVAL",
        REPAIR_LUA.as_bytes(),
        b"2",
        &key,
        &marker,
        b"rl-repair-1",
        b"b",
        &window,
        b"b:1",
        &local,
        b"",
        b"",
    ];
    cmd(&server, &args);
    let (ttl_after, _) = pttl_and_time(&server, &key);
    assert!(
        ttl_after >= ttl_before - 1000,
        "the repair shortened the TTL from {ttl_before} to {ttl_after} ms"
    );
    let d = l.peek("rep", 100, 600_000).unwrap();
    assert_eq!(
        d.used, 7,
        "the 600 s rule still counts the 5 permits admitted at {t}: {d:?}"
    );
}

/// `calls=` of one command in `INFO commandstats` (commands a script runs are counted too).
fn calls(server: &rl_harness::RedisServer, command: &str) -> i64 {
    let info = cmd(server, &[b"INFO", b"commandstats"]);
    let prefix = format!("cmdstat_{command}:calls=");
    info.as_str()
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix(prefix.as_str()))
        .map_or(0, |r| r.split(',').next().unwrap().parse().unwrap())
}

#[test]
fn a_large_cost_denial_reads_a_logarithmic_number_of_buckets() {
    let server = server();
    let t0 = wall_ms();
    let clock = Arc::new(ManualClock::new(t0));
    let l = blocking_with(&server, client_clock(clock.clone()));
    // 20 000 buckets of 1 permit each, one per millisecond, in a 60 s window.
    for ms in 0..20_000u64 {
        clock.set(t0 + ms);
        assert!(l.acquire("big", 1_000_000, 60_000, 1).unwrap().allowed);
    }
    cmd(&server, &[b"CONFIG", b"RESETSTAT"]);
    // Needs 10 001 permits to leave: the retry time is found without reading them one by one.
    let d = l.acquire("big", 1_000_000, 60_000, 990_001).unwrap();
    assert!(!d.allowed);
    assert_eq!(d.retry_after_ms, 60_000 - 19_999 + 10_000, "{d:?}");
    // Apart from one 2-bucket LRANGE at the front of a search, the script reads single buckets
    // (LINDEX), so these counts bound the buckets it read (the previous script paged through
    // the window with ever larger LRANGEs).
    let (lrange, lindex) = (calls(&server, "lrange"), calls(&server, "lindex"));
    assert!(lrange <= 1, "{lrange} LRANGE: paging through the window");
    assert!(lindex <= 2 + 2 * 16, "{lindex} LINDEX for 20 000 buckets");
}
