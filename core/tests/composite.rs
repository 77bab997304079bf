//! Composite acquire (`acquire_all`) on a real Redis, a real Cluster and the memory backend:
//! all-or-nothing, several limits on one key, per-IP + per-user in a group, exactness from a
//! fleet, the overall retry time, the local fallback, the Cluster slot rule and the script's own
//! argument checks.
//!
//! Calls without a group need keys on one Cluster slot (checked on every topology), so the
//! ungrouped tests use keys found to share one ([`same_slot`]): they can then be read back with
//! plain `peek`s.

mod common;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::*;
use rl_core::{
    blocking, CompositeDecision, ErrorKind, Limiter, ManualClock, Mode, Options, Policy, Rule,
};
use rl_harness::{key_slot, Cluster, RedisServer, RespValue};

/// `n` user keys starting `base` whose Redis keys share one Cluster slot.
fn same_slot(l: &blocking::Limiter, base: &str, n: usize) -> Vec<String> {
    let slot = key_slot(&l.redis_key(base));
    let mut out = vec![base.to_string()];
    for i in 0.. {
        if out.len() == n {
            break;
        }
        let k = format!("{base}:{i}");
        if key_slot(&l.redis_key(&k)) == slot {
            out.push(k);
        }
    }
    out
}

fn rule(key: &str, limit: u64, window_ms: u64, cost: u64) -> Rule {
    Rule::new(key, limit, window_ms, cost)
}

fn raw(server: &RedisServer, args: &[&[u8]]) -> RespValue {
    cmd(server, args)
}

/// A window key's raw state: its header and length (`None`: no such key).
fn raw_window(server: &RedisServer, key: &[u8]) -> Option<(Vec<u8>, i64)> {
    match raw(server, &[b"LINDEX", key, b"0"]) {
        RespValue::Nil => None,
        v => Some((
            v.as_bytes().unwrap().to_vec(),
            raw(server, &[b"LLEN", key]).as_int().unwrap(),
        )),
    }
}

fn used(d: &CompositeDecision) -> Vec<u64> {
    d.decisions.iter().map(|d| d.used).collect()
}

fn allowed(d: &CompositeDecision) -> Vec<bool> {
    d.decisions.iter().map(|d| d.allowed).collect()
}

/// A memory limiter and a Redis limiter (on `server`), both on `clock`.
fn both(server: &RedisServer, clock: &Arc<ManualClock>) -> [blocking::Limiter; 2] {
    let memory = blocking::Limiter::open(
        None,
        Options {
            clock: Some(clock.clone()),
            ..Options::default()
        },
    )
    .unwrap();
    [memory, blocking_with(server, client_clock(clock.clone()))]
}

fn one_denying_rule_takes_nothing(l: &blocking::Limiter, server: Option<&RedisServer>) {
    let k = same_slot(l, "aon", 3);
    let (a, b, c) = (k[0].as_str(), k[1].as_str(), k[2].as_str());
    let rules = [rule(a, 10, 60_000, 1), rule(b, 2, 60_000, 1)];
    for i in 1..=2 {
        let d = l.acquire_all(&rules, None).unwrap();
        assert!(d.allowed, "{d:?}");
        assert_eq!(used(&d), vec![i, i]);
        assert_eq!(d.decisions[0].remaining, 10 - i);
    }
    let before: Vec<_> = server
        .map(|s| [a, b].map(|k| raw_window(s, &l.redis_key(k))).to_vec())
        .unwrap_or_default();
    let d = l.acquire_all(&rules, None).unwrap();
    assert!(!d.allowed, "{d:?}");
    assert_eq!(allowed(&d), vec![true, false], "a alone would fit: {d:?}");
    assert_eq!(used(&d), vec![2, 2], "a denied call counts nothing: {d:?}");
    assert!(d.retry_after_ms > 0);
    assert_eq!(d.retry_after_ms, d.decisions[1].retry_after_ms);
    assert_eq!(d.decisions[0].retry_after_ms, 0);
    // A fresh key in a denied call is not even made.
    let d = l
        .acquire_all(&[rule(c, 5, 60_000, 1), rule(b, 2, 60_000, 1)], None)
        .unwrap();
    assert_eq!(allowed(&d), vec![true, false], "{d:?}");
    assert_eq!(l.peek(a, 10, 60_000).unwrap().used, 2, "a untouched");
    assert_eq!(l.peek(b, 2, 60_000).unwrap().used, 2);
    assert_eq!(l.peek(c, 5, 60_000).unwrap().used, 0, "c untouched");
    if let Some(s) = server {
        let after: Vec<_> = [a, b].map(|k| raw_window(s, &l.redis_key(k))).to_vec();
        assert_eq!(before, after, "the denied calls wrote nothing");
        assert_eq!(raw_window(s, &l.redis_key(c)), None, "no key for c");
    }
}

