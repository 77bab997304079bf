//! Least privilege: an ACL user with exactly the rules the README lists decides, falls back and
//! comes back to `normal` on every topology. Permissions it lacks (`INFO`, which only the failover
//! repair uses) must not keep it local. `REPORT` lines carry what was measured (`--nocapture`).

mod common;

use std::time::{Duration, Instant};

use common::*;
use rl_core::blocking::Limiter;
use rl_core::{Mode, Options};
use rl_harness::{Cluster, RedisServer, RespValue, SentinelTrio, ServerOptions};

/// The rules the README gives for rl's user (with the default key prefix `rl:`), verbatim.
const RULES: &str = "~rl:* +fcall +function|load +evalsha +script|load +time +lindex +lrange +llen +lset +ltrim +rpush +del +pexpire +pttl +get +set +hget +hset +hsetnx +hexists +hincrby +hgetall +hdel +zadd +zremrangebyscore +zcard +ping +role +cluster|slots +asking";

/// Commands rl may be refused without harm: `INFO` (the failover repair's run ids; optional in
/// the README) and `CLIENT SETINFO` (redis-rs names itself on connect and ignores the reply).
const MAY_BE_DENIED: [&str; 2] = ["info", "client|setinfo"];

/// The rules without Redis Functions (`+fcall +function|load`), which the README says may be
/// left out.
const FUNCTION_RULES: [&str; 2] = ["+fcall", "+function|load"];

/// Data nodes with the user `rl` (password `rl-pass`) holding exactly [`RULES`]; the harness's own
/// connections stay on `default`.
fn least_privilege() -> ServerOptions {
    with_rules(RULES.split(' ').collect())
}

/// [`least_privilege`] without the Functions rules.
fn without_functions() -> ServerOptions {
    with_rules(
        RULES
            .split(' ')
            .filter(|r| !FUNCTION_RULES.contains(r))
            .collect(),
    )
}

fn with_rules(rules: Vec<&str>) -> ServerOptions {
    let mut line = vec![
        "--user".to_string(),
        "rl".into(),
        "on".into(),
        ">rl-pass".into(),
    ];
    line.extend(rules.into_iter().map(String::from));
    ServerOptions::default().args(line)
}

/// `url` logged in as `rl`.
fn as_rl(url: &str) -> String {
    let (scheme, rest) = url.split_once("://").unwrap();
    format!("{scheme}://rl:rl-pass@{rest}")
}

#[test]
fn the_readme_lists_exactly_these_rules() {
    let readme = include_str!("../../README.md");
    assert!(
        readme.contains(RULES),
        "README.md must list the ACL rules the tests use:\n{RULES}"
    );
}

/// Every command `rl` was refused on `servers` (from `ACL LOG`), by name.
fn denied(servers: &[&RedisServer]) -> Vec<String> {
    let mut out = Vec::new();
    for s in servers {
        let RespValue::Array(entries) = s.command(&[b"ACL", b"LOG"]).unwrap() else {
            panic!("ACL LOG on {}", s.port())
        };
        for e in entries {
            let RespValue::Array(fields) = e else {
                continue;
            };
            let field = |name: &str| {
                fields
                    .chunks(2)
                    .find(|p| p[0].as_str() == Some(name))
                    .and_then(|p| p[1].as_str().map(String::from))
            };
            if field("username").as_deref() == Some("rl") {
                out.push(format!(
                    "{} ({})",
                    field("object").unwrap_or_default(),
                    field("reason").unwrap_or_default()
                ));
            }
        }
    }
    out
}

/// `name:value` of section `section` of `INFO` (empty if absent).
fn info_field(s: &RedisServer, section: &str, name: &str) -> String {
    let info = cmd(s, &[b"INFO", section.as_bytes()]);
    let text = info.as_str().unwrap_or_default().to_string();
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("{name}:")))
        .unwrap_or_default()
        .trim()
        .to_string()
}

/// Decides as `rl`, pauses writes on `servers` until the limiter has decided locally, then waits
/// for it to come back to `normal` with its local permits written into Redis.
fn falls_back_and_recovers(topology: &str, url: &str, admin_url: &str, servers: &[&RedisServer]) {
    falls_back_and_recovers_denied(topology, url, admin_url, servers, &MAY_BE_DENIED);
}

