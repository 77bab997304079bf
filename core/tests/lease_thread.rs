//! A limiter's lease background work on standalone Redis runs on one plain thread of its own
//! (`lease_worker.rs`), named `rl-leases`: one per limiter instance, gone with its limiter, and a
//! forked child's limiter gets one of its own. Alone in its test binary: it counts the process's
//! threads, and it forks.

mod common;

use std::time::{Duration, Instant};

use common::*;
use rl_core::{blocking, Mode, Options};

fn lease_threads() -> usize {
    std::fs::read_dir("/proc/self/task")
        .unwrap()
        .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("comm")).ok())
        .filter(|name| name.trim() == "rl-leases")
        .count()
}

fn leasing() -> Options {
    let mut o = strict();
    o.set_text("leases=on").unwrap();
    o.set_text("lease_ms=100").unwrap();
    o
}

/// Decides on `key` for `for_ms` at about one request a ms: the key's leases are renewed ahead
/// and the displaced ones returned, in the background. Every decision must come from a lease or
/// from Redis, and be allowed (the limit is far away).
fn hot(l: &blocking::Limiter, key: &str, for_ms: u64) -> bool {
    let until = Instant::now() + Duration::from_millis(for_ms);
    let mut leased = 0;
    while Instant::now() < until {
        match l.acquire(key, 1_000_000, 60_000, 1) {
            Ok(d) if d.allowed => leased += (d.mode == Mode::Lease) as u64,
            _ => return false,
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    leased > 0
}

#[test]
fn each_limiter_has_one_lease_thread_that_ends_with_it_and_a_forked_child_gets_its_own() {
    let server = server();
    assert_eq!(lease_threads(), 0);
    // A limiter whose keys never lease starts no thread.
    let plain = blocking_with(&server, strict());
    assert!(plain.acquire("plain", 10, 60_000, 1).unwrap().allowed);
    assert_eq!(lease_threads(), 0);

    // Limiters opened and dropped one after another: each hot key renews ahead on its limiter's
    // thread, and the thread ends when the limiter is dropped.
    for i in 0..5 {
        let l = blocking_with(&server, leasing());
        assert!(
            hot(&l, &format!("hot{i}"), 400),
            "limiter {i} decides from leases"
        );
        let s = l.stats();
        assert!(
            s.leases_taken >= 3 && s.lease_refunds >= 2,
            "limiter {i}: leases renewed ahead and the displaced ones returned: {s:?}"
        );
        assert_eq!(lease_threads(), 1, "limiter {i}: one lease thread");
        drop(l);
        wait_until(
            "the dropped limiter's lease thread ends",
            Duration::from_secs(2),
            || lease_threads() == 0,
        );
    }

    // Two limiters at once: a thread each.
    let (a, b) = (
        blocking_with(&server, leasing()),
        blocking_with(&server, leasing()),
    );
    assert!(hot(&a, "two-a", 200) && hot(&b, "two-b", 200));
    assert_eq!(lease_threads(), 2);
    drop(b);

    // A forked child has none of the parent's threads: its limiter (made before the fork) is a
    // new instance and starts a lease thread of its own, which renews its leases.
    let taken_before = a.stats().leases_taken;
    // SAFETY: the child only runs our code and leaves with _exit.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork failed");
    if pid == 0 {
        let fresh = lease_threads() == 0;
        let ok = fresh
            && hot(&a, "child", 400)
            && lease_threads() == 1
            && a.stats().leases_taken >= 3
            && a.stats().lease_refunds >= 2;
        unsafe { libc::_exit(if ok { 0 } else { 1 }) };
    }
    let status = wait_with_deadline(pid, Duration::from_secs(10));
    assert_eq!(
        status,
        Some(0),
        "the child starts its own lease thread and renews on it (None = hung, killed)"
    );
    // The parent's limiter keeps its own thread and leases.
    assert!(hot(&a, "two-a", 200));
    assert!(a.stats().leases_taken > taken_before);
    wait_until("only the parent's thread", Duration::from_secs(2), || {
        lease_threads() == 1
    });
    drop(a);
    wait_until(
        "no lease thread once every limiter is dropped",
        Duration::from_secs(2),
        || lease_threads() == 0,
    );
}