#[test]
fn one_denying_rule_takes_nothing_from_the_others() {
    let server = server();
    one_denying_rule_takes_nothing(&blocking_with(&server, strict()), Some(&server));
    one_denying_rule_takes_nothing(
        &blocking::Limiter::open(None, Options::default()).unwrap(),
        None,
    );
}

fn burst_and_daily(l: &blocking::Limiter, clock: &ManualClock) {
    let policies = Policy::parse_many("burst: 5/s; daily: 8/h").unwrap();
    let rules: Vec<Rule> = policies
        .iter()
        .map(|p| Rule::from_policy(p, "user:1", 1))
        .collect();
    for i in 1..=5 {
        let d = l.acquire_all(&rules, None).unwrap();
        assert!(d.allowed && used(&d) == vec![i, i], "{i}: {d:?}");
    }
    let d = l.acquire_all(&rules, None).unwrap();
    assert_eq!(allowed(&d), vec![false, true], "the burst denies: {d:?}");
    assert_eq!((d.retry_after_ms, used(&d)), (1000, vec![5, 5]), "{d:?}");
    clock.advance(1000);
    for i in 1..=3 {
        let d = l.acquire_all(&rules, None).unwrap();
        assert!(d.allowed && used(&d) == vec![i, 5 + i], "{i}: {d:?}");
    }
    let d = l.acquire_all(&rules, None).unwrap();
    assert_eq!(
        allowed(&d),
        vec![true, false],
        "the daily limit denies: {d:?}"
    );
    assert_eq!(d.retry_after_ms, 3_600_000 - 1000, "{d:?}");
    assert_eq!(d.decisions[1].remaining, 0);
    // One window holds both: the hour's history outlived the burst rule's second.
    assert_eq!(l.peek("user:1", 8, 3_600_000).unwrap().used, 8);
    assert_eq!(l.peek("user:1", 5, 1000).unwrap().used, 3);
}

#[test]
fn a_burst_and_a_daily_limit_on_one_key_are_one_window() {
    let server = server();
    let clock = Arc::new(ManualClock::new(wall_ms()));
    for l in both(&server, &clock) {
        burst_and_daily(&l, &clock);
        l.reset("user:1").unwrap();
    }
    let redis = blocking_with(&server, client_clock(clock.clone()));
    burst_and_daily(&redis, &clock);
    assert_eq!(
        keys(&server),
        vec![redis.redis_key("user:1")],
        "one Redis key for both limits"
    );
}

fn ip_and_user(l: &blocking::Limiter) {
    let g = Some(&b"api"[..]);
    let on = |ip: &str| [rule(ip, 3, 60_000, 1), rule("user:7", 5, 60_000, 1)];
    for i in 1..=3 {
        let d = l.acquire_all(&on("ip:1"), g).unwrap();
        assert!(d.allowed && used(&d) == vec![i, i], "{d:?}");
    }
    let d = l.acquire_all(&on("ip:1"), g).unwrap();
    assert_eq!(
        (allowed(&d), used(&d)),
        (vec![false, true], vec![3, 3]),
        "{d:?}"
    );
    for i in 1..=2 {
        let d = l.acquire_all(&on("ip:2"), g).unwrap();
        assert!(d.allowed && used(&d) == vec![i, 3 + i], "{d:?}");
    }
    let d = l.acquire_all(&on("ip:2"), g).unwrap();
    assert_eq!(
        (allowed(&d), used(&d)),
        (vec![true, false], vec![2, 5]),
        "{d:?}"
    );
    // The grouped windows are not the plain ones.
    assert_eq!(l.peek("ip:1", 3, 60_000).unwrap().used, 0);
    l.reset_in_group("user:7", g).unwrap();
    let d = l.acquire_all(&on("ip:2"), g).unwrap();
    assert!(
        d.allowed && used(&d) == vec![3, 1],
        "after the user's reset: {d:?}"
    );
}

