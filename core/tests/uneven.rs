//! The window spanning a switch to `local` under UNEVEN load, against a real redis-server: one
//! instance of four carries 90% of the traffic, Redis freezes mid-window, every instance decides
//! locally on its share, then Redis thaws. The README's bound for that window is checked from
//! the decisions' own times: never more than `limit·(2 − 1/n)`, and per window no more than the
//! tighter bound the local limiter keeps by counting the others' permits it last saw in Redis's
//! replies. Run with `--nocapture` for the `REPORT` line.

mod common;

use std::time::Duration;

use common::*;
use rl_core::audit::max_in_any_window;
use rl_core::{Limiter, Mode, Options};

/// The bound the design keeps for the window `(end - window, end]` (README, "Degradation"):
/// Redis's own decisions `R` stay within the limit; an instance `i` that decided locally in the
/// window admitted there at most its share, and at most the room `D = limit - R` plus what Redis
/// admitted after the last reply `i` had seen (`u_i`) before its first local decision in the
/// window: `R + Σ min(share, D + u_i)`.
fn bound(records: &[Record], n: usize, limit: u64, window: u64, end: u64) -> u64 {
    let inside = |r: &&Record| {
        r.admitted()
            .is_some_and(|(t, _)| t + window > end && t <= end)
    };
    let redis: Vec<u64> = records
        .iter()
        .filter(inside)
        .filter(|r| r.mode() == Some(Mode::Normal))
        .map(|r| r.admitted().unwrap().0)
        .collect();
    let r = redis.len() as u64;
    let room = limit.saturating_sub(r);
    let share = limit / n as u64;
    let mut total = r;
    for i in 0..n {
        let Some(first_local) = records
            .iter()
            .filter(inside)
            .filter(|x| x.instance == i && x.mode() == Some(Mode::Local))
            .map(|x| x.started)
            .min()
        else {
            continue;
        };
        let seen = records
            .iter()
            .filter(|x| x.instance == i && x.mode() == Some(Mode::Normal) && x.done() < first_local)
            .filter_map(|x| x.result.as_ref().ok().map(|d| d.now_ms))
            .max()
            .unwrap_or(0);
        let unseen = redis.iter().filter(|&&t| t > seen).count() as u64;
        total += share.min(room + unseen);
    }
    total
}

#[test]
fn uneven_load_across_a_freeze_stays_within_the_stated_bound() {
    let _heavy = heavy();
    let server = server();
    let rt = runtime();
    let (n, limit, window) = (4usize, 100u64, 1000u64);
    // 10x the limit offered; instance 0 carries 90% of it.
    let rates = [900u64, 34, 33, 33];
    let limiters: Vec<Limiter> = (0..n)
        .map(|_| limiter_with(&server, Options::default()))
        .collect();
    rt.block_on(async {
        for l in &limiters {
            l.acquire("warm-up", 1000, 1000, 1).await.unwrap();
        }
    });
    wait_until(
        "every instance sees 4 live instances",
        Duration::from_secs(5),
        || limiters.iter().all(|l| l.stats().instances == n as u64),
    );

    let pid = server.pid();
    let events = std::thread::spawn(move || {
        // Mid-window: the first window's permits (admitted within ~100 ms of the start, at 10x
        // the limit) are all still in it.
        std::thread::sleep(Duration::from_millis(400));
        assert_eq!(unsafe { libc::kill(pid as i32, libc::SIGSTOP) }, 0);
        std::thread::sleep(Duration::from_millis(1500));
        assert_eq!(unsafe { libc::kill(pid as i32, libc::SIGCONT) }, 0);
    });
    let records = rt.block_on(drive_at(
        &limiters,
        &rates,
        "uneven",
        limit,
        window,
        Duration::from_millis(3500),
    ));
    events.join().unwrap();

    assert!(
        records.iter().all(|r| r.result.is_ok()),
        "a call failed: {:?}",
        records.iter().find(|r| r.result.is_err())
    );
    for i in 0..n {
        assert!(
            records
                .iter()
                .any(|r| r.instance == i && r.mode() == Some(Mode::Local)),
            "instance {i} never decided locally: {}",
            per_mode(&records)
        );
    }
    let admitted: Vec<_> = records.iter().filter_map(|r| r.admitted()).collect();
    let max = max_in_any_window(&admitted, window);
    let worst = limit * (2 * n as u64 - 1) / n as u64;
    // Per window: what it held against its bound; the one closest to (or furthest over) it.
    let (mut held_at, mut bound_at, mut end_at) = (0, 0, 0);
    for &(end, _) in &admitted {
        let held = admitted
            .iter()
            .filter(|&&(t, _)| t + window > end && t <= end)
            .count() as u64;
        let b = bound(&records, n, limit, window, end);
        if held as i64 - b as i64 >= held_at as i64 - bound_at as i64 {
            (held_at, bound_at, end_at) = (held, b, end);
        }
    }
    let local: u64 = records
        .iter()
        .filter(|r| r.mode() == Some(Mode::Local))
        .filter_map(|r| r.admitted())
        .map(|a| a.1)
        .sum();
    println!(
        "REPORT uneven load (900/34/33/33 per s on 4 instances, limit {limit}/{window} ms, SIGSTOP 0.4-1.9 s): decisions {}; \
         admitted locally {local}; max admitted in any window {max} (limit {limit}, worst case {worst}); \
         the window closest to its bound held {held_at} of {bound_at}",
        per_mode(&records)
    );
    assert!(
        max <= worst,
        "{max} admitted in one window; the worst case is limit·(2 − 1/n) = {worst}"
    );
    assert!(
        held_at <= bound_at,
        "{held_at} admitted in the window ending at {end_at}; its bound is {bound_at}"
    );
}
