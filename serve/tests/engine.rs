//! `Engine::check` against a real redis-server: ratelimit's matching, sliding windows, all or
//! nothing, shadow mode, bans, replaces, and the IETF headers on the answer.

use std::sync::Arc;

use rl_harness::RedisServer;
use rl_serve::config::load;
use rl_serve::decide::{CheckRequest, Code, DescriptorRequest, Entry, Unit};
use rl_serve::metrics::Metrics;
use rl_serve::Engine;

const POLICIES: &str = r#"
domain: api
descriptors:
  - key: remote_address
    rate_limit: {unit: minute, requests_per_unit: 3}
  - key: user
    value: vip
    rate_limit: {unit: minute, requests_per_unit: 5, name: vip}
  - key: path
    value: /admin*
    rate_limit: {unit: minute, requests_per_unit: 0, name: banned}
  - key: tenant
    descriptors:
      - key: method
        value: POST
        rate_limit: {unit: second, requests_per_unit: 2}
  - key: shadow
    shadow_mode: true
    rate_limit: {unit: minute, requests_per_unit: 1}
  - key: free
    rate_limit: {unlimited: true}
  - key: old
    rate_limit: {unit: minute, requests_per_unit: 1, name: old}
  - key: new
    rate_limit: {unit: minute, requests_per_unit: 10, replaces: [{name: old}]}
  - key: fast
    rate_limit: {window_ms: 300, requests_per_unit: 2}
"#;

