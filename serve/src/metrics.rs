//! `rl serve`'s own metrics, exported beside the core's (`rl_core::metrics::METRICS`) in the
//! Prometheus text format. Labels are bounded: a policy label is a configured policy's name, never
//! a descriptor value or a key.

use std::collections::HashMap;
use std::fmt::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rl_core::Mode;

/// What became of one limited descriptor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Ok,
    OverLimit,
    /// A shadow-mode limit that would have denied (the request was not denied for it).
    ShadowOverLimit,
}

impl Outcome {
    const ALL: [Outcome; 3] = [Outcome::Ok, Outcome::OverLimit, Outcome::ShadowOverLimit];

    fn as_str(self) -> &'static str {
        match self {
            Outcome::Ok => "ok",
            Outcome::OverLimit => "over_limit",
            Outcome::ShadowOverLimit => "shadow_over_limit",
        }
    }
}

/// One policy's decision counters, by outcome and mode. Kept across reloads (by name).
#[derive(Debug, Default)]
pub struct PolicyCounters {
    counts: [[AtomicU64; 4]; 3],
}

impl PolicyCounters {
    pub fn count(&self, outcome: Outcome, mode: Mode) {
        let o = Outcome::ALL.iter().position(|x| *x == outcome).unwrap_or(0);
        let m = Mode::ALL.iter().position(|x| *x == mode).unwrap_or(0);
        self.counts[o][m].fetch_add(1, Ordering::Relaxed);
    }
}

/// Upper bounds of the decision latency histogram, in seconds.
const BUCKETS: [f64; 14] = [
    0.0001, 0.00025, 0.0005, 0.00075, 0.001, 0.0015, 0.002, 0.003, 0.005, 0.01, 0.025, 0.05, 0.1,
    0.5,
];

#[derive(Debug, Default)]
struct Histogram {
    buckets: [AtomicU64; BUCKETS.len()],
    count: AtomicU64,
    sum_ns: AtomicU64,
}

/// Everything `rl serve` counts itself.
#[derive(Debug, Default)]
pub struct Metrics {
    policies: Mutex<HashMap<String, Arc<PolicyCounters>>>,
    latency: Histogram,
    reloads: [AtomicU64; 2],
    errors: AtomicU64,
}

impl Metrics {
    /// The counters of the policy named `name` (the same ones after a reload).
    pub fn policy(&self, name: &str) -> Arc<PolicyCounters> {
        let mut m = self.policies.lock().unwrap_or_else(|e| e.into_inner());
        m.entry(name.to_string()).or_default().clone()
    }

    /// One check's time, from the request to its answer.
    pub fn observe(&self, took: Duration) {
        let s = took.as_secs_f64();
        for (i, b) in BUCKETS.iter().enumerate() {
            if s <= *b {
                self.latency.buckets[i].fetch_add(1, Ordering::Relaxed);
            }
        }
        self.latency.count.fetch_add(1, Ordering::Relaxed);
        self.latency
            .sum_ns
            .fetch_add(took.as_nanos() as u64, Ordering::Relaxed);
    }

    pub fn reloaded(&self, ok: bool) {
        self.reloads[usize::from(!ok)].fetch_add(1, Ordering::Relaxed);
    }

    /// A check that failed (the limiter's error, e.g. an invalid descriptor).
    pub fn error(&self) {
        self.errors.fetch_add(1, Ordering::Relaxed);
    }

    /// The Prometheus text exposition of these metrics and of the limiter's `stats`.
    pub fn render(&self, stats: &rl_core::Stats) -> String {
        let mut out = String::with_capacity(4096);
        let _ = writeln!(
            out,
            "# HELP rl_decisions_total Limited descriptors decided, by policy, outcome and the path that decided.\n# TYPE rl_decisions_total counter"
        );
        {
            let m = self.policies.lock().unwrap_or_else(|e| e.into_inner());
            let mut names: Vec<&String> = m.keys().collect();
            names.sort();
            for name in names {
                let c = &m[name];
                for (o, outcome) in Outcome::ALL.iter().enumerate() {
                    for (i, mode) in Mode::ALL.iter().enumerate() {
                        let v = c.counts[o][i].load(Ordering::Relaxed);
                        if v > 0 {
                            let _ = writeln!(
                                out,
                                "rl_decisions_total{{policy=\"{}\",outcome=\"{}\",mode=\"{}\"}} {v}",
                                name,
                                outcome.as_str(),
                                mode.as_str()
                            );
                        }
                    }
                }
            }
        }
        let _ = writeln!(
            out,
            "# HELP rl_decision_duration_seconds Time to decide one check (all its descriptors), Redis included.\n# TYPE rl_decision_duration_seconds histogram"
        );
        for (i, b) in BUCKETS.iter().enumerate() {
            let _ = writeln!(
                out,
                "rl_decision_duration_seconds_bucket{{le=\"{b}\"}} {}",
                self.latency.buckets[i].load(Ordering::Relaxed)
            );
        }
        let count = self.latency.count.load(Ordering::Relaxed);
        let _ = writeln!(
            out,
            "rl_decision_duration_seconds_bucket{{le=\"+Inf\"}} {count}\nrl_decision_duration_seconds_sum {}\nrl_decision_duration_seconds_count {count}",
            self.latency.sum_ns.load(Ordering::Relaxed) as f64 / 1e9
        );
        let _ = writeln!(
            out,
            "# HELP rl_config_reloads_total Policy file (re)loads, by result (a failed one keeps the old policies).\n# TYPE rl_config_reloads_total counter\nrl_config_reloads_total{{result=\"ok\"}} {}\nrl_config_reloads_total{{result=\"error\"}} {}",
            self.reloads[0].load(Ordering::Relaxed),
            self.reloads[1].load(Ordering::Relaxed)
        );
        let _ = writeln!(
            out,
            "# HELP rl_check_errors_total Checks answered with an error.\n# TYPE rl_check_errors_total counter\nrl_check_errors_total {}",
            self.errors.load(Ordering::Relaxed)
        );
        // The core's families; its rl_decisions_total{mode} is ours above, by policy.
        for fam in rl_core::metrics::METRICS {
            if fam.name == "rl_decisions_total" {
                continue;
            }
            let _ = writeln!(
                out,
                "# HELP {} {}\n# TYPE {} {}",
                fam.name,
                fam.help,
                fam.name,
                fam.kind.as_str()
            );
            for s in fam.samples {
                match (fam.label, s.label_value) {
                    (Some(l), Some(v)) => {
                        let _ = writeln!(out, "{}{{{l}=\"{v}\"}} {}", fam.name, s.value(stats));
                    }
                    _ => {
                        let _ = writeln!(out, "{} {}", fam.name, s.value(stats));
                    }
                }
            }
        }
        out
    }
}
