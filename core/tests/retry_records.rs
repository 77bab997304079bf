//! Where the window script keeps the record that lets a retried admission be answered instead of
//! counted twice (`lua/sliding_window.lua`, Retries), driven by FCALL with the native convention
//! exactly as rl-core sends it (call ids, the records' TTL after the clock, retries naming the
//! failed call and the request's place in it):
//! - a lone call's record is the id at the end of the window's header: no key of its own, and its
//!   retry is answered from it (`allowed = 2`, not counted again);
//! - a lone admission that replaces another instance's record, or its own while its caller says a
//!   reply was lost (an id ending in '!'), first moves it to a key of its own, so that record's
//!   retry is still answered; its own record replaced without the '!' is gone (rl-core sends the
//!   '!' whenever a call of its lost a reply), and that retry is decided afresh: a second permit
//!   for one request, never an admission Redis did not count;
//! - a batch's record is a key of its own, and it leaves the header's record alone;
//! - the window key outlives the record's TTL even when its window is far shorter;
//! - a malformed id is refused before anything is written.

mod common;

use common::*;
use rl_core::SLIDING_WINDOW_LIBRARY;
use rl_harness::{RedisServer, RespValue};

const KEY: &str = "rr:{k}";

fn id(tag: u8, n: u64) -> Vec<u8> {
    let mut v = vec![tag; 8];
    v.extend_from_slice(&n.to_be_bytes());
    v
}

/// One call of `n` requests of cost 1 (limit 100 in `window` ms) with call id `call` (records
/// kept `record_ms`), each request a retry of `retry` (a call id and the place in it) if given:
/// the reply, `[0, then per request allowed, used, retry_after, reset_after, now]`, or the error
/// reply's name of the bad argument.
fn call(
    server: &RedisServer,
    window: u64,
    n: usize,
    call: &[u8],
    retry: Option<(&[u8], u64)>,
    record_ms: &str,
) -> Result<Vec<i64>, String> {
    let mut clock = pack(&[0.0, 1000.0]);
    clock.extend_from_slice(&call[..8]);
    clock.extend_from_slice(record_ms.as_bytes());
    let requests: Vec<u8> = (0..n)
        .flat_map(|_| pack(&[1.0, window as f64, 100.0, 1.0]))
        .collect();
    let retries: Vec<u8> = retry
        .map(|(was, place)| {
            (0..n)
                .flat_map(|_| {
                    let mut r = was.to_vec();
                    r.extend_from_slice(&pack(&[place as f64]));
                    r
                })
                .collect()
        })
        .unwrap_or_default();
    let mut args: Vec<&[u8]> = vec![
        b"FCALL",
        SLIDING_WINDOW_LIBRARY.function.as_bytes(),
        b"1",
        KEY.as_bytes(),
        b"rl1",
        &clock,
        &requests,
        call,
    ];
    if retry.is_some() {
        args.push(&retries);
    }
    let RespValue::Array(items) = cmd(server, &args) else {
        panic!("not an array")
    };
    if items[0].as_int() == Some(-1) {
        return Err(items[1].as_str().unwrap_or("?").to_string());
    }
    Ok(items.iter().map(|i| i.as_int().unwrap()).collect())
}

/// `(allowed, used)` of a lone call's one request.
fn lone(server: &RedisServer, call_id: &[u8], retry: Option<(&[u8], u64)>) -> (i64, i64) {
    let r = call(server, 60_000, 1, call_id, retry, "2000").unwrap();
    (r[1], r[2])
}

fn header(server: &RedisServer) -> Vec<u8> {
    match cmd(server, &[b"LINDEX", KEY.as_bytes(), b"0"]) {
        RespValue::Bulk(h) => h,
        other => panic!("{other:?}"),
    }
}

fn record_key(call_id: &[u8]) -> Vec<u8> {
    let mut k = format!("{KEY}:r:").into_bytes();
    k.extend_from_slice(call_id);
    k
}

fn pttl(server: &RedisServer, key: &[u8]) -> i64 {
    cmd(server, &[b"PTTL", key]).as_int().unwrap()
}

#[test]
fn a_lone_admission_records_itself_in_the_header_and_its_retry_takes_no_second_permit() {
    let server = server();
    load_library(&server);
    let a = id(1, 1);
    assert_eq!(lone(&server, &a, None), (1, 1));
    let h = header(&server);
    assert_eq!(h.len(), 72, "a 56-byte header and the call's id");
    assert_eq!(&h[56..], &a[..]);
    assert_eq!(
        dbsize(&server),
        1,
        "no key but the window: {:?}",
        keys(&server)
    );
    // Its retry (a new call of the same instance naming it) is answered from the record.
    assert_eq!(lone(&server, &id(1, 2), Some((&a, 1))), (2, 1));
    assert_eq!(
        &header(&server)[56..],
        &a[..],
        "a retry answered writes nothing"
    );
    // A new request is counted as usual.
    assert_eq!(lone(&server, &id(1, 3), None), (1, 2));
}

