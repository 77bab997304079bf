//! The shortcuts a lone call takes in `lua/sliding_window.lua` must answer exactly as the general
//! path does:
//! - a denial decided from the window header alone (`decide`: no lease can count and every stored
//!   bucket is inside the window). Two keys get the same history; before each call one of them
//!   has its lease horizon set to "not known", which sends that call down the general path (it
//!   reads the lease HASH, finds none). Every reply of the two must be equal, and every denial
//!   must match an independent oracle;
//! - the server clock (Redis TIME's seconds converted once per second under FCALL, its
//!   microseconds digit by digit), checked against TIME itself;
//! - the memo of the last valid clock argument and lone request (`native`): a changed or invalid
//!   argument after a remembered one is unpacked and checked afresh.

mod common;

use common::*;
use rl_core::{SLIDING_WINDOW_LIBRARY, SLIDING_WINDOW_LUA};
use rl_harness::{RedisServer, RespValue};

const SKEW: f64 = 10_000_000.0;
/// The header's "lease horizon not known" (2e15).
const UNKNOWN: f64 = 2e15;

fn ints(r: RespValue) -> Vec<i64> {
    let RespValue::Array(items) = r else {
        panic!("{r:?}")
    };
    items
        .iter()
        .map(|i| i.as_int().unwrap_or(i64::MIN))
        .collect()
}

/// One native request (convention 2) by FCALL: `[allowed, used, retry_after, reset_after, now]`.
fn decide(server: &RedisServer, key: &str, now: u64, req: (u64, u64, u64, u64)) -> Vec<i64> {
    let (op, window, limit, cost) = req;
    let head = pack(&[now as f64, SKEW]);
    let body = pack(&[op as f64, window as f64, limit as f64, cost as f64]);
    let r = ints(cmd(
        server,
        &[
            b"FCALL",
            SLIDING_WINDOW_LIBRARY.function.as_bytes(),
            b"1",
            key.as_bytes(),
            b"rl1",
            &head,
            &body,
        ],
    ));
    assert_eq!(r.len(), 6, "{r:?}");
    assert_eq!(r[0], 0, "{r:?}");
    r[1..].to_vec()
}

fn header(server: &RedisServer, key: &str) -> Option<Vec<f64>> {
    let RespValue::Bulk(h) = cmd(server, &[b"LINDEX", key.as_bytes(), b"0"]) else {
        return None;
    };
    assert_eq!(h.len(), 56);
    Some(
        h.chunks(8)
            .map(|c| f64::from_be_bytes(c.try_into().unwrap()))
            .collect(),
    )
}

/// Sends the key's next decision down the general path: it must read the lease HASH.
fn forget_horizon(server: &RedisServer, key: &str) {
    if let Some(mut h) = header(server, key) {
        h[6] = UNKNOWN;
        cmd(server, &[b"LSET", key.as_bytes(), b"0", &pack(&h)]);
    }
}

/// The oracle's denial: (used, retry_after, reset_after) from the admitted (ms, permits), oldest
/// first. A denied request fits once the oldest buckets holding `used + cost - limit` permits
/// left the window; the window resets when its newest bucket leaves.
fn oracle_denial(
    admitted: &[(u64, u64)],
    now: u64,
    window: u64,
    limit: u64,
    cost: u64,
) -> [i64; 3] {
    let inside: Vec<(u64, u64)> = admitted
        .iter()
        .copied()
        .filter(|&(t, _)| t + window > now)
        .collect();
    let used: u64 = inside.iter().map(|b| b.1).sum();
    assert!(used + cost > limit);
    let need = used + cost - limit;
    let mut freed = 0;
    let at = inside
        .iter()
        .find(|b| {
            freed += b.1;
            freed >= need
        })
        .expect("cost <= limit: the window's buckets free enough")
        .0;
    let newest = inside.last().unwrap().0;
    [
        used as i64,
        (at + window - now) as i64,
        (newest + window - now) as i64,
    ]
}

