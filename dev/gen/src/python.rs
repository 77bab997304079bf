//! The Python binding's typed surface: the `LimiterOptions` TypedDict (`rl/_options.py`, a
//! whole file, also imported at runtime) that types `Limiter(url, **options)`, and the region of
//! the stubs (`rl/_rl.pyi`) that declares `OPTIONS`, `MODES` and the `Stats` class, one property
//! per stats field.

use rl_core::options::{Kind, Value, OPTIONS};
use rl_core::{Mode, StatsKind, STATS_FIELDS};

use crate::readme::range;
use crate::Output;

const OPTIONS_PY: &str = "bindings-python/python/rl/_options.py";
const STUBS: &str = "bindings-python/python/rl/_rl.pyi";

pub fn outputs() -> Vec<Output> {
    vec![
        Output::File {
            path: OPTIONS_PY,
            text: options_py(),
        },
        Output::Region {
            path: STUBS,
            comment: "#",
            text: stubs_region(),
        },
        Output::Region {
            path: "bindings-python/README.md",
            comment: "<!--",
            text: readme(),
        },
    ]
}

/// The README's option and stats tables, with Python's defaults and types.
fn readme() -> String {
    let mut t =
        String::from("| keyword | default | accepts | meaning |\n| --- | --- | --- | --- |\n");
    for s in OPTIONS {
        t += &format!(
            "| `{}` | `{}` | {} | {} |\n",
            s.name,
            py_default(&(s.default)()),
            crate::readme::range(s.kind, s.min, s.max),
            s.doc
        );
    }
    t += "\n#### `Stats` attributes\n\n| attribute | type | meaning |\n| --- | --- | --- |\n";
    for f in STATS_FIELDS {
        t += &format!("| `{}` | `{}` | {} |\n", f.name, stats_type(f.kind), f.doc);
    }
    t
}

/// A doc line as the body of a `"""` string.
fn docstring(doc: &str) -> String {
    format!(
        "\"\"\"{}\"\"\"",
        doc.replace('\\', "\\\\").replace('"', "\\\"")
    )
}

fn py_type(kind: Kind) -> &'static str {
    match kind {
        Kind::Millis | Kind::Count => "int",
        Kind::Bool => "bool",
        Kind::Text => "str",
    }
}

/// A default as Python spells it.
fn py_default(v: &Value) -> String {
    match v {
        Value::Null => "None (discovered)".into(),
        Value::Bool(true) => "True".into(),
        Value::Bool(false) => "False".into(),
        Value::Int(n) => n.to_string(),
        Value::Float(f) => f.to_string(),
        Value::Text(s) => format!("{s:?}"),
    }
}

fn options_py() -> String {
    let mut t = crate::banner("#");
    t += r#""""The keyword options of ``rl.Limiter`` and ``rl.AsyncLimiter``, from rl-core's option table.

    >>> opts: rl.LimiterOptions = {"request_timeout_ms": 200, "local_fallback": False}
    >>> limiter = rl.Limiter("redis://127.0.0.1:6379/", **opts)
"""

import typing
from typing import Optional

__all__ = ["LimiterOptions"]


class LimiterOptions(typing.TypedDict, total=False):
    """Every keyword option. One left out, or ``None``, takes its default. The core checks each
    value (``InvalidArgumentType`` for a wrong type, ``float`` included; ``InvalidArgument`` out
    of range), naming the option."""
"#;
    for s in OPTIONS {
        t += &format!(
            "\n    {}: Optional[{}]\n    {}\n",
            s.name,
            py_type(s.kind),
            docstring(&format!(
                "{} Default: {}{}.",
                s.doc,
                py_default(&(s.default)()),
                match s.kind {
                    Kind::Millis | Kind::Count => format!("; {}", range(s.kind, s.min, s.max)),
                    Kind::Bool | Kind::Text => String::new(),
                }
            ))
        );
    }
    t
}

/// `Tuple[Literal["a"], ...]`, one item a line at `indent`.
fn literal_tuple<'a>(names: impl Iterator<Item = &'a str>, indent: &str) -> String {
    let items: String = names
        .map(|n| format!("{indent}    Literal[\"{n}\"],\n"))
        .collect();
    format!("Tuple[\n{items}{indent}]")
}

fn stubs_region() -> String {
    let mut t = String::from(
        "#: Every keyword option of Limiter and AsyncLimiter (see rl.LimiterOptions).\n",
    );
    t += &format!(
        "OPTIONS: {}\n",
        literal_tuple(OPTIONS.iter().map(|s| s.name), "")
    );
    t += "#: Every value of Decision.mode and Stats.mode:\n";
    for m in Mode::ALL {
        t += &format!("#: {:?}: {}\n", m.as_str(), m.doc());
    }
    t += &format!(
        "MODES: {}\n",
        literal_tuple(Mode::ALL.iter().map(|m| m.as_str()), "")
    );
    t += "\n@final\nclass Stats:\n    \"\"\"A snapshot of a limiter's state and counters (Limiter.stats()). Immutable, picklable,\n    == by value.\"\"\"\n\n";
    t += &format!(
        "    __match_args__: ClassVar[{}]\n",
        literal_tuple(STATS_FIELDS.iter().map(|f| f.name), "    ")
    );
    t += "    def __new__(\n        cls,\n";
    for f in STATS_FIELDS {
        t += &format!("        {}: {},\n", f.name, stats_type(f.kind));
    }
    t += "    ) -> Self: ...\n";
    for f in STATS_FIELDS {
        t += &format!(
            "    @property\n    def {}(self) -> {}:\n        {}\n",
            f.name,
            stats_type(f.kind),
            docstring(f.doc)
        );
    }
    t += r#"    def as_dict(self) -> dict[str, Union[str, int]]:
        """Every attribute in a new dict (for logs and metrics exporters)."""
    def __eq__(self, other: object) -> bool: ...
    def __reduce__(self) -> Tuple[Any, Tuple[Union[str, int], ...]]: ...
"#;
    t
}

fn stats_type(kind: StatsKind) -> &'static str {
    match kind {
        StatsKind::Mode | StatsKind::Text => "str",
        StatsKind::Count => "int",
    }
}
