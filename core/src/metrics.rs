//! The metrics every adapter exports (Prometheus `prometheus_client` in Python, `prom-client` in
//! Node, Micrometer in Java), defined once: each sample is one [`Stats`] field, so an adapter
//! reads `stats()` and this table (generated into each binding by `rl-gen`) and holds no list of
//! its own. Labels are bounded by construction: modes, outcomes and quantiles, never a key.

use crate::decision::Mode;
use crate::stats::{Stats, STATS_FIELDS};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MetricKind {
    /// Only grows while the limiter lives.
    Counter,
    /// Goes up and down.
    Gauge,
}

impl MetricKind {
    pub fn as_str(self) -> &'static str {
        match self {
            MetricKind::Counter => "counter",
            MetricKind::Gauge => "gauge",
        }
    }
}

/// Where a sample's value comes from.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Source {
    /// A count field of [`Stats`], multiplied by `scale` (µs and ms become seconds).
    Field { field: &'static str, scale: f64 },
    /// 1 if the limiter's current mode is this one, else 0.
    ModeIs(Mode),
}

/// One sample of a family: its label value (`None` for a family without a label) and source.
#[derive(Debug, Clone, Copy)]
pub struct Sample {
    pub label_value: Option<&'static str>,
    pub source: Source,
}

/// One metric family. Counter names end in `_total` (the OpenMetrics convention); units are
/// seconds.
#[derive(Debug, Clone, Copy)]
pub struct MetricFamily {
    pub name: &'static str,
    pub kind: MetricKind,
    pub help: &'static str,
    /// The one label of the family's samples, if it has several.
    pub label: Option<&'static str>,
    pub samples: &'static [Sample],
}

const fn field(label_value: Option<&'static str>, field: &'static str, scale: f64) -> Sample {
    Sample {
        label_value,
        source: Source::Field { field, scale },
    }
}

const C: MetricKind = MetricKind::Counter;
const G: MetricKind = MetricKind::Gauge;

/// Every metric family, in export order.
pub static METRICS: &[MetricFamily] = &[
    MetricFamily {
        name: "rl_decisions_total",
        kind: C,
        help: "Decisions by the path that made them (cached denials are rl_denials_cached_total).",
        label: Some("mode"),
        samples: &[
            field(Some("normal"), "decisions_normal", 1.0),
            field(Some("local"), "decisions_local", 1.0),
            field(Some("memory"), "decisions_memory", 1.0),
            field(Some("lease"), "decisions_lease", 1.0),
        ],
    },
    MetricFamily {
        name: "rl_denials_total",
        kind: C,
        help: "Of rl_decisions_total, the denials, by path (lease decisions never deny).",
        label: Some("mode"),
        samples: &[
            field(Some("normal"), "denied_normal", 1.0),
            field(Some("local"), "denied_local", 1.0),
            field(Some("memory"), "denied_memory", 1.0),
        ],
    },
    MetricFamily {
        name: "rl_denials_cached_total",
        kind: C,
        help: "Denials replayed from the local denial cache without a Redis call.",
        label: None,
        samples: &[field(None, "denials_cached", 1.0)],
    },
    MetricFamily {
        name: "rl_mode",
        kind: G,
        help: "1 for the path new decisions take now (normal: Redis; local: the fallback).",
        label: Some("mode"),
        samples: &[
            Sample {
                label_value: Some("normal"),
                source: Source::ModeIs(Mode::Normal),
            },
            Sample {
                label_value: Some("local"),
                source: Source::ModeIs(Mode::Local),
            },
            Sample {
                label_value: Some("memory"),
                source: Source::ModeIs(Mode::Memory),
            },
        ],
    },
    MetricFamily {
        name: "rl_transitions_total",
        kind: C,
        help: "State machine transitions, by the state entered.",
        label: Some("to"),
        samples: &[
            field(Some("local"), "transitions_to_local", 1.0),
            field(Some("normal"), "transitions_to_normal", 1.0),
        ],
    },
    MetricFamily {
        name: "rl_state_seconds",
        kind: G,
        help: "How long the current state has lasted.",
        label: None,
        samples: &[field(None, "state_ms", 1e-3)],
    },
    MetricFamily {
        name: "rl_redis_rtt_seconds",
        kind: G,
        help: "Redis round trips of the last 1024 decisions, by quantile (1 = the slowest).",
        label: Some("quantile"),
        samples: &[
            field(Some("0.5"), "rtt_p50_us", 1e-6),
            field(Some("0.99"), "rtt_p99_us", 1e-6),
            field(Some("1"), "rtt_max_us", 1e-6),
        ],
    },
    MetricFamily {
        name: "rl_redis_errors_total",
        kind: C,
        help: "Redis calls that failed with a connection-class error.",
        label: None,
        samples: &[field(None, "redis_errors", 1.0)],
    },
    MetricFamily {
        name: "rl_redis_retries_total",
        kind: C,
        help: "Of rl_redis_errors_total, the calls retried.",
        label: None,
        samples: &[field(None, "retries", 1.0)],
    },
    MetricFamily {
        name: "rl_probes_total",
        kind: C,
        help: "Recovery probes sent while local.",
        label: None,
        samples: &[field(None, "probes", 1.0)],
    },
    MetricFamily {
        name: "rl_repairs_total",
        kind: C,
        help: "Repair calls that wrote locally admitted permits back to Redis.",
        label: None,
        samples: &[field(None, "repairs", 1.0)],
    },
    MetricFamily {
        name: "rl_repaired_permits_total",
        kind: C,
        help: "Permits those repairs added.",
        label: None,
        samples: &[field(None, "repaired_permits", 1.0)],
    },
    MetricFamily {
        name: "rl_failovers_total",
        kind: C,
        help: "New Redis primaries seen.",
        label: None,
        samples: &[field(None, "failovers", 1.0)],
    },
    MetricFamily {
        name: "rl_instances",
        kind: G,
        help: "The divisor of the local budget: configured, or live instances counted in Redis.",
        label: None,
        samples: &[field(None, "instances", 1.0)],
    },
    MetricFamily {
        name: "rl_local_keys",
        kind: G,
        help: "Keys the local record holds (bounded by local_max_keys).",
        label: None,
        samples: &[field(None, "local_keys", 1.0)],
    },
    MetricFamily {
        name: "rl_shard_borrows_total",
        kind: C,
        help: "Calls to a sharded key's other shards after its home shard denied.",
        label: None,
        samples: &[field(None, "shard_borrows", 1.0)],
    },
    MetricFamily {
        name: "rl_leases_total",
        kind: C,
        help: "Leases Redis granted this instance.",
        label: None,
        samples: &[field(None, "leases_taken", 1.0)],
    },
    MetricFamily {
        name: "rl_lease_refunds_total",
        kind: C,
        help: "Leases returned to Redis.",
        label: None,
        samples: &[field(None, "lease_refunds", 1.0)],
    },
    MetricFamily {
        name: "rl_leased_permits_total",
        kind: C,
        help: "Permits leases held, and (outcome=refunded) those returned unused.",
        label: Some("outcome"),
        samples: &[
            field(Some("leased"), "leased_permits", 1.0),
            field(Some("refunded"), "refunded_permits", 1.0),
        ],
    },
];