#[test]
fn replacing_another_instances_record_moves_it_to_a_key_and_its_retry_is_still_answered() {
    let server = server();
    load_library(&server);
    let (a, b) = (id(1, 1), id(2, 1));
    assert_eq!(lone(&server, &a, None), (1, 1));
    assert_eq!(lone(&server, &b, None), (1, 2));
    assert_eq!(&header(&server)[56..], &b[..]);
    let moved = record_key(&a);
    let t = pttl(&server, &moved);
    assert!(
        t > 0 && t <= 2000,
        "{} PTTL {t}",
        String::from_utf8_lossy(&moved)
    );
    assert_eq!(lone(&server, &id(1, 2), Some((&a, 1))), (2, 2), "A's retry");
    assert_eq!(lone(&server, &id(2, 2), Some((&b, 1))), (2, 2), "B's retry");
}

#[test]
fn replacing_its_own_record_moves_it_only_while_a_reply_of_its_is_lost() {
    let server = server();
    load_library(&server);
    let (a, b) = (id(1, 1), id(1, 2));
    assert_eq!(lone(&server, &a, None), (1, 1));
    assert_eq!(lone(&server, &b, None), (1, 2));
    assert_eq!(dbsize(&server), 1, "A was answered: its record is not kept");
    // Had A's reply been lost after all, its retry is decided afresh: a second permit for one
    // request, counted (never an admission Redis does not count).
    assert_eq!(lone(&server, &id(1, 3), Some((&a, 1))), (1, 3));
    // With '!' (a reply of this instance's was lost) the record replaced is kept.
    let mut c = id(1, 4);
    c.push(b'!');
    assert_eq!(lone(&server, &c, None), (1, 4));
    assert_eq!(&header(&server)[56..], &c[..16]);
    assert!(pttl(&server, &record_key(&id(1, 3))) > 0);
    assert_eq!(lone(&server, &id(1, 5), Some((&id(1, 3), 1))), (2, 4));
}

#[test]
fn a_batch_records_itself_in_a_key_and_leaves_the_headers_record_alone() {
    let server = server();
    load_library(&server);
    let a = id(1, 1);
    assert_eq!(lone(&server, &a, None), (1, 1));
    let b = id(1, 2);
    let r = call(&server, 60_000, 2, &b, None, "2000").unwrap();
    assert_eq!((r[1], r[2], r[6], r[7]), (1, 2, 1, 3));
    assert_eq!(&header(&server)[56..], &a[..]);
    let RespValue::Bulk(marks) = cmd(&server, &[b"GET", &record_key(&b)]) else {
        panic!("no record of the batch")
    };
    assert_eq!(marks, b"11");
    assert_eq!(lone(&server, &id(1, 3), Some((&a, 1))), (2, 3));
    let r = call(&server, 60_000, 2, &id(1, 4), Some((&b, 2)), "2000").unwrap();
    assert_eq!((r[1], r[2], r[6], r[7]), (2, 3, 2, 3), "{r:?}");
}

#[test]
fn the_window_key_outlives_its_records_ttl_when_the_window_is_shorter() {
    let server = server();
    load_library(&server);
    let a = id(1, 1);
    let r = call(&server, 10, 1, &a, None, "5000").unwrap();
    assert_eq!(r[1], 1);
    let t = pttl(&server, KEY.as_bytes());
    assert!(t > 4900, "the window key's PTTL {t} < the record's 5000 ms");
    std::thread::sleep(std::time::Duration::from_millis(50));
    let r = call(&server, 10, 1, &id(1, 2), Some((&a, 1)), "5000").unwrap();
    assert_eq!(
        (r[1], r[2]),
        (2, 0),
        "answered from the record after its window passed"
    );
}

#[test]
fn a_malformed_call_id_is_refused_before_anything_is_written() {
    let server = server();
    load_library(&server);
    for bad in [id(1, 1)[..9].to_vec(), {
        let mut v = id(1, 1);
        v.push(b'?');
        v
    }] {
        assert_eq!(
            call(&server, 60_000, 1, &bad, None, "2000"),
            Err("call_id".to_string())
        );
    }
    assert_eq!(dbsize(&server), 0);
}
