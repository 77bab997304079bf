//! Random sequences of acquire/peek/reset with random limits, windows (several per key), costs and
//! time steps, checked against an independent brute-force oracle: a plain list of the admitted
//! `(time, cost)` per key and the decision a correct sliding window must make from it. Runs on a
//! client clock (every millisecond chosen, Redis and memory side by side, which must also agree)
//! and on Redis TIME (the times are the decisions' own `now_ms`); on Redis TIME every step also
//! checks that the key's TTL outlives every permit the oracle knows is live, and a rule that never
//! changes on a key is checked after the fact: the most permits in any window is at most the limit.
//! A lease-aware part drives the script's lease calling convention directly (client clock, three
//! instances taking, returning and renewing leases between plain acquires) against a second
//! oracle that keeps leases as `(t, t + lease_ms, k)` intervals, each counted in every span that
//! meets its life (until it is returned, its used part then a bucket): every reply must match it
//! exactly, and no span on any millisecond may hold more than the limit.

mod common;

use std::sync::Arc;

use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};
use rl_core::{audit::max_in_any_window, blocking, Clock, Decision, Limiter, ManualClock};
use rl_harness::{RedisServer, RespValue};

/// What a call asks for, and what the oracle says it must get.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct Verdict {
    allowed: bool,
    used: u64,
    retry_after_ms: u64,
    reset_after_ms: u64,
}

impl From<&Decision> for Verdict {
    fn from(d: &Decision) -> Self {
        Verdict {
            allowed: d.allowed,
            used: d.used,
            retry_after_ms: d.retry_after_ms,
            reset_after_ms: d.reset_after_ms,
        }
    }
}

/// One key as the oracle sees it. Every admission is kept in `admitted`, oldest first. A key keeps
/// history for the longest window seen while it lives, so an admission older than `now - longest`
/// may have been dropped (by a later admission, or with the key's TTL): the first `uncertain`
/// entries may or may not still count, and the backend's state is `admitted[i..]` for some
/// `i <= uncertain` (buckets are dropped oldest first). The oracle keeps every such `i` that
/// explains all the decisions so far.
#[derive(Debug, Default, Clone)]
struct Oracle {
    admitted: Vec<(u64, u64)>,
    uncertain: usize,
    longest: u64,
}

/// The decision a sliding window must make on exactly `live` (admissions, oldest first).
fn brute(
    live: &[(u64, u64)],
    now: u64,
    limit: u64,
    window: u64,
    cost: u64,
    consume: bool,
) -> Verdict {
    let inside: Vec<(u64, u64)> = live
        .iter()
        .copied()
        .filter(|&(t, _)| t + window > now)
        .collect();
    let used: u64 = inside.iter().map(|&(_, c)| c).sum();
    let reset = inside.last().map_or(0, |&(t, _)| t + window - now);
    if used + cost > limit {
        let need = used + cost - limit;
        let mut acc = 0;
        let at = inside.iter().find(|&&(_, c)| {
            acc += c;
            acc >= need
        });
        let t = at
            .expect("cost <= limit, so the window holds enough to free")
            .0;
        return Verdict {
            allowed: false,
            used,
            retry_after_ms: t + window - now,
            reset_after_ms: reset,
        };
    }
    if consume {
        Verdict {
            allowed: true,
            used: used + cost,
            retry_after_ms: 0,
            reset_after_ms: window,
        }
    } else {
        Verdict {
            allowed: true,
            used,
            retry_after_ms: 0,
            reset_after_ms: reset,
        }
    }
}

