//! Coalesced composite calls (`acquire_all`), against a real redis-server: concurrent composite
//! calls on one group share script calls, and what they decide is exactly what deciding them one
//! by one in Redis's order would decide — checked against the test's own model of the rules, not
//! against the crate's code: at most `limit` admitted per rule in any window, all or nothing per
//! request, and each rule's `used` as the model counts it.

mod common;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::*;
use rl_core::{CompositeDecision, Limiter, Mode, Options, Rule};

/// Script calls Redis ran so far (FCALL where functions load, else EVALSHA).
fn script_calls(server: &rl_harness::RedisServer) -> i64 {
    let info = cmd(server, &[b"INFO", b"commandstats"]);
    let text = info.as_str().unwrap().to_string();
    text.lines()
        .filter_map(|l| {
            l.strip_prefix("cmdstat_evalsha:calls=")
                .or_else(|| l.strip_prefix("cmdstat_fcall:calls="))
        })
        .map(|rest| rest.split(',').next().unwrap().parse::<i64>().unwrap())
        .sum()
}

const GROUP: &[u8] = b"tenant-7";

/// `callers` tasks at once, each making `each` composite calls on `GROUP` with `rules(caller)`:
/// every call's outcome, with its caller's number.
fn concurrently(
    rt: &tokio::runtime::Runtime,
    l: &Limiter,
    callers: usize,
    each: usize,
    rules: impl Fn(usize) -> Vec<Rule>,
) -> Vec<(usize, rl_core::Result<CompositeDecision>)> {
    rt.block_on(async {
        let tasks: Vec<_> = (0..callers)
            .map(|c| {
                let (l, rules) = (l.clone(), rules(c));
                tokio::spawn(async move {
                    let mut out = Vec::new();
                    for _ in 0..each {
                        out.push((c, l.acquire_all(&rules, Some(GROUP)).await));
                    }
                    out
                })
            })
            .collect();
        let mut all = Vec::new();
        for t in tasks {
            all.extend(t.await.unwrap());
        }
        all
    })
}

/// 32 callers x 40 composite calls on one group through a limiter on `url` (a server `server`):
/// all admitted, each once; returns the script calls Redis ran for them.
fn share(server: &rl_harness::RedisServer, url: &str) -> i64 {
    let rt = runtime();
    let l = Limiter::open(Some(url), strict()).unwrap();
    const CALLERS: usize = 32;
    const EACH: usize = 40;
    let before = script_calls(server);
    // Per client IP and for the whole tenant: different keys, one group.
    let rules = |c: usize| {
        vec![
            Rule::new(format!("ip:{}", c % 8), 1_000_000, 60_000, 1),
            Rule::new("all", 1_000_000, 60_000, 1),
        ]
    };
    let decisions: Vec<CompositeDecision> = concurrently(&rt, &l, CALLERS, EACH, rules)
        .into_iter()
        .map(|(_, r)| r.unwrap())
        .collect();
    let calls = script_calls(server) - before;
    let requests = (CALLERS * EACH) as i64;
    assert!(decisions
        .iter()
        .all(|d| d.allowed && d.mode == Mode::Normal));
    // Redis holds every admission once: the last caller's count of the shared key.
    let most = decisions.iter().map(|d| d.decisions[1].used).max().unwrap();
    assert_eq!(most, requests as u64, "every admission counted once");
    println!(
        "REPORT {CALLERS} callers x {EACH} composite calls on one group: {calls} script calls, {:.1} requests per call",
        requests as f64 / calls as f64
    );
    assert!(
        calls < requests / 2,
        "concurrent composite calls share script calls: {calls} calls for {requests} requests"
    );
    calls
}

#[test]
fn concurrent_composite_calls_on_one_group_share_script_calls() {
    let _heavy = heavy();
    let server = server();
    share(&server, &server.url());
}

/// The same by EVALSHA: a user without `+fcall +function|load` (the README's least privilege,
/// less the Functions rules), so the window script runs by EVALSHA, never FCALL.
#[test]
fn concurrent_composite_calls_share_script_calls_by_evalsha_too() {
    let _heavy = heavy();
    let rules = "~rl:* +evalsha +script|load +time +lindex +lrange +llen +lset +ltrim +rpush +del \
                 +pexpire +pttl +get +set +hget +hset +hsetnx +hexists +hincrby +hgetall +hdel +ping";
    let user = ["--user", "rl", "on", ">rl-pass"]
        .into_iter()
        .chain(rules.split_whitespace());
    let options = rl_harness::ServerOptions::default().args(user);
    let server = rl_harness::RedisServer::start_with(options).unwrap();
    let url = server.url().replacen("redis://", "redis://rl:rl-pass@", 1);
    share(&server, &url);
    let info = cmd(&server, &[b"INFO", b"commandstats"]);
    let fcalls = info
        .as_str()
        .unwrap()
        .lines()
        .filter_map(|l| l.strip_prefix("cmdstat_fcall:calls="))
        .map(|rest| rest.split(',').next().unwrap().parse::<i64>().unwrap())
        .sum::<i64>();
    assert_eq!(fcalls, 0, "every script call went by EVALSHA");
}

