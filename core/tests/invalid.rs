//! Bad arguments through the core API: a typed error naming the value, and no Redis call at all.

mod common;

use common::*;
use rl_core::{Error, ErrorKind, Limiter, Options, MAX_PERMITS, MAX_WINDOW_MS};

/// Lines of `INFO commandstats` except INFO's own, which our looking changes.
fn commands_other_than_info(server: &rl_harness::RedisServer) -> Vec<String> {
    let info = cmd(server, &[b"INFO", b"commandstats"]);
    let text = info.as_str().unwrap().to_string();
    text.lines()
        .filter(|l| l.starts_with("cmdstat_") && !l.starts_with("cmdstat_info:"))
        .map(String::from)
        .collect()
}

/// One bad call: key, limit, window_ms, cost, the argument it names, and what its message shows.
type Case = (&'static [u8], u64, u64, u64, &'static str, &'static str);

#[test]
fn bad_acquire_arguments_are_typed_errors_naming_the_value_and_write_nothing() {
    let server = server();
    let before = commands_other_than_info(&server);
    let l = blocking_with(&server, Options::default());
    let cases: &[Case] = &[
        (b"", 10, 1000, 1, "key", "empty"),
        (b"k", 0, 1000, 1, "limit", "is 0"),
        (b"k", MAX_PERMITS + 1, 1000, 1, "limit", "1000000000000001"),
        (b"k", u64::MAX, 1000, 1, "limit", "18446744073709551615"),
        (b"k", 10, 0, 1, "window_ms", "is 0"),
        (b"k", 10, MAX_WINDOW_MS + 1, 1, "window_ms", "2592000001"),
        (b"k", 10, u64::MAX, 1, "window_ms", "18446744073709551615"),
        (b"k", 10, 1000, 0, "cost", "is 0"),
        (b"k", 10, 1000, 11, "cost", "is 11"),
    ];
    for &(key, limit, window, cost, name, shows) in cases {
        let mut results = vec![l.acquire(key, limit, window, cost)];
        if name != "cost" {
            // peek takes no cost, so it shares every other check.
            results.push(l.peek(key, limit, window));
        }
        for result in results {
            let e = result.expect_err(name);
            let Error::InvalidArgument { name: got, .. } = &e else {
                panic!("{e}")
            };
            assert_eq!(*got, name);
            assert!(e.to_string().contains(shows), "{e} should show {shows}");
        }
    }
    assert_eq!(
        commands_other_than_info(&server),
        before,
        "no command reached Redis"
    );
    assert_eq!(dbsize(&server), 0);
}

#[test]
fn bad_options_and_urls_are_rejected_at_open() {
    let bad_prefix = Options {
        key_prefix: "rl:{x}:".into(),
        ..Options::default()
    };
    assert_eq!(
        Limiter::open(None, bad_prefix).unwrap_err().kind(),
        ErrorKind::InvalidArgument
    );
    let zero = Options {
        request_timeout: std::time::Duration::ZERO,
        ..Options::default()
    };
    assert_eq!(
        Limiter::open(None, zero).unwrap_err().kind(),
        ErrorKind::InvalidArgument
    );
    for url in [
        "http://127.0.0.1:6379",
        "",
        "redis//nope",
        "redis://:pw@[::1",
    ] {
        let e = Limiter::open(Some(url), Options::default()).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{url}: {e}");
        assert!(
            !e.to_string().contains("pw@"),
            "passwords never appear in errors: {e}"
        );
    }
}
