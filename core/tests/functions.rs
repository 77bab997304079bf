//! The window script as a Redis Functions library: rl loads it itself, calls it by FCALL, loads it
//! again wherever a server lacks it, and reaches every Cluster master. (EVALSHA where functions
//! are refused: `acl.rs`; the design's EVALSHA convention on the same window: `design_script.rs`.)

mod common;

use std::time::Duration;

use common::*;
use rl_core::{sliding_window_sha, Leases, Mode, Options, SLIDING_WINDOW_LIBRARY};
use rl_harness::{Cluster, RedisServer, RespValue};

/// The library names `server` holds.
fn libraries(server: &RedisServer) -> Vec<String> {
    let RespValue::Array(libs) = cmd(server, &[b"FUNCTION", b"LIST"]) else {
        panic!("FUNCTION LIST")
    };
    libs.iter()
        .filter_map(|l| match l {
            RespValue::Array(fields) => fields
                .chunks(2)
                .find(|p| p[0].as_str() == Some("library_name"))
                .and_then(|p| p[1].as_str().map(String::from)),
            _ => None,
        })
        .collect()
}

/// FCALLs `server` ran: (answered, failed). A failed one is the first call that found no library.
fn fcalls(server: &RedisServer) -> (u64, u64) {
    let info = cmd(server, &[b"INFO", b"commandstats"]);
    let Some(line) = info
        .as_str()
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("cmdstat_fcall:"))
        .map(String::from)
    else {
        return (0, 0);
    };
    let field = |name: &str| -> u64 {
        line.split(',')
            .find_map(|f| f.strip_prefix(&format!("{name}=")))
            .unwrap()
            .parse()
            .unwrap()
    };
    (
        field("calls") - field("failed_calls"),
        field("failed_calls"),
    )
}

#[test]
fn decisions_are_made_by_fcall_of_the_library_not_evalsha() {
    let s = server();
    let l = blocking_with(&s, strict());
    for i in 1..=5 {
        assert_eq!(l.acquire("fn", 10, 60_000, 1).unwrap().used, i);
    }
    assert_eq!(libraries(&s), vec![SLIDING_WINDOW_LIBRARY.name.clone()]);
    assert!(SLIDING_WINDOW_LIBRARY
        .name
        .starts_with(&format!("rl_{}", &sliding_window_sha()[..16])));
    assert_eq!(
        fcalls(&s),
        (5, 1),
        "one FCALL found no library, then it was loaded"
    );
    // The window script itself was never loaded for EVALSHA (heartbeats are other scripts).
    assert_eq!(
        cmd(&s, &[b"SCRIPT", b"EXISTS", sliding_window_sha().as_bytes()]),
        RespValue::Array(vec![RespValue::Integer(0)])
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leases_are_taken_and_returned_by_fcall_of_the_library_too() {
    let s = server();
    let leasing = Options {
        leases: Leases::On,
        lease_ms: 60_000,
        ..strict()
    };
    let a = limiter_with(&s, leasing);
    let b = limiter(&s);
    let d = a.acquire("fl", 100, 60_000, 1).await.unwrap();
    assert_eq!((d.allowed, d.mode), (true, Mode::Lease), "{d:?}");
    let leased = a.stats().leased_permits;
    assert!(leased >= 1, "{:?}", a.stats());
    assert_eq!(b.peek("fl", 100, 60_000).await.unwrap().used, leased);
    // close returns the unused part of the lease: the one granted stays counted.
    a.close().await.unwrap();
    assert_eq!(a.stats().lease_refunds, 1, "{:?}", a.stats());
    assert_eq!(b.peek("fl", 100, 60_000).await.unwrap().used, 1);
    let (answered, failed) = fcalls(&s);
    assert_eq!(
        failed, 1,
        "the first FCALL found no library, then it was loaded"
    );
    // The lease, its refund and b's two peeks at least, all by FCALL.
    assert!(answered >= 4, "{answered} FCALLs");
    // The window script itself was never loaded for EVALSHA.
    assert_eq!(
        cmd(&s, &[b"SCRIPT", b"EXISTS", sliding_window_sha().as_bytes()]),
        RespValue::Array(vec![RespValue::Integer(0)])
    );
}

#[test]
fn a_flushed_or_lost_library_is_loaded_again_without_an_error() {
    let mut s = server();
    let l = blocking_with(&s, strict());
    assert!(l.acquire("fn", 10, 60_000, 1).unwrap().allowed);
    assert_eq!(
        cmd(&s, &[b"FUNCTION", b"FLUSH"]).as_str(),
        Some("OK"),
        "FUNCTION FLUSH"
    );
    let d = l.acquire("fn", 10, 60_000, 1).unwrap();
    assert_eq!((d.allowed, d.used, d.mode), (true, 2, Mode::Normal));
    assert_eq!(libraries(&s), vec![SLIDING_WINDOW_LIBRARY.name.clone()]);

    // A restart without persistence loses data and library alike.
    s.restart().unwrap();
    let mut decided = None;
    wait_until(
        "a decision after the restart",
        Duration::from_secs(5),
        || {
            decided = l.acquire("fn", 10, 60_000, 1).ok();
            decided.is_some()
        },
    );
    let d = decided.unwrap();
    assert_eq!((d.allowed, d.used, d.mode), (true, 1, Mode::Normal));
    assert_eq!(libraries(&s), vec![SLIDING_WINDOW_LIBRARY.name.clone()]);
}

#[test]
fn another_rl_versions_library_stays_beside_this_one() {
    let s = server();
    // What an rl with another script would have loaded (its own name and function).
    let other = SLIDING_WINDOW_LIBRARY
        .code
        .replace(&SLIDING_WINDOW_LIBRARY.name, "rl_0000000000000000")
        .replace(
            &SLIDING_WINDOW_LIBRARY.function,
            "rl_window_0000000000000000",
        );
    cmd(&s, &[b"FUNCTION", b"LOAD", other.as_bytes()]);
    let l = blocking_with(&s, strict());
    assert!(l.acquire("fn", 10, 60_000, 1).unwrap().allowed);
    let mut libs = libraries(&s);
    libs.sort();
    assert_eq!(
        libs,
        vec![
            "rl_0000000000000000".to_string(),
            SLIDING_WINDOW_LIBRARY.name.clone()
        ]
    );
}

#[test]
fn every_cluster_master_gets_the_library() {
    let cluster = Cluster::start().unwrap();
    let l = rl_core::blocking::Limiter::open(Some(&cluster.url()), strict()).unwrap();
    // Keys on every master: the first FCALL that misses loads it on all of them.
    for i in 0..30 {
        assert!(l.acquire(format!("k{i}"), 10, 60_000, 1).unwrap().allowed);
    }
    for node in cluster.nodes() {
        assert_eq!(
            libraries(node),
            vec![SLIDING_WINDOW_LIBRARY.name.clone()],
            "node {}",
            node.port()
        );
    }
    let (answered, failed) = cluster
        .nodes()
        .iter()
        .map(fcalls)
        .fold((0, 0), |a, b| (a.0 + b.0, a.1 + b.1));
    assert_eq!((answered, failed), (30, 1), "one load reached every master");
}
