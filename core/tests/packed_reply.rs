//! The native convention's packed reply ('rl1P', what rl-core sends) carries exactly what the
//! array reply ('rl1', the convention gateways may call) does: two keys get the same calls, one
//! asking for each form, and every reply must decode to the same numbers, for lone calls and
//! batches, admissions, denials, peeks and retries answered from a record. Errors keep the array
//! form in both.

mod common;

use common::*;
use rl_core::{SLIDING_WINDOW_LIBRARY, SLIDING_WINDOW_LUA};
use rl_harness::{RedisServer, RespValue};

const SKEW: f64 = 10_000_000.0;

fn fcall(server: &RedisServer, key: &str, args: &[&[u8]]) -> RespValue {
    let mut all: Vec<&[u8]> = vec![
        b"FCALL",
        SLIDING_WINDOW_LIBRARY.function.as_bytes(),
        b"1",
        key.as_bytes(),
    ];
    all.extend_from_slice(args);
    cmd(server, &all)
}

/// An array reply `{0, 5 numbers per request}` as numbers (status checked).
fn from_array(r: &RespValue, n: usize) -> Vec<f64> {
    let RespValue::Array(items) = r else {
        panic!("array reply expected: {r:?}")
    };
    assert_eq!(items.len(), 1 + 5 * n, "{r:?}");
    assert_eq!(items[0].as_int(), Some(0), "{r:?}");
    items[1..]
        .iter()
        .map(|v| v.as_int().unwrap_or_else(|| panic!("{r:?}")) as f64)
        .collect()
}

/// A packed reply: 40 bytes (5 big-endian doubles) per request, nothing else.
fn from_packed(r: &RespValue, n: usize) -> Vec<f64> {
    let RespValue::Bulk(b) = r else {
        panic!("packed reply expected: {r:?}")
    };
    assert_eq!(b.len(), 40 * n, "{r:?}");
    b.chunks(8)
        .map(|c| f64::from_be_bytes(c.try_into().unwrap()))
        .collect()
}

#[test]
fn packed_replies_decode_to_the_array_replies_numbers() {
    let server = server();
    load_library(&server);
    let (mut admitted, mut denied, mut again, mut batches) = (0, 0, 0, 0);
    for seed in 1..=3u64 {
        let mut rng = Rng(0x2545_F491_4F6C_DD1D ^ seed);
        let (array_key, packed_key) = (format!("a:{{{seed}}}"), format!("p:{{{seed}}}"));
        let limit = 3 + rng.below(10);
        let mut now = wall_ms();
        // The last call: its id and its requests, for a retry of it.
        let mut last: Option<([u8; 16], usize)> = None;
        for step in 0..800u64 {
            now += rng.below(15);
            let n = if rng.below(3) == 0 {
                2 + rng.below(3) as usize
            } else {
                1
            };
            let mut requests = Vec::new();
            for _ in 0..n {
                let op = u64::from(rng.below(5) != 0);
                let window = [50.0, 200.0][rng.below(2) as usize];
                let cost = 1 + rng.below(limit.min(3));
                requests.extend(pack(&[op as f64, window, limit as f64, cost as f64]));
            }
            // Every call brings an id (the instance's 8 bytes, then 8 of its own) and so leaves a
            // record of what it admitted; now and then a call retries the last one, request by
            // request, in order (the same requests are not resent: each is decided afresh unless
            // its earlier attempt admitted it).
            let mut id = [7u8; 16];
            id[8..].copy_from_slice(&(seed * 1_000_000 + step).to_be_bytes());
            let mut clock = pack(&[now as f64, SKEW]);
            clock.extend_from_slice(&id[..8]);
            clock.extend_from_slice(b"5000");
            let mut retries = Vec::new();
            if let Some((was, m)) = last.filter(|_| rng.below(6) == 0) {
                for place in 1..=n {
                    retries.extend_from_slice(&was);
                    let at = if place <= m { place } else { 0 };
                    retries.extend(pack(&[at as f64]));
                }
            }
            let mut args: Vec<&[u8]> = vec![b"rl1", &clock, &requests, &id];
            if !retries.is_empty() {
                args.push(&retries);
            }
            let a = from_array(&fcall(&server, &array_key, &args), n);
            args[0] = b"rl1P";
            let p = from_packed(&fcall(&server, &packed_key, &args), n);
            assert_eq!(a, p, "seed {seed} step {step}: array vs packed reply");
            for r in a.chunks(5) {
                match r[0] as u64 {
                    0 => denied += 1,
                    1 => admitted += 1,
                    2 => again += 1,
                    x => panic!("allowed = {x}"),
                }
                assert_eq!(r[4], now as f64, "now_ms");
            }
            if n > 1 {
                batches += 1;
            }
            last = Some((id, n));
        }
    }
    // Every kind of answer was really compared.
    assert!(admitted >= 200, "admitted: {admitted}");
    assert!(denied >= 200, "denied: {denied}");
    assert!(again >= 10, "answered from a record: {again}");
    assert!(batches >= 100, "batches: {batches}");
}

#[test]
fn packed_calls_report_errors_as_arrays_by_fcall_and_by_eval() {
    let server = server();
    load_library(&server);
    let good_clock = pack(&[0.0, 1000.0]);
    let good = pack(&[1.0, 1000.0, 10.0, 1.0]);
    let zero_window = pack(&[1.0, 0.0, 10.0, 1.0]);
    let far_clock = pack(&[1_000.0, 10.0]);
    for (clock, requests, want) in [
        (&good_clock, &zero_window, "window_ms"),
        (&far_clock, &good, "skew"),
    ] {
        let array = fcall(&server, "e", &[b"rl1", clock, requests]);
        let packed = fcall(&server, "e", &[b"rl1P", clock, requests]);
        let RespValue::Array(a) = &array else {
            panic!("{array:?}")
        };
        let RespValue::Array(p) = &packed else {
            panic!("{want}: an error must stay an array: {packed:?}")
        };
        if want == "skew" {
            assert_eq!(a[0].as_int(), Some(-2), "{array:?}");
            assert_eq!(p[0].as_int(), Some(-2), "{packed:?}");
        } else {
            assert_eq!(array, packed, "{want}");
            assert_eq!(p[0].as_int(), Some(-1), "{packed:?}");
            assert_eq!(p[1].as_str(), Some(want), "{packed:?}");
        }
    }
    // The same file by EVAL answers the packed form too.
    let r = cmd(
        &server,
        &[
            b"EVAL",
            SLIDING_WINDOW_LUA.as_bytes(),
            b"1",
            b"ev",
            b"rl1P",
            &good_clock,
            &good,
        ],
    );
    let p = from_packed(&r, 1);
    assert_eq!(&p[..4], &[1.0, 1.0, 0.0, 1000.0], "{p:?}");
    assert_eq!(
        dbsize(&server),
        1,
        "only the window EVAL admitted on was written"
    );
}