#[test]
fn header_only_denials_answer_as_the_general_path_and_the_oracle() {
    let server = server();
    load_library(&server);
    let (mut fast, mut fast_search, mut general) = (0, 0, 0);
    for seed in 1..=4u64 {
        let mut rng = Rng(0x9E37_79B9_7F4A_7C15 ^ seed);
        let (fast_key, general_key) = (format!("fp:{seed}"), format!("gp:{seed}"));
        let windows = [40, 150, 600];
        let limit = 4 + rng.below(12);
        let mut now = wall_ms();
        let mut admitted: Vec<(u64, u64)> = Vec::new();
        for step in 0..1500 {
            now += rng.below(12);
            let window = windows[rng.below(3) as usize];
            let cost = 1 + rng.below(limit.min(4));
            let op = u64::from(rng.below(5) != 0);
            // Would the script take the header-only path on `fast_key`?
            let eligible = header(&server, &fast_key).is_some_and(|h| {
                let edge = now as f64 - window as f64;
                h[6] <= edge && window as f64 <= h[5] && h[1] > edge && (h[3] == 0.0 || h[3] > edge)
            });
            forget_horizon(&server, &general_key);
            let a = decide(&server, &fast_key, now, (op, window, limit, cost));
            let b = decide(&server, &general_key, now, (op, window, limit, cost));
            assert_eq!(a, b, "seed {seed} step {step}: header-only vs general path");
            assert_eq!(a[4], now as i64);
            if a[0] == 1 {
                if op == 1 {
                    match admitted.last_mut() {
                        Some(last) if last.0 == now => last.1 += cost,
                        _ => admitted.push((now, cost)),
                    }
                }
                continue;
            }
            assert_eq!(
                a[1..4],
                oracle_denial(&admitted, now, window, limit, cost),
                "seed {seed} step {step}: denial vs the oracle"
            );
            if eligible {
                fast += 1;
                if a[1] as u64 + cost - limit > 1 {
                    fast_search += 1;
                }
            } else {
                general += 1;
            }
        }
    }
    // Both paths (and the header-only path's search for a retry time) were really compared.
    assert!(fast >= 100, "header-only denials: {fast}");
    assert!(
        fast_search >= 20,
        "header-only denials that search: {fast_search}"
    );
    assert!(
        general >= 100,
        "general-path denials on the fast key: {general}"
    );
}

/// The script's `now` on the server clock, by FCALL (a library converts TIME's seconds once per
/// second) and by EVAL, lies between two TIME readings around it, across second boundaries.
#[test]
fn server_clock_matches_redis_time() {
    let server = server();
    load_library(&server);
    let time = || {
        let RespValue::Array(t) = cmd(&server, &[b"TIME"]) else {
            panic!("TIME")
        };
        let secs: u64 = t[0].as_str().unwrap().parse().unwrap();
        let micros: u64 = t[1].as_str().unwrap().parse().unwrap();
        secs * 1000 + micros / 1000
    };
    let head = pack(&[0.0, 1000.0]);
    let body = pack(&[0.0, 1000.0, 10.0, 1.0]);
    let start = std::time::Instant::now();
    let mut calls = 0;
    while start.elapsed() < std::time::Duration::from_millis(2500) {
        let before = time();
        let by_eval = calls % 7 == 0;
        let r = if by_eval {
            cmd(
                &server,
                &[
                    b"EVAL",
                    SLIDING_WINDOW_LUA.as_bytes(),
                    b"1",
                    b"clock",
                    b"rl1",
                    &head,
                    &body,
                ],
            )
        } else {
            cmd(
                &server,
                &[
                    b"FCALL",
                    SLIDING_WINDOW_LIBRARY.function.as_bytes(),
                    b"1",
                    b"clock",
                    b"rl1",
                    &head,
                    &body,
                ],
            )
        };
        let after = time();
        let now = ints(r)[5] as u64;
        assert!(
            before <= now && now <= after,
            "TIME {before}..{after}, script {now} (eval: {by_eval})"
        );
        calls += 1;
        if calls % 50 == 0 {
            std::thread::sleep(std::time::Duration::from_micros(997));
        }
    }
    assert!(calls > 500, "{calls}");
}

