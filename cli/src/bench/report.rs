//! What `rl bench` prints: a table for people, one JSON object for machines, built from the same
//! numbers so the two never disagree.

use std::collections::BTreeMap;
use std::fmt::Write;

use serde::Serialize;

use super::load::Tally;
use crate::args::{BenchArgs, Pattern};
use crate::latency::Summary;
use crate::redis_admin::CommandCounts;
use crate::target::Target;

#[derive(Debug, Serialize)]
pub struct BenchReport {
    /// "redis" or "memory".
    pub backend: &'static str,
    pub target: String,
    pub private_server: bool,
    pub key: String,
    pub instances: u32,
    pub rate_per_instance: f64,
    pub pattern: &'static str,
    /// Boundary pattern only: the share of a window each half-burst fills.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub burst_fraction: Option<f64>,
    pub limit: u64,
    pub window_ms: u64,
    pub duration_ms: u64,
    pub max_in_flight_per_instance: u32,
    /// The rate the limit allows on average: limit per window, per second.
    pub limit_qps: f64,
    pub sliding_window: RunReport,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fixed_window: Option<RunReport>,
}

impl BenchReport {
    pub fn new(
        a: &BenchArgs,
        pattern: Pattern,
        target: &Target,
        sliding: RunReport,
        fixed: Option<RunReport>,
    ) -> Self {
        BenchReport {
            backend: if target.url.is_some() {
                "redis"
            } else {
                "memory"
            },
            target: target.describe(),
            private_server: target.is_private(),
            key: a.key.clone(),
            instances: a.instances,
            rate_per_instance: a.rate,
            pattern: pattern.as_str(),
            burst_fraction: (pattern == Pattern::Boundary).then_some(a.burst_fraction),
            limit: a.limit,
            window_ms: a.window,
            duration_ms: a.duration,
            max_in_flight_per_instance: a.max_in_flight,
            limit_qps: limit_qps(a.limit, a.window),
            sliding_window: sliding,
            fixed_window: fixed,
        }
    }
}

fn limit_qps(limit: u64, window_ms: u64) -> f64 {
    limit as f64 * 1000.0 / window_ms as f64
}

#[derive(Debug, Serialize)]
pub struct RunReport {
    pub limiter: &'static str,
    /// Requests on the schedule.
    pub offered: u64,
    /// Not sent because the instance already had its maximum in flight.
    pub shed: u64,
    pub allowed: u64,
    pub denied: u64,
    pub errors: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub first_error: Option<String>,
    pub latency_ms: Option<Summary>,
    /// How late sends were against the schedule: the generator's own health.
    pub send_lag_ms: Option<Summary>,
    /// What the per-second figures are divided by.
    pub span_s: f64,
    pub offered_qps: f64,
    pub admitted_qps: f64,
    /// (admitted_qps - limit_qps) / limit_qps, in percent.
    pub admitted_qps_deviation_pct: f64,
    /// Most permits admitted in any span (t - window, t] of the deciding clock.
    pub max_admitted_in_window: u64,
    pub max_admitted_in_window_over_limit: f64,
    /// Decisions per deciding path (normal, memory, local, lease, fixed-window).
    pub modes: BTreeMap<&'static str, u64>,
    /// `None` on the memory backend.
    pub redis: Option<RedisCost>,
    /// Peak MEMORY USAGE of the limiter's key during the run; `None` without Redis.
    pub memory_per_key_kib: Option<f64>,
}

#[derive(Debug, Serialize)]
pub struct RedisCost {
    /// Commands only clients send (EVALSHA, SCRIPT LOAD, HELLO ...).
    pub client_calls: u64,
    /// Everything Redis executed, including the commands inside the scripts.
    pub total_commands: u64,
    pub client_calls_per_s: f64,
    pub total_commands_per_s: f64,
    pub client_calls_per_decision: Option<f64>,
    pub total_commands_per_decision: Option<f64>,
    /// Redis server time per decision (INFO commandstats usec of the client calls), µs.
    pub server_us_per_decision: Option<f64>,
    pub per_command: BTreeMap<String, u64>,
}

impl RunReport {
    pub fn new(
        limiter: &'static str,
        a: &BenchArgs,
        offered: u64,
        span_us: u64,
        t: Tally,
        commands: Option<CommandCounts>,
        memory_bytes: Option<u64>,
    ) -> Self {
        let span_s = span_us as f64 / 1e6;
        let limit_qps = limit_qps(a.limit, a.window);
        let admitted_qps = t.allowed as f64 / span_s;
        let max_in_window = rl_core::audit::max_in_any_window(&t.admitted, a.window);
        let decisions = t.allowed + t.denied;
        let per_decision = |x: u64| (decisions > 0).then(|| x as f64 / decisions as f64);
        RunReport {
            limiter,
            offered,
            shed: t.shed,
            allowed: t.allowed,
            denied: t.denied,
            errors: t.errors,
            first_error: t.first_error,
            latency_ms: Summary::of(&t.latency),
            send_lag_ms: Summary::of(&t.send_lag),
            span_s,
            offered_qps: offered as f64 / span_s,
            admitted_qps,
            admitted_qps_deviation_pct: (admitted_qps - limit_qps) / limit_qps * 100.0,
            max_admitted_in_window: max_in_window,
            max_admitted_in_window_over_limit: max_in_window as f64 / a.limit as f64,
            modes: t.modes,
            redis: commands.map(|c| RedisCost {
                client_calls: c.client_calls,
                total_commands: c.total,
                client_calls_per_s: c.client_calls as f64 / span_s,
                total_commands_per_s: c.total as f64 / span_s,
                client_calls_per_decision: per_decision(c.client_calls),
                total_commands_per_decision: per_decision(c.total),
                server_us_per_decision: per_decision(c.client_usec),
                per_command: c.per_command,
            }),
            memory_per_key_kib: memory_bytes.map(|b| b as f64 / 1024.0),
        }
    }
}