impl Oracle {
    /// Checks `got` (one decision per request; `n` identical requests decided at `now`, as a
    /// multiset) and records what was admitted.
    fn check(
        &mut self,
        now: u64,
        limit: u64,
        window: u64,
        cost: u64,
        consume: bool,
        got: &[Verdict],
    ) -> Result<(), String> {
        // What fell out of the longest window may be gone from here on.
        let stale = self
            .admitted
            .partition_point(|&(t, _)| t + self.longest <= now);
        self.uncertain = self.uncertain.max(stale);
        if self.uncertain == self.admitted.len() {
            // Nothing is surely kept: the key may have expired, and with it the longest window.
            self.longest = 0;
        }
        let mut got = got.to_vec();
        got.sort_unstable();
        let mut fits = Vec::new();
        for i in 0..=self.uncertain {
            let mut live = self.admitted[i..].to_vec();
            let mut want = Vec::new();
            for _ in 0..got.len() {
                let v = brute(&live, now, limit, window, cost, consume);
                if v.allowed && consume {
                    live.push((now, cost));
                }
                want.push(v);
            }
            want.sort_unstable();
            if want == got {
                fits.push(i);
            }
        }
        let Some(&first) = fits.first() else {
            let options: Vec<_> = (0..=self.uncertain)
                .map(|i| brute(&self.admitted[i..], now, limit, window, cost, consume))
                .collect();
            return Err(format!(
                "at {now} (limit {limit}, window {window}, cost {cost}, consume {consume}) got {got:?}; a sliding window over {:?} \
                 ({} oldest possibly dropped) gives one of {options:?}",
                self.admitted, self.uncertain
            ));
        };
        // States before the first that fits cannot be the backend's, now or later.
        self.admitted.drain(..first);
        self.uncertain -= first;
        let admitted_any = consume && got.iter().any(|v| v.allowed);
        if admitted_any || self.uncertain < self.admitted.len() {
            self.longest = self.longest.max(window);
        }
        if consume {
            let n = got.iter().filter(|v| v.allowed).count();
            self.admitted.extend(std::iter::repeat_n((now, cost), n));
        }
        Ok(())
    }

    fn reset(&mut self) {
        *self = Oracle::default();
    }

    /// The latest moment (on the deciding clock) until which an admission surely still counts.
    fn surely_live_until(&self) -> Option<u64> {
        self.admitted[self.uncertain..]
            .last()
            .map(|&(t, _)| t + self.longest)
    }
}

#[derive(Debug, Clone)]
enum Op {
    /// `rule: None` uses the key's own rule; `Some` a different limit and window on the same key.
    Acquire {
        key: u8,
        rule: Option<(u64, u64)>,
        cost: u64,
    },
    Peek {
        key: u8,
        rule: Option<(u64, u64)>,
    },
    Reset {
        key: u8,
    },
    /// Client clock: advance by this many ms. Redis TIME: sleep this many ms.
    Advance(u64),
    /// `n` identical acquires at once (client clock only): on Redis they run concurrently and are
    /// coalesced into batches; their decisions, as a multiset, must be `n` sequential ones.
    Burst {
        key: u8,
        cost: u64,
        n: usize,
    },
}

const KEYS: usize = 3;

#[derive(Debug, Clone)]
struct Case {
    /// Each key's own (limit, window).
    rules: Vec<(u64, u64)>,
    ops: Vec<Op>,
}

/// Few keys and small numbers, so windows fill, expire and collide often. `max_window` and the
/// time steps are short on Redis TIME, where time really passes.
fn case(max_window: u64, max_step: u64, bursts: bool) -> impl Strategy<Value = Case> {
    shaped(12, max_window, max_step, bursts, 60)
}

