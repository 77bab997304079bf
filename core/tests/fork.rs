//! A limiter made before `fork()` works in the child (gunicorn, Celery prefork): the child builds
//! its own runtime and connection instead of waiting on the parent's threads. Alone in its test
//! binary so no other test thread is running when it forks.

mod common;

use std::time::Duration;

use common::*;
use rl_core::{Limiter, Options};

#[test]
fn limiters_made_before_fork_work_in_the_child_and_the_parent() {
    let server = server();
    let redis = blocking_with(&server, strict());
    let memory =
        rl_core::blocking::Limiter::from_async(Limiter::memory(Options::default()).unwrap());
    // Use both first, so the runtime and the Redis connection exist before the fork.
    assert!(redis.acquire("fork", 10, 60_000, 1).unwrap().allowed);
    assert!(memory.acquire("fork", 10, 60_000, 1).unwrap().allowed);

    // SAFETY: the child only runs our code and leaves with _exit.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork failed");
    if pid == 0 {
        let ok = matches!(redis.acquire("fork", 10, 60_000, 1), Ok(d) if d.allowed && d.used == 2)
            && matches!(memory.acquire("fork", 10, 60_000, 1), Ok(d) if d.allowed && d.used == 1);
        unsafe { libc::_exit(if ok { 0 } else { 1 }) };
    }
    let status = wait_with_deadline(pid, Duration::from_secs(10));
    assert_eq!(
        status,
        Some(0),
        "child must decide correctly and not hang (None = hung, killed)"
    );
    // The parent is unaffected: its connection still works and sees the child's permit.
    let d = redis.acquire("fork", 10, 60_000, 1).unwrap();
    assert_eq!(d.used, 3);
    // The memory backend is per process: the child started with empty windows (used == 1 there)
    // and the parent's were untouched by it.
    assert_eq!(memory.acquire("fork", 10, 60_000, 1).unwrap().used, 2);
}
