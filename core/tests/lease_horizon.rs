//! The window header's lease horizon (`lua/sliding_window.lua`, "Leases"): a decision reads the
//! lease HASH only when a lease may count. Each test here would see a decision over-admit (or a
//! lease ignored) if the horizon were ever wrongly below a live lease's end, and the cost tests
//! check that a key nobody leases (or whose leases aged out) is decided without reading the HASH.
//! Everything runs on the script directly, on a client clock, so every millisecond is chosen.

mod common;

use common::*;
use rl_core::SLIDING_WINDOW_LUA;
use rl_harness::{RedisServer, RespValue};

const REPAIR_LUA: &str = include_str!("../../lua/repair.lua");
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

fn redis_ms(server: &RedisServer) -> u64 {
    let RespValue::Array(t) = cmd(server, &[b"TIME"]) else {
        panic!("TIME")
    };
    let secs: u64 = t[0].as_str().unwrap().parse().unwrap();
    let micros: u64 = t[1].as_str().unwrap().parse().unwrap();
    secs * 1000 + micros / 1000
}

fn eval(server: &RedisServer, key: &str, args: &[&[u8]]) -> RespValue {
    let mut all: Vec<&[u8]> = vec![b"EVAL", SLIDING_WINDOW_LUA.as_bytes(), b"1", key.as_bytes()];
    all.extend_from_slice(args);
    cmd(server, &all)
}

/// A plain decision (convention 2) at `now`: `(allowed, used)`.
fn acquire(
    server: &RedisServer,
    key: &str,
    now: u64,
    window: u64,
    limit: u64,
    cost: u64,
) -> (i64, i64) {
    let head = pack(&[now as f64, SKEW]);
    let body = pack(&[1.0, window as f64, limit as f64, cost as f64]);
    let r = ints(eval(server, key, &[b"rl1", &head, &body]));
    assert_eq!(r[0], 0, "{r:?}");
    (r[1], r[2])
}

/// A lease call (convention 3) at `now` for instance `id`: returns the permits granted.
#[allow(clippy::too_many_arguments)]
fn lease(
    server: &RedisServer,
    key: &str,
    id: &str,
    now: u64,
    window: u64,
    limit: u64,
    want: u64,
    lease_ms: u64,
    seq: u64,
    old: (u64, u64),
) -> i64 {
    let head = pack(&[now as f64, SKEW]);
    let body = pack(&[
        window as f64,
        limit as f64,
        want as f64,
        1.0,
        lease_ms as f64,
        seq as f64,
        old.0 as f64,
        old.1 as f64,
    ]);
    let r = ints(eval(server, key, &[b"rl1L", &head, &body, id.as_bytes()]));
    assert_eq!(r[0], 0, "{r:?}");
    r[1]
}

/// The header's fields (7 doubles; a 48-byte one gives 6).
fn header(server: &RedisServer, key: &str) -> Vec<f64> {
    let RespValue::Bulk(b) = cmd(server, &[b"LINDEX", key.as_bytes(), b"0"]) else {
        panic!("no header")
    };
    b.chunks(8)
        .map(|c| f64::from_be_bytes(c.try_into().unwrap()))
        .collect()
}

/// `calls=` of HGETALL in `INFO commandstats` (a script's own commands are counted).
fn hgetalls(server: &RedisServer) -> i64 {
    let RespValue::Bulk(info) = cmd(server, &[b"INFO", b"commandstats"]) else {
        panic!("INFO")
    };
    let info = String::from_utf8(info).unwrap();
    info.lines()
        .find_map(|l| l.strip_prefix("cmdstat_hgetall:calls="))
        .map_or(0, |rest| rest.split(',').next().unwrap().parse().unwrap())
}