/// `case` with the limit's and the sequence's sizes chosen: long sequences with high limits build
/// windows of hundreds of buckets, where the script's binary searches gallop and bisect.
fn shaped(
    max_limit: u64,
    max_window: u64,
    max_step: u64,
    bursts: bool,
    max_ops: usize,
) -> impl Strategy<Value = Case> {
    let rule = (
        1u64..max_limit,
        prop_oneof![
            1u64..5,
            5u64..=max_window / 10,
            max_window / 10..=max_window
        ],
    );
    let other = proptest::option::weighted(0.3, rule.clone());
    let op = prop_oneof![
        6 => (0..KEYS as u8, other.clone(), 1u64..12).prop_map(|(key, rule, cost)| Op::Acquire { key, rule, cost }),
        2 => (0..KEYS as u8, other).prop_map(|(key, rule)| Op::Peek { key, rule }),
        1 => (0..KEYS as u8).prop_map(|key| Op::Reset { key }),
        4 => prop_oneof![Just(0u64), 0u64..3, 0..=max_step / 10, 0..=max_step].prop_map(Op::Advance),
        if bursts { 1 } else { 0 } => (0..KEYS as u8, 1u64..12, 2usize..40).prop_map(|(key, cost, n)| Op::Burst { key, cost, n }),
    ];
    (
        proptest::collection::vec(rule, KEYS),
        proptest::collection::vec(op, 1..max_ops),
    )
        .prop_map(|(rules, ops)| Case { rules, ops })
}

/// A cost that fits the rule (cost <= limit).
fn fit(cost: u64, limit: u64) -> u64 {
    1 + (cost - 1) % limit
}

/// Redis's TTL for `key` and its clock, read together.
fn ttl_and_time(server: &RedisServer, key: &[u8]) -> (i64, u64) {
    let ttl = server.command(&[b"PTTL", key]).unwrap().as_int().unwrap();
    let RespValue::Array(t) = server.command(&[b"TIME"]).unwrap() else {
        panic!("TIME")
    };
    let secs: u64 = t[0].as_str().unwrap().parse().unwrap();
    let micros: u64 = t[1].as_str().unwrap().parse().unwrap();
    (ttl, secs * 1000 + micros / 1000)
}