#[test]
fn per_ip_and_per_user_limits_in_a_group() {
    let server = server();
    let l = blocking_with(&server, strict());
    ip_and_user(&l);
    let (ip, user) = (
        l.rule_key("ip:1", Some(b"api")),
        l.rule_key("user:7", Some(b"api")),
    );
    assert_eq!(ip, b"rl:{api}{ip:1}".to_vec());
    assert_eq!(key_slot(&ip), key_slot(&user));
    assert_eq!(key_slot(&ip), key_slot(b"api"));
    let (_, len) = raw_window(&server, &ip).expect("the grouped key");
    assert!(len >= 1);
    assert_eq!(raw_window(&server, &l.redis_key("ip:1")), None);
    ip_and_user(&blocking::Limiter::open(None, Options::default()).unwrap());
}

fn retry_after(l: &blocking::Limiter, clock: &ManualClock) {
    let k = same_slot(l, "retry", 2);
    let (a, b) = (k[0].as_str(), k[1].as_str());
    let rules = [rule(a, 2, 1000, 1), rule(b, 3, 5000, 1)];
    assert!(l.acquire_all(&rules, None).unwrap().allowed);
    assert!(l.acquire_all(&rules, None).unwrap().allowed);
    clock.advance(200);
    assert!(l.acquire_all(&[rule(b, 3, 5000, 1)], None).unwrap().allowed);
    clock.advance(100);
    let d = l.acquire_all(&rules, None).unwrap();
    assert_eq!(allowed(&d), vec![false, false], "{d:?}");
    let waits: Vec<u64> = d.decisions.iter().map(|d| d.retry_after_ms).collect();
    assert_eq!(waits, vec![700, 4700], "{d:?}");
    assert_eq!(
        d.retry_after_ms, 4700,
        "every rule fits after the longest wait"
    );
    clock.advance(d.retry_after_ms - 1);
    let early = l.acquire_all(&rules, None).unwrap();
    assert!(!early.allowed && early.retry_after_ms == 1, "{early:?}");
    clock.advance(1);
    let d = l.acquire_all(&rules, None).unwrap();
    assert!(d.allowed, "after the overall retry_after_ms: {d:?}");
    l.reset(a).unwrap();
    l.reset(b).unwrap();
}

#[test]
fn waiting_the_overall_retry_after_admits_the_same_call() {
    let server = server();
    let clock = Arc::new(ManualClock::new(wall_ms()));
    for l in both(&server, &clock) {
        retry_after(&l, &clock);
    }
}

type Shared<T> = Arc<Mutex<T>>;

/// Each key's rules, `(limit, window_ms)`: every call on a key brings all of them (a rule a call
/// does not bring is no limit on that call).
const KEY_RULES: [&[(u64, u64)]; 3] = [
    &[(6, 200), (15, 1000)],
    &[(10, 500)],
    &[(4, 100), (9, 400), (20, 1500)],
];

/// A random call: a non-empty subset of the keys, each with its rules and a random cost.
fn random_call(keys: &[String], rng: &mut Rng) -> (Vec<Rule>, Vec<(usize, u64)>) {
    let mask = 1 + rng.below(7);
    let (mut rules, mut picked) = (Vec::new(), Vec::new());
    for (k, key) in keys.iter().enumerate() {
        if mask & (1 << k) != 0 {
            let cost = 1 + rng.below(3);
            picked.push((k, cost));
            for &(limit, window) in KEY_RULES[k] {
                rules.push(rule(key, limit, window, cost));
            }
        }
    }
    (rules, picked)
}

/// The most permits in any span `(t - window, t]` (the test's own count, not the crate's).
fn most_in_a_window(admitted: &[(u64, u64)], window: u64) -> u64 {
    let mut v = admitted.to_vec();
    v.sort_unstable();
    let mut best = 0;
    for (i, &(t, _)) in v.iter().enumerate() {
        let inside: u64 = v[..=i]
            .iter()
            .filter(|&&(s, _)| s + window > t)
            .map(|&(_, n)| n)
            .sum();
        best = best.max(inside);
    }
    best
}

