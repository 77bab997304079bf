//! Hostile user keys: whatever bytes they hold, distinct keys never share or corrupt state, and
//! each limiter's Redis state sits under one hash tag derived from its key.

mod common;

use common::*;
use rl_core::{ErrorKind, Options, MAX_KEY_BYTES};

fn hostile_keys() -> Vec<Vec<u8>> {
    let mut keys: Vec<Vec<u8>> = [
        &b"a"[..],
        b"{a}",
        b"a}",
        b"{a",
        b"}",
        b"{",
        b"{}",
        b"}{",
        b"%7D",
        b"%7B",
        b"%",
        b"%25",
        b"a:b",
        b"a:b:",
        b":a:b",
        b"rl:{a}",
        b"a\0b",
        b"a\0c",
        b"\0",
        b"\xff\xfe",
        "ключ".as_bytes(),
        b" ",
        b"*",
        b"a b",
    ]
    .iter()
    .map(|k| k.to_vec())
    .collect();
    keys.push(vec![b'x'; MAX_KEY_BYTES]);
    let mut braces = vec![b'{'; MAX_KEY_BYTES / 2];
    braces.extend(vec![b'}'; MAX_KEY_BYTES / 2]);
    keys.push(braces);
    let mut tail = vec![b'x'; MAX_KEY_BYTES];
    *tail.last_mut().unwrap() = b'y';
    keys.push(tail);
    keys
}

#[test]
fn distinct_hostile_keys_have_independent_windows() {
    let server = server();
    let l = blocking_with(&server, strict());
    let keys = hostile_keys();
    for k in &keys {
        let d = l.acquire(k, 2, 60_000, 1).unwrap();
        assert!(
            d.allowed && d.used == 1,
            "key {:?}: a fresh key must start empty: {d:?}",
            String::from_utf8_lossy(&k[..k.len().min(20)])
        );
    }
    for k in &keys {
        assert_eq!(
            l.peek(k, 2, 60_000).unwrap().used,
            1,
            "each key saw exactly its own permit"
        );
    }
    // Nothing besides the windows: each was one lone admission, whose retry record (README:
    // Retry) is the id at the end of its window's header; a record key would be a batch's, or
    // one moved out of a header, each of one of those windows.
    let windows = window_keys(&server);
    assert_eq!(windows.len(), keys.len(), "one window key per user key");
    let records: Vec<_> = common::keys(&server)
        .into_iter()
        .filter(|k| is_retry_record(k))
        .collect();
    assert!(records.is_empty(), "{} record keys", records.len());
    for r in &records {
        assert!(
            windows.iter().any(|w| w[..] == r[..r.len() - 19]),
            "a retry record of no window: {:?}",
            String::from_utf8_lossy(&r[..r.len().min(40)])
        );
    }
    assert_eq!(
        dbsize(&server) as usize,
        windows.len() + records.len(),
        "no other key"
    );
    l.reset(&keys[0]).unwrap();
    assert_eq!(
        l.peek(&keys[1], 2, 60_000).unwrap().used,
        1,
        "reset touches only its own key"
    );
}

#[test]
fn every_redis_key_is_one_hash_tag_from_its_user_key() {
    let server = server();
    let l = blocking_with(
        &server,
        Options {
            key_prefix: "app1:rl:".into(),
            ..strict()
        },
    );
    for k in hostile_keys() {
        l.acquire(&k, 2, 60_000, 1).unwrap();
        let rk = l.redis_key(&k);
        assert!(rk.starts_with(b"app1:rl:{"), "prefix is configurable");
        // Redis takes the tag between the first '{' and the next '}': that must be our own closing
        // brace at the very end, so the whole (escaped) user key is the tag.
        let open = rk.iter().position(|&b| b == b'{').unwrap();
        let close = open + 1 + rk[open + 1..].iter().position(|&b| b == b'}').unwrap();
        assert_eq!(close, rk.len() - 1);
        assert!(close > open + 1, "tag is never empty");
    }
    for rk in keys(&server) {
        assert!(
            rk.starts_with(b"app1:rl:{"),
            "{:?}",
            String::from_utf8_lossy(&rk)
        );
    }
}

#[test]
fn too_long_and_empty_keys_are_invalid_arguments() {
    let server = server();
    let l = blocking_with(&server, strict());
    for k in [vec![], vec![b'k'; MAX_KEY_BYTES + 1]] {
        let e = l.acquire(&k, 1, 1000, 1).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidArgument);
        assert!(e.to_string().contains("key"), "{e}");
    }
    assert_eq!(dbsize(&server), 0);
}
