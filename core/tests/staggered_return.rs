//! Instances return to Redis one by one after an outage (each once its own probes have been good
//! for `recover_after`), so for a while some decide on Redis and others still locally. A permit
//! of a local instance that leaves the window then frees one place twice: in Redis, where the
//! instances back on it take it at once, and in the local instance's share. The local instance
//! reads Redis's count with each flush while Redis answers (`lua/repair.lua`'s reply), and a
//! permit of its own leaving frees no room until Redis shows the room (`window.rs`, `Seen`).
//! Measured before this: 150 admitted in one window at limit 100; after: 100.
//!
//! What this does not close (README, "What a switch can let through"): room that a read of
//! Redis's count SHOWS can still be taken twice, by the instances on Redis and by the local one
//! until its next read. So B here stops asking (and so reading) well before its permits leave: a
//! read landing between their leaving and A taking the room is that other, documented, race.
//! (The test waited for exactly 51 permits in Redis, which missed B's first call that the frozen
//! server ran on the thaw; it then went on only once A's first permit left, ~1.9 s in, and
//! whether B read before or after its permits left was a matter of milliseconds: 150 in one of
//! five runs on a busy machine.)

mod common;

use std::time::{Duration, Instant};

use common::*;
use rl_core::audit::max_in_any_window;
use rl_core::{blocking, Mode, Options};

#[test]
fn a_local_instance_does_not_take_a_place_redis_gave_away_while_it_was_local() {
    let _heavy = heavy();
    let mut server = server();
    let (limit, window) = (100u64, 2000u64);
    let options = Options {
        instances: Some(2),
        // B stays local long after Redis answers again: the instance that returns last.
        recover_after: Duration::from_secs(30),
        ..Options::default()
    };
    let a = blocking_with(&server, options.clone());
    let b = blocking_with(&server, options);
    let checker = blocking_with(&server, strict());
    let admitted = std::cell::RefCell::new(Vec::new());
    let take = |l: &blocking::Limiter, n: usize, mode: Mode| {
        let mut got = 0;
        for _ in 0..n {
            let d = l.acquire("k", limit, window, 1).unwrap();
            assert_eq!(d.mode, mode, "{d:?}");
            if d.allowed {
                admitted.borrow_mut().push((d.now_ms, 1));
                got += 1;
            }
        }
        got
    };
    assert_eq!(take(&a, 1, Mode::Normal), 1, "A talks to Redis first");
    // B goes local on a frozen Redis and takes its share, 50.
    server.freeze().unwrap();
    let d = b.acquire("k", limit, window, 1).unwrap();
    assert_eq!(d.mode, Mode::Local);
    admitted.borrow_mut().push((d.now_ms, 1));
    let b_started = Instant::now();
    assert_eq!(take(&b, 60, Mode::Local), 49, "B's share is 50");
    server.thaw().unwrap();
    // 51 or more: B's first call, sent to the frozen server and decided locally when it timed
    // out, ran there on the thaw too (an overcount, never an undercount).
    wait_until(
        "B wrote its 50 local permits back",
        Duration::from_secs(5),
        || checker.peek("k", limit, window).unwrap().used >= 51,
    );
    // A, on Redis, takes the rest of the window, well after B's permits (so they are still in
    // the window when B's leave).
    std::thread::sleep(Duration::from_millis(500).saturating_sub(b_started.elapsed()));
    let written = checker.peek("k", limit, window).unwrap().used;
    assert_eq!(take(&a, 60, Mode::Normal), limit - written);
    // B keeps asking, locally (denied), while its 50 are in the window; its last read of Redis's
    // count (at most a probe period after its last ask) still shows them. Once they left, Redis
    // has room for 50, which A takes at once; B must not take them too.
    while b_started.elapsed() < Duration::from_millis(window - 300) {
        take(&b, 1, Mode::Local);
        std::thread::sleep(Duration::from_millis(10));
    }
    std::thread::sleep(Duration::from_millis(window + 100).saturating_sub(b_started.elapsed()));
    let a_got = take(&a, 60, Mode::Normal);
    let b_got = take(&b, 60, Mode::Local);
    let max = max_in_any_window(&admitted.borrow(), window);
    println!(
        "REPORT staggered return (A on Redis, B local, limit {limit}/{window} ms): after B's \
         permits left, A took {a_got} and B {b_got}; max admitted in any window {max}; B {:?}",
        b.stats()
    );
    assert!(
        max <= limit,
        "{max} admitted in one window of {window} ms at limit {limit}"
    );
    assert!(
        a_got >= 49,
        "the room B's permits left went to A, on Redis: {a_got}"
    );
}
