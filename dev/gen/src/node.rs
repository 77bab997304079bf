//! The Node binding's generated surface: the `LimiterOptions`, `Mode` and `Stats` types in
//! `bindings-node/limiter.d.ts` (a region of the hand-written file), camelCase as Node spells
//! them, with each row's doc, default and accepted values as TSDoc; and the option and stats
//! tables of `bindings-node/README.md`.

use rl_core::options::{camel_case, Kind, OPTIONS};
use rl_core::{Mode, StatsKind, STATS_FIELDS};

use crate::readme::{range, show};
use crate::Output;

/// `doc` with every option and stats field name (`degrade_rtt_ms`) spelled as Node spells it
/// (`degradeRttMs`).
fn camel_doc(doc: &str) -> String {
    let names = OPTIONS
        .iter()
        .map(|s| s.name)
        .chain(STATS_FIELDS.iter().map(|f| f.name));
    let mut out = String::with_capacity(doc.len());
    let mut word = String::new();
    let flush = |word: &mut String, out: &mut String| {
        if names.clone().any(|n| n == word) {
            out.push_str(&camel_case(word));
        } else {
            out.push_str(word);
        }
        word.clear();
    };
    for c in doc.chars() {
        if c.is_ascii_alphanumeric() || c == '_' {
            word.push(c);
        } else {
            flush(&mut word, &mut out);
            out.push(c);
        }
    }
    flush(&mut word, &mut out);
    out
}

fn ts_type(kind: Kind) -> &'static str {
    match kind {
        Kind::Millis | Kind::Count => "number | bigint",
        Kind::Bool => "boolean",
        Kind::Text => "string",
    }
}

fn options() -> String {
    let mut t = String::from(
        "/**\n * Options of a limiter, from the core's option table. Every field is optional; `undefined` or\n * `null` keeps the default. Types, whole numbers and ranges are checked by the core; an unknown\n * key is an error.\n */\nexport interface LimiterOptions {\n",
    );
    for s in OPTIONS {
        t += &format!(
            "  /**\n   * {}\n   * Default: {}. Accepts: {}.\n   */\n  {}?: {} | null\n",
            camel_doc(s.doc),
            show(&(s.default)(), s.kind),
            range(s.kind, s.min, s.max),
            camel_case(s.name),
            ts_type(s.kind),
        );
    }
    t + "}\n"
}

fn mode() -> String {
    let mut t = String::from("/**\n * Which path decided (later versions may add more):\n");
    for m in Mode::ALL {
        t += &format!(" * - `{}`: {}\n", m.as_str(), m.doc());
    }
    t += " */\nexport type Mode =";
    for m in Mode::ALL {
        t += &format!(" '{}' |", m.as_str());
    }
    t + " (string & {})\n"
}

fn stats() -> String {
    let mut t = String::from(
        "/** What `limiter.stats()` returns: a plain object, a snapshot. Counts are since the limiter was made. */\nexport interface Stats {\n",
    );
    for f in STATS_FIELDS {
        let ty = match f.kind {
            StatsKind::Mode => "Mode",
            StatsKind::Text => "string",
            StatsKind::Count => "number",
        };
        t += &format!(
            "  /** {} */\n  {}: {}\n",
            camel_doc(f.doc),
            camel_case(f.name),
            ty
        );
    }
    t + "}\n"
}

/// The README's option and stats tables, in Node's spelling.
fn readme_options() -> String {
    let mut t =
        String::from("| option | default | accepts | meaning |\n| --- | --- | --- | --- |\n");
    for s in OPTIONS {
        t += &format!(
            "| `{}` | {} | {} | {} |\n",
            camel_case(s.name),
            show(&(s.default)(), s.kind),
            range(s.kind, s.min, s.max),
            camel_doc(s.doc)
        );
    }
    t
}

fn readme_stats() -> String {
    let mut t = String::from("| field | meaning |\n| --- | --- |\n");
    for f in STATS_FIELDS {
        t += &format!("| `{}` | {} |\n", camel_case(f.name), camel_doc(f.doc));
    }
    t
}

pub fn outputs() -> Vec<Output> {
    vec![
        Output::Region {
            path: "bindings-node/limiter.d.ts",
            comment: "//",
            text: format!("{}\n{}\n{}", options(), mode(), stats()),
        },
        Output::Region {
            path: "bindings-node/README.md",
            comment: "<!--",
            text: format!(
                "{}\n#### `stats()` fields\n\n{}",
                readme_options(),
                readme_stats()
            ),
        },
    ]
}