/// One request as its caller saw it: its rules and Redis's answer.
struct Seen {
    rules: Vec<Rule>,
    d: CompositeDecision,
}

/// The rules of one request: its IP's, the tenant's two on `all` (burst and longer), and its
/// user's, all of one cost.
fn request(ip: u64, user: u64, cost: u64) -> Vec<Rule> {
    vec![
        Rule::new("all", 100, 1000, cost),
        Rule::new(format!("ip:{ip}"), 6, 300, cost),
        Rule::new("all", 600, 5000, cost),
        Rule::new(format!("user:{user}"), 30, 700, cost),
    ]
}

/// The model: per key, the admissions `(t, cost)`.
#[derive(Default)]
struct Model(std::collections::HashMap<Vec<u8>, Vec<(u64, u64)>>);

impl Model {
    fn count(&self, key: &[u8], t: u64, window: u64) -> u64 {
        self.0.get(key).map_or(0, |v| {
            v.iter()
                .filter(|&&(s, _)| s <= t && s + window > t)
                .map(|&(_, n)| n)
                .sum()
        })
    }
}

#[test]
fn batched_composite_calls_are_exact_and_all_or_nothing_under_uneven_load() {
    let _heavy = heavy();
    let server = server();
    let rt = runtime();
    // No denial cache: every decision is Redis's, made in one of its script calls.
    let l = limiter_with(
        &server,
        Options {
            denial_cache: false,
            ..strict()
        },
    );
    let seen: Arc<Mutex<Vec<Seen>>> = Arc::default();
    let before = script_calls(&server);
    let end = Instant::now() + Duration::from_millis(2500);
    rt.block_on(async {
        let tasks: Vec<_> = (0..48u64)
            .map(|t| {
                let (l, seen) = (l.clone(), seen.clone());
                tokio::spawn(async move {
                    let mut rng = Rng(0x9e37_79b9_7f4a_7c15 ^ (t + 1));
                    while Instant::now() < end {
                        // Uneven: half the callers on one IP, and costs 1 to 3.
                        let ip = if t < 24 { 0 } else { t % 6 };
                        let rules = request(ip, rng.below(3), 1 + rng.below(3));
                        let d = l.acquire_all(&rules, Some(GROUP)).await.unwrap();
                        seen.lock().unwrap().push(Seen { rules, d });
                        if rng.below(4) == 0 {
                            tokio::time::sleep(Duration::from_millis(rng.below(3))).await;
                        }
                    }
                })
            })
            .collect();
        for t in tasks {
            t.await.unwrap();
        }
    });
    let calls = script_calls(&server) - before;
    let mut seen = std::mem::take(&mut *seen.lock().unwrap());
    let requests = seen.len() as i64;
    assert!(seen.iter().all(|s| s.d.mode == Mode::Normal));
    let denied = seen.iter().filter(|s| !s.d.allowed).count();

    // Redis's order: by time, then by the shared key's count before the request (it grows with
    // every admission); a denial before an admission that starts from the same count (the denial
    // saw that count, the admission made it larger). Denials change nothing, so their order among
    // themselves does not matter.
    let before_all =
        |s: &Seen| s.d.decisions[0].used - if s.d.allowed { s.rules[0].cost } else { 0 };
    seen.sort_by_key(|s| (s.d.now_ms, before_all(s), s.d.allowed));
    let mut model = Model::default();
    for (i, s) in seen.iter().enumerate() {
        let t = s.d.now_ms;
        let counts: Vec<u64> = s
            .rules
            .iter()
            .map(|r| model.count(&r.key, t, r.window_ms))
            .collect();
        let fits: Vec<bool> = s
            .rules
            .iter()
            .zip(&counts)
            .map(|(r, &n)| n + r.cost <= r.limit)
            .collect();
        let allowed = fits.iter().all(|&f| f);
        assert_eq!(
            s.d.allowed, allowed,
            "request {i} at {t}: the model says {allowed} (counts {counts:?}, rules {:?})",
            s.rules
        );
        for (j, (r, d)) in s.rules.iter().zip(&s.d.decisions).enumerate() {
            assert_eq!(d.allowed, fits[j], "request {i}, rule {j}");
            let used = counts[j] + if allowed { r.cost } else { 0 };
            assert_eq!(d.used, used, "request {i}, rule {j}: Redis's count");
        }
        if allowed {
            // Once per distinct key: the cost is taken once from a key, whatever its rules.
            let mut keys: Vec<&Vec<u8>> = s.rules.iter().map(|r| &r.key).collect();
            keys.sort();
            keys.dedup();
            for k in keys {
                let cost = s.rules.iter().find(|r| &r.key == k).unwrap().cost;
                model.0.entry(k.clone()).or_default().push((t, cost));
            }
        }
    }
    // Exactness, from the decisions' Redis times alone: every rule's most in any window.
    let mut reached = 0;
    for r in request(0, 0, 1) {
        let keys: Vec<Vec<u8>> = model
            .0
            .keys()
            .filter(|k| {
                let name = String::from_utf8_lossy(k);
                name.split(':').next() == String::from_utf8_lossy(&r.key).split(':').next()
            })
            .cloned()
            .collect();
        for k in keys {
            let mut v = model.0[&k].clone();
            v.sort_unstable();
            let most = (0..v.len())
                .map(|i| {
                    v[..=i]
                        .iter()
                        .filter(|&&(s, _)| s + r.window_ms > v[i].0)
                        .map(|&(_, n)| n)
                        .sum::<u64>()
                })
                .max()
                .unwrap_or(0);
            assert!(
                most <= r.limit,
                "{} {}/{} ms: {most} admitted in one window",
                String::from_utf8_lossy(&k),
                r.limit,
                r.window_ms
            );
            reached += usize::from(most + 3 > r.limit);
        }
    }
    println!(
        "REPORT {requests} composite requests ({denied} denied) in {calls} script calls, {:.1} per call; {reached} rules driven to their limits",
        requests as f64 / calls as f64
    );
    assert!(denied * 2 > seen.len(), "the load is far above the limits");
    assert!(reached >= 3, "rules driven to their limits: {reached}");
    assert!(
        calls < requests,
        "{calls} script calls for {requests} requests"
    );
}

