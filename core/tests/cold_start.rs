//! The cold start: a fleet that starts while Redis is down has never counted its instances, so
//! each instance's local budget is `limit / 8` (the design's fleet size), not the whole limit.
//! `REPORT` lines carry the measured overshoot (`--nocapture`).

mod common;

use std::time::Duration;

use common::*;
use rl_core::audit::max_in_any_window;
use rl_core::{Limiter, Mode, Options};
use rl_harness::free_port;

#[test]
fn a_fleet_of_four_started_while_redis_is_down_stays_within_the_limit() {
    let _heavy = heavy();
    let rt = runtime();
    // Nothing listens there: every instance is refused from its first call on.
    let url = format!("redis://127.0.0.1:{}/", free_port().unwrap());
    let (n, limit, window) = (4usize, 400u64, 1000u64);
    let limiters: Vec<Limiter> = (0..n)
        .map(|_| Limiter::open(Some(&url), Options::default()).unwrap())
        .collect();
    // Each instance offers the whole limit per window: 4x the limit in all.
    let records = rt.block_on(drive(
        &limiters,
        "cold",
        limit,
        window,
        limit,
        Duration::from_secs(3),
    ));

    assert!(
        records.iter().all(|r| r.mode() == Some(Mode::Local)),
        "{}",
        per_mode(&records)
    );
    let admitted: Vec<_> = records.iter().filter_map(|r| r.admitted()).collect();
    let max = max_in_any_window(&admitted, window);
    let per_instance: Vec<u64> = (0..n)
        .map(|i| {
            let mine: Vec<_> = records
                .iter()
                .filter(|r| r.instance == i)
                .filter_map(|r| r.admitted())
                .collect();
            max_in_any_window(&mine, window)
        })
        .collect();
    // The design's bound: each instance admits at most floor(limit / 8) in any window.
    let budget = limit / 8;
    let bound = n as u64 * budget;
    println!(
        "REPORT cold start, Redis down from the start: {n} instances x {limit}/s offered against limit {limit}/{window} ms; \
         decisions {}; max admitted in any window {max} = {:.2} x the limit (per instance {per_instance:?}, budget {budget})",
        per_mode(&records),
        max as f64 / limit as f64,
    );
    assert!(
        per_instance.iter().all(|&m| m <= budget),
        "per instance {per_instance:?}; budget {budget}"
    );
    assert!(
        max <= bound && bound <= limit,
        "{max} admitted in one window by the fleet; bound {n} x {budget} = {bound}"
    );
    for l in &limiters {
        assert_eq!(
            l.stats().instances,
            8,
            "no heartbeat was ever counted: {:?}",
            l.stats()
        );
    }
}
