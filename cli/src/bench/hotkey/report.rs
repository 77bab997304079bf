//! The hot-key scenario's report: one row of figures per contender, the lease targets as a
//! pass/fail column, and a table built from the same numbers as the JSON.

use std::collections::BTreeMap;
use std::fmt::Write;

use hdrhistogram::Histogram;
use serde::Serialize;

use super::{Kind, LeaseStats, Run, Setup};
use crate::args::BenchArgs;
use crate::target::Target;

#[derive(Debug, Serialize)]
pub struct HotKeyReport {
    pub scenario: &'static str,
    pub target: String,
    pub private_server: bool,
    pub key: String,
    /// Limiters sharing the key: instances in this process, or one per process.
    pub instances: usize,
    /// 0: all instances in this process.
    pub processes: u32,
    pub limit: u64,
    pub window_ms: u64,
    pub limit_per_s: f64,
    pub duration_ms_per_contender: u64,
    pub probe: Probe,
    pub load_factor: f64,
    pub offered_per_s: f64,
    /// /proc/loadavg at the end (1, 5, 15 min): other work on the machine skews every figure.
    pub load_average: Option<[f64; 3]>,
    pub contenders: Vec<Row>,
}

/// The plain path, closed loop: what one script call per request can decide.
#[derive(Debug, Serialize)]
pub struct Probe {
    pub duration_ms: u64,
    pub callers: usize,
    pub decisions: u64,
    pub errors: u64,
    pub decisions_per_s: f64,
}

#[derive(Debug, Clone, Copy, Serialize)]
pub struct Quantiles {
    pub p50_us: u64,
    pub p99_us: u64,
    pub p999_us: u64,
    pub max_us: u64,
    pub count: u64,
}

impl Quantiles {
    fn of(h: &Histogram<u64>) -> Option<Quantiles> {
        (!h.is_empty()).then(|| Quantiles {
            p50_us: h.value_at_quantile(0.5),
            p99_us: h.value_at_quantile(0.99),
            p999_us: h.value_at_quantile(0.999),
            max_us: h.max(),
            count: h.len(),
        })
    }
}

/// The targets for leases, measured for every contender.
#[derive(Debug, Serialize)]
pub struct Targets {
    /// Most admitted in any window ≤ the limit.
    pub zero_overshoot: bool,
    /// Admitted ≥ 95 % of min(offered, limit), summed over the full windows.
    pub admitted_95pct: bool,
    /// Redis client calls ≤ 1 % of decisions.
    pub redis_calls_1pct: bool,
    /// P99 of decisions with mode lease ≤ 50 µs; `None` without lease decisions.
    pub lease_p99_50us: Option<bool>,
    pub all_met: bool,
}

#[derive(Debug, Serialize)]
pub struct Row {
    pub contender: &'static str,
    pub options: String,
    pub offered: u64,
    pub shed: u64,
    pub errors: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub first_error: Option<String>,
    pub decisions: u64,
    pub admitted: u64,
    pub span_s: f64,
    pub offered_per_s: f64,
    pub decisions_per_s: f64,
    pub admitted_per_s: f64,
    pub latency: Option<Quantiles>,
    /// Decisions made from a lease (mode lease) only.
    pub lease_latency: Option<Quantiles>,
    pub send_lag_p99_us: Option<u64>,
    /// EVALSHA/FCALL and other client-sent commands per decision.
    pub redis_calls_per_decision: Option<f64>,
    /// Everything Redis executed (scripts' inner commands included) per decision.
    pub redis_commands_per_decision: Option<f64>,
    /// INFO commandstats usec of the client calls, per decision.
    pub redis_command_us_per_decision: Option<f64>,
    /// INFO used_cpu_sys + used_cpu_user of the whole server, per decision.
    pub redis_cpu_us_per_decision: Option<f64>,
    pub redis_per_command: BTreeMap<String, u64>,
    /// From the decisions' own times (`now_ms`), the audit every bench run does.
    pub max_admitted_in_window: u64,
    pub overshoot: u64,
    /// The same audit without the local fallback's decisions (mode local), which the limiter
    /// makes when Redis round trips stay slow (degrade_rtt_ms): what the Redis paths admitted.
    pub max_admitted_in_window_redis_paths: u64,
    /// Tumbling windows of the deciding clock wholly inside the run.
    pub full_windows: u64,
    /// Sum over those windows of min(offered in it, limit).
    pub admissible_in_full_windows: u64,
    pub admitted_in_full_windows: u64,
    /// Admitted in each full window, in order: where an under-admission sits.
    pub admitted_per_full_window: Vec<u64>,
    /// 100 * (1 - admitted / admissible), over the full windows (negative: more than the
    /// tumbling-window share, which a sliding window may do).
    pub under_admission_pct: f64,
    pub modes: BTreeMap<&'static str, u64>,
    pub stats: LeaseStats,
    pub targets: Targets,
}

