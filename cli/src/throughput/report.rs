//! What `rl throughput` prints: one row per concurrency, rl-core beside the raw script, and the
//! ratio that says what rl's exactness and checks cost in throughput.

use std::fmt::Write;
use std::time::Duration;

use hdrhistogram::Histogram;
use serde::Serialize;

use crate::args::ThroughputArgs;
use crate::latency::Summary;
use crate::redis_admin::CommandCounts;
use crate::target::Target;

#[derive(Debug, Serialize)]
pub struct ThroughputReport {
    pub backend: &'static str,
    pub target: String,
    pub private_server: bool,
    pub key: String,
    pub limit: u64,
    pub window_ms: u64,
    pub duration_ms: u64,
    pub levels: Vec<Level>,
}

impl ThroughputReport {
    pub fn new(a: &ThroughputArgs, target: &Target, levels: Vec<Level>) -> Self {
        ThroughputReport {
            backend: if target.url.is_some() {
                "redis"
            } else {
                "memory"
            },
            target: target.describe(),
            private_server: target.is_private(),
            key: a.key.clone(),
            limit: a.limit,
            window_ms: a.window,
            duration_ms: a.duration,
            levels,
        }
    }
}

#[derive(Debug, Serialize)]
pub struct Level {
    pub concurrency: u32,
    /// Which implementation was measured first at this level ("core" or "raw").
    pub first: &'static str,
    pub core: ImpStats,
    /// `None` on the memory backend: the baseline is a Redis script.
    pub raw: Option<ImpStats>,
    /// core decisions/s over raw decisions/s.
    pub core_over_raw: Option<f64>,
}

impl Level {
    pub fn new(
        concurrency: u32,
        first: &'static str,
        core: ImpStats,
        raw: Option<ImpStats>,
    ) -> Self {
        let core_over_raw = raw
            .as_ref()
            .filter(|r| r.decisions_per_s > 0.0)
            .map(|r| core.decisions_per_s / r.decisions_per_s);
        Level {
            concurrency,
            first,
            core,
            raw,
            core_over_raw,
        }
    }
}

#[derive(Debug, Serialize)]
pub struct ImpStats {
    pub decisions: u64,
    pub allowed: u64,
    pub denied: u64,
    /// Tasks that stopped on an error.
    pub errors: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub first_error: Option<String>,
    pub elapsed_s: f64,
    pub decisions_per_s: f64,
    pub latency_ms: Option<Summary>,
    /// Commands Redis executed per decision, including those inside the script.
    pub redis_commands_per_decision: Option<f64>,
    /// Redis server time per decision, µs (commandstats usec of EVALSHA): the script's own cost,
    /// apart from the client's.
    pub server_us_per_decision: Option<f64>,
}

impl ImpStats {
    pub fn new(
        allowed: u64,
        denied: u64,
        errors: u64,
        first_error: Option<String>,
        h: &Histogram<u64>,
        elapsed: Duration,
    ) -> Self {
        let decisions = allowed + denied;
        let elapsed_s = elapsed.as_secs_f64();
        ImpStats {
            decisions,
            allowed,
            denied,
            errors,
            first_error,
            elapsed_s,
            decisions_per_s: decisions as f64 / elapsed_s,
            latency_ms: Summary::of(h),
            redis_commands_per_decision: None,
            server_us_per_decision: None,
        }
    }

    pub fn add_redis_cost(&mut self, c: &CommandCounts) {
        if self.decisions > 0 {
            self.redis_commands_per_decision = Some(c.total as f64 / self.decisions as f64);
            self.server_us_per_decision = Some(c.client_usec as f64 / self.decisions as f64);
        }
    }
}

pub fn table(r: &ThroughputReport) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "\nrl throughput: closed loop, one key {:?}, limit {} per {} ms, {:.1} s per run\nbackend: {}\n",
        r.key,
        r.limit,
        r.window_ms,
        r.duration_ms as f64 / 1000.0,
        r.target
    );
    let _ = writeln!(
        out,
        "{:>11} | {:^43} | {:^43} | {:>8}",
        "", "rl-core Limiter::acquire", "raw EVALSHA baseline_zset.lua", ""
    );
    let _ = writeln!(
        out,
        "{:>11} | {:>12} {:>9} {:>9} {:>10} | {:>12} {:>9} {:>9} {:>10} | {:>8}",
        "concurrency",
        "decisions/s",
        "P50 ms",
        "P99 ms",
        "Redis us",
        "decisions/s",
        "P50 ms",
        "P99 ms",
        "Redis us",
        "core/raw"
    );
    let _ = writeln!(out, "{}", "-".repeat(11 + 3 + 43 + 3 + 43 + 3 + 8));
    for l in &r.levels {
        let _ = writeln!(
            out,
            "{:>11} | {} | {} | {:>8}",
            l.concurrency,
            cells(Some(&l.core)),
            cells(l.raw.as_ref()),
            l.core_over_raw
                .map(|x| format!("{x:.2}"))
                .unwrap_or_else(|| "n/a".into())
        );
    }
    let _ = writeln!(
        out,
        "\nRedis us: Redis server time per decision (INFO commandstats), the script's own cost."
    );
    let _ = writeln!(out, "raw measured first at: {}", first_list(r));
    for l in &r.levels {
        for (name, s) in [("rl-core", Some(&l.core)), ("raw", l.raw.as_ref())] {
            if let Some(e) = s.and_then(|s| s.first_error.as_ref()) {
                let _ = writeln!(
                    out,
                    "concurrency {} {name}: {} task(s) stopped on error: {e}",
                    l.concurrency,
                    s.map_or(0, |s| s.errors)
                );
            }
        }
    }
    out
}

fn first_list(r: &ThroughputReport) -> String {
    let v: Vec<String> = r
        .levels
        .iter()
        .filter(|l| l.first == "raw")
        .map(|l| l.concurrency.to_string())
        .collect();
    if v.is_empty() {
        "none".into()
    } else {
        format!("concurrency {}", v.join(", "))
    }
}

fn cells(s: Option<&ImpStats>) -> String {
    match s {
        None => format!("{:>12} {:>9} {:>9} {:>10}", "n/a", "n/a", "n/a", "n/a"),
        Some(s) => {
            let (p50, p99) = match s.latency_ms {
                Some(l) => (format!("{:.3}", l.p50_ms), format!("{:.3}", l.p99_ms)),
                None => ("n/a".into(), "n/a".into()),
            };
            let server = s
                .server_us_per_decision
                .map(|v| format!("{v:.1}"))
                .unwrap_or_else(|| "n/a".into());
            format!(
                "{:>12.0} {:>9} {:>9} {:>10}",
                s.decisions_per_s, p50, p99, server
            )
        }
    }
}