#[test]
fn a_lease_on_a_key_with_buckets_counts_in_every_later_plain_decision_until_it_ages_out() {
    let server = server();
    let (w, limit, lease_ms) = (1000, 10, 300);
    let now = redis_ms(&server);
    {
        let key = "h";
        // A key with buckets and no lease: its horizon says so, and it is decided without the HASH.
        assert_eq!(acquire(&server, key, now, w, limit, 2), (1, 2));
        assert_eq!(header(&server, key)[6], 0.0, "a key nobody leased");
        let before = hgetalls(&server);
        assert_eq!(acquire(&server, key, now + 1, w, limit, 1), (1, 3));
        assert_eq!(hgetalls(&server), before, "no lease: the HASH is not read");
        // Another instance leases (7 - 3 = 7 left, fair share 3); the horizon rises to its end.
        let k = lease(
            &server,
            key,
            "b",
            now + 10,
            w,
            limit,
            5,
            lease_ms,
            1,
            (0, 0),
        );
        assert_eq!(k, 3);
        assert_eq!(header(&server, key)[6], (now + 10 + lease_ms) as f64);
        // A plain decision from anyone counts the lease: 3 + 3 leased, so 4 fit and the 5th not.
        assert_eq!(acquire(&server, key, now + 20, w, limit, 4), (1, 10));
        assert_eq!(acquire(&server, key, now + 20, w, limit, 1), (0, 10));
        // The buckets leave at +1000/+1001/+1020; the lease (end +310) counts until +1310.
        let t = now + 1100;
        assert_eq!(acquire(&server, key, t, w, limit, 7), (1, 10));
        assert_eq!(acquire(&server, key, t, w, limit, 1), (0, 10));
        // Aged out (crash: never returned): it counts no more, and costs no read.
        let t = now + 10 + lease_ms + w;
        let before = hgetalls(&server);
        assert_eq!(acquire(&server, key, t, w, limit, 3), (1, 10));
        assert_eq!(
            hgetalls(&server),
            before,
            "an aged-out lease: the HASH is not read"
        );
        assert_eq!(
            acquire(&server, key, t, 2 * w, limit, 1).0,
            0,
            "a longer window still counts the lease (and reads the HASH for it)"
        );
        assert_eq!(hgetalls(&server), before + 1);
    }
}

#[test]
fn a_returned_lease_clears_the_horizon_and_other_leases_keep_it() {
    let server = server();
    let (w, limit, key) = (1000, 100, "ret");
    let now = redis_ms(&server);
    assert_eq!(acquire(&server, key, now, w, limit, 1), (1, 1));
    assert!(lease(&server, key, "a", now + 1, w, limit, 10, 500, 1, (0, 0)) > 0);
    assert!(lease(&server, key, "b", now + 2, w, limit, 10, 200, 2, (0, 0)) > 0);
    assert_eq!(
        header(&server, key)[6],
        (now + 501) as f64,
        "the latest end"
    );
    // a returns (used 4): b's lease is left, and the horizon is b's end.
    lease(&server, key, "a", now + 3, w, limit, 0, 500, 0, (1, 4));
    assert_eq!(header(&server, key)[6], (now + 202) as f64);
    // b returns (used 0): no lease left, no read.
    lease(&server, key, "b", now + 4, w, limit, 0, 200, 0, (2, 0));
    assert_eq!(header(&server, key)[6], 0.0);
    let before = hgetalls(&server);
    assert_eq!(acquire(&server, key, now + 5, w, limit, 1), (1, 6));
    assert_eq!(hgetalls(&server), before);
}

#[test]
fn a_refund_that_makes_the_window_key_does_not_hide_another_live_lease() {
    let server = server();
    let (w, limit, key) = (1000, 40, "gone");
    let now = redis_ms(&server);
    // Two leases on a key with no buckets (granted from an empty window).
    let a = lease(&server, key, "a", now, w, limit, 10, 5000, 1, (0, 0));
    let b = lease(&server, key, "b", now + 1, w, limit, 10, 5000, 2, (0, 0));
    assert!(a > 0 && b > 0, "{a} {b}");
    // The window key goes (its TTL ran out, or someone deleted only it); the HASH stays.
    cmd(&server, &[b"DEL", key.as_bytes()]);
    // a returns 3 used: its refund makes the key again (a bucket of 3), without reading the HASH.
    lease(&server, key, "a", now + 2, w, limit, 0, 5000, 0, (1, 3));
    assert_eq!(header(&server, key)[6], (now + 5001) as f64, "b's end");
    // A plain decision counts b's lease and the 3.
    let want = 3 + b;
    assert_eq!(acquire(&server, key, now + 3, w, limit, 1), (1, want + 1));
    let fit = limit as i64 - want - 1;
    assert_eq!(
        acquire(&server, key, now + 3, w, limit, fit as u64),
        (1, limit as i64)
    );
    assert_eq!(acquire(&server, key, now + 3, w, limit, 1).0, 0);
}

