//! Measures (does not assert) the worst-case work of one decision at limit 10^6 in a 60 s window:
//! a key holding 60 000 one-millisecond buckets, then denials whose retry time needs the whole
//! window to leave. Redis's `INFO commandstats`
//! gives the script's mean run time on the server; the caller times each round trip. Run it by hand:
//!
//! `cargo test -p rl-core --release --test script_time -- --ignored --nocapture`

mod common;

use std::sync::Arc;
use std::time::Instant;

use common::*;
use rl_core::{blocking, Limiter, ManualClock};

const LIMIT: u64 = 1_000_000;
const WINDOW: u64 = 60_000;
const BUCKETS: u64 = 60_000;

/// Fills `key` with one bucket of 16 permits per millisecond for 60 000 ms (960 000 permits).
fn fill(l: &blocking::Limiter, clock: &ManualClock, t0: u64, key: &str) {
    for ms in 0..BUCKETS {
        clock.set(t0 + ms);
        let d = l.acquire(key, LIMIT, WINDOW, 16).unwrap();
        assert!(d.allowed, "at +{ms}: {d:?}");
    }
}

/// The mean time of the EVALSHA calls since the last `CONFIG RESETSTAT`, from Redis's own
/// `INFO commandstats` (the script's run time on the server, without the network).
fn evalsha_usec_per_call(server: &rl_harness::RedisServer) -> String {
    let info = cmd(server, &[b"INFO", b"commandstats"]);
    let line = info
        .as_str()
        .unwrap()
        .lines()
        .find(|l| l.starts_with("cmdstat_evalsha:"))
        .unwrap()
        .to_string();
    let field = |name: &str| {
        line.split([':', ','])
            .find_map(|f| f.strip_prefix(name))
            .unwrap()
            .to_string()
    };
    format!(
        "{} us per call over {} calls",
        field("usec_per_call="),
        field("calls=")
    )
}

fn summary(mut v: Vec<i64>) -> String {
    v.sort_unstable();
    format!(
        "median {} us, max {} us over {} calls",
        v[v.len() / 2],
        v[v.len() - 1],
        v.len()
    )
}

#[test]
#[ignore = "a measurement, run by hand"]
fn worst_case_decision_time_at_a_million_permits_in_60_s() {
    let server = server();
    let t0 = wall_ms();
    let clock = Arc::new(ManualClock::new(t0));
    // A slow script call must be waited for, not timed out.
    let redis = blocking_with(
        &server,
        rl_core::Options {
            request_timeout: std::time::Duration::from_secs(30),
            ..client_clock(clock.clone())
        },
    );
    let memory =
        blocking::Limiter::from_async(Limiter::memory(client_clock(clock.clone())).unwrap());
    for (name, l) in [("redis", &redis), ("memory", &memory)] {
        cmd(&server, &[b"CONFIG", b"RESETSTAT"]);
        fill(l, &clock, t0, "w");
        if name == "redis" {
            // The common case for comparison: admissions into a window that is filling up.
            println!(
                "redis  script, the 60 000 admissions that filled it: {}",
                evalsha_usec_per_call(&server)
            );
        }
        if name == "redis" {
            // Steady state: each admission also drops the bucket that just left the window.
            cmd(&server, &[b"CONFIG", b"RESETSTAT"]);
            for ms in BUCKETS..BUCKETS + 5000 {
                clock.set(t0 + ms);
                assert!(l.acquire("w", LIMIT, WINDOW, 16).unwrap().allowed);
            }
            println!(
                "redis  script, 5000 steady admissions (one bucket leaves per ms): {}",
                evalsha_usec_per_call(&server)
            );
        }
        let end = t0 + BUCKETS + 5000 - 1;
        clock.set(end);
        cmd(&server, &[b"CONFIG", b"RESETSTAT"]);
        let mut took = Vec::new();
        for i in 0..50 {
            // cost = limit: every stored permit must leave, so the retry search spans the window.
            clock.set(end + i % 2);
            let started = Instant::now();
            let d = l.acquire("w", LIMIT, WINDOW, LIMIT).unwrap();
            took.push(started.elapsed().as_micros() as i64);
            assert!(!d.allowed);
        }
        let denial = if name == "redis" {
            evalsha_usec_per_call(&server)
        } else {
            String::new()
        };
        cmd(&server, &[b"CONFIG", b"RESETSTAT"]);
        // A 1 s rule on the same key: its window is the newest 1000 of the 60 000 buckets.
        let mut short = Vec::new();
        for _ in 0..50 {
            let started = Instant::now();
            l.peek("w", 1000, 1000).unwrap();
            short.push(started.elapsed().as_micros() as i64);
        }
        let peek = if name == "redis" {
            evalsha_usec_per_call(&server)
        } else {
            String::new()
        };
        if name == "redis" {
            println!("redis  script, denial of cost = limit on {BUCKETS} buckets: {denial}; round trip {}", summary(took));
            println!(
                "redis  script, peek with a 1 s window on the same key: {peek}; round trip {}",
                summary(short)
            );
        } else {
            println!(
                "memory decide, denial of cost = limit on {BUCKETS} buckets: {}",
                summary(took)
            );
            println!(
                "memory decide, peek with a 1 s window on the same key: {}",
                summary(short)
            );
        }
    }
}
