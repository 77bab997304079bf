//! `rl acquire|peek|reset` as a shell script sees them: exit codes, JSON, and error messages.

mod common;

use std::process::Output;

use common::rl;

use rl_harness::RedisServer;
use serde_json::Value;

fn server() -> RedisServer {
    RedisServer::start().expect("start redis-server (apt-get install redis-server)")
}

fn json(out: &Output) -> Value {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "stdout is not JSON ({e}): {}",
            String::from_utf8_lossy(&out.stdout)
        )
    })
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn acquire_twice_with_limit_one_allows_then_denies_with_exit_codes_and_json() {
    let redis = server();
    let url = redis.url();
    let args = [
        "acquire", "cli:once", "--limit", "1", "--window", "10s", "--redis", &url, "--json",
    ];

    let first = rl(&args);
    assert_eq!(
        first.status.code(),
        Some(0),
        "first acquire: {}",
        stderr(&first)
    );
    let d1 = json(&first);
    for field in [
        "allowed",
        "remaining",
        "used",
        "limit",
        "window_ms",
        "retry_after_ms",
        "reset_after_ms",
        "mode",
        "now_ms",
    ] {
        assert!(d1.get(field).is_some(), "field {field} missing from {d1}");
    }
    assert_eq!(d1["allowed"], true);
    assert_eq!(
        (d1["used"].as_u64(), d1["remaining"].as_u64()),
        (Some(1), Some(0))
    );
    assert_eq!(d1["mode"], "normal");
    assert_eq!(d1["backend"], "redis");

    let second = rl(&args);
    assert_eq!(
        second.status.code(),
        Some(1),
        "second acquire: {}",
        stderr(&second)
    );
    let d2 = json(&second);
    assert_eq!(d2["allowed"], false);
    assert!(
        d2["retry_after_ms"].as_u64().unwrap() > 0,
        "a denial says when to retry: {d2}"
    );
    assert!(d2["now_ms"].as_u64().unwrap() >= d1["now_ms"].as_u64().unwrap());
}

#[test]
fn peek_takes_nothing_and_reset_empties_the_window() {
    let redis = server();
    let url = redis.url();
    let acquire = [
        "acquire",
        "cli:reset",
        "--limit",
        "1",
        "--window",
        "1m",
        "--redis",
        &url,
        "--json",
    ];
    assert_eq!(rl(&acquire).status.code(), Some(0));

    let peek = rl(&[
        "peek",
        "cli:reset",
        "--limit",
        "1",
        "--window",
        "1m",
        "--redis",
        &url,
        "--json",
    ]);
    assert_eq!(
        peek.status.code(),
        Some(0),
        "peek exits 0 even when it would deny: {}",
        stderr(&peek)
    );
    assert_eq!(json(&peek)["allowed"], false);

    let reset = rl(&["reset", "cli:reset", "--redis", &url]);
    assert_eq!(reset.status.code(), Some(0), "{}", stderr(&reset));
    assert_eq!(
        rl(&acquire).status.code(),
        Some(0),
        "the window is empty again after reset"
    );
}

#[test]
fn limit_zero_exits_2_naming_the_limit_and_its_value() {
    let out = rl(&["acquire", "k", "--limit", "0", "--window", "1s"]);
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert!(
        err.contains("limit") && err.contains("is 0"),
        "stderr: {err}"
    );
    assert!(out.stdout.is_empty(), "no decision is printed on error");
}

#[test]
fn unparsable_window_exits_2_naming_the_value() {
    let out = rl(&["acquire", "k", "--limit", "5", "--window", "abc"]);
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert!(
        err.contains("'abc'") && err.contains("--window"),
        "stderr: {err}"
    );
}

#[test]
fn unreachable_redis_exits_2_with_the_backend_error() {
    // A port nothing listens on: bind one, note it, close it.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let url = format!("redis://127.0.0.1:{port}/");
    let out = rl(&[
        "acquire", "k", "--limit", "5", "--window", "1s", "--redis", &url,
    ]);
    assert_eq!(
        out.status.code(),
        Some(2),
        "stdout: {}",
        String::from_utf8_lossy(&out.stdout)
    );
    assert!(
        stderr(&out).contains("backend unavailable"),
        "stderr: {}",
        stderr(&out)
    );
}

#[test]
fn without_redis_the_memory_backend_is_used_and_announced() {
    let out = rl(&["acquire", "k", "--limit", "5", "--window", "1s", "--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(json(&out)["backend"], "memory");
    assert!(
        stderr(&out).contains("memory backend"),
        "stderr: {}",
        stderr(&out)
    );
}

#[test]
fn every_option_reaches_the_cli_through_the_core_table() {
    let redis = server();
    let url = redis.url();
    // `rl options` lists every row of the core's table.
    let listed = rl(&["options"]);
    assert_eq!(listed.status.code(), Some(0));
    let text = String::from_utf8_lossy(&listed.stdout);
    for s in rl_core::OPTIONS {
        assert!(
            text.lines().any(|l| l.starts_with(s.name)),
            "{} missing from `rl options`",
            s.name
        );
    }
    // An option changes behaviour: the key prefix decides where the window lives.
    let out = rl(&[
        "acquire",
        "cli:opt",
        "--limit",
        "5",
        "--window",
        "10s",
        "--redis",
        &url,
        "-o",
        "key_prefix=opt:",
        "-o",
        "retry_delay_ms=20ms",
        "-o",
        "client_clock=true",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    // The window, and nothing else: a lone admission's retry record is in the window's header
    // (a record key, `<window key>:r:<16-byte call id>`, would be a batch's).
    let keys = redis.command(&[b"KEYS", b"opt:*"]).expect("KEYS");
    let rl_harness::RespValue::Array(keys) = keys else {
        panic!("KEYS: {keys:?}")
    };
    let mut keys: Vec<Vec<u8>> = keys
        .iter()
        .map(|k| k.as_bytes().expect("a key").to_vec())
        .collect();
    keys.sort();
    assert_eq!(
        keys.first().map(Vec::as_slice),
        Some(&b"opt:{cli:opt}"[..]),
        "the window lives under the prefix given with -o key_prefix: {keys:?}"
    );
    assert_eq!(keys.len(), 1, "nothing but the window: {keys:?}");
    // Bad ones are the core's errors, naming the option, before any I/O (exit 2).
    for (pair, named) in [
        ("retry_delay_ms=abc", "`retry_delay_ms`"),
        ("recover_after_ms=0", "`recover_after_ms`"),
        ("local_fallback=yes", "`local_fallback`"),
        ("bogus=1", "\"bogus\" is not an option"),
    ] {
        let out = rl(&[
            "peek", "cli:opt", "--limit", "5", "--window", "10s", "--redis", &url, "-o", pair,
        ]);
        assert_eq!(out.status.code(), Some(2), "{pair}");
        assert!(stderr(&out).contains(named), "{pair}: {}", stderr(&out));
    }
}