#[test]
fn a_fleet_far_above_the_limits_never_admits_more_than_any_rule_allows() {
    let _heavy = heavy();
    let server = server();
    let limiters: Vec<blocking::Limiter> =
        (0..4).map(|_| blocking_with(&server, strict())).collect();
    let keys = same_slot(&limiters[0], "fleet", 3);
    // Per key: every admission (its time, its cost); and the counts of calls.
    let admitted: Shared<Vec<Vec<(u64, u64)>>> = Arc::new(Mutex::new(vec![Vec::new(); 3]));
    let (calls, denied) = (Arc::new(Mutex::new(0u64)), Arc::new(Mutex::new(0u64)));
    let end = Instant::now() + Duration::from_millis(2500);
    let threads: Vec<_> = (0..12)
        .map(|t| {
            let (l, keys) = (limiters[t % 4].clone(), keys.clone());
            let (admitted, calls, denied) = (admitted.clone(), calls.clone(), denied.clone());
            std::thread::spawn(move || {
                let mut rng = Rng(0x9e37_79b9_7f4a_7c15 ^ (t as u64 + 1));
                while Instant::now() < end {
                    let (rules, picked) = random_call(&keys, &mut rng);
                    let d = l.acquire_all(&rules, None).unwrap();
                    *calls.lock().unwrap() += 1;
                    if !d.allowed {
                        *denied.lock().unwrap() += 1;
                        continue;
                    }
                    let mut at = 0;
                    let mut admitted = admitted.lock().unwrap();
                    for (k, cost) in picked {
                        let n = KEY_RULES[k].len();
                        let times: Vec<u64> =
                            d.decisions[at..at + n].iter().map(|d| d.now_ms).collect();
                        assert!(times.iter().all(|&t| t == times[0]), "one key, one time");
                        admitted[k].push((times[0], cost));
                        at += n;
                    }
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let admitted = admitted.lock().unwrap();
    let (calls, denied) = (*calls.lock().unwrap(), *denied.lock().unwrap());
    assert!(
        denied * 2 > calls,
        "the load is far above the limits: {denied} of {calls} denied"
    );
    let mut reached = 0;
    for (k, rules) in KEY_RULES.iter().enumerate() {
        for &(limit, window) in *rules {
            let most = most_in_a_window(&admitted[k], window);
            assert!(
                most <= limit,
                "key {k}, {limit}/{window} ms: {most} admitted in one window"
            );
            reached += usize::from(most + 3 > limit);
        }
        // All or nothing: Redis's count is exactly what the admitted calls took.
        let &(limit, window) = rules.iter().max_by_key(|r| r.1).unwrap();
        let p = limiters[0].peek(&keys[k], limit, window).unwrap();
        let expected: u64 = admitted[k]
            .iter()
            .filter(|&&(t, _)| t + window > p.now_ms)
            .map(|&(_, n)| n)
            .sum();
        assert_eq!(
            p.used, expected,
            "key {k}: Redis holds what the decisions admitted"
        );
    }
    assert!(
        reached >= 4,
        "the rules were driven to their limits ({reached} of 6)"
    );
    println!(
        "REPORT composite fleet: 4 instances x 3 threads, {calls} calls, {denied} denied, {} admissions",
        admitted.iter().map(Vec::len).sum::<usize>()
    );
}

#[test]
fn memory_and_redis_make_the_same_composite_decisions() {
    let server = server();
    let clock = Arc::new(ManualClock::new(wall_ms()));
    let [memory, _] = both(&server, &clock);
    // The script against the model: without the denial cache, whose replays keep `used` as
    // Redis last said it (checked against the model below, through `cached`).
    let redis = blocking_with(
        &server,
        Options {
            denial_cache: false,
            ..client_clock(clock.clone())
        },
    );
    // The same calls with the cache, on windows of their own (another prefix): it must allow
    // and deny exactly as the model does, and never give a longer wait.
    let cached = blocking_with(
        &server,
        Options {
            denial_cache: true,
            key_prefix: "cached:".into(),
            ..client_clock(clock.clone())
        },
    );
    let keys = same_slot(&redis, "model", 3);
    let mut rng = Rng(12345);
    let mut denied = 0;
    for step in 0..400 {
        let (rules, _) = random_call(&keys, &mut rng);
        let group = (rng.below(4) == 0).then_some(&b"g"[..]);
        let (m, r, c) = (
            memory.acquire_all(&rules, group).unwrap(),
            redis.acquire_all(&rules, group).unwrap(),
            cached.acquire_all(&rules, group).unwrap(),
        );
        assert_eq!(c.allowed, m.allowed, "step {step}: {rules:?}: {c:?}");
        assert!(
            c.retry_after_ms <= m.retry_after_ms && (c.allowed || c.retry_after_ms > 0),
            "step {step}: {c:?} {m:?}"
        );
        denied += u64::from(!r.allowed);
        assert_eq!((m.mode, r.mode), (Mode::Memory, Mode::Normal));
        let strip = |d: &CompositeDecision| CompositeDecision {
            mode: Mode::Normal,
            decisions: d
                .decisions
                .iter()
                .map(|x| rl_core::Decision {
                    mode: Mode::Normal,
                    ..*x
                })
                .collect(),
            ..d.clone()
        };
        assert_eq!(strip(&m), strip(&r), "step {step}: {rules:?}");
        clock.advance(rng.below(120));
    }
    // A composite call is one decision in stats(), a denial if any rule denied.
    let (ms, rs) = (memory.stats(), redis.stats());
    assert!(
        denied > 0 && denied < 400,
        "{denied} denials: the run tests nothing"
    );
    assert_eq!((ms.decisions_memory, ms.denied_memory), (400, denied));
    assert_eq!((rs.decisions_normal, rs.denied_normal), (400, denied));
    let cs = cached.stats();
    assert!(cs.denials_cached > 0, "the cache answered nothing: {cs:?}");
    assert_eq!(cs.decisions_normal + cs.denials_cached, 400, "{cs:?}");
}

#[test]
fn the_local_fallback_honours_every_rule() {
    let mut server = server();
    let l = blocking_with(
        &server,
        Options {
            instances: Some(1),
            ..Options::default()
        },
    );
    let k = same_slot(&l, "local", 2);
    let (a, b) = (k[0].as_str(), k[1].as_str());
    let both = [rule(a, 5, 60_000, 1), rule(b, 3, 60_000, 1)];
    let d = l.acquire_all(&both, None).unwrap();
    assert!(d.allowed && d.mode == Mode::Normal, "{d:?}");
    server.freeze().unwrap();
    let mut admitted = 1;
    loop {
        let d = l.acquire_all(&both, None).unwrap();
        if !d.allowed {
            assert_eq!(d.mode, Mode::Local, "{d:?}");
            assert_eq!(allowed(&d), vec![true, false], "b's 3 are spent: {d:?}");
            assert_eq!(used(&d), vec![3, 3], "{d:?}");
            break;
        }
        admitted += 1;
        assert!(admitted <= 3, "b allows 3: {d:?}");
    }
    // b's denial took nothing from a: a alone has exactly 2 more.
    for i in 4..=5 {
        let d = l.acquire_all(&[rule(a, 5, 60_000, 1)], None).unwrap();
        assert!(
            d.allowed && d.mode == Mode::Local && d.decisions[0].used == i,
            "{d:?}"
        );
    }
    let d = l.acquire_all(&[rule(a, 5, 60_000, 1)], None).unwrap();
    assert!(!d.allowed && d.mode == Mode::Local, "{d:?}");
    server.thaw().unwrap();
    wait_until("back to normal, repaired", Duration::from_secs(10), || {
        let s = l.stats();
        s.mode == Mode::Normal && s.repairs >= 1 && s.decisions_local >= 4
    });
    let fresh = blocking_with(&server, strict());
    let counts = (
        fresh.peek(a, 5, 60_000).unwrap().used,
        fresh.peek(b, 3, 60_000).unwrap().used,
    );
    // The call that met the frozen Redis was already sent and may run at the thaw: all of it
    // or none of it, never a part.
    assert!(
        counts == (5, 3) || counts == (6, 4),
        "Redis holds the local admissions: {counts:?}, {:?}",
        l.stats()
    );
}

/// FCALLs a node ran, answered or failed.
fn fcalls(server: &RedisServer) -> u64 {
    let info = cmd(server, &[b"INFO", b"commandstats"]);
    info.as_str()
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("cmdstat_fcall:"))
        .map_or(0, |line| {
            ["calls=", "failed_calls=", "rejected_calls="]
                .iter()
                .filter_map(|f| line.split(',').find_map(|x| x.strip_prefix(f)))
                .map(|n| n.parse::<u64>().unwrap())
                .sum()
        })
}

#[test]
fn cluster_grouped_keys_work_and_keys_on_two_slots_are_refused_before_any_io() {
    let _heavy = heavy();
    let cluster = Cluster::start().unwrap();
    let l = blocking::Limiter::open(Some(&cluster.url()), strict()).unwrap();
    let (ip, user) = ("ip:1.2.3.4", "user:42");
    let owners = [ip, user].map(|k| cluster.key_owner(&l.redis_key(k)).unwrap());
    assert_ne!(owners[0], owners[1], "two masters");
    let rules = [rule(ip, 3, 60_000, 1), rule(user, 5, 60_000, 1)];
    let e = l.acquire_all(&rules, None).unwrap_err();
    assert_eq!(
        (e.kind(), e.argument()),
        (ErrorKind::InvalidArgument, Some("rules")),
        "{e}"
    );
    let text = e.to_string();
    for part in [ip, user, "pass a group", "slot"] {
        assert!(text.contains(part), "{text}");
    }
    let sent: u64 = cluster.nodes().iter().map(fcalls).sum();
    assert_eq!(sent, 0, "nothing was sent");

    let g = Some(&b"tenant:7"[..]);
    for i in 1..=3 {
        let d = l.acquire_all(&rules, g).unwrap();
        assert!(
            d.allowed && d.mode == Mode::Normal && used(&d) == vec![i, i],
            "{d:?}"
        );
    }
    let d = l.acquire_all(&rules, g).unwrap();
    assert_eq!(allowed(&d), vec![false, true], "{d:?}");
    let owner = cluster.key_owner(b"{tenant:7}").unwrap();
    let on_owner = keys(&cluster.nodes()[owner]);
    for k in [ip, user] {
        assert!(
            on_owner.contains(&l.rule_key(k, g)),
            "{k} is on the group's master"
        );
    }
    // The same call keeps working from an async limiter too.
    let rt = runtime();
    let a = Limiter::open(Some(&cluster.url()), strict()).unwrap();
    let d = rt
        .block_on(a.acquire_all(&[rule(user, 5, 60_000, 1)], g))
        .unwrap();
    assert!(d.allowed && d.decisions[0].used == 4, "{d:?}");
}

/// A limiter, a call's rules and group, and the argument its refusal names.
type Refused<'a> = (&'a blocking::Limiter, Vec<Rule>, Option<&'a [u8]>, &'a str);

#[test]
fn invalid_calls_are_refused_before_any_io() {
    let server = server();
    let l = blocking_with(&server, strict());
    let sharded = blocking_with(
        &server,
        Options {
            key_shards: 4,
            ..strict()
        },
    );
    let memory = blocking::Limiter::open(None, Options::default()).unwrap();
    let same = [rule("k", 5, 1000, 1), rule("k", 50, 60_000, 2)];
    let cases: Vec<Refused> = vec![
        (&l, vec![], None, "rules"),
        (&l, vec![rule("k", 1, 1000, 1); 17], None, "rules"),
        (&l, vec![rule("k", 0, 1000, 1)], None, "limit"),
        (&l, vec![rule("k", 5, 0, 1)], None, "window_ms"),
        (&l, vec![rule("k", 5, 1000, 6)], None, "cost"),
        (
            &l,
            vec![rule("k", 5, 1000, 1), rule("", 5, 1000, 1)],
            None,
            "key",
        ),
        (&l, same.to_vec(), None, "cost"),
        (&l, vec![rule("k", 5, 1000, 1)], Some(b""), "group"),
        (&sharded, vec![rule("k", 5, 1000, 1)], None, "key_shards"),
        (&memory, same.to_vec(), None, "cost"),
        (
            &memory,
            vec![rule("ip:1.2.3.4", 1, 9, 1), rule("user:42", 1, 9, 1)],
            None,
            "rules",
        ),
    ];
    for (l, rules, group, name) in cases {
        let e = l.acquire_all(&rules, group).unwrap_err();
        assert_eq!(e.argument(), Some(name), "{e}");
    }
    assert_eq!(dbsize(&server), 0, "nothing reached Redis");
}

/// Keys, rules `(key index, window, limit, cost)` and the reply wanted.
type ScriptCase<'a> = (Vec<&'a [u8]>, Vec<[u64; 4]>, RespValue);

/// The script's own checks (for callers that bypass the core): a bad rule anywhere is refused
/// before the first write, naming the argument and the rule.
#[test]
fn the_script_checks_every_rule_before_writing() {
    let server = server();
    let pack =
        |v: &[u64]| -> Vec<u8> { v.iter().flat_map(|&x| (x as f64).to_be_bytes()).collect() };
    let clock = pack(&[0, 0]);
    let call = |keys: &[&[u8]], rules: &[[u64; 4]]| {
        let blob = pack(&rules.concat());
        let n = keys.len().to_string();
        let mut args: Vec<&[u8]> = vec![
            b"EVAL",
            rl_core::SLIDING_WINDOW_LUA.as_bytes(),
            n.as_bytes(),
        ];
        args.extend_from_slice(keys);
        args.extend_from_slice(&[b"rl1C", &clock, &blob]);
        cmd(&server, &args)
    };
    let err = |name: &str, i: i64| {
        RespValue::Array(vec![
            RespValue::Integer(-1),
            RespValue::Bulk(name.as_bytes().to_vec()),
            RespValue::Integer(i),
        ])
    };
    let (a, b): (&[u8], &[u8]) = (b"rl:{x}a", b"rl:{x}b");
    let ok = [1, 1000, 5, 1];
    let cases: Vec<ScriptCase> = vec![
        (vec![a, b], vec![ok, [2, 1000, 5, 6]], err("cost", 2)),
        (vec![a, b], vec![ok, [3, 1000, 5, 1]], err("key", 2)),
        (vec![a, b], vec![ok, [2, 0, 5, 1]], err("window_ms", 2)),
        (vec![a, b], vec![ok, [2, 1000, 0, 1]], err("limit", 2)),
        (vec![a], vec![ok, [1, 60_000, 50, 2]], err("cost", 2)),
        (vec![a, a], vec![ok, [2, 1000, 5, 1]], err("key", 0)),
        (vec![a, b], vec![ok], err("key", 0)),
        (vec![a], vec![ok; 17], err("rules", 0)),
    ];
    for (keys, rules, want) in cases {
        assert_eq!(call(&keys, &rules), want, "{rules:?}");
    }
    assert_eq!(dbsize(&server), 0, "no bad call wrote anything");
    // And a good one: both keys, one cost each.
    let RespValue::Array(v) = call(&[a, b], &[ok, [2, 1000, 5, 1], [1, 60_000, 50, 1]]) else {
        panic!()
    };
    assert_eq!(&v[..2], &[RespValue::Integer(0), RespValue::Integer(1)]);
    assert_eq!(v.len(), 4 + 5 * 3);
    assert_eq!(dbsize(&server), 2);
}

/// A composite call takes no lease, but counts every live lease on its keys, the calling
/// instance's own included (whose unused leased permits Redis counts as used): exact beside them.
#[test]
fn composite_calls_count_live_leases_as_used() {
    let server = server();
    let leasing = blocking_with(
        &server,
        Options {
            leases: rl_core::Leases::On,
            lease_ms: 5_000,
            ..strict()
        },
    );
    let other = blocking_with(&server, strict());
    let (limit, window) = (100u64, 60_000u64);
    let k = same_slot(&other, "leased", 2);
    for _ in 0..3 {
        assert!(leasing.acquire(&k[0], limit, window, 1).unwrap().allowed);
    }
    let leased = leasing.stats().leased_permits;
    assert!(leased >= 3, "{:?}", leasing.stats());
    let rules = [rule(&k[0], limit, window, 1), rule(&k[1], 1000, window, 1)];
    for (who, l) in [("another instance", &other), ("the lease holder", &leasing)] {
        let d = l.acquire_all(&rules, None).unwrap();
        assert!(d.allowed, "{who}: {d:?}");
        assert_eq!(
            d.decisions[0].used,
            other.peek(&k[0], limit, window).unwrap().used
        );
    }
    assert_eq!(other.peek(&k[0], limit, window).unwrap().used, leased + 2);
    let mut got = 2;
    while other.acquire_all(&rules, None).unwrap().allowed {
        got += 1;
    }
    assert_eq!(got, limit - leased, "the whole lease stays counted");
    assert_eq!(
        leasing.stats().leases_taken,
        1,
        "composite calls took no lease"
    );
}

/// One rule without a group is `acquire` itself: the same decisions on the same key, and a
/// repeated denial is answered by the denial cache (no script call), as for `acquire`.
#[test]
fn one_rule_is_acquire_with_its_denial_cache() {
    let server = server();
    let l = blocking_with(
        &server,
        Options {
            denial_cache: true,
            ..strict()
        },
    );
    let one = [rule("solo", 3, 60_000, 1)];
    for i in 1..=3 {
        let d = l.acquire_all(&one, None).unwrap();
        assert!(d.allowed && d.decisions[0].used == i, "{d:?}");
    }
    let calls_before = fcalls(&server);
    let first = l.acquire_all(&one, None).unwrap();
    assert!(!first.allowed && first.retry_after_ms > 0, "{first:?}");
    let cached_before = l.stats().denials_cached;
    for _ in 0..5 {
        let d = l.acquire_all(&one, None).unwrap();
        assert!(!d.allowed && d.decisions[0].used == 3, "{d:?}");
    }
    assert_eq!(l.stats().denials_cached, cached_before + 5);
    assert_eq!(
        fcalls(&server),
        calls_before + 1,
        "only the first denial reached Redis"
    );
    // The same window as a plain acquire on the key, seen by a limiter without a cache.
    let fresh = blocking_with(&server, strict());
    assert_eq!(fresh.peek("solo", 3, 60_000).unwrap().used, 3);
}

/// Calls of several rules use the denial cache: a repeated denied call is answered without a
/// script call (counted in `denials_cached`), with the figures of Redis's answer, aged; a call with
/// a rule the cache knows nothing of asks Redis; `reset` and `reset_in_group` clear what they
/// reset, and only that.
#[test]
fn repeated_denied_composite_calls_are_answered_by_the_denial_cache() {
    let server = server();
    let l = blocking_with(
        &server,
        Options {
            denial_cache: true,
            ..strict()
        },
    );
    let k = same_slot(&l, "dcache", 2);
    let rules = [rule(&k[0], 2, 60_000, 1), rule(&k[1], 100, 60_000, 1)];
    for _ in 0..2 {
        assert!(l.acquire_all(&rules, None).unwrap().allowed);
    }
    let calls = fcalls(&server);
    let first = l.acquire_all(&rules, None).unwrap();
    assert!(
        !first.allowed && allowed(&first) == [false, true],
        "{first:?}"
    );
    let cached = l.stats().denials_cached;
    for _ in 0..5 {
        let d = l.acquire_all(&rules, None).unwrap();
        assert!(!d.allowed && d.mode == Mode::Normal, "{d:?}");
        assert_eq!((allowed(&d), used(&d)), (vec![false, true], vec![2, 2]));
        assert!(
            d.retry_after_ms > 0 && d.retry_after_ms <= first.retry_after_ms,
            "{d:?}"
        );
        assert_eq!(d.retry_after_ms, d.decisions[0].retry_after_ms);
    }
    assert_eq!(
        fcalls(&server),
        calls + 1,
        "only the first denial ran the script"
    );
    assert_eq!(l.stats().denials_cached, cached + 5);
    // What the composite answer taught answers a single call on the denied rule too.
    assert!(!l.acquire(&k[0], 2, 60_000, 1).unwrap().allowed);
    assert_eq!(fcalls(&server), calls + 1);
    // A rule the cache has no figures for (another limit on k[1]): Redis decides.
    let other = [rule(&k[0], 2, 60_000, 1), rule(&k[1], 50, 60_000, 1)];
    assert!(!l.acquire_all(&other, None).unwrap().allowed);
    assert_eq!(fcalls(&server), calls + 2);
    // Nothing was taken by the denied calls.
    let fresh = blocking_with(&server, strict());
    assert_eq!(fresh.peek(&k[1], 100, 60_000).unwrap().used, 2);
    // A reset through the limiter clears the cached denial: the call is Redis's again, and fits.
    l.reset(&k[0]).unwrap();
    assert!(l.acquire_all(&rules, None).unwrap().allowed);
    assert_eq!(fcalls(&server), calls + 4, "the peek above, and this call");

    // Grouped keys: cached under their grouped Redis keys, cleared by reset_in_group only.
    let g = Some(&b"tenant"[..]);
    let grouped = [
        rule("ip:1.2.3.4", 1, 60_000, 1),
        rule("user:42", 10, 60_000, 1),
    ];
    assert!(l.acquire_all(&grouped, g).unwrap().allowed);
    let calls = fcalls(&server);
    assert!(!l.acquire_all(&grouped, g).unwrap().allowed);
    assert!(!l.acquire_all(&grouped, g).unwrap().allowed);
    assert_eq!(fcalls(&server), calls + 1);
    l.reset("ip:1.2.3.4").unwrap(); // the ungrouped window: not the group's
    assert!(!l.acquire_all(&grouped, g).unwrap().allowed);
    assert_eq!(fcalls(&server), calls + 1, "still answered by the cache");
    l.reset_in_group("ip:1.2.3.4", g).unwrap();
    assert!(l.acquire_all(&grouped, g).unwrap().allowed);
    assert_eq!(fcalls(&server), calls + 2);
}