/// A native call by FCALL with raw clock and request blobs: the whole reply.
fn native(server: &RedisServer, key: &str, clock: &[u8], requests: &[u8]) -> Vec<i64> {
    let r = cmd(
        server,
        &[
            b"FCALL",
            SLIDING_WINDOW_LIBRARY.function.as_bytes(),
            b"1",
            key.as_bytes(),
            b"rl1",
            clock,
            requests,
        ],
    );
    let RespValue::Array(items) = r else {
        panic!("{r:?}")
    };
    items
        .iter()
        .map(|i| {
            i.as_int().unwrap_or_else(|| match i.as_str() {
                Some("op") => -101,
                Some("window_ms") => -102,
                Some("limit") => -103,
                Some("cost") => -104,
                Some("batch") => -105,
                Some("max_skew_ms") => -106,
                Some("client_now_ms") => -107,
                other => panic!("{other:?}"),
            })
        })
        .collect()
}

#[test]
fn remembered_arguments_answer_as_their_checks_do() {
    let server = server();
    load_library(&server);
    let now = wall_ms() as f64;
    let clock = pack(&[now, SKEW]);
    let acquire = |limit: f64, cost: f64| pack(&[1.0, 60_000.0, limit, cost]);
    // Remembered: this clock and request. Two fit, the third is denied.
    assert_eq!(
        native(&server, "m", &clock, &acquire(2.0, 1.0))[..3],
        [0, 1, 1]
    );
    assert_eq!(
        native(&server, "m", &clock, &acquire(2.0, 1.0))[..3],
        [0, 1, 2]
    );
    assert_eq!(
        native(&server, "m", &clock, &acquire(2.0, 1.0))[..3],
        [0, 0, 2]
    );
    // Another request, same clock: its own limit and cost count.
    assert_eq!(
        native(&server, "m", &clock, &acquire(5.0, 2.0))[..3],
        [0, 1, 4]
    );
    assert_eq!(
        native(&server, "m", &clock, &acquire(5.0, 2.0))[..3],
        [0, 0, 4]
    );
    // Invalid arguments after valid ones are refused, each time, and do not replace the memo.
    let bad_cost = acquire(5.0, 6.0);
    for _ in 0..2 {
        assert_eq!(native(&server, "m", &clock, &bad_cost), [-1, -104, 1]);
    }
    let bad_op = pack(&[2.0, 60_000.0, 5.0, 1.0]);
    assert_eq!(native(&server, "m", &clock, &bad_op), [-1, -101, 1]);
    assert_eq!(
        native(&server, "m", &clock, &pack(&[1.0, 60_000.0, 5.0])),
        [-1, -105, 0]
    );
    let bad_skew = pack(&[now, 1.5]);
    for _ in 0..2 {
        assert_eq!(
            native(&server, "m", &bad_skew, &acquire(9.0, 1.0)),
            [-1, -106, 0]
        );
    }
    assert_eq!(
        native(&server, "m", &pack(&[now])[..], &acquire(9.0, 1.0)),
        [-1, -105, 0]
    );
    assert_eq!(
        native(&server, "m", &pack(&[now + 0.5, SKEW]), &acquire(9.0, 1.0)),
        [-1, -107, 0]
    );
    // A clock too far from Redis's after a remembered one is still refused.
    let far = pack(&[now + 3.0 * SKEW, SKEW]);
    assert_eq!(native(&server, "m", &far, &acquire(9.0, 1.0))[0], -2);
    // The remembered ones still answer (4 used of 9: one more fits).
    assert_eq!(
        native(&server, "m", &clock, &acquire(5.0, 1.0))[..3],
        [0, 1, 5]
    );
    // A batch after a remembered lone request: each request decided, in order.
    let batch = [acquire(1.0, 1.0), acquire(1.0, 1.0)].concat();
    let r = native(&server, "mb", &clock, &batch);
    assert_eq!(r.len(), 11, "{r:?}");
    assert_eq!((r[0], r[1], r[2], r[6], r[7]), (0, 1, 1, 0, 1), "{r:?}");
    // And the lone request the batch began with is not taken for a remembered one.
    assert_eq!(
        native(&server, "mb", &clock, &acquire(1.0, 1.0))[..3],
        [0, 0, 1]
    );
}