pub fn table(r: &BenchReport) -> String {
    let runs: Vec<&RunReport> = std::iter::once(&r.sliding_window)
        .chain(r.fixed_window.as_ref())
        .collect();
    let mut out = String::new();
    let _ = writeln!(
        out,
        "\nrl bench: {} instances x {}/s ({} pattern{}) on key {:?} for {:.1} s; limit {} per {} ms ({:.0}/s)\nbackend: {}\n",
        r.instances,
        r.rate_per_instance,
        r.pattern,
        r.burst_fraction.map(|f| format!(", bursts of {:.0}% of a window each side of a boundary", f * 100.0)).unwrap_or_default(),
        r.key,
        r.duration_ms as f64 / 1000.0,
        r.limit,
        r.window_ms,
        r.limit_qps,
        r.target
    );
    let mut rows: Vec<(String, Vec<String>)> = Vec::new();
    let mut row = |label: &str, f: &dyn Fn(&RunReport) -> String| {
        rows.push((label.to_string(), runs.iter().map(|x| f(x)).collect()))
    };
    row("", &|x| x.limiter.replace('-', " "));
    row("decisions (allowed / denied)", &|x| {
        format!("{} ({} / {})", x.allowed + x.denied, x.allowed, x.denied)
    });
    row("shed / errors", &|x| format!("{} / {}", x.shed, x.errors));
    row("latency P50 (ms)", &|x| ms(x.latency_ms.map(|s| s.p50_ms)));
    row("latency P99 (ms)", &|x| ms(x.latency_ms.map(|s| s.p99_ms)));
    row("latency max (ms)", &|x| ms(x.latency_ms.map(|s| s.max_ms)));
    row("send lag P99 (ms)", &|x| {
        ms(x.send_lag_ms.map(|s| s.p99_ms))
    });
    row("offered QPS", &|x| format!("{:.1}", x.offered_qps));
    row("admitted QPS", &|x| format!("{:.1}", x.admitted_qps));
    row("admitted QPS vs limit", &|x| {
        format!("{:+.2} %", x.admitted_qps_deviation_pct)
    });
    let window_label = format!("max admitted in any {} ms", r.window_ms);
    row(&window_label, &|x| {
        format!(
            "{} ({:.2}x limit)",
            x.max_admitted_in_window, x.max_admitted_in_window_over_limit
        )
    });
    row("Redis client calls/s", &|x| {
        opt(x
            .redis
            .as_ref()
            .map(|c| format!("{:.0}", c.client_calls_per_s)))
    });
    row("Redis commands/s incl. scripts", &|x| {
        opt(x
            .redis
            .as_ref()
            .map(|c| format!("{:.0}", c.total_commands_per_s)))
    });
    row("Redis commands per decision", &|x| {
        opt(x.redis.as_ref().and_then(|c| {
            Some(format!(
                "{:.2} client, {:.2} total",
                c.client_calls_per_decision?, c.total_commands_per_decision?
            ))
        }))
    });
    row("Redis server time per decision (us)", &|x| {
        opt(x
            .redis
            .as_ref()
            .and_then(|c| c.server_us_per_decision)
            .map(|v| format!("{v:.1}")))
    });
    row("memory per key (KiB, peak)", &|x| {
        opt(x.memory_per_key_kib.map(|k| format!("{k:.1}")))
    });
    row("decided by", &|x| {
        x.modes
            .iter()
            .map(|(m, n)| format!("{m} {n}"))
            .collect::<Vec<_>>()
            .join(", ")
    });

    let label_w = rows.iter().map(|(l, _)| l.len()).max().unwrap_or(0);
    let col_w = rows
        .iter()
        .flat_map(|(_, v)| v.iter().map(String::len))
        .max()
        .unwrap_or(0)
        .max(14);
    for (label, values) in &rows {
        let _ = write!(out, "{label:<label_w$}");
        for v in values {
            let _ = write!(out, "   {v:>col_w$}");
        }
        out.push('\n');
    }
    for x in &runs {
        if x.shed > 0 {
            let _ = writeln!(
                out,
                "\n{}: {} of {} offers ({:.1} %) were shed at the in-flight bound: Redis or this \
                 machine could not keep up, so less than the offered load reached the limiter. A \
                 lighter load (--instances, --rate, --limit) measures the limiter, not the overload.",
                x.limiter,
                x.shed,
                x.offered,
                x.shed as f64 * 100.0 / x.offered.max(1) as f64
            );
        }
        if let Some(e) = &x.first_error {
            let _ = writeln!(out, "\n{}: first error: {e}", x.limiter);
        }
    }
    out
}

fn ms(v: Option<f64>) -> String {
    opt(v.map(|v| format!("{v:.3}")))
}

fn opt(v: Option<String>) -> String {
    v.unwrap_or_else(|| "n/a".to_string())
}