fn engine(redis: &RedisServer) -> Engine {
    // One file per engine: the tests run in parallel, and a file rewritten while another test
    // reads it is read half-written.
    static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("rl-serve-engine-{}-{n}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("p.yaml");
    std::fs::write(&path, POLICIES).unwrap();
    let metrics = Arc::new(Metrics::default());
    let policies = load(&path, &metrics).unwrap();
    let limiter = rl_core::Limiter::open(Some(&redis.url()), Default::default()).unwrap();
    Engine::new(limiter, policies, metrics)
}

fn req(descriptors: &[&[(&str, &str)]]) -> CheckRequest {
    CheckRequest {
        domain: "api".into(),
        descriptors: descriptors
            .iter()
            .map(|d| DescriptorRequest {
                entries: d
                    .iter()
                    .map(|(k, v)| Entry {
                        key: k.to_string(),
                        value: v.to_string(),
                    })
                    .collect(),
                hits_addend: None,
            })
            .collect(),
        hits_addend: 0,
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn matching_follows_ratelimit_and_windows_slide() {
    let redis = RedisServer::start().unwrap();
    let e = engine(&redis);
    // A key without value: one counter per value.
    for _ in 0..3 {
        let r = e
            .check(&req(&[&[("remote_address", "1.1.1.1")]]))
            .await
            .unwrap();
        assert_eq!(r.overall, Code::Ok);
    }
    let r = e
        .check(&req(&[&[("remote_address", "1.1.1.1")]]))
        .await
        .unwrap();
    assert_eq!(r.overall, Code::OverLimit);
    let s = &r.statuses[0];
    assert_eq!(s.limit.as_ref().unwrap().unit, Unit::Minute);
    assert!(s.duration_until_reset.as_secs() > 50, "{s:?}");
    let body = r.problem_body.expect("a denial has a problem body");
    assert!(body.contains("api.remote_address"), "{body}");
    assert!(r.headers.iter().any(|(k, _)| k == "Retry-After"));
    let r = e
        .check(&req(&[&[("remote_address", "2.2.2.2")]]))
        .await
        .unwrap();
    assert_eq!(r.overall, Code::Ok);
    assert_eq!(r.statuses[0].limit_remaining, 2);
    // key_value beats key; an unmatched value of a valued key has no limit.
    let r = e.check(&req(&[&[("user", "vip")]])).await.unwrap();
    assert_eq!(r.statuses[0].limit.as_ref().unwrap().name, "vip");
    let r = e.check(&req(&[&[("user", "nobody")]])).await.unwrap();
    assert_eq!((r.overall, r.statuses[0].limit.clone()), (Code::Ok, None));
    // Wildcard prefix, limit 0: always denied.
    let r = e.check(&req(&[&[("path", "/admin/users")]])).await.unwrap();
    assert_eq!(r.overall, Code::OverLimit);
    let r = e.check(&req(&[&[("path", "/public")]])).await.unwrap();
    assert_eq!(r.overall, Code::Ok);
    // Nested: the limit is at depth 2 only.
    let r = e.check(&req(&[&[("tenant", "t1")]])).await.unwrap();
    assert!(r.statuses[0].limit.is_none());
    let two = &[("tenant", "t1"), ("method", "POST")][..];
    let r = e.check(&req(&[two])).await.unwrap();
    assert_eq!(r.statuses[0].limit.as_ref().unwrap().requests_per_unit, 2);
    // Unlimited.
    let r = e.check(&req(&[&[("free", "x")]])).await.unwrap();
    assert_eq!(r.statuses[0].limit_remaining, u64::from(u32::MAX));
    // Sliding: 2 per 300 ms.
    for _ in 0..2 {
        assert_eq!(
            e.check(&req(&[&[("fast", "a")]])).await.unwrap().overall,
            Code::Ok
        );
    }
    let r = e.check(&req(&[&[("fast", "a")]])).await.unwrap();
    assert_eq!(r.overall, Code::OverLimit);
    tokio::time::sleep(r.retry_after + std::time::Duration::from_millis(20)).await;
    assert_eq!(
        e.check(&req(&[&[("fast", "a")]])).await.unwrap().overall,
        Code::Ok
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_denied_request_takes_nothing_and_shadow_never_denies() {
    let redis = RedisServer::start().unwrap();
    let e = engine(&redis);
    // remote_address has 3, user vip 5; the banned path denies the request: nothing is taken.
    for _ in 0..5 {
        let r = e
            .check(&req(&[
                &[("remote_address", "9.9.9.9")],
                &[("user", "vip")],
                &[("path", "/admin")],
            ]))
            .await
            .unwrap();
        assert_eq!(r.overall, Code::OverLimit);
    }
    let r = e
        .check(&req(&[
            &[("remote_address", "9.9.9.9")],
            &[("user", "vip")],
        ]))
        .await
        .unwrap();
    assert_eq!(r.overall, Code::Ok);
    assert_eq!(r.statuses[0].limit_remaining, 2, "{r:?}");
    assert_eq!(r.statuses[1].limit_remaining, 4, "{r:?}");
    let policy = r
        .headers
        .iter()
        .find(|(k, _)| k == "RateLimit-Policy")
        .unwrap();
    assert_eq!(
        policy.1,
        "\"api.remote_address\";q=3;w=60, \"vip\";q=5;w=60"
    );
    // Exhaust remote_address: user vip is then not counted either.
    e.check(&req(&[&[("remote_address", "9.9.9.9")]]))
        .await
        .unwrap();
    e.check(&req(&[&[("remote_address", "9.9.9.9")]]))
        .await
        .unwrap();
    let r = e
        .check(&req(&[
            &[("remote_address", "9.9.9.9")],
            &[("user", "vip")],
        ]))
        .await
        .unwrap();
    assert_eq!(r.overall, Code::OverLimit);
    assert_eq!(r.statuses[0].code, Code::OverLimit);
    assert_eq!(r.statuses[1].code, Code::Ok);
    let r = e.check(&req(&[&[("user", "vip")]])).await.unwrap();
    assert_eq!(
        r.statuses[0].limit_remaining, 3,
        "the denied request took nothing"
    );
    // Shadow: over its limit of 1, reported, never denied.
    for i in 0..3 {
        let r = e.check(&req(&[&[("shadow", "s")]])).await.unwrap();
        assert_eq!(r.overall, Code::Ok);
        assert_eq!(r.statuses[0].shadow_denied, i > 0);
    }
    // replaces: "new" (10/min) replaces "old" (1/min) when both match.
    for _ in 0..3 {
        let r = e
            .check(&req(&[&[("old", "o")], &[("new", "n")]]))
            .await
            .unwrap();
        assert_eq!(r.overall, Code::Ok);
        assert!(r.statuses[0].limit.is_none());
    }
    // hits_addend is the cost; above the limit it never fits.
    let mut big = req(&[&[("user", "vip")]]);
    big.hits_addend = 3;
    assert_eq!(e.check(&big).await.unwrap().overall, Code::Ok);
    assert_eq!(e.check(&big).await.unwrap().overall, Code::OverLimit);
    big.hits_addend = 6;
    assert_eq!(e.check(&big).await.unwrap().overall, Code::OverLimit);
    // An unknown domain has no limits.
    let mut other = req(&[&[("remote_address", "9.9.9.9")]]);
    other.domain = "nope".into();
    assert_eq!(e.check(&other).await.unwrap().overall, Code::Ok);
    let text = e.metrics().render(&e.limiter().stats());
    assert!(
        text.contains("rl_decisions_total{policy=\"vip\",outcome=\"ok\",mode=\"normal\"}"),
        "{text}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn an_empty_domain_descriptor_list_or_descriptor_is_refused_as_invalid() {
    let redis = RedisServer::start().unwrap();
    let e = engine(&redis);
    let refused = |r: Result<_, rl_core::Error>| {
        let err = r.expect_err("refused, not answered OK");
        assert_eq!(err.kind(), rl_core::ErrorKind::InvalidArgument, "{err}");
        err
    };
    let mut no_domain = req(&[&[("remote_address", "1.1.1.1")]]);
    no_domain.domain.clear();
    let err = refused(e.check(&no_domain).await);
    assert_eq!(err.argument(), Some("domain"));
    assert!(
        err.to_string().contains("domain must not be empty"),
        "{err}"
    );
    let err = refused(e.check(&req(&[])).await);
    assert_eq!(err.argument(), Some("descriptors"));
    assert!(
        err.to_string()
            .contains("descriptor list must not be empty"),
        "{err}"
    );
    let err = refused(
        e.check(&req(&[&[("remote_address", "1.1.1.1")], &[]]))
            .await,
    );
    assert!(
        err.to_string().contains("descriptor 1 has no entries"),
        "{err}"
    );
    // Nothing was taken by the refused calls.
    let r = e
        .check(&req(&[&[("remote_address", "1.1.1.1")]]))
        .await
        .unwrap();
    assert_eq!(r.statuses[0].limit_remaining, 2);
    let text = e.metrics().render(&e.limiter().stats());
    assert!(text.contains("rl_check_errors_total 3"), "{text}");
}

/// Script calls Redis has run since its stats were last reset (FCALL / EVALSHA / EVAL, any
/// flavour): the limiter's decisions, not its health checks.
fn script_calls(redis: &RedisServer) -> u64 {
    let info = redis.command(&[b"INFO", b"commandstats"]).unwrap();
    let text = info.as_str().unwrap().to_string();
    text.lines()
        .filter(|l| {
            let name = l.split(':').next().unwrap_or("");
            ["fcall", "eval"]
                .iter()
                .any(|p| name.starts_with(&format!("cmdstat_{p}")))
        })
        .filter_map(|l| {
            l.split(['=', ','])
                .nth(1)
                .and_then(|n| n.parse::<u64>().ok())
        })
        .sum()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_repeated_denial_on_the_default_domain_group_path_makes_no_redis_call() {
    let redis = RedisServer::start().unwrap();
    let e = engine(&redis);
    // The default path: the domain is the composite call's group (one slot), with one limit and
    // with two (all or nothing), each request one acquire_all.
    let one = req(&[&[("remote_address", "3.3.3.3")]]);
    let two = req(&[&[("remote_address", "4.4.4.4")], &[("user", "vip")]]);
    for r in [&one, &two] {
        for _ in 0..3 {
            assert_eq!(e.check(r).await.unwrap().overall, Code::Ok);
        }
        // Redis denies once (the denial is learnt) ...
        let first = e.check(r).await.unwrap();
        assert_eq!(first.overall, Code::OverLimit);
        redis.command(&[b"CONFIG", b"RESETSTAT"]).unwrap();
        // ... and while it holds (about a minute), the same request is denied from the cache.
        for _ in 0..20 {
            let again = e.check(r).await.unwrap();
            assert_eq!(again.overall, Code::OverLimit);
            assert!(again.retry_after > std::time::Duration::from_secs(50));
        }
        assert_eq!(
            script_calls(&redis),
            0,
            "denied again with no Redis call: {r:?}"
        );
    }
    // The count is real: a request no denial covers is one script call.
    let fresh = req(&[&[("remote_address", "5.5.5.5")]]);
    assert_eq!(e.check(&fresh).await.unwrap().overall, Code::Ok);
    assert_eq!(script_calls(&redis), 1);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_decision_carries_the_redis_time_it_was_made_at() {
    let redis = RedisServer::start().unwrap();
    let e = engine(&redis);
    let redis_ms = || {
        let t = redis.command(&[b"TIME"]).unwrap();
        let rl_harness::resp::RespValue::Array(parts) = t else {
            panic!("TIME is an array: {t:?}")
        };
        let secs: u64 = parts[0].as_str().unwrap().parse().unwrap();
        let micros: u64 = parts[1].as_str().unwrap().parse().unwrap();
        secs * 1000 + micros / 1000
    };
    for r in [
        req(&[&[("remote_address", "7.7.7.7")]]),
        req(&[&[("remote_address", "8.8.8.8")], &[("user", "vip")]]),
        req(&[&[("shadow", "s")]]),
    ] {
        let before = redis_ms();
        let d = e.check(&r).await.unwrap();
        let after = redis_ms();
        let t = d.decided_at_ms.expect("a decision Redis made has its time");
        assert!(before <= t && t <= after, "{before} <= {t} <= {after}");
    }
    // Nothing asked, no time: no limit matched, or a ban that never fits.
    let d = e.check(&req(&[&[("user", "nobody")]])).await.unwrap();
    assert_eq!(d.decided_at_ms, None);
    let d = e.check(&req(&[&[("path", "/admin/x")]])).await.unwrap();
    assert_eq!(d.decided_at_ms, None);
}
