//! The README's tables of options, stats fields and modes.

use rl_core::options::{camel_case, Kind, Value, OPTIONS};
use rl_core::{Mode, STATS_FIELDS};

use crate::Output;

/// How a value reads in docs.
pub fn show(v: &Value, kind: Kind) -> String {
    match v {
        Value::Null => "discovered".into(),
        Value::Bool(b) => b.to_string(),
        Value::Int(n) if kind == Kind::Millis => format!("{n} ms"),
        Value::Int(n) => n.to_string(),
        Value::Float(f) => f.to_string(),
        Value::Text(s) => format!("`{s:?}`"),
    }
}

/// The accepted values, for docs.
pub fn range(kind: Kind, min: u64, max: u64) -> String {
    match kind {
        Kind::Millis => format!("{min}–{max} ms"),
        Kind::Count => format!("{min}–{max}"),
        Kind::Bool => "true / false".into(),
        Kind::Text => "string".into(),
    }
}

pub fn outputs() -> Vec<Output> {
    let mut t = String::from(
        "| Option (Python, C, core) | Node, Java | Default | Accepts | What it does |\n|---|---|---|---|---|\n",
    );
    for s in OPTIONS {
        t += &format!(
            "| `{}` | `{}` | {} | {} | {} |\n",
            s.name,
            camel_case(s.name),
            show(&(s.default)(), s.kind),
            range(s.kind, s.min, s.max),
            s.doc
        );
    }
    t += "\n`limiter.stats()` fields (camelCase in Node and Java):\n\n| Field | What it counts |\n|---|---|\n";
    for f in STATS_FIELDS {
        t += &format!("| `{}` | {} |\n", f.name, f.doc);
    }
    t += "\nModes (`decision.mode`, `stats().mode`):\n\n| Mode | Meaning |\n|---|---|\n";
    for m in Mode::ALL {
        t += &format!("| `{}` | {} |\n", m.as_str(), m.doc());
    }
    vec![Output::Region {
        path: "README.md",
        comment: "<!--",
        text: t,
    }]
}
