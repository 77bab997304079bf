//! `fork()` at any instant leaves the child a working limiter: 200 forks while 8 threads decide
//! on a Redis limiter (fallback on, so its background task heartbeats too) and on a memory
//! limiter. A lock that some parent thread held at the instant of a fork (the state machine's RTT
//! ring, the local record's shards, the memory backend's shards, the runtime's creation lock, the
//! coalescing queues, the connection slot) would hang the child forever; every child must finish.
//! Alone in its test binary so the only threads are the ones this test starts.

mod common;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::*;
use rl_core::{blocking, Limiter, Options};

const FORKS: usize = 200;
const THREADS: usize = 8;

#[test]
fn no_child_hangs_when_forked_mid_call() {
    let server = server();
    let redis = blocking_with(&server, Options::default());
    let memory = blocking::Limiter::from_async(Limiter::memory(Options::default()).unwrap());
    let stop = Arc::new(AtomicBool::new(false));
    let calls = Arc::new(AtomicU64::new(0));
    let threads: Vec<_> = (0..THREADS)
        .map(|t| {
            let (redis, memory, stop, calls) =
                (redis.clone(), memory.clone(), stop.clone(), calls.clone());
            std::thread::spawn(move || {
                let mut i = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    let key = format!("k{}", (t as u64 * 7 + i) % 32);
                    let _ = redis.acquire(&key, 1_000_000, 1000, 1);
                    let _ = memory.acquire(&key, 1_000_000, 1000, 1);
                    let _ = redis.stats();
                    calls.fetch_add(1, Ordering::Relaxed);
                    i += 1;
                }
            })
        })
        .collect();
    wait_until(
        "the threads to be deciding",
        Duration::from_secs(10),
        || calls.load(Ordering::Relaxed) > 100,
    );

    let mut hung = 0;
    let mut failed = 0;
    for n in 0..FORKS {
        // SAFETY: the child only runs our code and leaves with _exit.
        let pid = unsafe { libc::fork() };
        assert!(pid >= 0, "fork failed");
        if pid == 0 {
            let key = format!("child{n}");
            // A large limit: a child that goes local (a slow first connection on a loaded host)
            // decides on its share, limit / live instances, and earlier children still count.
            let r = redis.acquire(&key, 1_000_000, 60_000, 1);
            let m = memory.acquire(&key, 10, 60_000, 1);
            let ok =
                matches!(r, Ok(d) if d.allowed) && matches!(m, Ok(d) if d.allowed && d.used == 1);
            if !ok {
                // The test harness captures eprintln! in-process; the child writes to fd 2 itself.
                let line = format!("child {n}: redis {r:?}, memory {m:?}\n");
                unsafe { libc::write(2, line.as_ptr().cast(), line.len()) };
            }
            unsafe { libc::_exit(if ok { 0 } else { 1 }) };
        }
        match wait_with_deadline(pid, Duration::from_secs(10)) {
            None => hung += 1,
            Some(0) => {}
            Some(_) => failed += 1,
        }
    }
    stop.store(true, Ordering::Relaxed);
    for t in threads {
        t.join().expect("a deciding thread panicked");
    }
    assert_eq!(
        hung, 0,
        "{hung} of {FORKS} children hung (killed after 10 s)"
    );
    assert_eq!(failed, 0, "{failed} of {FORKS} children decided wrongly");
}
