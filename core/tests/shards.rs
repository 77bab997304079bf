//! Sharded keys (`key_shards`, `shards.rs`) on real servers: a 3-master Cluster (where the
//! sub-keys must sit on every master, exactness must hold across masters, and under-admission is
//! measured under unbalanced load) and a standalone server (every shard on one server). `REPORT`
//! lines carry the measured figures (`--nocapture`).
//!
//! Times: the exactness checks use each decision's `now_ms`, which is the TIME of the master that
//! decided. The test masters all run on this host, so they read one clock. In production each
//! master has its own clock; that does not weaken the bound, because each shard counts its spans
//! on its own clock (a span of `window_ms` is one on every clock that runs at the same rate), but
//! an observer merging the masters' timestamps must use per-shard spans: with an offset of `d` ms
//! between two masters, their admissions may look up to `d` ms closer together or further apart.

mod common;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::*;
use rl_core::audit::max_in_any_window;
use rl_core::{Decision, ErrorKind, Limiter, Mode, Options};
use rl_harness::{key_slot, Cluster};

/// Strict (no fallback: every decision is Redis's), with timeouts long enough that a loaded
/// 2-core machine running a 3-master Cluster cannot time a call out: these tests check counts,
/// not latency.
fn sharded(n: u64) -> Options {
    Options {
        key_shards: n,
        request_timeout: std::time::Duration::from_secs(10),
        connect_timeout: std::time::Duration::from_secs(10),
        ..strict()
    }
}

/// The middle of the `i`-th of `n` equal slices of the 16384 slots: where shard `i` must sit.
fn target(i: u64, n: u64) -> u16 {
    ((2 * i + 1) * 16384 / (2 * n)) as u16
}

fn node_keys(server: &rl_harness::RedisServer) -> Vec<Vec<u8>> {
    keys(server)
}

#[test]
fn cluster_sub_keys_sit_on_all_three_masters() {
    let _heavy = heavy();
    let cluster = Cluster::start().unwrap();
    let rt = runtime();
    for n in [3u64, 8] {
        let l = Limiter::open(Some(&cluster.url()), sharded(n)).unwrap();
        let key = format!("spread-{n}");
        let limit = 10 * n;
        rt.block_on(async {
            for k in 1..=limit {
                let d = l.acquire(&key, limit, 60_000, 1).await.unwrap();
                assert!(d.allowed && d.mode == Mode::Normal, "{k}: {d:?}");
            }
            let d = l.acquire(&key, limit, 60_000, 1).await.unwrap();
            assert!(!d.allowed, "the limit is spent over the shards: {d:?}");
            // A denial asked every shard: the totals are the key's.
            assert_eq!((d.used, d.remaining), (limit, 0), "{d:?}");
            assert!(d.retry_after_ms > 0, "{d:?}");
        });
        assert!(
            l.stats().shard_borrows >= n - 1,
            "filling every shard borrowed from each other shard: {:?}",
            l.stats()
        );
        let subs = l.shard_keys(&key);
        assert_eq!(subs.len() as u64, n);
        let mut per_master = [0usize; 3];
        for (i, sub) in subs.iter().enumerate() {
            assert_eq!(key_slot(sub), target(i as u64, n), "shard {i}");
            let owner = cluster.key_owner(sub).unwrap();
            assert!(
                node_keys(&cluster.nodes()[owner]).contains(sub),
                "shard {i} ({}) is on its slot's master",
                String::from_utf8_lossy(sub)
            );
            per_master[owner] += 1;
        }
        assert!(
            per_master.iter().all(|&c| c as u64 >= n / 3),
            "{n} shards over 3 masters: {per_master:?}"
        );
        let on_masters: usize = cluster
            .nodes()
            .iter()
            .map(|m| node_keys(m).iter().filter(|k| subs.contains(k)).count())
            .sum();
        assert_eq!(on_masters as u64, n, "every sub-key exists once");
        println!("REPORT key_shards {n} on a 3-master Cluster: sub-keys per master {per_master:?}");
    }
}

/// One decision of a load run.
struct Shot {
    who: usize,
    cost: u64,
    d: Decision,
}

/// A small xorshift, seeded per worker (the tests only need variety, not quality).
fn next(s: &mut u64) -> u64 {
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    *s
}