/// Runs one case on `limiter`. With `clock`, time is the test's; without, it is Redis TIME and
/// `server` is read after each step for the TTL check. Returns every op's decisions (a burst's
/// sorted), for comparing backends.
fn run(
    limiter: &blocking::Limiter,
    clock: Option<&ManualClock>,
    server: &RedisServer,
    c: &Case,
) -> Result<Vec<Vec<Verdict>>, TestCaseError> {
    let mut oracles = vec![Oracle::default(); KEYS];
    // Per key, the admitted (now_ms, cost) for the "most in any window" check, or None once the
    // key saw a reset or a rule other than its own.
    let mut admitted: Vec<Option<Vec<(u64, u64)>>> = vec![Some(Vec::new()); KEYS];
    let mut last_now = [0u64; KEYS];
    let mut out = Vec::new();
    let name = |k: u8| format!("k{k}");
    for (i, op) in c.ops.iter().enumerate() {
        let (key, decisions, limit, window, cost, consume) = match *op {
            Op::Advance(ms) => {
                match clock {
                    Some(clock) => clock.advance(ms),
                    None => std::thread::sleep(std::time::Duration::from_millis(ms)),
                }
                continue;
            }
            Op::Reset { key } => {
                limiter.reset(name(key)).unwrap();
                oracles[key as usize].reset();
                admitted[key as usize] = None;
                continue;
            }
            Op::Acquire { key, rule, cost } => {
                let (limit, window) = rule.unwrap_or(c.rules[key as usize]);
                if rule.is_some() {
                    admitted[key as usize] = None;
                }
                let cost = fit(cost, limit);
                (
                    key,
                    vec![limiter.acquire(name(key), limit, window, cost).unwrap()],
                    limit,
                    window,
                    cost,
                    true,
                )
            }
            Op::Peek { key, rule } => {
                let (limit, window) = rule.unwrap_or(c.rules[key as usize]);
                (
                    key,
                    vec![limiter.peek(name(key), limit, window).unwrap()],
                    limit,
                    window,
                    1,
                    false,
                )
            }
            Op::Burst { key, cost, n } => {
                let (limit, window) = c.rules[key as usize];
                let cost = fit(cost, limit);
                let rt = rl_core::runtime::handle().unwrap();
                let joins: Vec<_> = (0..n)
                    .map(|_| {
                        let (l, k) = (limiter.as_async().clone(), name(key));
                        rt.spawn(async move { l.acquire(k, limit, window, cost).await })
                    })
                    .collect();
                (
                    key,
                    joins
                        .into_iter()
                        .map(|j| rt.block_on(j).unwrap().unwrap())
                        .collect(),
                    limit,
                    window,
                    cost,
                    true,
                )
            }
        };
        let k = key as usize;
        let now = decisions[0].now_ms;
        for d in &decisions {
            prop_assert_eq!(d.now_ms, now, "op {}: one instant for a burst", i);
            prop_assert_eq!(
                d.remaining,
                limit.saturating_sub(d.used),
                "op {}: {:?}",
                i,
                d
            );
        }
        match clock {
            Some(clock) => prop_assert_eq!(
                now,
                clock.now_ms(),
                "op {}: decided at the client's time",
                i
            ),
            None => prop_assert!(
                now >= last_now[k],
                "op {}: time ran backwards for a window: {} < {}",
                i,
                now,
                last_now[k]
            ),
        }
        last_now[k] = now;
        let mut got: Vec<Verdict> = decisions.iter().map(Verdict::from).collect();
        oracles[k]
            .check(now, limit, window, cost, consume, &got)
            .map_err(|e| TestCaseError::fail(format!("op {i} {op:?}: {e}")))?;
        if let Some(a) = admitted[k].as_mut() {
            a.extend(
                decisions
                    .iter()
                    .filter(|d| d.allowed && consume)
                    .map(|d| (d.now_ms, cost)),
            );
        }
        if clock.is_none() {
            // The key must outlive every permit that surely still counts (on Redis TIME).
            if let Some(until) = oracles[k].surely_live_until() {
                let (ttl, server_now) = ttl_and_time(server, &limiter.redis_key(name(key)));
                prop_assert!(
                    ttl > 0 && server_now + ttl as u64 >= until,
                    "op {}: the key expires in {} ms at {} but holds a permit live until {}",
                    i,
                    ttl,
                    server_now,
                    until
                );
            }
        }
        got.sort_unstable();
        out.push(got);
    }
    // A rule that never changed on a key: never more than its limit in any of its windows.
    for (k, a) in admitted.iter().enumerate() {
        if let Some(a) = a {
            let (limit, window) = c.rules[k];
            let max = max_in_any_window(a, window);
            prop_assert!(
                max <= limit,
                "key {}: {} permits in one {} ms window, limit {}: {:?}",
                k,
                max,
                window,
                limit,
                a
            );
        }
    }
    Ok(out)
}

fn cases(default: u32) -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|c| c.parse().ok())
        .unwrap_or(default)
}

fn check(
    strategy: impl Strategy<Value = Case>,
    cases: u32,
    f: impl Fn(u64, Case) -> Result<(), TestCaseError>,
) {
    let mut runner = TestRunner::new(Config {
        cases,
        ..Config::default()
    });
    let n = std::sync::atomic::AtomicU64::new(0);
    if let Err(e) = runner.run(&strategy, |c| {
        f(n.fetch_add(1, std::sync::atomic::Ordering::SeqCst), c)
    }) {
        panic!("{e}");
    }
}

/// The model holds every field of every answer to the oracle's, so every answer must be Redis's
/// own: a denial replayed from the denial cache carries `used` as Redis last said it (the oracle
/// counts the permits that left the window since). `tests/denial_cache.rs` holds the cache's
/// replays to the admitted history.
fn uncached(options: rl_core::Options) -> rl_core::Options {
    rl_core::Options {
        denial_cache: false,
        ..options
    }
}

