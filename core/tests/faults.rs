//! Script cache loss, Redis absent, frozen, and back again: typed errors within the configured
//! timeout, never a hang, and recovery without a new limiter.

mod common;

use std::time::{Duration, Instant};

use common::*;
use rl_core::{ErrorKind, Mode, Options};

#[test]
fn script_flush_between_calls_reloads_transparently() {
    let server = server();
    // Without the fallback: each call below is Redis's decision, made after the reload.
    let l = blocking_with(&server, strict());
    assert!(l.acquire("flush", 3, 10_000, 1).unwrap().allowed);
    // Each call is counted exactly once, the one that met NOSCRIPT included: a reload that ran
    // the call twice would show as used 3 at the first step (and a denial at the second).
    for (step, allowed, used) in [(1, true, 2), (2, true, 3), (3, false, 3)] {
        assert_eq!(cmd(&server, &[b"SCRIPT", b"FLUSH"]).as_str(), Some("OK"));
        let d = l.acquire("flush", 3, 10_000, 1).unwrap();
        assert_eq!(
            (d.mode, d.allowed, d.used),
            (Mode::Normal, allowed, used),
            "after flush {step}: {d:?}"
        );
    }
    assert_eq!(l.peek("flush", 3, 10_000).unwrap().used, 3);
}

// With the local fallback off (`local_fallback: false`), callers see typed errors; the fallback
// itself is tested in `resilience.rs`.

#[test]
fn redis_not_running_is_backend_unavailable_within_the_timeout() {
    let port = rl_harness::free_port().unwrap();
    let options = Options {
        request_timeout: SHORT,
        connect_timeout: SHORT,
        local_fallback: false,
        ..Options::default()
    };
    let l = rl_core::blocking::Limiter::open(Some(&format!("redis://127.0.0.1:{port}/")), options)
        .unwrap();
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
    let timeout = Duration::from_secs(1);
    let options = Options {
        request_timeout: timeout,
        local_fallback: false,
        ..Options::default()
    };
    let l = blocking_with(&server, options);
    assert!(l.acquire("frozen", 10, 60_000, 1).unwrap().allowed);
    server.freeze().unwrap();
    let start = Instant::now();
    let e = l.acquire("frozen", 10, 60_000, 1).unwrap_err();
    let waited = start.elapsed();
    server.thaw().unwrap();
    assert_eq!(e.kind(), ErrorKind::BackendUnavailable, "{e}");
    // The call ends at its one deadline: not before it, and not at a second one (a retry or a
    // reconnect with a fresh timeout would take 2x). The slack below that is the busy machine's.
    assert!(
        waited >= timeout - Duration::from_millis(20),
        "gave up early: {waited:?}"
    );
    assert!(
        waited < timeout * 3 / 2,
        "waited {waited:?}, beyond the request timeout {timeout:?}"
    );
    // The same limiter answers again once Redis does (the request queued while frozen may land).
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        match l.acquire("frozen", 10, 60_000, 1) {
            Ok(d) => {
                assert!(d.allowed && d.used >= 2);
                break;
            }
            Err(e) if Instant::now() < deadline => {
                assert_eq!(e.kind(), ErrorKind::BackendUnavailable)
            }
            Err(e) => panic!("did not recover: {e}"),
        }
    }
}

#[test]
fn limiter_recovers_after_redis_restarts() {
    let mut server = server();
    let options = Options {
        request_timeout: SHORT,
        connect_timeout: SHORT,
        local_fallback: false,
        ..Options::default()
    };
    let l = blocking_with(&server, options);
    assert!(l.acquire("restart", 10, 60_000, 1).unwrap().allowed);
    server.kill().unwrap();
    assert_eq!(
        l.acquire("restart", 10, 60_000, 1).unwrap_err().kind(),
        ErrorKind::BackendUnavailable
    );
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
    let server = rl_harness::RedisServer::start_with(
        rl_harness::ServerOptions::default().requirepass("right"),
    )
    .unwrap();
    let url = format!("redis://:wrong@127.0.0.1:{}/", server.port());
    let l = rl_core::blocking::Limiter::open(
        Some(&url),
        Options {
            request_timeout: SHORT,
            ..Options::default()
        },
    )
    .unwrap();
    let e = l.acquire("auth", 1, 1000, 1).unwrap_err();
    // The README: an error reply that is not about availability (auth among them) is `Backend`.
    assert_eq!(e.kind(), ErrorKind::Backend, "{e}");
    assert!(
        e.to_string().to_lowercase().contains("authentication"),
        "the error says why: {e}"
    );
    let ok = rl_core::blocking::Limiter::open(Some(&server.url()), Options::default()).unwrap();
    assert!(
        ok.acquire("auth", 1, 1000, 1).unwrap().allowed,
        "the right password works"
    );
}