#[test]
fn a_lone_composite_call_goes_out_at_once_and_alone() {
    let server = server();
    let rt = runtime();
    let l: Limiter = limiter(&server);
    let rules = request(1, 1, 1);
    // The first call loads the function library (a refused FCALL, the load, the FCALL again).
    rt.block_on(l.acquire_all(&rules, Some(GROUP))).unwrap();
    for _ in 0..5 {
        let before = script_calls(&server);
        let d = rt.block_on(l.acquire_all(&rules, Some(GROUP))).unwrap();
        assert!(d.allowed);
        assert_eq!(script_calls(&server) - before, 1, "one request, one call");
    }
}

#[test]
fn composite_callers_that_timed_out_during_a_freeze_are_not_decided_by_redis_afterwards() {
    let _heavy = heavy();
    let mut server = server();
    let rt = runtime();
    let timeout = Duration::from_millis(500);
    // No fallback, so callers time out; no retry (a delay as long as the timeout): a retry is a
    // new caller, alive when it is sent, whose call Redis may rightly decide.
    let options = Options {
        local_fallback: false,
        request_timeout: timeout,
        retry_delay: timeout,
        ..Options::default()
    };
    let l = limiter_with(&server, options);
    let rules = |ip: u64| {
        vec![
            Rule::new(format!("ip:{ip}"), 1_000_000, 60_000, 1),
            Rule::new("all", 1_000_000, 60_000, 1),
        ]
    };
    let warm = rt.block_on(l.acquire_all(&rules(0), Some(GROUP))).unwrap();
    assert!(warm.allowed && warm.mode == Mode::Normal, "{warm:?}");

    // Frozen at a quiet moment: the one call that reaches Redis is the first caller's own.
    server.freeze().unwrap();
    let results: Vec<(Duration, rl_core::Result<CompositeDecision>)> = rt.block_on(async {
        let calls: Vec<_> = (0..64u64)
            .map(|c| {
                let (l, rules) = (l.clone(), rules(c % 8));
                tokio::spawn(async move {
                    let started = Instant::now();
                    let r = l.acquire_all(&rules, Some(GROUP)).await;
                    (started.elapsed(), r)
                })
            })
            .collect();
        let mut out = Vec::new();
        for c in calls {
            out.push(c.await.unwrap());
        }
        out
    });
    std::thread::sleep(Duration::from_millis(300));
    server.thaw().unwrap();
    for (took, r) in &results {
        let e = r
            .as_ref()
            .expect_err("Redis was frozen: every caller times out");
        assert_eq!(e.kind(), rl_core::ErrorKind::BackendUnavailable, "{e}");
        assert!(
            *took < timeout + Duration::from_millis(250),
            "a caller waited {took:?}; request_timeout {timeout:?}"
        );
    }
    // Once Redis answers again, a call on the same connection comes after every call left on it.
    let (mut after, mut attempts) = (None, 0);
    wait_until("Redis answers again", Duration::from_secs(10), || {
        attempts += 1;
        after = rt.block_on(l.acquire_all(&rules(0), Some(GROUP))).ok();
        after.is_some()
    });
    // The shared key: the warm-up, at most the one call that was on the wire, and the attempts
    // since (a failed one may have been decided too).
    let held = after.unwrap().decisions[1].used;
    println!("REPORT 64 composite callers timed out on a frozen Redis: Redis holds {held} permits on the shared key; warm-up + 1 sent + {attempts} after");
    assert!(
        held <= 2 + attempts,
        "Redis holds {held}: a queued caller that gave up was sent"
    );
}

