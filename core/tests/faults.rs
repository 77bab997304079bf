//! Script cache loss, Redis absent, frozen, and back again: typed errors within the configured
//! timeout, never a hang, and recovery without a new limiter.

mod common;

use std::time::{Duration, Instant};

use common::*;
use rl_core::{ErrorKind, Options};

#[test]
fn script_flush_between_calls_reloads_transparently() {
    let server = server();
    let l = blocking_with(&server, Options::default());
    assert!(l.acquire("flush", 3, 10_000, 1).unwrap().allowed);
    for _ in 0..3 {
        assert_eq!(cmd(&server, &[b"SCRIPT", b"FLUSH"]).as_str(), Some("OK"));
        let d = l.acquire("flush", 3, 10_000, 1).unwrap();
        assert!(d.used >= 2);
    }
    assert_eq!(l.peek("flush", 3, 10_000).unwrap().used, 3);
}

// With the local fallback off (`local_fallback: false`), callers see typed errors; the fallback
// itself is tested in `resilience.rs`.

#[test]
fn redis_not_running_is_backend_unavailable_within_the_timeout() {
    let port = rl_harness::free_port().unwrap();
    let options = Options { request_timeout: SHORT, connect_timeout: SHORT, local_fallback: false, ..Options::default() };
    let l = rl_core::blocking::Limiter::open(Some(&format!("redis://127.0.0.1:{port}/")), options).unwrap();
    for _ in 0..3 {
        let start = Instant::now();
        let e = l.acquire("down", 10, 1000, 1).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::BackendUnavailable, "{e}");
        // Refused is known at once: no waiting out the timeout, no backoff sleep.
        assert!(start.elapsed() < SHORT, "took {:?}", start.elapsed());
    }
}

#[test]
fn frozen_redis_times_out_then_recovers_when_thawed() {
    let mut server = server();
    let options = Options { request_timeout: SHORT, local_fallback: false, ..Options::default() };
    let l = blocking_with(&server, options);
    assert!(l.acquire("frozen", 10, 60_000, 1).unwrap().allowed);
    server.freeze().unwrap();
    let start = Instant::now();
    let e = l.acquire("frozen", 10, 60_000, 1).unwrap_err();
    let waited = start.elapsed();
    server.thaw().unwrap();
    assert_eq!(e.kind(), ErrorKind::BackendUnavailable, "{e}");
    assert!(waited >= SHORT - Duration::from_millis(20) && waited < SHORT + Duration::from_millis(150), "{waited:?}");
    // The same limiter answers again once Redis does (the request queued while frozen may land).
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        match l.acquire("frozen", 10, 60_000, 1) {
            Ok(d) => {
                assert!(d.allowed && d.used >= 2);
                break;
            }
            Err(e) if Instant::now() < deadline => assert_eq!(e.kind(), ErrorKind::BackendUnavailable),
            Err(e) => panic!("did not recover: {e}"),
        }
    }
}

#[test]
fn limiter_recovers_after_redis_restarts() {
    let mut server = server();
    let options = Options { request_timeout: SHORT, connect_timeout: SHORT, local_fallback: false, ..Options::default() };
    let l = blocking_with(&server, options);
    assert!(l.acquire("restart", 10, 60_000, 1).unwrap().allowed);
    server.kill().unwrap();
    assert_eq!(l.acquire("restart", 10, 60_000, 1).unwrap_err().kind(), ErrorKind::BackendUnavailable);
    server.restart().unwrap();
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        match l.acquire("restart", 10, 60_000, 1) {
            // A restarted Redis without persistence starts empty; the script is reloaded on NOSCRIPT.
            Ok(d) => {
                assert!(d.allowed);
                assert_eq!(d.used, 1);
                break;
            }
            Err(e) if Instant::now() < deadline => {
                assert_eq!(e.kind(), ErrorKind::BackendUnavailable, "{e}");
                std::thread::sleep(Duration::from_millis(50));
            }
            Err(e) => panic!("did not recover: {e}"),
        }
    }
}

#[test]
fn wrong_password_is_a_backend_error_not_a_hang() {
    let server = rl_harness::RedisServer::start_with(rl_harness::ServerOptions::default().requirepass("right")).unwrap();
    let url = format!("redis://:wrong@127.0.0.1:{}/", server.port());
    let l = rl_core::blocking::Limiter::open(Some(&url), Options { request_timeout: SHORT, ..Options::default() }).unwrap();
    let e = l.acquire("auth", 1, 1000, 1).unwrap_err();
    assert!(matches!(e.kind(), ErrorKind::Backend | ErrorKind::BackendUnavailable), "{e}");
    let ok = rl_core::blocking::Limiter::open(Some(&server.url()), Options::default()).unwrap();
    assert!(ok.acquire("auth", 1, 1000, 1).unwrap().allowed, "the right password works");
}