#[test]
fn client_clock_decisions_match_the_oracle_on_redis_and_memory_alike() {
    // The server lives in this test's scope, so it is stopped when the test ends, pass or fail.
    let server = common::server();
    let url = server.url();
    check(case(3000, 4000, true), cases(150), |id, c| {
        let clock = Arc::new(ManualClock::new(common::wall_ms()));
        // A fresh prefix per case: cases never see each other's windows.
        let options = rl_core::Options {
            key_prefix: format!("model{id}:"),
            ..uncached(common::client_clock(clock.clone()))
        };
        let redis = blocking::Limiter::open(Some(&url), options.clone()).unwrap();
        let memory = blocking::Limiter::from_async(Limiter::memory(options).unwrap());
        let start = clock.now_ms();
        let r = run(&redis, Some(&clock), &server, &c)?;
        clock.set(start);
        let m = run(&memory, Some(&clock), &server, &c)?;
        // Same rules, same clock: the backends also agree with each other, op for op.
        prop_assert_eq!(r, m);
        Ok(())
    });
}

#[test]
fn long_histories_match_the_oracle_on_redis_and_memory_alike() {
    let server = common::server();
    let url = server.url();
    check(shaped(400, 3000, 40, false, 400), cases(12), |id, c| {
        let clock = Arc::new(ManualClock::new(common::wall_ms()));
        let options = rl_core::Options {
            key_prefix: format!("long{id}:"),
            ..uncached(common::client_clock(clock.clone()))
        };
        let redis = blocking::Limiter::open(Some(&url), options.clone()).unwrap();
        let memory = blocking::Limiter::from_async(Limiter::memory(options).unwrap());
        let start = clock.now_ms();
        let r = run(&redis, Some(&clock), &server, &c)?;
        clock.set(start);
        let m = run(&memory, Some(&clock), &server, &c)?;
        prop_assert_eq!(r, m);
        Ok(())
    });
}

#[test]
fn redis_time_decisions_match_the_oracle_from_their_own_now_ms() {
    let server = common::server();
    let url = server.url();
    // Windows up to 300 ms and steps up to 150 ms of real time: a few seconds in all.
    check(case(300, 150, false), cases(25), |id, c| {
        let options = rl_core::Options {
            key_prefix: format!("time{id}:"),
            ..uncached(common::strict())
        };
        let redis = blocking::Limiter::open(Some(&url), options).unwrap();
        run(&redis, None, &server, &c)?;
        Ok(())
    });
}

#[test]
fn an_expired_key_starts_afresh_and_the_oracle_accepts_what_it_forgot() {
    let server = common::server();
    let l = common::blocking_with(&server, common::strict());
    let key = l.redis_key("exp");
    let mut oracle = Oracle::default();
    let mut step = |limit: u64, window: u64, cost: u64| {
        let d = l.acquire("exp", limit, window, cost).unwrap();
        oracle
            .check(d.now_ms, limit, window, cost, true, &[Verdict::from(&d)])
            .unwrap();
        d
    };
    assert!(step(3, 50, 3).allowed);
    assert!(!step(3, 50, 1).allowed);
    // The TTL is twice (window + 1 s slack) at most: wait until Redis has dropped the key.
    common::wait_until(
        "the key's TTL to pass",
        std::time::Duration::from_secs(5),
        || server.command(&[b"EXISTS", &key]).unwrap().as_int() == Some(0),
    );
    // A 10 s rule now: the old permits may no longer count (the key expired with them), and
    // what is admitted from here on is counted exactly again.
    let d = step(4, 10_000, 4);
    assert!(d.allowed && d.used == 4, "{d:?}");
    let d = step(4, 10_000, 1);
    assert!(!d.allowed && d.used == 4, "{d:?}");
}

/// One step of a lease-aware case: a plain acquire (calling convention 2, `rl1`), a lease call
/// from one of three instances (convention 3, `rl1L`: the instance returns its current lease, if
/// it holds one, with `used` of its permits granted, and asks for a new one), a refund alone, or
/// time passing.
#[derive(Debug, Clone)]
enum LeaseStep {
    Acquire {
        cost: u64,
    },
    Lease {
        inst: usize,
        want: u64,
        min: u64,
        used: u64,
    },
    Refund {
        inst: usize,
        used: u64,
    },
    Advance(u64),
}

#[derive(Debug, Clone)]
struct LeaseCase {
    window: u64,
    limit: u64,
    lease_ms: u64,
    steps: Vec<LeaseStep>,
}