/// Closed-loop callers of every load run.
const WORKERS: u64 = 16;

/// Closed-loop load: [`WORKERS`] tasks, each picking limiter `i` with weight `weights[i]` and a cost
/// in `1..=max_cost` for every call, for `duration`.
async fn offer(
    limiters: &[Limiter],
    weights: &[u64],
    key: &str,
    limit: u64,
    window_ms: u64,
    max_cost: u64,
    duration: Duration,
) -> Vec<Shot> {
    let out = Arc::new(Mutex::new(Vec::new()));
    let total: u64 = weights.iter().sum();
    let end = Instant::now() + duration;
    let mut tasks = Vec::new();
    for w in 0..WORKERS {
        let (limiters, weights, out, key) = (
            limiters.to_vec(),
            weights.to_vec(),
            out.clone(),
            key.to_string(),
        );
        tasks.push(tokio::spawn(async move {
            let mut seed = 0x9E37_79B9_7F4A_7C15u64 ^ ((w + 1) * 0x1000_0001);
            let mut mine = Vec::new();
            while Instant::now() < end {
                let mut pick = next(&mut seed) % total;
                let who = weights
                    .iter()
                    .position(|&wt| {
                        if pick < wt {
                            true
                        } else {
                            pick -= wt;
                            false
                        }
                    })
                    .unwrap();
                let cost = 1 + next(&mut seed) % max_cost;
                let d = limiters[who]
                    .acquire(&key, limit, window_ms, cost)
                    .await
                    .unwrap();
                mine.push(Shot { who, cost, d });
            }
            out.lock().unwrap().extend(mine);
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    Arc::try_unwrap(out).ok().unwrap().into_inner().unwrap()
}

/// Permits admitted per whole window from the first admission on, against the limit: the share of
/// the limit a saturated key actually gave out (1.0 = no under-admission).
fn admitted_share(shots: &[Shot], limit: u64, window_ms: u64) -> (f64, u64) {
    let t0 = shots
        .iter()
        .filter(|s| s.d.allowed)
        .map(|s| s.d.now_ms)
        .min()
        .unwrap();
    let t_end = shots.iter().map(|s| s.d.now_ms).max().unwrap();
    let windows = (t_end - t0) / window_ms;
    assert!(windows >= 2, "the run spans {} ms", t_end - t0);
    let admitted: u64 = shots
        .iter()
        .filter(|s| s.d.allowed && s.d.now_ms < t0 + windows * window_ms)
        .map(|s| s.cost)
        .sum();
    (admitted as f64 / (windows * limit) as f64, windows)
}

fn max_window(shots: &[Shot], window_ms: u64) -> u64 {
    let admitted: Vec<(u64, u64)> = shots
        .iter()
        .filter(|s| s.d.allowed)
        .map(|s| (s.d.now_ms, s.cost))
        .collect();
    max_in_any_window(&admitted, window_ms)
}

/// Limiters on `url` with `key_shards` `n` whose home shards are `0..count`, all distinct.
fn with_distinct_homes(url: &str, n: u64, count: usize) -> Vec<Limiter> {
    let mut by_home: Vec<Option<Limiter>> = vec![None; count];
    for _ in 0..1000 {
        let l = Limiter::open(Some(url), sharded(n)).unwrap();
        let h = l.home_shard() as usize;
        if h < count && by_home[h].is_none() {
            by_home[h] = Some(l);
        }
        if by_home.iter().all(Option::is_some) {
            return by_home.into_iter().map(Option::unwrap).collect();
        }
    }
    panic!("no {count} distinct home shards out of 1000 limiters");
}

#[test]
fn cluster_never_admits_more_than_the_limit_in_any_window() {
    let _heavy = heavy();
    let cluster = Cluster::start().unwrap();
    let rt = runtime();
    let (n, limit, window) = (6u64, 120u64, 500u64);
    let limiters = with_distinct_homes(&cluster.url(), n, 4);
    // Costs up to the largest shard (20), from 4 instances far above the limit.
    let shots = rt.block_on(offer(
        &limiters,
        &[1, 1, 1, 1],
        "exact",
        limit,
        window,
        limit.div_ceil(n),
        Duration::from_secs(3),
    ));
    let most = max_window(&shots, window);
    let admitted = shots.iter().filter(|s| s.d.allowed).count();
    println!(
        "REPORT Cluster key_shards {n}, limit {limit}/{window} ms, costs 1..={}: {} decisions, {admitted} admitted, most in any window {most}",
        limit.div_ceil(n),
        shots.len()
    );
    assert!(
        admitted > 0 && shots.len() > admitted,
        "the load saturated the key"
    );
    assert!(most <= limit, "{most} > {limit} in one window");
    assert!(
        shots.iter().all(|s| s.d.mode == Mode::Normal),
        "Redis decided every call"
    );
}

#[test]
fn cluster_unbalanced_load_under_admission_is_small() {
    let _heavy = heavy();
    let cluster = Cluster::start().unwrap();
    let rt = runtime();
    let (n, limit, window) = (4u64, 200u64, 1000u64);
    let run = Duration::from_secs(4);
    // One instance carries 90% of the calls, three share the rest.
    let weights = [90u64, 3, 3, 4];
    let limiters = with_distinct_homes(&cluster.url(), n, 4);
    let mut report = Vec::new();
    for max_cost in [1u64, 5] {
        let key = format!("unbalanced-{max_cost}");
        let borrows_before: u64 = limiters.iter().map(|l| l.stats().shard_borrows).sum();
        let shots = rt.block_on(offer(
            &limiters, &weights, &key, limit, window, max_cost, run,
        ));
        let (share, windows) = admitted_share(&shots, limit, window);
        let most = max_window(&shots, window);
        assert!(most <= limit, "cost 1..={max_cost}: {most} > {limit}");
        let heavy_share = shots.iter().filter(|s| s.who == 0).count() as f64 / shots.len() as f64;
        let borrows: u64 = limiters
            .iter()
            .map(|l| l.stats().shard_borrows)
            .sum::<u64>()
            - borrows_before;
        let denied = shots.iter().filter(|s| !s.d.allowed).count();
        let granted = |who: usize| -> u64 {
            shots
                .iter()
                .filter(|s| s.who == who && s.d.allowed)
                .map(|s| s.cost)
                .sum()
        };
        let per_instance: Vec<u64> = (0..4).map(granted).collect();
        report.push(format!(
            "costs 1..={max_cost}: {} decisions ({denied} denied, {:.0}% from the heavy instance), {:.2} Redis calls per decision, admitted {:.2}% of the limit over {windows} windows (under-admission {:.2}%), most in any window {most}, permits per instance {per_instance:?}",
            shots.len(),
            heavy_share * 100.0,
            (shots.len() as u64 + borrows) as f64 / shots.len() as f64,
            share * 100.0,
            (1.0 - share) * 100.0
        ));
        // The heavy instance's home shard holds a quarter of the limit: without borrowing the
        // fleet would admit little more than that plus the light instances' shards' use.
        if max_cost == 1 {
            assert!(share >= 0.95, "cost 1 loses only timing: admitted {share}");
        } else {
            // Bound: a denial saw at most cost - 1 free on each shard: N * (5 - 1) = 16 of 200.
            assert!(share >= 0.9, "costs 1..=5: admitted {share}");
        }
    }
    let borrows = limiters[0].stats().shard_borrows;
    assert!(borrows > 0, "the heavy instance borrowed");
    let light: Vec<u64> = limiters[1..]
        .iter()
        .map(|l| l.stats().shard_borrows)
        .collect();
    // The same load on one unsharded key, as the reference.
    let plain: Vec<Limiter> = (0..4)
        .map(|_| Limiter::open(Some(&cluster.url()), strict()).unwrap())
        .collect();
    let shots = rt.block_on(offer(
        &plain,
        &weights,
        "unbalanced-plain",
        limit,
        window,
        1,
        run,
    ));
    let (share, windows) = admitted_share(&shots, limit, window);
    report.push(format!(
        "unsharded reference, cost 1: {} decisions, admitted {:.1}% of the limit over {windows} windows",
        shots.len(),
        share * 100.0
    ));
    println!(
        "REPORT Cluster key_shards {n}, limit {limit}/{window} ms, 4 instances with distinct home shards, weights {weights:?}, {WORKERS} closed-loop callers; shard borrows: heavy instance {borrows}, light ones {light:?}:\n  {}",
        report.join("\n  ")
    );
}

#[test]
fn standalone_shards_share_one_server_exactly() {
    let server = server();
    let rt = runtime();
    let l = limiter_with(&server, sharded(8));
    rt.block_on(async {
        for k in 1..=20 {
            let d = l.acquire("one-server", 20, 60_000, 1).await.unwrap();
            assert!(d.allowed, "{k}: {d:?}");
        }
        let d = l.acquire("one-server", 20, 60_000, 1).await.unwrap();
        assert!(!d.allowed && d.used == 20 && d.remaining == 0, "{d:?}");
        let p = l.peek("one-server", 20, 60_000).await.unwrap();
        assert!(!p.allowed && p.used == 20 && p.remaining == 0, "{p:?}");
    });
    // 20 over 8 shards: 3, 3, 3, 3, 2, 2, 2, 2; every shard was used.
    assert_eq!(window_keys(&server).len(), 8);
    let subs = l.shard_keys("one-server");
    let stored = keys(&server);
    assert!(subs.iter().all(|k| stored.contains(k)), "{stored:?}");

    // A limit below the shard count: only the first `limit` shards hold a permit.
    rt.block_on(async {
        let admitted = {
            let mut a = 0;
            for _ in 0..10 {
                a += u64::from(l.acquire("tiny", 3, 60_000, 1).await.unwrap().allowed);
            }
            a
        };
        assert_eq!(admitted, 3);
    });
    assert_eq!(window_keys(&server).len(), 8 + 3);

    // reset forgets every shard.
    rt.block_on(async {
        l.reset("one-server").await.unwrap();
        let p = l.peek("one-server", 20, 60_000).await.unwrap();
        assert!(p.allowed && p.used == 0 && p.remaining == 20, "{p:?}");
    });
    assert_eq!(window_keys(&server).len(), 3);
}

#[test]
fn peek_sums_every_shard() {
    let server = server();
    let rt = runtime();
    let l = limiter_with(&server, sharded(4));
    rt.block_on(async {
        for _ in 0..5 {
            assert!(l.acquire("peeked", 40, 60_000, 2).await.unwrap().allowed);
        }
        let p = l.peek("peeked", 40, 60_000).await.unwrap();
        assert!(p.allowed && p.used == 10 && p.remaining == 30, "{p:?}");
        assert_eq!(p.retry_after_ms, 0);
        assert!(p.reset_after_ms > 0 && p.reset_after_ms <= 60_000, "{p:?}");
    });
}

#[test]
fn cost_above_the_largest_shard_is_refused_before_any_io() {
    let server = server();
    let rt = runtime();
    let redis = limiter_with(&server, sharded(4));
    let memory = Limiter::memory(sharded(4)).unwrap();
    rt.block_on(async {
        for l in [&redis, &memory] {
            // 10 over 4 shards: 3, 3, 2, 2.
            let e = l.acquire("big", 10, 1000, 4).await.unwrap_err();
            assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e}");
            assert_eq!(e.argument(), Some("cost"), "{e}");
            assert!(e.to_string().contains("key_shards 4"), "{e}");
            assert!(l.acquire("big", 10, 1000, 3).await.unwrap().allowed);
        }
    });
    // The cost-3 request took its permits from one shard of 3; nothing else was written (but
    // that admission's retry record).
    assert_eq!(window_keys(&server).len(), 1);
    assert!(keys(&server).len() <= 2, "{:?}", keys(&server));
}

#[test]
fn local_fallback_decides_each_shard_with_its_share() {
    let mut server = server();
    server.kill().unwrap();
    let options = Options {
        key_shards: 4,
        instances: Some(2),
        ..Options::default()
    };
    let l = rl_core::blocking::Limiter::open(Some(&server.url()), options).unwrap();
    // 100 over 4 shards is 25 each; the local budget per shard is 25 / 2 instances = 12.
    let mut admitted = 0;
    for _ in 0..100 {
        let d = l.acquire("offline", 100, 60_000, 1).unwrap();
        assert_eq!(d.mode, Mode::Local, "{d:?}");
        admitted += u64::from(d.allowed);
    }
    assert_eq!(admitted, 4 * 12);
    assert_eq!(l.stats().local_keys, 4, "one local record per sub-key");
}
