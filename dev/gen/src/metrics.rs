//! The metric families (`rl_core::metrics::METRICS`) as a data table in each language, read by
//! that language's adapter (Python `prometheus_client`, Node `prom-client`, Java Micrometer):
//! the adapters hold the export logic, never the list.

use rl_core::metrics::{MetricFamily, Source, METRICS};

use crate::Output;

pub fn outputs() -> Vec<Output> {
    vec![
        Output::File {
            path: "bindings-python/python/rl/_metrics.py",
            text: python(),
        },
        Output::File {
            path: "bindings-node/metrics-table.js",
            text: node(),
        },
        Output::File {
            path: "bindings-java/micrometer/src/main/java/dev/rl/micrometer/MetricsTable.java",
            text: java(),
        },
    ]
}

/// A sample as (label value or none, stats field or none, scale, mode or none).
type Parts = (
    Option<&'static str>,
    Option<&'static str>,
    f64,
    Option<&'static str>,
);

fn parts(m: &MetricFamily) -> Vec<Parts> {
    m.samples
        .iter()
        .map(|s| match s.source {
            Source::Field { field, scale } => (s.label_value, Some(field), scale, None),
            Source::ModeIs(mode) => (s.label_value, None, 1.0, Some(mode.as_str())),
        })
        .collect()
}

fn q(s: &str) -> String {
    format!("{s:?}")
}

fn py_opt(s: Option<&str>) -> String {
    s.map_or("None".into(), q)
}

fn js_opt(s: Option<&str>) -> String {
    s.map_or("null".into(), q)
}

fn python() -> String {
    let mut t = crate::banner("#");
    t += "\"\"\"The metric families rl exports: (name, kind, help, label, samples), each sample\n(label value, stats field, scale, mode): the value is the stats field times scale, or, with\na mode, 1 when the limiter's mode is that one.\"\"\"\n\nfrom typing import List, Optional, Tuple\n\n";
    t += "Sample = Tuple[Optional[str], Optional[str], float, Optional[str]]\n";
    t +=
        "Family = Tuple[str, str, str, Optional[str], List[Sample]]\n\nMETRICS: List[Family] = [\n";
    for m in METRICS {
        t += &format!(
            "    ({}, {}, {}, {}, [\n",
            q(m.name),
            q(m.kind.as_str()),
            q(m.help),
            py_opt(m.label)
        );
        for (lv, f, scale, mode) in parts(m) {
            t += &format!(
                "        ({}, {}, {scale:e}, {}),\n",
                py_opt(lv),
                py_opt(f),
                py_opt(mode)
            );
        }
        t += "    ]),\n";
    }
    t += "]\n";
    t
}

fn node() -> String {
    let mut t = crate::banner("//");
    t += "'use strict';\n/** The metric families rl exports, read by prometheus.js. Each sample: [label value, stats field\n * (camelCase), scale, mode] — the value is the field times scale, or, with a mode, 1 when\n * the limiter's mode is that one. */\nmodule.exports = [\n";
    for m in METRICS {
        t += &format!(
            "  {{ name: {}, kind: {}, help: {}, label: {}, samples: [\n",
            q(m.name),
            q(m.kind.as_str()),
            q(m.help),
            js_opt(m.label)
        );
        for (lv, f, scale, mode) in parts(m) {
            let f = f.map(rl_core::options::camel_case);
            t += &format!(
                "    [{}, {}, {scale:e}, {}],\n",
                js_opt(lv),
                js_opt(f.as_deref()),
                js_opt(mode)
            );
        }
        t += "  ] },\n";
    }
    t += "];\n";
    t
}

fn java() -> String {
    let mut t = crate::banner("//");
    t += "package dev.rl.micrometer;\n\nimport java.util.List;\n\n/** The metric families rl exports, read by {@link RlMetrics}. */\nfinal class MetricsTable {\n    private MetricsTable() {}\n\n";
    t += "    /** A sample: the value is the stats field ({@code Stats} accessor name) times scale, or,\n     * with a mode, 1 when the limiter's mode is that one. */\n    record Sample(String labelValue, String field, double scale, String mode) {}\n\n";
    t += "    /** A family: counters end in _total; Micrometer drops that suffix itself. */\n    record Family(String name, String kind, String help, String label, List<Sample> samples) {}\n\n";
    t += "    static final List<Family> FAMILIES = List.of(\n";
    let fams: Vec<String> = METRICS
        .iter()
        .map(|m| {
            let samples: Vec<String> = parts(m)
                .into_iter()
                .map(|(lv, f, scale, mode)| {
                    let f = f.map(rl_core::options::camel_case);
                    format!(
                        "                new Sample({}, {}, {scale:e}, {})",
                        js_opt(lv),
                        js_opt(f.as_deref()),
                        js_opt(mode)
                    )
                })
                .collect();
            format!(
                "        new Family({}, {}, {}, {}, List.of(\n{}))",
                q(m.name),
                q(m.kind.as_str()),
                q(m.help),
                js_opt(m.label),
                samples.join(",\n")
            )
        })
        .collect();
    t += &fams.join(",\n");
    t += ");\n}\n";
    t
}
