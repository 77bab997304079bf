//! `--option NAME=VALUE` and `rl options`: every limiter option reaches the CLI through the
//! core's table (`rl_core::OPTIONS`), so the CLI takes the same options as every binding.

use rl_core::options::{Kind, Value};
use rl_core::{Options, OPTIONS};

use crate::CliResult;

/// `base` with `--prefix` (kept for compatibility) and each `--option` applied in order, checked.
pub fn build(mut base: Options, prefix: Option<&str>, pairs: &[String]) -> CliResult<Options> {
    if let Some(p) = prefix {
        base.set("key_prefix", Value::Text(p.into()))?;
    }
    for pair in pairs {
        base.set_text(pair)?;
    }
    base.validate()?;
    Ok(base)
}

/// `rl options`: the table, one option per line.
pub fn list() -> CliResult<u8> {
    for s in OPTIONS {
        let default = match (s.default)() {
            Value::Null => "discovered".to_string(),
            Value::Int(n) if s.kind == Kind::Millis => format!("{n} ms"),
            Value::Int(n) => n.to_string(),
            Value::Bool(b) => b.to_string(),
            Value::Float(f) => f.to_string(),
            Value::Text(t) => format!("{t:?}"),
        };
        let accepts = match s.kind {
            Kind::Millis => format!("{}..={} ms", s.min, s.max),
            Kind::Count => format!("{}..={}", s.min, s.max),
            Kind::Bool => "true|false".into(),
            Kind::Text => "text".into(),
        };
        println!(
            "{:<20} default {:<12} accepts {:<18} {}",
            s.name, default, accepts, s.doc
        );
    }
    Ok(crate::EXIT_ALLOWED)
}