fn lease_case() -> impl Strategy<Value = LeaseCase> {
    (10u64..=200, 1u64..=40, 5u64..=150).prop_flat_map(|(window, limit, lease_ms)| {
        let step = prop_oneof![
            3 => (1..=limit).prop_map(|cost| LeaseStep::Acquire { cost }),
            3 => (0usize..3, 1..=limit, 1u64..=3, 0..=limit)
                .prop_map(|(inst, want, min, used)| LeaseStep::Lease { inst, want, min, used }),
            1 => (0usize..3, 0..=limit).prop_map(|(inst, used)| LeaseStep::Refund { inst, used }),
            3 => (0..=window / 2).prop_map(LeaseStep::Advance),
        ];
        prop::collection::vec(step, 1..60).prop_map(move |steps| LeaseCase {
            window,
            limit,
            lease_ms,
            steps,
        })
    })
}

/// A lease as the lease oracle keeps it: granted at `t` until `end` (`t + lease_ms`), `k` permits,
/// and when it was returned (its used part then admitted as a bucket at that time).
#[derive(Debug, Clone, Copy)]
struct LeaseLife {
    t: u64,
    end: u64,
    k: u64,
    seq: u64,
    returned: Option<u64>,
}

/// The lease-aware oracle: admissions `(time, cost)` (refunds' used parts included, at the refund
/// time), and every lease ever granted. A live lease counts in full in every span `(s - W, s]`
/// that meets its life `[t, end]`; a returned one counts in full in the spans that end before its
/// return, and by its used part (a bucket) from then on.
#[derive(Debug, Default)]
struct LeaseOracle {
    buckets: Vec<(u64, u64)>,
    leases: Vec<LeaseLife>,
    /// Index into `leases` of each instance's lease that Redis still holds.
    held: [Option<usize>; 3],
}

impl LeaseOracle {
    fn count(&self, s: u64, window: u64) -> u64 {
        let b: u64 = self
            .buckets
            .iter()
            .filter(|&&(t, _)| t <= s && t + window > s)
            .map(|&(_, c)| c)
            .sum();
        let l: u64 = self
            .leases
            .iter()
            .filter(|l| match l.returned {
                Some(r) => l.t <= s && s < r,
                None => l.t <= s && l.end + window > s,
            })
            .map(|l| l.k)
            .sum();
        b + l
    }
}