impl Row {
    pub fn new(kind: Kind, setup: &Setup, run: Run) -> Row {
        let t = &run.tally;
        let span_s = run.plan.span_us as f64 / 1e6;
        let decisions = t.allowed + t.denied;
        let per = |x: u64| (decisions > 0).then(|| x as f64 / decisions as f64);
        let max_in = rl_core::audit::max_in_any_window(&t.admitted, setup.window_ms);
        let per_window = full_windows(setup, &run);
        let full_windows = per_window.len() as u64;
        let admissible: u64 = per_window.iter().map(|w| w.0).sum();
        let admitted_full: u64 = per_window.iter().map(|w| w.1).sum();
        let under = if admissible > 0 {
            100.0 * (1.0 - admitted_full as f64 / admissible as f64)
        } else {
            0.0
        };
        let lease_latency = t.latency_by_mode.get("lease").and_then(Quantiles::of);
        let c = &run.commands;
        let calls_per = per(c.client_calls);
        let targets = {
            let zero_overshoot = max_in <= setup.limit;
            let admitted_95pct = admissible > 0 && admitted_full as f64 >= 0.95 * admissible as f64;
            let redis_calls_1pct = calls_per.is_some_and(|x| x <= 0.01);
            let lease_p99_50us = lease_latency.map(|q| q.p99_us <= 50);
            Targets {
                all_met: zero_overshoot
                    && admitted_95pct
                    && redis_calls_1pct
                    && lease_p99_50us == Some(true),
                zero_overshoot,
                admitted_95pct,
                redis_calls_1pct,
                lease_p99_50us,
            }
        };
        Row {
            contender: kind.name(),
            options: kind.describe(setup),
            offered: run.plan.total(),
            shed: t.shed,
            errors: t.errors,
            first_error: t.first_error.clone(),
            decisions,
            admitted: t.allowed,
            span_s,
            offered_per_s: run.plan.total() as f64 / span_s,
            decisions_per_s: decisions as f64 / span_s,
            admitted_per_s: t.allowed as f64 / span_s,
            latency: Quantiles::of(&t.latency),
            lease_latency,
            send_lag_p99_us: (!t.send_lag.is_empty()).then(|| t.send_lag.value_at_quantile(0.99)),
            redis_calls_per_decision: calls_per,
            redis_commands_per_decision: per(c.total),
            redis_command_us_per_decision: per(c.client_usec),
            redis_cpu_us_per_decision: per(c.cpu_us),
            redis_per_command: c.per_command.clone(),
            max_admitted_in_window: max_in,
            overshoot: max_in.saturating_sub(setup.limit),
            max_admitted_in_window_redis_paths: rl_core::audit::max_in_any_window(
                &t.admitted_redis,
                setup.window_ms,
            ),
            full_windows,
            admissible_in_full_windows: admissible,
            admitted_in_full_windows: admitted_full,
            admitted_per_full_window: per_window.iter().map(|w| w.1).collect(),
            under_admission_pct: under,
            modes: t.modes.clone(),
            stats: run.stats,
            targets,
        }
    }
}

