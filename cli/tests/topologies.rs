//! `rl bench` and `rl throughput` on every deployment rl-core reaches: a Redis Cluster (the admin
//! figures summed over its masters, the baselines on the master that owns their key) and the
//! primary a Sentinel trio names. Each runs against real servers started by rl-harness.

mod common;

use common::*;

use rl_harness::{Cluster, SentinelTrio};
use serde_json::Value;

fn f(v: &Value, path: &[&str]) -> f64 {
    path.iter()
        .fold(v, |v, k| &v[*k])
        .as_f64()
        .unwrap_or_else(|| panic!("{path:?} missing in {v}"))
}

/// A short, light `rl bench` on `url`, with the fixed-window baseline when `compare`.
fn bench(url: &str, compare: bool) -> Value {
    let mut args = vec![
        "bench",
        "--duration",
        "1s",
        "--json",
        "--quiet",
        "--redis",
        url,
        "--instances",
        "2",
        "--rate",
        "200",
        "--limit",
        "100",
    ];
    if compare {
        args.extend(["--compare", "fixed-window"]);
    }
    report(&rl(&args))
}

/// The run decided on Redis and its Redis figures (commands per decision, key memory) are there.
fn assert_figures(run: &Value, limit: f64) {
    assert!(f(run, &["allowed"]) > 0.0, "{run}");
    assert!(f(run, &["max_admitted_in_window"]) <= limit, "{run}");
    // Below 1 when concurrent requests for the key shared a script call (coalescing).
    assert!(
        f(run, &["redis", "client_calls_per_decision"]) > 0.0,
        "{run}"
    );
    assert!(f(run, &["redis", "total_commands"]) > 0.0, "{run}");
    assert!(f(run, &["memory_per_key_kib"]) > 0.0, "{run}");
}

#[test]
fn bench_runs_on_a_cluster_with_figures_summed_over_its_masters() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let cluster = Cluster::start().expect("start a Redis Cluster (apt-get install redis-server)");
    let r = bench(&cluster.url(), true);
    assert_eq!(r["backend"], "redis", "{r}");
    assert_figures(&r["sliding_window"], 100.0);
    // The baseline's counters live on the master that owns its key, found through the admin.
    let fixed = &r["fixed_window"];
    assert!(f(fixed, &["allowed"]) > 0.0, "{fixed}");
    assert!(f(fixed, &["redis", "total_commands"]) > 0.0, "{fixed}");
}

#[test]
fn bench_runs_on_the_primary_the_sentinels_name() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let trio = SentinelTrio::start().expect("start a Sentinel trio (apt-get install redis-server)");
    let r = bench(&trio.url(), false);
    assert_eq!(r["backend"], "redis", "{r}");
    assert_figures(&r["sliding_window"], 100.0);
}

#[test]
fn throughput_runs_on_a_cluster_next_to_its_raw_baseline() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let cluster = Cluster::start().expect("start a Redis Cluster (apt-get install redis-server)");
    let r = report(&rl(&[
        "throughput",
        "--duration",
        "500ms",
        "--concurrency",
        "2",
        "--json",
        "--quiet",
        "--redis",
        &cluster.url(),
    ]));
    let level = &r["levels"][0];
    for imp in ["core", "raw"] {
        assert!(f(level, &[imp, "decisions"]) > 0.0, "{imp}: {level}");
        assert_eq!(f(level, &[imp, "errors"]), 0.0, "{imp}: {level}");
        assert!(
            f(level, &[imp, "redis_commands_per_decision"]) > 0.0,
            "{imp}: {level}"
        );
    }
}