/// Runs one lease case straight against the script (client clock: every ms chosen), checking each
/// reply against the oracle and, at the end, every span against the limit.
fn run_lease_case(server: &RedisServer, n: u64, c: &LeaseCase) -> Result<(), TestCaseError> {
    let key = format!("lm:{n}");
    let lkey = format!("{key}:l");
    let (_, mut now) = ttl_and_time(server, key.as_bytes());
    now += 1;
    let start = now;
    let skew = 10_000_000f64;
    let pack = |v: &[f64]| v.iter().flat_map(|x| x.to_be_bytes()).collect::<Vec<u8>>();
    let ints = |r: RespValue| -> Vec<i64> {
        let RespValue::Array(items) = r else {
            panic!("{r:?}")
        };
        items.iter().map(|i| i.as_int().unwrap()).collect()
    };
    let (w, limit) = (c.window, c.limit);
    let mut o = LeaseOracle::default();
    let mut seq = 0u64;
    for step in &c.steps {
        match *step {
            LeaseStep::Advance(ms) => now += ms,
            LeaseStep::Acquire { cost } => {
                let head = pack(&[now as f64, skew]);
                let body = pack(&[1.0, w as f64, limit as f64, cost as f64]);
                let args: Vec<&[u8]> = vec![
                    b"EVAL",
                    rl_core::SLIDING_WINDOW_LUA.as_bytes(),
                    b"1",
                    key.as_bytes(),
                    b"rl1",
                    &head,
                    &body,
                ];
                let r = ints(server.command(&args).unwrap());
                let used = o.count(now, w);
                let allowed = used + cost <= limit;
                if allowed {
                    o.buckets.push((now, cost));
                }
                let want = (
                    allowed as i64,
                    (used + if allowed { cost } else { 0 }) as i64,
                );
                prop_assert_eq!(
                    (r[1], r[2]),
                    want,
                    "acquire {} at +{}: {:?}",
                    cost,
                    now - start,
                    r
                );
            }
            LeaseStep::Lease { inst, used, .. } | LeaseStep::Refund { inst, used } => {
                let (new_seq, want, min) = match *step {
                    LeaseStep::Lease { want, min, .. } => {
                        seq += 1;
                        (seq, want, min)
                    }
                    _ => (0, 0, 1),
                };
                let (old_seq, old_used) = o.held[inst].map_or((0, 0), |i| {
                    let l = o.leases[i];
                    (l.seq, used.min(l.k))
                });
                if new_seq == 0 && old_seq == 0 {
                    continue;
                }
                let head = pack(&[now as f64, skew]);
                let body = pack(&[
                    w as f64,
                    limit as f64,
                    want as f64,
                    min as f64,
                    c.lease_ms as f64,
                    new_seq as f64,
                    old_seq as f64,
                    old_used as f64,
                ]);
                let id = format!("i{inst}");
                let args: Vec<&[u8]> = vec![
                    b"EVAL",
                    rl_core::SLIDING_WINDOW_LUA.as_bytes(),
                    b"1",
                    key.as_bytes(),
                    b"rl1L",
                    &head,
                    &body,
                    id.as_bytes(),
                ];
                let r = ints(server.command(&args).unwrap());
                // Leases that count in no window any more are deleted (their history stays).
                for h in o.held.iter_mut() {
                    if h.is_some_and(|i| o.leases[i].end + w <= now) {
                        *h = None;
                    }
                }
                if let Some(i) = o.held[inst] {
                    // The return: the lease goes, its used part is admitted now.
                    o.held[inst] = None;
                    o.leases[i].returned = Some(now);
                    if old_used > 0 {
                        o.buckets.push((now, old_used));
                    }
                }
                let used_now = o.count(now, w);
                let holders = (0..3).filter(|&j| j != inst && o.held[j].is_some()).count() as u64;
                let mut k = 0;
                if new_seq != 0 && used_now < limit {
                    k = want.min((limit - used_now) / (2 * (holders + 1)));
                    if k < min {
                        k = 0;
                    }
                }
                if k > 0 {
                    o.leases.push(LeaseLife {
                        t: now,
                        end: now + c.lease_ms,
                        k,
                        seq: new_seq,
                        returned: None,
                    });
                    o.held[inst] = Some(o.leases.len() - 1);
                }
                let want_reply = (0, k as i64, now as i64, (used_now + k) as i64);
                prop_assert_eq!(
                    (r[0], r[1], r[2], r[3]),
                    want_reply,
                    "lease call {:?} at +{}",
                    step,
                    now - start
                );
            }
        }
    }
    // Every span, on every ms from the first event to one window after the last.
    for s in start..=now + w {
        let held = o.count(s, w);
        prop_assert!(
            held <= limit,
            "{} in the span ending at +{}",
            held,
            s - start
        );
    }
    server
        .command(&[b"DEL", key.as_bytes(), lkey.as_bytes()])
        .unwrap();
    Ok(())
}

#[test]
fn lease_calls_and_acquires_match_the_lease_aware_oracle_and_no_span_exceeds_the_limit() {
    let server = common::server();
    let mut runner = TestRunner::new(Config {
        cases: cases(200),
        ..Config::default()
    });
    let n = std::sync::atomic::AtomicU64::new(0);
    if let Err(e) = runner.run(&lease_case(), |c| {
        run_lease_case(
            &server,
            n.fetch_add(1, std::sync::atomic::Ordering::SeqCst),
            &c,
        )
    }) {
        panic!("{e}");
    }
}