/// Tumbling windows [kW, (k+1)W) of the deciding clock wholly inside the schedule, each with what
/// it could admit (min(offered, limit), offers placed at their scheduled time) and what it did.
fn full_windows(setup: &Setup, run: &Run) -> Vec<(u64, u64)> {
    let w = setup.window_ms;
    let first_ms = run.server_start_us / 1000;
    let end_ms = (run.server_start_us + run.plan.span_us) / 1000;
    let k0 = first_ms.div_ceil(w);
    let k1 = end_ms / w;
    if k1 <= k0 {
        return Vec::new();
    }
    let n = (k1 - k0) as usize;
    let slot = |ms: u64| -> Option<usize> {
        let k = ms / w;
        (k >= k0 && k < k1).then(|| (k - k0) as usize)
    };
    let mut offered = vec![0u64; n];
    for &off in run.plan.offsets_us.iter().flatten() {
        if let Some(i) = slot((run.server_start_us + off) / 1000) {
            offered[i] += 1;
        }
    }
    let mut admitted = vec![0u64; n];
    for &(ms, cost) in &run.tally.admitted {
        if let Some(i) = slot(ms) {
            admitted[i] += cost;
        }
    }
    offered
        .iter()
        .zip(admitted)
        .map(|(&o, a)| (o.min(setup.limit), a))
        .collect()
}

impl HotKeyReport {
    pub fn new(
        a: &BenchArgs,
        target: &Target,
        setup: &Setup,
        probe: Probe,
        offered_per_s: f64,
        contenders: Vec<Row>,
    ) -> Self {
        HotKeyReport {
            scenario: "hot-key",
            target: target.describe(),
            private_server: target.is_private(),
            key: a.key.clone(),
            instances: setup.instances,
            processes: a.processes,
            limit: setup.limit,
            window_ms: setup.window_ms,
            limit_per_s: setup.limit as f64 * 1000.0 / setup.window_ms as f64,
            duration_ms_per_contender: setup.duration_ms,
            probe,
            load_factor: a.load_factor,
            offered_per_s,
            load_average: load_average(),
            contenders,
        }
    }
}

fn load_average() -> Option<[f64; 3]> {
    let s = std::fs::read_to_string("/proc/loadavg").ok()?;
    let mut it = s.split_whitespace().map(|v| v.parse::<f64>().ok());
    Some([it.next()??, it.next()??, it.next()??])
}

