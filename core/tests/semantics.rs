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
        assert!(!d.allowed, "t0 is still inside (t0-1+999-1000, t0+999]: {d:?}");
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
        assert_eq!(d.reset_after_ms, 900, "the newest permit (t0+300) leaves at t0+1300");
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
        assert!(!d.allowed && d.used == 7 && d.remaining == 3, "denied requests take nothing: {d:?}");
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
        assert!(empty.allowed && empty.used == 0 && empty.remaining == 2 && empty.reset_after_ms == 0);
        l.acquire("p", 2, 1000, 2).unwrap();
        for _ in 0..3 {
            let d = l.peek("p", 2, 1000).unwrap();
            assert!(!d.allowed && d.used == 2 && d.remaining == 0 && d.retry_after_ms == 1000, "{d:?}");
        }
        l.reset("p").unwrap();
        assert_eq!(l.peek("p", 2, 1000).unwrap().used, 0, "reset forgets the window");
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
    assert_eq!(rt.block_on(redis.acquire("m", 1, 1000, 1)).unwrap().mode, Mode::Normal);
    assert_eq!(rt.block_on(memory.acquire("m", 1, 1000, 1)).unwrap().mode, Mode::Memory);
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
    assert!(d.now_ms + 5 >= before && d.now_ms <= after + 5, "{before} <= {} <= {after}", d.now_ms);
}

#[test]
fn client_clock_further_than_max_skew_is_refused_with_a_typed_error() {
    let server = server();
    let clock = Arc::new(ManualClock::new(wall_ms() + 2000));
    let l = blocking_with(&server, Options { clock: Some(clock.clone()), max_clock_skew_ms: 1000, ..strict() });
    let e = l.acquire("skew", 10, 1000, 1).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::ClockSkew, "{e}");
    assert_eq!(dbsize(&server), 0, "a refused call writes nothing");
    clock.set(wall_ms() + 200);
    assert!(l.acquire("skew", 10, 1000, 1).unwrap().allowed, "within the allowance it works");
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
