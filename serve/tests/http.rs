//! The HTTP side of `rl serve`, the real binary against a real redis-server, asked by a real
//! HTTP client: the check endpoint (IETF fields read back with the `sfv` RFC 9651 parser), the
//! trusted-proxy rule, reverse-proxy mode and its exactness counted by the upstream itself,
//! reload on change and on SIGHUP with no failed request, /readyz in degraded mode, SIGTERM drain.

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{client, get, most_in_any, most_in_any_ms, scratch, write_atomic, Serve, Upstream};
use rl_harness::RedisServer;

/// An IETF field, parsed: each member's name and integer parameters.
fn fields(value: &str) -> Vec<(String, Vec<(String, i64)>)> {
    let list: sfv::List = sfv::Parser::new(value)
        .parse_list()
        .expect("an RFC 9651 list");
    list.into_iter()
        .map(|m| match m {
            sfv::ListEntry::Item(i) => (
                i.bare_item
                    .as_string()
                    .expect("a string item")
                    .as_str()
                    .to_string(),
                i.params
                    .iter()
                    .map(|(k, v)| (k.as_str().to_string(), i64::from(v.as_integer().unwrap())))
                    .collect(),
            ),
            sfv::ListEntry::InnerList(_) => panic!("no inner lists: {value}"),
        })
        .collect()
}

fn policies(trusted: &str, per_ip: u64) -> String {
    format!(
        r#"
domain: web
http:
  trusted_proxies: [{trusted}]
  rate_limits:
    - actions:
        - remote_address: {{}}
    - actions:
        - request_headers: {{header_name: ":path", descriptor_key: path}}
descriptors:
  - key: remote_address
    rate_limit: {{unit: minute, requests_per_unit: {per_ip}, name: per-ip}}
  - key: path
    value: /admin*
    rate_limit: {{unit: minute, requests_per_unit: 0, name: no-admin}}
"#
    )
}

#[tokio::test(flavor = "multi_thread")]
async fn check_endpoint_answers_with_ietf_fields_and_honours_only_trusted_proxies() {
    let redis = RedisServer::start().unwrap();
    let dir = scratch("check");
    let cfg = dir.join("p.yaml");
    write_atomic(&cfg, &policies("\"127.0.0.1\"", 3));
    let serve = Serve::start(&cfg, Some(&redis.url()), &[]);
    let c = client();
    let url = serve.url("/check");
    let from = |ip: &'static str| [("X-Forwarded-For", ip), ("X-Original-URI", "/shop")];
    for left in [2, 1, 0] {
        let a = get(&c, &url, &from("5.5.5.5")).await.unwrap();
        assert_eq!(a.status, 200, "{a:?}");
        // Without --decision-time-header no decision time is passed on.
        assert_eq!(a.header("rl-decided-at"), None);
        let p = fields(a.header("ratelimit-policy").unwrap());
        assert_eq!(
            p,
            [(
                "per-ip".to_string(),
                vec![("q".into(), 3), ("w".into(), 60)]
            )]
        );
        let r = fields(a.header("ratelimit").unwrap());
        assert_eq!(r[0].0, "per-ip");
        assert_eq!(r[0].1[0], ("r".to_string(), left));
        assert!(r[0].1[1].1 >= 59, "{r:?}");
    }
    let a = get(&c, &url, &from("5.5.5.5")).await.unwrap();
    assert_eq!(a.status, 429, "{a:?}");
    assert_eq!(a.header("content-type"), Some("application/problem+json"));
    let retry: u64 = a.header("retry-after").unwrap().parse().unwrap();
    let r = fields(a.header("ratelimit").unwrap());
    assert_eq!(r[0].1[0], ("r".to_string(), 0));
    assert!(retry >= r[0].1[1].1 as u64 && retry <= 60, "{a:?}");
    let body: serde_json::Value = serde_json::from_str(&a.body).unwrap();
    assert_eq!(body["status"], 429);
    assert_eq!(body["violated-policies"], serde_json::json!(["per-ip"]));
    // Another forwarded client has its own quota: 127.0.0.1 is trusted.
    assert_eq!(get(&c, &url, &from("6.6.6.6")).await.unwrap().status, 200);
    // The original URI picks the policy; nginx's auth_request wants 403 (deny_status).
    let admin = [
        ("X-Forwarded-For", "7.7.7.7"),
        ("X-Original-URI", "/admin/x"),
    ];
    let a = get(&c, &serve.url("/check?deny_status=403"), &admin)
        .await
        .unwrap();
    assert_eq!(a.status, 403, "{a:?}");
    let names: Vec<String> = fields(a.header("ratelimit-policy").unwrap())
        .into_iter()
        .map(|f| f.0)
        .collect();
    // Only the limit that decided is shown: per-ip was not asked (the ban denies without Redis).
    assert_eq!(names, ["no-admin"]);
    // The denied request took nothing from 7.7.7.7's per-ip quota.
    let a = get(&c, &url, &from("7.7.7.7")).await.unwrap();
    assert_eq!(fields(a.header("ratelimit").unwrap())[0].1[0].1, 2);

    // Trust nobody: X-Forwarded-For is ignored, every request is 127.0.0.1's.
    write_atomic(&cfg, &policies("", 3));
    wait_for_log(&serve, "policies loaded", 2).await;
    for ip in ["8.8.8.8", "9.9.9.9", "1.2.3.4"] {
        assert_eq!(get(&c, &url, &from(ip)).await.unwrap().status, 200);
    }
    let a = get(&c, &url, &from("4.3.2.1")).await.unwrap();
    assert_eq!(
        a.status, 429,
        "a spoofed X-Forwarded-For must not buy a new quota"
    );
}

