//! `lua/sliding_window.lua` called the way the seed design's gateways call it (2 KEYS, 6 ARGV,
//! EVALSHA), sharing one window with the native library.

mod common;

use common::*;
use rl_core::{sliding_window_sha, SLIDING_WINDOW_LUA};
use rl_harness::{RedisServer, RespValue};

fn load(server: &RedisServer) {
    let sha = cmd(server, &[b"SCRIPT", b"LOAD", SLIDING_WINDOW_LUA.as_bytes()]);
    assert_eq!(sha.as_str(), Some(sliding_window_sha()));
}

/// One design-convention call by EVALSHA.
fn design_call(server: &RedisServer, keys: &[&[u8]], argv: &[&[u8]]) -> RespValue {
    let numkeys = keys.len().to_string();
    let mut args: Vec<&[u8]> = vec![
        b"EVALSHA",
        sliding_window_sha().as_bytes(),
        numkeys.as_bytes(),
    ];
    args.extend_from_slice(keys);
    args.extend_from_slice(argv);
    cmd(server, &args)
}

fn reply(v: &RespValue) -> (i64, i64, i64, String) {
    let RespValue::Array(items) = v else {
        panic!("not an array: {v:?}")
    };
    assert_eq!(items.len(), 4, "{v:?}");
    (
        items[0].as_int().unwrap(),
        items[1].as_int().unwrap(),
        items[2].as_int().unwrap(),
        items[3].as_str().unwrap().to_string(),
    )
}

const KEYS: [&[u8]; 2] = [b"rl:{api:order:create}", b"rl:cfg:{api:order:create}"];

fn argv<'a>(now: &'a str, window: &'a str, max: &'a str) -> Vec<&'a [u8]> {
    vec![
        now.as_bytes(),
        window.as_bytes(),
        max.as_bytes(),
        b"0",
        b"0",
        b"gw-03",
    ]
}

#[test]
fn design_convention_admits_then_denies_with_its_four_field_reply() {
    let server = server();
    load(&server);
    let now = wall_ms().to_string();
    assert_eq!(
        reply(&design_call(&server, &KEYS, &argv(&now, "1000", "2"))),
        (1, 1, 1, "normal".into())
    );
    assert_eq!(
        reply(&design_call(&server, &KEYS, &argv(&now, "1000", "2"))),
        (1, 0, 2, "normal".into())
    );
    assert_eq!(
        reply(&design_call(&server, &KEYS, &argv(&now, "1000", "2"))),
        (0, 0, 2, "normal".into())
    );
    // Only the declared log key holds state; the design's undeclared ":degraded" key is gone.
    assert_eq!(keys(&server), vec![KEYS[0].to_vec()]);
}

#[test]
fn same_millisecond_calls_never_collide() {
    let server = server();
    load(&server);
    let now = wall_ms().to_string();
    // The design's random member lost ~14 of 5000 same-millisecond entries; buckets cannot.
    for i in 1..=3000 {
        let (allowed, _, current, _) =
            reply(&design_call(&server, &KEYS, &argv(&now, "60000", "5000")));
        assert_eq!((allowed, current), (1, i));
    }
}

#[test]
fn every_bad_input_is_invalid_args_and_writes_nothing() {
    let server = server();
    load(&server);
    let now = wall_ms().to_string();
    let bad_numbers: &[&str] = &[
        "inf",
        "-inf",
        "nan",
        "0x10",
        "1e3",
        "1.5",
        "1000.0",
        "-5",
        "0",
        "",
        " 5",
        "+5",
        "5 ",
        "99999999999999999999",
        "1e309",
        "abc",
    ];
    let invalid = (-1, 0, 0, "invalid_args".to_string());
    for bad in bad_numbers {
        // now_ms, window_ms, max_req each get every bad value.
        for pos in 0..3 {
            let mut a = argv(&now, "1000", "10");
            a[pos] = bad.as_bytes();
            assert_eq!(
                reply(&design_call(&server, &KEYS, &a)),
                invalid,
                "ARGV[{}] = {bad:?}",
                pos + 1
            );
        }
        if !bad.is_empty() && *bad != "0" {
            for pos in 3..5 {
                let mut a = argv(&now, "1000", "10");
                a[pos] = bad.as_bytes();
                assert_eq!(
                    reply(&design_call(&server, &KEYS, &a)),
                    invalid,
                    "ARGV[{}] = {bad:?}",
                    pos + 1
                );
            }
        }
    }
    // Out of range: a window above 30 days, a limit above 1e15.
    assert_eq!(
        reply(&design_call(
            &server,
            &KEYS,
            &argv(&now, "2592000001", "10")
        )),
        invalid
    );
    assert_eq!(
        reply(&design_call(
            &server,
            &KEYS,
            &argv(&now, "1000", "1000000000000001")
        )),
        invalid
    );
    // Missing arguments, missing client id, missing key.
    let a = argv(&now, "1000", "10");
    assert_eq!(reply(&design_call(&server, &KEYS, &a[..5])), invalid);
    assert_eq!(reply(&design_call(&server, &KEYS, &a[..2])), invalid);
    let mut no_client = a.clone();
    no_client[5] = b"";
    assert_eq!(reply(&design_call(&server, &KEYS, &no_client)), invalid);
    assert_eq!(reply(&design_call(&server, &KEYS[..1], &a)), invalid);
    assert_eq!(
        dbsize(&server),
        0,
        "no bad call may leave anything behind: {:?}",
        keys(&server)
    );
    // And the good call still works afterwards.
    assert_eq!(reply(&design_call(&server, &KEYS, &a)).0, 1);
    let ttl = cmd(&server, &[b"PTTL", KEYS[0]]).as_int().unwrap();
    // Twice (window + 1 s slack): renewed once per window, not on every admission.
    assert!(ttl > 2000 && ttl <= 4000, "the log always has a TTL: {ttl}");
}

