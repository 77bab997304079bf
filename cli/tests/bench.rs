//! `rl bench` end to end against real redis-servers: the exactness audit in its JSON, and the
//! fixed-window comparison's boundary spike.

mod common;

use common::*;

use rl_harness::RedisServer;
use serde_json::Value;

fn u(v: &Value, path: &[&str]) -> u64 {
    path.iter()
        .fold(v, |v, k| &v[*k])
        .as_u64()
        .unwrap_or_else(|| panic!("{path:?} missing in {v}"))
}

#[test]
fn bench_json_reports_max_admitted_in_any_window_within_the_limit() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let redis = RedisServer::start().expect("start redis-server (apt-get install redis-server)");
    // The default shape (steady, 8 instances, offered rate = the limit's rate) at a fifth of the
    // default volume: a debug build on a busy two-core machine times out at 5000/s, and the
    // property does not depend on the volume.
    let r = report(&rl(&[
        "bench",
        "--duration",
        "2s",
        "--json",
        "--redis",
        &redis.url(),
        "--rate",
        "125",
        "--limit",
        "1000",
    ]));

    let limit = u(&r, &["limit"]);
    let sliding = &r["sliding_window"];
    assert_eq!((limit, r["pattern"].as_str()), (1000, Some("steady")));
    // A request that timed out (rl-core's default 500 ms) may still have been admitted by Redis,
    // unseen by the audit; a loaded CI machine makes a few, so they are bounded, not forbidden.
    let errors = u(sliding, &["errors"]);
    assert!(
        errors * 50 <= u(sliding, &["offered"]),
        "{errors} errors: {sliding}"
    );
    // The load must have pressed on the limit for the audit to mean anything.
    assert!(u(sliding, &["allowed"]) >= limit, "{sliding}");
    let max = u(sliding, &["max_admitted_in_window"]);
    assert!(max <= limit, "admitted {max} in one window, limit {limit}");
    assert!(
        max > limit / 2,
        "a steady load at the limit fills the window: {max}"
    );
    // Redis-only figures are present on Redis: script calls per decision are counted (concurrent
    // decisions on one key share a call when the machine is busy, so fewer than one per
    // decision is normal; more than two would mean calls beyond the one retry).
    let calls = sliding["redis"]["client_calls_per_decision"]
        .as_f64()
        .unwrap();
    assert!(calls > 0.0 && calls <= 2.0, "{sliding}");
    assert!(
        sliding["memory_per_key_kib"].as_f64().unwrap() > 0.0,
        "{sliding}"
    );
    assert!(
        r.get("fixed_window").is_none(),
        "no baseline without --compare"
    );
}

#[test]
fn compare_fixed_window_spikes_past_the_limit_while_sliding_stays_within_it() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    // No --redis: the private-server path. A lighter load than the default (1000 per window, bursts
    // at 2 000/s) so a debug build on two cores keeps up and the spike is not shed away.
    let out = rl(&[
        "bench",
        "--compare",
        "fixed-window",
        "--duration",
        "3s",
        "--json",
        "--instances",
        "4",
        "--rate",
        "250",
        "--limit",
        "1000",
    ]);
    let r = report(&out);
    assert_eq!(
        r["pattern"], "boundary",
        "--compare defaults to the boundary pattern"
    );
    assert_eq!(r["private_server"], true);

    let limit = u(&r, &["limit"]);
    let sliding = u(&r, &["sliding_window", "max_admitted_in_window"]);
    let fixed = u(&r, &["fixed_window", "max_admitted_in_window"]);
    assert!(
        sliding <= limit,
        "sliding window admitted {sliding} in one window, limit {limit}"
    );
    assert!(
        fixed > limit,
        "fixed window admitted only {fixed} in one window-length span, limit {limit}: no spike"
    );

    // The private redis-server is gone once rl has exited.
    let err = String::from_utf8_lossy(&out.stderr);
    let pid: u32 = err
        .split("(pid ")
        .nth(1)
        .and_then(|s| s.split(')').next())
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no private server pid in stderr: {err}"));
    assert!(
        !rl_harness::process::is_alive(pid),
        "private redis-server {pid} outlived rl"
    );
}

/// `rl bench --scenario hot-key` on a private redis-server, briefly: every contender is in the
/// report with every figure, and none admitted more than the limit in any window. No speed is
/// asserted (a debug build on a shared machine); the local fallback is off because its budget
/// (limit / instances per instance) is not the exact bound this test is about, and an overloaded
/// debug client would otherwise trip the slow-round-trip switch to it.
fn hot_key(extra: &[&str]) -> Value {
    let redis = RedisServer::start().expect("start redis-server (apt-get install redis-server)");
    let url = redis.url();
    let mut args = vec![
        "bench",
        "--scenario",
        "hot-key",
        "--duration",
        "1s",
        "--window",
        "500ms",
        "--probe",
        "300ms",
        "--load-factor",
        "2",
        "--json",
        "--redis",
        &url,
        "-o",
        "local_fallback=false",
    ];
    args.extend_from_slice(extra);
    report(&rl(&args))
}

fn check_hot_key(r: &Value, contenders: &[&str]) {
    assert_eq!(r["scenario"], "hot-key");
    assert!(r["probe"]["decisions_per_s"].as_f64().unwrap() > 0.0, "{r}");
    assert!(r["offered_per_s"].as_f64().unwrap() > 0.0, "{r}");
    let limit = u(r, &["limit"]);
    let rows = r["contenders"].as_array().expect("contenders");
    let names: Vec<&str> = rows
        .iter()
        .map(|x| x["contender"].as_str().unwrap())
        .collect();
    assert_eq!(names, contenders);
    for x in rows {
        for f in [
            "decisions_per_s",
            "admitted_per_s",
            "offered_per_s",
            "redis_calls_per_decision",
            "redis_commands_per_decision",
            "redis_command_us_per_decision",
            "redis_cpu_us_per_decision",
            "under_admission_pct",
        ] {
            assert!(x[f].as_f64().is_some(), "{f} missing: {x}");
        }
        for q in ["p50_us", "p99_us", "p999_us"] {
            assert!(x["latency"][q].as_u64().is_some(), "latency {q}: {x}");
        }
        for t in [
            "zero_overshoot",
            "admitted_95pct",
            "redis_calls_1pct",
            "all_met",
        ] {
            assert!(x["targets"][t].is_boolean(), "target {t}: {x}");
        }
        assert!(u(x, &["decisions"]) > 0, "{x}");
        assert!(u(x, &["admitted"]) > 0, "{x}");
        let max = u(x, &["max_admitted_in_window"]);
        assert!(
            max <= limit,
            "{}: {max} in one window, limit {limit}",
            x["contender"]
        );
        assert_eq!(u(x, &["overshoot"]), 0, "{x}");
        assert_eq!(x["targets"]["zero_overshoot"], true, "{x}");
    }
    let leased = rows.iter().find(|x| x["contender"] == "leases").unwrap();
    assert!(
        u(leased, &["stats", "leases_taken"]) > 0,
        "leases contender took none: {leased}"
    );
}

#[test]
fn hot_key_scenario_reports_every_contender_without_overshoot() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let r = hot_key(&[]);
    assert_eq!(r["processes"], 0);
    check_hot_key(&r, &["plain", "coalesce", "leases", "leases+denial"]);
}

#[test]
fn hot_key_scenario_runs_from_several_processes() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let r = hot_key(&["--processes", "3", "--contenders", "plain,leases"]);
    assert_eq!((u(&r, &["processes"]), u(&r, &["instances"])), (3, 3));
    check_hot_key(&r, &["plain", "leases"]);
}