impl Sample {
    /// The sample's value in `stats`.
    pub fn value(&self, stats: &Stats) -> f64 {
        match self.source {
            Source::ModeIs(m) => f64::from(u8::from(stats.mode == m)),
            Source::Field { field, scale } => {
                stats
                    .fields()
                    .find(|(f, _)| f.name == field)
                    .map_or(0.0, |(_, v)| match v {
                        crate::options::Value::Int(n) => n as f64 * scale,
                        _ => 0.0,
                    })
            }
        }
    }
}

/// Whether `name` is a count field of [`STATS_FIELDS`] (checked by the table's test).
pub fn is_count_field(name: &str) -> bool {
    STATS_FIELDS
        .iter()
        .any(|f| f.name == name && matches!(f.kind, crate::stats::StatsKind::Count))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_sample_reads_a_count_field_and_names_are_unique() {
        let mut names = std::collections::HashSet::new();
        for m in METRICS {
            assert!(names.insert(m.name), "{} twice", m.name);
            assert!(m.name.starts_with("rl_"), "{}", m.name);
            assert_eq!(m.kind == C, m.name.ends_with("_total"), "{}", m.name);
            assert!(!m.samples.is_empty(), "{}", m.name);
            assert_eq!(
                m.label.is_some(),
                m.samples[0].label_value.is_some(),
                "{}",
                m.name
            );
            for s in m.samples {
                assert_eq!(s.label_value.is_some(), m.label.is_some(), "{}", m.name);
                if let Source::Field { field, .. } = s.source {
                    assert!(
                        is_count_field(field),
                        "{}: {field} is not a count field",
                        m.name
                    );
                }
            }
        }
    }

    #[test]
    fn every_count_field_is_exported() {
        let used: Vec<&str> = METRICS
            .iter()
            .flat_map(|m| m.samples.iter())
            .filter_map(|s| match s.source {
                Source::Field { field, .. } => Some(field),
                Source::ModeIs(_) => None,
            })
            .collect();
        // rtt_samples and rtt_last_us are sampling details, not series worth keeping.
        for f in STATS_FIELDS.iter().filter(|f| is_count_field(f.name)) {
            if !["rtt_samples", "rtt_last_us"].contains(&f.name) {
                assert!(
                    used.contains(&f.name),
                    "stats field {} is not exported",
                    f.name
                );
            }
        }
    }
}