#[test]
fn a_48_byte_header_reads_the_hash_once_and_learns_the_horizon() {
    let server = server();
    let (w, limit, key) = (60_000u64, 10u64, "old48");
    let now = redis_ms(&server);
    // As the previous script wrote them: a 48-byte header (3 permits at now - 5 s, longest 60 s)
    // and a live lease of 4 permits ending at now + 1 s.
    let head = pack(&[
        3.0,
        (now - 5000) as f64,
        0.0,
        0.0,
        (now + 120_000) as f64,
        w as f64,
    ]);
    cmd(&server, &[b"RPUSH", key.as_bytes(), &head]);
    cmd(&server, &[b"PEXPIRE", key.as_bytes(), b"120000"]);
    let l = pack(&[(now + 1000) as f64, 4.0, 1.0]);
    cmd(&server, &[b"HSET", b"old48:l", b"b", &l]);
    let before = hgetalls(&server);
    assert_eq!(
        acquire(&server, key, now, w, limit, 3),
        (1, 10),
        "3 in buckets + 4 leased + 3"
    );
    assert_eq!(acquire(&server, key, now, w, limit, 1).0, 0);
    assert_eq!(
        hgetalls(&server),
        before + 2,
        "the horizon counts the lease"
    );
    let h = header(&server, key);
    assert_eq!(h.len(), 7, "rewritten in the 56-byte layout");
    assert_eq!(h[6], (now + 1000) as f64);
}

#[test]
fn repair_keeps_the_horizon_or_marks_it_unknown() {
    let server = server();
    let (w, limit) = (60_000u64, 20u64);
    let now = redis_ms(&server);
    let repair = |key: &str, local: &[f64]| {
        let marker = format!("{key}:repair");
        let (window, local) = (pack(&[w as f64, 2.0 * w as f64]), pack(local));
        let args: Vec<&[u8]> = vec![
            b"EVAL",
            REPAIR_LUA.as_bytes(),
            b"2",
            key.as_bytes(),
            marker.as_bytes(),
            b"rl-repair-1",
            b"i",
            &window,
            b"t:1",
            &local,
            b"",
            b"",
        ];
        cmd(&server, &args);
    };
    // A key with a lease: a repair that rewrites it keeps the horizon.
    assert_eq!(acquire(&server, "r1", now, w, limit, 1), (1, 1));
    let k = lease(&server, "r1", "b", now, w, limit, 10, 1000, 1, (0, 0));
    assert!(k > 0);
    repair("r1", &[now as f64, 2.0]);
    assert_eq!(header(&server, "r1")[6], (now + 1000) as f64);
    assert_eq!(acquire(&server, "r1", now, w, limit, 1), (1, 4 + k));
    // A repair that makes the key (it was gone, the lease was not) does not know the horizon,
    // so the next decision reads the HASH and counts the lease.
    let k = lease(&server, "r2", "b", now, w, limit, 10, 1000, 1, (0, 0));
    assert!(k > 0);
    cmd(&server, &[b"DEL", b"r2"]);
    repair("r2", &[now as f64, 2.0]);
    assert_eq!(header(&server, "r2")[6], UNKNOWN);
    assert_eq!(acquire(&server, "r2", now, w, limit, 1), (1, 3 + k));
    assert_eq!(header(&server, "r2")[6], (now + 1000) as f64, "learnt");
}