/// [`falls_back_and_recovers`], where rl may be refused `may_be_denied` (and nothing else).
fn falls_back_and_recovers_denied(
    topology: &str,
    url: &str,
    admin_url: &str,
    servers: &[&RedisServer],
    may_be_denied: &[&str],
) {
    let l = Limiter::open(Some(&as_rl(url)), Options::default()).unwrap();
    for i in 1..=3 {
        let d = l.acquire("acl", 1000, 60_000, 1).unwrap();
        assert_eq!((d.mode, d.used), (Mode::Normal, i), "{topology}");
    }
    l.reset("acl-reset").unwrap();
    l.ping().unwrap();
    wait_until("a heartbeat", Duration::from_secs(5), || {
        l.stats().instances == 1
    });

    // Writes (scripts included) wait; the limiter goes local after degrade_after.
    for s in servers {
        let r = s
            .command(&[b"CLIENT", b"PAUSE", b"1500", b"WRITE"])
            .unwrap();
        assert_eq!(r.as_str(), Some("OK"), "{r:?}");
    }
    let paused = Instant::now();
    let (mut admitted, mut local) = (3u64, 0u64);
    while local < 20 && paused.elapsed() < Duration::from_millis(1200) {
        let d = l.acquire("acl", 1000, 60_000, 1).unwrap();
        admitted += d.allowed as u64;
        local += (d.allowed && d.mode == Mode::Local) as u64;
    }
    assert!(
        local > 0,
        "{topology}: never went local while writes were paused: {:?}",
        l.stats()
    );

    let resumed = paused + Duration::from_millis(1500);
    let deadline = resumed + Duration::from_secs(10);
    while l.stats().mode != Mode::Normal {
        assert!(
            Instant::now() < deadline,
            "{topology}: still local 10 s after writes resumed; refused: {:?}; {:?}",
            denied(servers),
            l.stats()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let back = resumed.elapsed();
    let fresh = Limiter::open(Some(admin_url), strict()).unwrap();
    let used = fresh.peek("acl", 1000, 60_000).unwrap().used;
    assert!(
        used >= admitted,
        "{topology}: Redis holds {used} of the {admitted} permits admitted ({local} locally)"
    );
    assert_eq!(
        l.acquire("acl", 1000, 60_000, 1).unwrap().mode,
        Mode::Normal
    );
    let refused = denied(servers);
    assert!(
        refused.iter().all(|d| may_be_denied
            .iter()
            .any(|ok| d.starts_with(&format!("{ok} ")))),
        "{topology}: rl needed a command the README's rules do not grant: {refused:?}"
    );
    println!(
        "REPORT {topology}, ACL user with the README's rules only: {local} permits decided locally, back to normal {} ms after \
         writes resumed; Redis holds {used} of {admitted} admitted; refused: {refused:?}",
        back.as_millis()
    );
}

#[test]
fn a_least_privilege_user_recovers_on_a_standalone_server() {
    let s = RedisServer::start_with(least_privilege()).unwrap();
    falls_back_and_recovers("standalone", &s.url(), &s.url(), &[&s]);
}

#[test]
fn a_least_privilege_user_recovers_on_sentinel() {
    let trio = SentinelTrio::start_with(least_privilege()).unwrap();
    falls_back_and_recovers("sentinel", &trio.url(), &trio.url(), &[trio.primary()]);
}

#[test]
fn a_least_privilege_user_recovers_on_cluster() {
    let cluster = Cluster::start_with(least_privilege()).unwrap();
    let masters: Vec<&RedisServer> = cluster.nodes().iter().collect();
    falls_back_and_recovers("cluster", &cluster.url(), &cluster.url(), &masters);
}

/// `cmdstat_<command>` field `field` (0 when the command never ran).
fn cmdstat(s: &RedisServer, command: &str, field: &str) -> u64 {
    let v = info_field(s, "commandstats", &format!("cmdstat_{command}"));
    v.split(',')
        .find_map(|f| f.strip_prefix(&format!("{field}=")))
        .map_or(0, |n| n.parse().unwrap())
}

/// An ACL user without `+fcall +function|load` (or a Redis without Functions) decides by EVALSHA:
/// FCALL is tried once, refused, and never again; the library is never loaded; the limiter decides
/// in `normal` mode, falls back and recovers as with every rule.
#[test]
fn a_user_without_functions_decides_by_evalsha() {
    let s = RedisServer::start_with(without_functions()).unwrap();
    let l = Limiter::open(Some(&as_rl(&s.url())), Options::default()).unwrap();
    for i in 1..=20 {
        let d = l.acquire("nofn", 1000, 60_000, 1).unwrap();
        assert_eq!((d.mode, d.used), (Mode::Normal, i));
    }
    assert_eq!(
        cmdstat(&s, "fcall", "rejected_calls"),
        1,
        "FCALL is tried once"
    );
    assert_eq!(cmdstat(&s, "fcall", "calls"), 0);
    assert!(cmdstat(&s, "evalsha", "calls") >= 20);
    assert_eq!(
        cmd(&s, &[b"FUNCTION", b"LIST"]),
        RespValue::Array(vec![]),
        "no library was loaded"
    );
    drop(l);
    let mut may_be_denied = MAY_BE_DENIED.to_vec();
    may_be_denied.push("fcall");
    falls_back_and_recovers_denied(
        "standalone without functions",
        &s.url(),
        &s.url(),
        &[&s],
        &may_be_denied,
    );
}

/// A key that holds something else than an rl window (here a plain string written while the
/// limiter was local) cannot take the local permits; it must not keep the instance local, nor keep
/// the other keys' permits out of Redis.
#[test]
fn a_foreign_value_at_a_window_key_does_not_keep_the_limiter_local() {
    let s = server();
    let l = blocking_with(&s, Options::default());
    for key in ["victim", "other"] {
        assert_eq!(l.acquire(key, 1000, 60_000, 1).unwrap().mode, Mode::Normal);
    }
    wait_until("a heartbeat", Duration::from_secs(5), || {
        l.stats().instances == 1
    });
    assert_eq!(
        cmd(&s, &[b"CLIENT", b"PAUSE", b"5000", b"WRITE"]).as_str(),
        Some("OK")
    );
    let paused = Instant::now();
    let mut local = [0u64; 2];
    while local.iter().any(|&n| n < 5) {
        assert!(
            paused.elapsed() < Duration::from_secs(4),
            "never went local: {:?}",
            l.stats()
        );
        for (i, key) in ["victim", "other"].iter().enumerate() {
            let d = l.acquire(key, 1000, 60_000, 1).unwrap();
            local[i] += (d.allowed && d.mode == Mode::Local) as u64;
        }
    }
    assert_eq!(cmd(&s, &[b"CLIENT", b"UNPAUSE"]).as_str(), Some("OK"));
    // Well before the recovery period (500 ms of good probes) ends.
    let victim = l.redis_key("victim");
    assert_eq!(
        cmd(&s, &[b"SET", &victim, b"not an rl window"]).as_str(),
        Some("OK")
    );

    let started = Instant::now();
    wait_until(
        "back to normal with a foreign value at one key",
        Duration::from_secs(10),
        || l.stats().mode == Mode::Normal,
    );
    let back = started.elapsed();
    let fresh = limiter_with(&s, strict());
    let other = runtime()
        .block_on(fresh.peek("other", 1000, 60_000))
        .unwrap()
        .used;
    assert!(
        other > local[1],
        "the other key's {} local permits were written back: Redis holds {other}",
        local[1]
    );
    assert_eq!(
        cmd(&s, &[b"GET", &victim]).as_str(),
        Some("not an rl window"),
        "the foreign value is left alone"
    );
    // The skipped key's permits are dropped, not sent again with every heartbeat.
    let wrongtype = || info_field(&s, "errorstats", "errorstat_WRONGTYPE");
    let before = wrongtype();
    std::thread::sleep(Duration::from_millis(2500));
    assert_eq!(
        wrongtype(),
        before,
        "the repair of the foreign key was retried"
    );
    assert_eq!(l.stats().mode, Mode::Normal);
    println!(
        "REPORT foreign value at a window key: back to normal {} ms after writes resumed; {:?}",
        back.as_millis(),
        l.stats()
    );
}