pub fn table(r: &HotKeyReport) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "\nrl bench --scenario hot-key: key {:?}, {} {}, limit {} per {} ms ({:.0}/s), {:.1} s per contender\n\
         backend: {}\n\
         plain path, closed loop ({} callers, {} ms): {:.0} decisions/s; offered {:.1}x that: {:.0}/s\n\
         load average at the end: {}\n",
        r.key,
        r.instances,
        if r.processes > 0 { "processes (one limiter each)" } else { "instances in one process" },
        r.limit,
        r.window_ms,
        r.limit_per_s,
        r.duration_ms_per_contender as f64 / 1000.0,
        r.target,
        r.probe.callers,
        r.probe.duration_ms,
        r.probe.decisions_per_s,
        r.load_factor,
        r.offered_per_s,
        r.load_average
            .map(|l| format!("{:.2} {:.2} {:.2}", l[0], l[1], l[2]))
            .unwrap_or_else(|| "n/a".into()),
    );
    let mut rows: Vec<(String, Vec<String>)> = Vec::new();
    let mut row = |label: &str, f: &dyn Fn(&Row) -> String| {
        rows.push((label.to_string(), r.contenders.iter().map(f).collect()))
    };
    let f0 = |v: f64| format!("{v:.0}");
    let f2 = |v: Option<f64>| v.map(|v| format!("{v:.4}")).unwrap_or_else(|| "n/a".into());
    let f1 = |v: Option<f64>| v.map(|v| format!("{v:.2}")).unwrap_or_else(|| "n/a".into());
    let q = |v: Option<Quantiles>, f: fn(&Quantiles) -> u64| {
        v.map(|q| f(&q).to_string()).unwrap_or_else(|| "n/a".into())
    };
    let yes = |b: bool| if b { "pass" } else { "FAIL" }.to_string();
    row("", &|x| x.contender.to_string());
    row("offered/s", &|x| f0(x.offered_per_s));
    row("decisions/s", &|x| f0(x.decisions_per_s));
    row("admitted/s", &|x| f0(x.admitted_per_s));
    row("shed / errors", &|x| format!("{} / {}", x.shed, x.errors));
    row("latency P50 (us)", &|x| q(x.latency, |q| q.p50_us));
    row("latency P99 (us)", &|x| q(x.latency, |q| q.p99_us));
    row("latency P999 (us)", &|x| q(x.latency, |q| q.p999_us));
    row("leased decisions P99, call (us)", &|x| {
        q(x.lease_latency, |q| q.p99_us)
    });
    row("send lag P99 (us)", &|x| {
        x.send_lag_p99_us.map(|v| v.to_string()).unwrap_or_default()
    });
    row("Redis calls per decision", &|x| {
        f2(x.redis_calls_per_decision)
    });
    row("Redis commands per decision", &|x| {
        f2(x.redis_commands_per_decision)
    });
    row("Redis cmd time per decision (us)", &|x| {
        f1(x.redis_command_us_per_decision)
    });
    row("Redis CPU per decision (us)", &|x| {
        f1(x.redis_cpu_us_per_decision)
    });
    let label = format!("max admitted in any {} ms", r.window_ms);
    row(&label, &|x| {
        format!("{} (limit {})", x.max_admitted_in_window, r.limit)
    });
    row("  without local-fallback decisions", &|x| {
        x.max_admitted_in_window_redis_paths.to_string()
    });
    row("under-admission (full windows)", &|x| {
        format!("{:.2} % of {}", x.under_admission_pct, x.full_windows)
    });
    row("leases taken / denials cached", &|x| {
        format!("{} / {}", x.stats.leases_taken, x.stats.denials_cached)
    });
    row("target: zero overshoot", &|x| yes(x.targets.zero_overshoot));
    row("target: admitted >= 95%", &|x| {
        yes(x.targets.admitted_95pct)
    });
    row("target: Redis calls <= 1%", &|x| {
        yes(x.targets.redis_calls_1pct)
    });
    row("target: lease P99 <= 50 us", &|x| {
        x.targets
            .lease_p99_50us
            .map(yes)
            .unwrap_or_else(|| "n/a".into())
    });
    row("all lease targets", &|x| yes(x.targets.all_met));

    let label_w = rows.iter().map(|(l, _)| l.len()).max().unwrap_or(0);
    let col_w = rows
        .iter()
        .flat_map(|(_, v)| v.iter().map(String::len))
        .max()
        .unwrap_or(0)
        .max(10);
    for (label, values) in &rows {
        let _ = write!(out, "{label:<label_w$}");
        for v in values {
            let _ = write!(out, "  {v:>col_w$}");
        }
        out.push('\n');
    }
    out.push_str("\ndecided by (mode: decisions):\n");
    for x in &r.contenders {
        let modes: Vec<String> = x.modes.iter().map(|(m, n)| format!("{m} {n}")).collect();
        let _ = writeln!(out, "  {:<14} {}", x.contender, modes.join(", "));
    }
    for x in &r.contenders {
        if let Some(e) = &x.first_error {
            let _ = writeln!(out, "\n{}: first error: {e}", x.contender);
        }
    }
    out
}
