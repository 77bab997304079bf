//! A dropped limiter's background tasks (heartbeat, lag probe) end at the drop. Alone in its own
//! test binary: it counts the process's runtime tasks, which any test running beside it in the
//! same process would change (in `in_place.rs` it failed CI once, with the frozen-Redis tests'
//! tasks still alive when it looked).

mod common;

use std::time::Duration;

use common::*;
use rl_core::Options;

#[test]
fn dropped_limiters_leave_no_background_task_behind() {
    let server = server();
    let alive = || {
        rl_core::runtime::handle()
            .unwrap()
            .metrics()
            .num_alive_tasks()
    };
    // The runtime and a limiter of its own up, settled.
    let keep = blocking_with(&server, Options::default());
    keep.acquire("k", 1000, 60_000, 1).unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let before = alive();
    // Opened and closed faster than the heartbeat's second: a dropped limiter's task (heartbeat,
    // lag probe) must end at the drop, not after its sleep, or a process that opens a limiter
    // per request holds a second's worth of them (Java's LeakTest: +16 MB over 9,000).
    for i in 0..50 {
        let l = blocking_with(&server, Options::default());
        assert!(l.acquire(format!("k{i}"), 1000, 60_000, 1).unwrap().allowed);
    }
    wait_until(
        "the dropped limiters' tasks end",
        Duration::from_millis(500),
        || alive() <= before,
    );
}