/// Waits until `needle` appears `n` times in the server's log.
async fn wait_for_log(serve: &Serve, needle: &str, n: usize) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while serve.log().matches(needle).count() < n {
        assert!(
            Instant::now() < deadline,
            "no {needle:?} x{n} in:\n{}",
            serve.log()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn proxy_mode_is_exact_under_concurrent_load_as_the_upstream_counts() {
    let redis = RedisServer::start().unwrap();
    let up = Upstream::start().await;
    let dir = scratch("proxy");
    let cfg = dir.join("p.yaml");
    let (limit, window_ms) = (20u64, 1000u64);
    write_atomic(
        &cfg,
        &format!(
            r#"
domain: gw
http:
  rate_limits:
    - actions:
        - generic_key: {{descriptor_value: order}}
descriptors:
  - key: generic_key
    value: order
    rate_limit: {{window_ms: {window_ms}, requests_per_unit: {limit}, name: order}}
"#
        ),
    );
    // Exactness is Redis's: the local fallback (which decides alone, inexactly, while Redis
    // answers slowly, as it may on a loaded test machine) is off here; /readyz tests it.
    let serve = Serve::start(
        &cfg,
        Some(&redis.url()),
        &[
            "--upstream",
            &up.url(),
            "-o",
            "local_fallback=false",
            "--decision-time-header",
        ],
    );
    let c = client();
    let url = serve.url("/api/order/create");
    let (ok, denied) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let run = Duration::from_millis(3000);
    let start = Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..24 {
        let (c, url, ok, denied) = (c.clone(), url.clone(), ok.clone(), denied.clone());
        tasks.push(tokio::spawn(async move {
            while start.elapsed() < run {
                // A forged decision time must not reach the upstream.
                let a = get(&c, &url, &[("RL-Decided-At", "1")])
                    .await
                    .expect("every request is answered");
                match a.status {
                    200 => {
                        assert_eq!(a.body, "hello /api/order/create");
                        assert!(a.header("ratelimit").is_some());
                        ok.fetch_add(1, Ordering::Relaxed);
                    }
                    429 => {
                        assert_eq!(a.header("content-type"), Some("application/problem+json"));
                        assert!(a.header("retry-after").is_some());
                        assert!(
                            a.body.contains("\"violated-policies\":[\"order\"]"),
                            "{}",
                            a.body
                        );
                        denied.fetch_add(1, Ordering::Relaxed);
                    }
                    s => panic!("unexpected {s}: {a:?}"),
                }
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    let (ok, denied) = (ok.load(Ordering::Relaxed), denied.load(Ordering::Relaxed));
    let arrivals = up.arrivals.lock().unwrap().clone();
    assert_eq!(
        arrivals.len(),
        ok,
        "the upstream saw exactly the admitted requests"
    );
    assert!(
        denied > ok,
        "the load must exceed the limit: {ok} ok, {denied} denied"
    );
    // Exactness on the decisions' own clock: every admitted request reached the upstream with
    // the Redis time it was decided at (not the client's forged one), and no window of those
    // times holds more than the limit. Zero slack.
    let decided: Vec<u64> = up
        .decided
        .lock()
        .unwrap()
        .iter()
        .map(|t| t.expect("every admitted request carries RL-Decided-At"))
        .collect();
    assert!(
        decided.iter().all(|t| *t > 1_600_000_000_000),
        "decision times are Redis's Unix ms, not the client's header: {:?}",
        &decided[..decided.len().min(5)]
    );
    let most = most_in_any_ms(&decided, window_ms);
    assert!(
        most as u64 <= limit,
        "{most} decisions in one {window_ms} ms window; limit {limit}"
    );
    // On the upstream's own clock arrivals come after the proxy's queueing (tens of ms on a
    // loaded machine), so a request admitted at a window's end can land in the next one: a
    // looser check, any span of the window less 100 ms.
    let slack = Duration::from_millis(100);
    let most_arrived = most_in_any(&arrivals, Duration::from_millis(window_ms) - slack);
    println!(
        "most in any {window_ms} ms: {most} by decision time, {} by arrival, {most_arrived} by arrival in {} ms",
        most_in_any(&arrivals, Duration::from_millis(window_ms)),
        window_ms - 100
    );
    assert!(
        most_arrived as u64 <= limit,
        "{most_arrived} arrivals in one window less 100 ms; limit {limit}"
    );
    // And the limiter is not idle: each full window admitted (nearly) the limit.
    let windows = run.as_millis() as u64 / window_ms;
    assert!(
        ok as u64 >= (windows - 1) * limit,
        "{ok} admitted in {windows} windows of {limit}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn policies_reload_on_change_and_sighup_without_a_failed_request() {
    let redis = RedisServer::start().unwrap();
    let dir = scratch("reload");
    let cfg = dir.join("p.yaml");
    let limits = |per: u64| {
        format!(
            "domain: r\nhttp:\n  rate_limits:\n    - actions:\n        - request_headers: {{header_name: x-user, descriptor_key: user}}\ndescriptors:\n  - key: user\n    rate_limit: {{unit: minute, requests_per_unit: {per}, name: per-user}}\n"
        )
    };
    write_atomic(&cfg, &limits(1000));
    let serve = Serve::start(&cfg, Some(&redis.url()), &[]);
    let c = client();
    // Background load on other users for the whole test: nothing may fail.
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let answered = Arc::new(AtomicUsize::new(0));
    let mut load = Vec::new();
    for w in 0..6 {
        let (c, url, stop, answered) = (
            c.clone(),
            serve.url("/check"),
            stop.clone(),
            answered.clone(),
        );
        load.push(tokio::spawn(async move {
            let mut i = 0u64;
            while !stop.load(Ordering::Relaxed) {
                i += 1;
                let user = format!("bg-{w}-{i}");
                let a = get(&c, &url, &[("x-user", &user)]).await.expect("answered");
                assert!(a.status == 200 || a.status == 429, "{a:?}");
                answered.fetch_add(1, Ordering::Relaxed);
            }
        }));
    }
    let limit_of = |a: &common::Answer| fields(a.header("ratelimit-policy").unwrap())[0].1[0].1;
    let probe = |user: &'static str| {
        let (c, url) = (c.clone(), serve.url("/check"));
        async move { get(&c, &url, &[("x-user", user)]).await.unwrap() }
    };
    assert_eq!(limit_of(&probe("a").await), 1000);
    // No x-user header: the rule makes no descriptor, so nothing is asked (as Envoy's filter
    // does not call its service): 200 without fields, not a refused empty list.
    let a = get(&c, &serve.url("/check"), &[]).await.unwrap();
    assert_eq!(a.status, 200, "{a:?}");
    assert!(a.header("ratelimit").is_none(), "{a:?}");
    // 1. The file changes: picked up by the watcher.
    write_atomic(&cfg, &limits(7));
    wait_for_log(&serve, "policies loaded", 2).await;
    assert_eq!(limit_of(&probe("a").await), 7);
    // 2. A bad file: refused with its line and reason, the old policies stay.
    write_atomic(
        &cfg,
        &limits(7).replace("requests_per_unit", "requests_per_unti"),
    );
    wait_for_log(&serve, "policies refused", 1).await;
    let log = serve.log();
    let line = log
        .lines()
        .find(|l| l.contains("policies refused"))
        .unwrap();
    assert!(line.contains("line=8"), "{line}");
    assert!(line.contains("unknown field `requests_per_unti`"), "{line}");
    assert_eq!(limit_of(&probe("a").await), 7);
    // 3. SIGHUP reloads at once.
    serve.signal(libc::SIGHUP);
    wait_for_log(&serve, "SIGHUP: reloading", 1).await;
    wait_for_log(&serve, "policies refused", 2).await;
    write_atomic(&cfg, &limits(9));
    serve.signal(libc::SIGHUP);
    wait_for_log(&serve, "SIGHUP: reloading", 2).await;
    wait_for_log(&serve, "policies loaded", 3).await;
    assert_eq!(limit_of(&probe("a").await), 9);
    let m = get(&c, &serve.url("/metrics"), &[]).await.unwrap().body;
    assert!(
        m.contains("rl_config_reloads_total{result=\"error\"} 2"),
        "{m}"
    );
    stop.store(true, Ordering::Relaxed);
    for t in load {
        t.await.unwrap();
    }
    assert!(answered.load(Ordering::Relaxed) > 50);
}

#[tokio::test(flavor = "multi_thread")]
async fn readyz_tells_degraded_from_healthy_and_stays_ready() {
    let mut redis = RedisServer::start().unwrap();
    let dir = scratch("ready");
    let cfg = dir.join("p.yaml");
    write_atomic(&cfg, &policies("", 100));
    let with_fallback = Serve::start(&cfg, Some(&redis.url()), &[]);
    let without = Serve::start(&cfg, Some(&redis.url()), &["-o", "local_fallback=false"]);
    let c = client();
    for s in [&with_fallback, &without] {
        let a = get(&c, &s.url("/readyz"), &[]).await.unwrap();
        assert_eq!((a.status, a.body.as_str()), (200, "ready\n"));
        assert_eq!(a.header("rl-mode"), Some("normal"));
        assert_eq!(get(&c, &s.url("/check"), &[]).await.unwrap().status, 200);
    }
    redis.stop().unwrap();
    // Decisions go on, locally, on the instance with the fallback.
    for _ in 0..5 {
        let a = get(&c, &with_fallback.url("/check"), &[]).await.unwrap();
        assert_eq!(a.status, 200, "{a:?}");
    }
    let a = get(&c, &with_fallback.url("/readyz"), &[]).await.unwrap();
    assert_eq!(a.status, 200, "{a:?}");
    assert!(a.body.starts_with("degraded"), "{a:?}");
    assert_eq!(a.header("rl-mode"), Some("local"));
    let m = get(&c, &with_fallback.url("/metrics"), &[])
        .await
        .unwrap()
        .body;
    assert!(m.contains("rl_mode{mode=\"local\"} 1"), "{m}");
    assert!(m.contains("mode=\"local\"} "), "{m}");
    let a = get(&c, &without.url("/readyz"), &[]).await.unwrap();
    assert_eq!(a.status, 503, "{a:?}");
    assert!(a.body.contains("local_fallback is off"), "{a:?}");
    for s in [&with_fallback, &without] {
        assert_eq!(get(&c, &s.url("/healthz"), &[]).await.unwrap().status, 200);
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn sigterm_drains_the_request_in_flight_then_exits() {
    let redis = RedisServer::start().unwrap();
    let up = Upstream::start().await;
    let dir = scratch("drain");
    let cfg = dir.join("p.yaml");
    write_atomic(&cfg, &policies("", 100));
    let mut serve = Serve::start(
        &cfg,
        Some(&redis.url()),
        &["--upstream", &up.url(), "--drain-delay-ms", "300"],
    );
    let c = client();
    let slow = {
        let (c, url) = (c.clone(), serve.url("/slow?sleep_ms=1200"));
        tokio::spawn(async move { get(&c, &url, &[]).await })
    };
    while up.count() == 0 {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    serve.signal(libc::SIGTERM);
    tokio::time::sleep(Duration::from_millis(100)).await;
    // Draining: not ready any more, while the request in flight goes on.
    let fresh = client();
    let a = get(&fresh, &serve.url("/readyz"), &[]).await.unwrap();
    assert_eq!((a.status, a.body.as_str()), (503, "draining\n"));
    let a = slow
        .await
        .unwrap()
        .expect("the request in flight is answered");
    assert_eq!((a.status, a.body.as_str()), (200, "hello /slow"));
    let status = serve
        .wait_exit(Duration::from_secs(10))
        .expect("exits after draining");
    assert!(status.success(), "{status:?}\n{}", serve.log());
    assert!(std::net::TcpStream::connect(serve.addr).is_err());
    assert!(serve.log().contains("stopped"));
}

/// The value of the Prometheus sample `name` (with its labels, as written) in `text`.
fn sample(text: &str, name: &str) -> Option<f64> {
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.trim().parse().ok())
}

#[tokio::test(flavor = "multi_thread")]
async fn metrics_report_lease_stats_when_leases_are_on() {
    let redis = RedisServer::start().unwrap();
    let dir = scratch("leases");
    let cfg = dir.join("p.yaml");
    // key_group: none sends a one-limit request through `acquire`, where leases live.
    write_atomic(
        &cfg,
        r#"
domain: hot
key_group: none
http:
  rate_limits:
    - actions:
        - generic_key: {descriptor_value: order}
descriptors:
  - key: generic_key
    value: order
    rate_limit: {unit: minute, requests_per_unit: 10000, name: order}
"#,
    );
    let serve = Serve::start(&cfg, Some(&redis.url()), &["-o", "leases=on"]);
    let c = client();
    for _ in 0..50 {
        let a = get(&c, &serve.url("/check"), &[]).await.unwrap();
        assert_eq!(a.status, 200, "{a:?}");
    }
    let m = get(&c, &serve.url("/metrics"), &[]).await.unwrap().body;
    let leases = sample(&m, "rl_leases_total").expect("rl_leases_total");
    assert!(leases >= 1.0, "{m}");
    let leased = sample(&m, "rl_leased_permits_total{outcome=\"leased\"}").expect("leased");
    assert!(leased >= 2.0, "{m}");
    let by_lease = sample(
        &m,
        "rl_decisions_total{policy=\"order\",outcome=\"ok\",mode=\"lease\"}",
    )
    .expect("decisions made from a lease, by policy");
    assert!(by_lease >= 1.0, "{m}");
    assert!(m.contains("# TYPE rl_lease_refunds_total counter"), "{m}");
    // Without leases the families are there, at zero.
    let plain = Serve::start(&cfg, Some(&redis.url()), &[]);
    get(&c, &plain.url("/check"), &[]).await.unwrap();
    let m = get(&c, &plain.url("/metrics"), &[]).await.unwrap().body;
    assert_eq!(sample(&m, "rl_leases_total"), Some(0.0), "{m}");
}

/// Threads of a running process named as rl serve names its runtime's workers (comm: 15 bytes).
fn runtime_workers(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .unwrap()
        .filter(|t| {
            let comm = std::fs::read_to_string(t.as_ref().unwrap().path().join("comm"));
            comm.is_ok_and(|c| c.trim() == "rl-serve-worker")
        })
        .count()
}

#[tokio::test(flavor = "multi_thread")]
async fn threads_sets_the_runtime_workers_and_a_bad_count_is_refused_by_name() {
    let dir = scratch("threads");
    let cfg = dir.join("p.yaml");
    write_atomic(&cfg, &policies("", 3));
    let c = client();
    for n in [1usize, 3] {
        let serve = Serve::start(&cfg, None, &["--threads", &n.to_string()]);
        let a = get(&c, &serve.url("/check"), &[]).await.unwrap();
        assert_eq!(a.status, 200, "{a:?}");
        assert_eq!(runtime_workers(serve.child.id()), n, "--threads {n}");
    }
    for bad in ["0", "1025", "two"] {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_rl-serve"))
            .args(["--config", cfg.to_str().unwrap(), "--threads", bad])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "--threads {bad}: {err}");
        assert!(
            err.contains(&format!("'{bad}'")) && err.contains("--threads"),
            "--threads {bad}: {err}"
        );
    }
}