/// A key holding another program's value (a string, or a list that is not an rl window) fails
/// only the requests that name it, though they share script calls with requests that do not: the
/// others are decided as if it were not there, and the failed requests take no permit anywhere.
#[test]
fn a_key_holding_another_programs_value_fails_only_the_requests_that_name_it() {
    let _heavy = heavy();
    let server = server();
    let rt = runtime();
    let l = limiter(&server);
    let prefix = l.options().key_prefix.clone();
    let key = |k: &str| rl_core::group_key(&prefix, GROUP, k.as_bytes());
    cmd(&server, &[b"SET", &key("bad"), b"not a window"]);
    cmd(&server, &[b"RPUSH", &key("odd"), b"x", b"y"]);
    // The first call loads the function library; the ones below then share calls.
    let warm = [Rule::new("warm", 10, 60_000, 1)];
    rt.block_on(l.acquire_all(&warm, Some(GROUP))).unwrap();
    const CALLERS: usize = 24;
    const EACH: usize = 30;
    let before = script_calls(&server);
    // Caller c: its IP and the tenant's `all`, and for c % 3 == 1 `bad`, for c % 3 == 2 `odd`.
    let rules = |c: usize| {
        let mut r = vec![
            Rule::new(format!("ip:{c}"), 1_000_000, 60_000, 1),
            Rule::new("all", 1_000_000, 60_000, 1),
        ];
        match c % 3 {
            1 => r.push(Rule::new("bad", 1_000_000, 60_000, 1)),
            2 => r.push(Rule::new("odd", 1_000_000, 60_000, 1)),
            _ => {}
        }
        r
    };
    let results = concurrently(&rt, &l, CALLERS, EACH, rules);
    let calls = script_calls(&server) - before;
    let requests = (CALLERS * EACH) as i64;
    let good = (CALLERS / 3 * EACH) as u64;
    println!("REPORT {CALLERS} callers x {EACH} composite calls, two in three naming a key that is not a window: {calls} script calls");
    // Shared: a batch with bad keys costs one call more, not one per request that names one.
    assert!(
        calls < requests / 4,
        "the calls were shared: {calls} for {requests} requests"
    );
    let mut most_all = 0;
    for (c, r) in &results {
        match (c % 3, r) {
            (0, Ok(d)) => {
                assert!(d.allowed, "caller {c}: {d:?}");
                most_all = most_all.max(d.decisions[1].used);
            }
            (0, Err(e)) => panic!("caller {c} names no bad key, and failed: {e}"),
            (_, Ok(d)) => panic!("caller {c} names a key that is not a window, and got {d:?}"),
            // The key named, whether the script met it in a lone call or the client failed the
            // request in a batch.
            (k, Err(e)) => {
                let named = key(if k == 1 { "bad" } else { "odd" });
                let text = e.to_string();
                assert!(
                    text.contains(&*String::from_utf8_lossy(&named))
                        && text.contains("holds something that is not an rl window"),
                    "caller {c}: {e}"
                );
            }
        }
    }
    assert_eq!(
        most_all, good,
        "`all` counts the requests that named no bad key, and only them"
    );
    // `acquire` on a key of another type fails naming it too (Redis's WRONGTYPE names none).
    let plain = l.redis_key("plain");
    cmd(&server, &[b"SET", &plain, b"not a window"]);
    let e = rt.block_on(l.acquire("plain", 10, 1000, 1)).unwrap_err();
    assert_eq!(e.kind(), rl_core::ErrorKind::Backend, "{e}");
    let named = format!(
        "{} holds something that is not an rl window",
        String::from_utf8_lossy(&plain)
    );
    assert!(e.to_string().contains(&named), "{e}");
    assert_eq!(
        cmd(&server, &[b"GET", &plain]).as_str(),
        Some("not a window"),
        "left alone"
    );
    for c in (0..CALLERS).filter(|c| c % 3 != 0) {
        let ip = key(&format!("ip:{c}"));
        let exists = cmd(&server, &[b"EXISTS", &ip]);
        assert_eq!(
            exists.as_int(),
            Some(0),
            "caller {c}'s IP window took nothing"
        );
    }
}