#[test]
fn design_callers_and_the_native_library_share_one_window() {
    let server = server();
    load(&server);
    let native = blocking_with(&server, strict());
    assert_eq!(native.redis_key("api:order:create"), KEYS[0].to_vec());
    let now = wall_ms().to_string();
    let mut admitted = 0;
    for i in 0..20 {
        let allowed = if i % 2 == 0 {
            let (allowed, remaining, current, _) =
                reply(&design_call(&server, &KEYS, &argv(&now, "60000", "10")));
            assert_eq!(remaining + current, 10);
            allowed == 1
        } else {
            let d = native.acquire("api:order:create", 10, 60_000, 1).unwrap();
            d.allowed
        };
        admitted += allowed as u64;
        let state = native.peek("api:order:create", 10, 60_000).unwrap();
        assert_eq!(
            state.used, admitted,
            "after call {i} both callers see every admitted permit"
        );
    }
    assert_eq!(admitted, 10);
}

#[test]
fn native_convention_rejects_bad_arguments_before_writing() {
    let server = server();
    load(&server);
    let sha = sliding_window_sha().as_bytes();
    fn pack(values: &[f64]) -> Vec<u8> {
        values.iter().flat_map(|v| v.to_be_bytes()).collect()
    }
    let head = pack(&[0.0, 1000.0]);
    let ok = pack(&[1.0, 1000.0, 10.0, 1.0]);
    let cases: Vec<(Vec<u8>, Vec<u8>, &str)> = vec![
        (head.clone(), pack(&[1.0, 0.0, 10.0, 1.0]), "window_ms"),
        (head.clone(), pack(&[1.0, 1000.5, 10.0, 1.0]), "window_ms"),
        (
            head.clone(),
            pack(&[1.0, 2592000001.0, 10.0, 1.0]),
            "window_ms",
        ),
        (
            head.clone(),
            pack(&[1.0, 1000.0, f64::INFINITY, 1.0]),
            "limit",
        ),
        (head.clone(), pack(&[1.0, 1000.0, f64::NAN, 1.0]), "limit"),
        (head.clone(), pack(&[1.0, 1000.0, -3.0, 1.0]), "limit"),
        (head.clone(), pack(&[1.0, 1000.0, 10.0, 11.0]), "cost"),
        (head.clone(), pack(&[2.0, 1000.0, 10.0, 1.0]), "op"),
        (
            pack(&[1e12 + 0.5, 1000.0]),
            pack(&[1.0, 1000.0, 10.0, 1.0]),
            "client_now_ms",
        ),
        (
            pack(&[0.0, -1.0]),
            pack(&[1.0, 1000.0, 10.0, 1.0]),
            "max_skew_ms",
        ),
        (
            pack(&[0.0, f64::NAN]),
            pack(&[1.0, 1000.0, 10.0, 1.0]),
            "max_skew_ms",
        ),
        (head.clone(), pack(&[1.0, 1000.0, 10.0]), "batch"),
        (head.clone(), Vec::new(), "batch"),
        (pack(&[0.0]), ok.clone(), "batch"),
    ];
    for (head, requests, name) in &cases {
        // Alone, and after a valid request in the same batch: either way nothing is written.
        for prefix in [&[][..], &ok[..]] {
            let mut batch = prefix.to_vec();
            batch.extend_from_slice(requests);
            if *name == "batch" && !prefix.is_empty() && batch.len() % 32 == 0 && head.len() == 16 {
                continue; // the valid prefix would complete the batch
            }
            let args: Vec<&[u8]> = vec![b"EVALSHA", sha, b"1", b"rl:{k}", b"rl1", head, &batch];
            let RespValue::Array(items) = cmd(&server, &args) else {
                panic!()
            };
            assert_eq!(items[0].as_int(), Some(-1), "{name}");
            assert_eq!(items[1].as_str(), Some(*name));
        }
    }
    assert_eq!(dbsize(&server), 0);
}

#[test]
fn a_window_in_the_previous_40_byte_layout_is_read_and_upgraded() {
    let server = server();
    let native = blocking_with(&server, strict());
    let key = native.redis_key("old");
    let pack = |v: &[f64]| v.iter().flat_map(|x| x.to_be_bytes()).collect::<Vec<u8>>();
    // As the previous script wrote it: (sum, open ms, open permits, oldest ms, deadline), then
    // closed buckets (ms, permits). A fleet mid-upgrade still has such keys.
    let now = wall_ms() as f64;
    let head = pack(&[6.0, now - 5000.0, 3.0, now - 20_000.0, now + 120_000.0]);
    let (b1, b2) = (pack(&[now - 20_000.0, 2.0]), pack(&[now - 10_000.0, 1.0]));
    cmd(&server, &[b"RPUSH", &key, &head, &b1, &b2]);
    cmd(&server, &[b"PEXPIRE", &key, b"120000"]);
    let d = native.peek("old", 10, 60_000).unwrap();
    assert_eq!(d.used, 6, "{d:?}");
    assert_eq!(
        native.peek("old", 10, 12_000).unwrap().used,
        4,
        "only the buckets at -10 s and -5 s are inside 12 s"
    );
    let d = native.acquire("old", 10, 60_000, 4).unwrap();
    assert!(d.allowed && d.used == 10, "{d:?}");
    assert!(!native.acquire("old", 10, 60_000, 1).unwrap().allowed);
    let ttl = cmd(&server, &[b"PTTL", &key]).as_int().unwrap();
    assert!(
        ttl > 60_000,
        "the upgraded key keeps a TTL covering its window: {ttl}"
    );
}
