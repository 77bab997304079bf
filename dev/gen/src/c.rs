//! The C binding's generated surface: `bindings-c/src/generated.rs` (the `rl_mode`, `rl_options`
//! and `rl_stats` types with their docs, which cbindgen turns into `include/rl.h`, plus the tables
//! the binding reads them with) and the options table in `bindings-c/README.md`.
//!
//! The one C-specific fact kept here is the ABI order of `rl_options`: [`FIELDS`], because a C
//! struct can only grow at its end, versioned by `struct_size`. Everything else (names, ranges,
//! defaults, docs) comes from rl-core's tables.

use rl_core::options::{Kind, OptionSpec, Value, OPTIONS};
use rl_core::{Mode, StatsKind, STATS_FIELDS};

use crate::readme::show;
use crate::Output;

/// How a C field holds its option (C has no "unset", so zero means the default).
#[derive(Clone, Copy, PartialEq)]
enum Conv {
    /// NULL / 0 / false: the default; anything else: the value.
    Plain,
    /// As `Plain`, and the named C constant (u64::MAX) stands for 0, since 0 is the default.
    MaxForZero(&'static str),
    /// A field `disable_<name>` for a bool that defaults to true, so that zero is the default.
    Inverted,
}

/// `rl_options`' fields after `struct_size`, in ABI order: (option, struct version, convention).
/// A new option appends a row with the next version; rows are never reordered or removed.
const FIELDS: &[(&str, u32, Conv)] = &[
    ("key_prefix", 1, Conv::Plain),
    ("connect_timeout_ms", 1, Conv::Plain),
    ("request_timeout_ms", 1, Conv::Plain),
    (
        "retry_delay_ms",
        2,
        Conv::MaxForZero("RL_RETRY_IMMEDIATELY"),
    ),
    ("local_fallback", 2, Conv::Inverted),
    ("degrade_rtt_ms", 2, Conv::Plain),
    ("degrade_after_ms", 2, Conv::Plain),
    ("recover_rtt_ms", 2, Conv::Plain),
    ("recover_after_ms", 2, Conv::Plain),
    ("instances", 2, Conv::Plain),
    ("local_max_keys", 2, Conv::Plain),
    ("client_clock", 3, Conv::Plain),
    ("max_clock_skew_ms", 3, Conv::Plain),
    ("key_shards", 4, Conv::Plain),
    ("leases", 4, Conv::Plain),
    ("lease_ms", 4, Conv::Plain),
    ("lease_hot_rate", 4, Conv::Plain),
    ("denial_cache", 4, Conv::Inverted),
    ("busy_poll_us", 5, Conv::MaxForZero("RL_BUSY_POLL_OFF")),
];

/// Bytes (NUL included) of a text stats field in `rl_stats`; part of the ABI.
fn text_capacity(field: &str) -> usize {
    match field {
        "topology" => 16,
        _ => 128,
    }
}

const GENERATED: &str = "bindings-c/src/generated.rs";

/// One C field: its name, its option's row, version and convention.
struct Field {
    c_name: String,
    spec: &'static OptionSpec,
    version: u32,
    conv: Conv,
}

/// [`FIELDS`] joined with the table, checked: every option has exactly one field, versions only
/// grow, and each convention fits its option's kind and default.
fn fields() -> Vec<Field> {
    let mut out = Vec::new();
    let mut last = 1;
    for &(name, version, conv) in FIELDS {
        let spec = rl_core::options::spec(name)
            .unwrap_or_else(|| panic!("c.rs FIELDS: `{name}` is not in rl-core's OPTIONS"));
        assert!(
            version >= last,
            "c.rs FIELDS: `{name}` goes back to version {version}"
        );
        last = version;
        let default = (spec.default)();
        match (conv, spec.kind) {
            (Conv::Inverted, Kind::Bool) => assert_eq!(default, Value::Bool(true), "{name}"),
            (Conv::Inverted, _) => panic!("c.rs FIELDS: `{name}` is not a bool to invert"),
            (Conv::MaxForZero(_), Kind::Millis | Kind::Count) => {
                assert_eq!(spec.min, 0, "c.rs FIELDS: `{name}` cannot be 0")
            }
            (Conv::MaxForZero(_), _) => panic!("c.rs FIELDS: `{name}` is not a number"),
            // Zero is false, so a plain bool must default to false.
            (Conv::Plain, Kind::Bool) => assert_eq!(default, Value::Bool(false), "{name}"),
            (Conv::Plain, _) => {}
        }
        let c_name = match conv {
            Conv::Inverted => format!("disable_{name}"),
            _ => name.to_string(),
        };
        out.push(Field {
            c_name,
            spec,
            version,
            conv,
        });
    }
    for s in OPTIONS {
        let n = out.iter().filter(|f| f.spec.name == s.name).count();
        assert_eq!(n, 1, "c.rs FIELDS: option `{}` has {n} C fields (want 1: append it with a new struct version)", s.name);
    }
    out
}

/// `text` as `///` lines of at most 100 columns at `indent`.
fn doc(indent: &str, text: &str) -> String {
    let width = 100 - indent.len() - 4;
    let mut out = String::new();
    for para in text.split("\n\n") {
        if !out.is_empty() {
            out += &format!("{indent}///\n");
        }
        let mut line = String::new();
        for word in para.split_whitespace() {
            if !line.is_empty() && line.len() + 1 + word.len() > width {
                out += &format!("{indent}/// {line}\n");
                line.clear();
            }
            if !line.is_empty() {
                line.push(' ');
            }
            line += word;
        }
        out += &format!("{indent}/// {line}\n");
    }
    out
}

fn c_type(kind: Kind) -> &'static str {
    match kind {
        Kind::Text => "*const c_char",
        Kind::Millis | Kind::Count => "u64",
        Kind::Bool => "bool",
    }
}

/// What the C field holds and what zero means, after the table's doc line.
fn c_detail(f: &Field) -> String {
    let s = f.spec;
    let default = show(&(s.default)(), s.kind).replace('`', "");
    let mut t = match (f.conv, s.kind) {
        (Conv::Inverted, _) => format!(
            "`true` sets `{0}` to false. Inverted so that zero (false) is the default, `{0}` = {default}; \
             an error about it names `{0}`.",
            s.name
        ),
        (_, Kind::Text) => format!(
            "NUL-terminated UTF-8, at most {} bytes; NULL: the default, {default}.",
            s.max
        ),
        (_, Kind::Bool) => "false (zero) is the default.".to_string(),
        (_, Kind::Millis) => format!("In ms, {} to {}; 0: the default, {default}.", s.min, s.max),
        (_, Kind::Count) if (s.default)() == Value::Null => {
            format!("{} to {}; 0: unset (the default).", s.min, s.max)
        }
        (_, Kind::Count) => format!("{} to {}; 0: the default, {default}.", s.min, s.max),
    };
    if let Conv::MaxForZero(c) = f.conv {
        t += &format!(" `{c}`: 0{}.", unit(s.kind));
    } else if s.min == 0 && matches!(s.kind, Kind::Millis | Kind::Count) {
        t += " (0 itself cannot be set here: 1 is the smallest other value.)";
    }
    if f.version > 1 {
        t += &format!(" Since version {} of this struct.", f.version);
    }
    t
}

/// " ms" after a number of this kind.
fn unit(kind: Kind) -> &'static str {
    match kind {
        Kind::Millis => " ms",
        _ => "",
    }
}

/// The size each struct version ends at, as Rust expressions over the generated struct: what
/// `sizeof` gave a program built against it, so padded to the struct's alignment (the next
/// version's first field must not fit in that padding, or two versions would share a size;
/// the binding's tests check the sizes differ).
fn version_ends(fields: &[Field]) -> Vec<(u32, String)> {
    let mut ends = Vec::new();
    for w in fields.windows(2) {
        if w[1].version != w[0].version {
            ends.push((
                w[0].version,
                format!("padded(offset_of!(rl_options, {}))", w[1].c_name),
            ));
        }
    }
    let last = fields.last().expect("rl_options has fields").version;
    ends.push((last, "size_of::<rl_options>()".to_string()));
    ends
}

fn mode_enum() -> String {
    let mut t = doc(
        "",
        "Which path made a decision. The values are the core's modes in `Mode::ALL` order, which only \
         appends. New modes may be added in later versions: handle unknown values (`rl_mode_name` \
         names every mode the library knows).",
    );
    t += "#[repr(C)]\n#[derive(Debug, Clone, Copy, PartialEq, Eq)]\npub enum rl_mode {\n";
    for (i, m) in Mode::ALL.iter().enumerate() {
        t += &doc("    ", m.doc());
        t += &format!("    RL_MODE_{} = {i},\n", m.as_str().to_uppercase());
    }
    t += "}\n\n/// Every mode, at its index in `rl_core::Mode::ALL`.\n";
    t += &format!(
        "pub(crate) const MODES: [rl_mode; {}] = [\n",
        Mode::ALL.len()
    );
    for m in Mode::ALL {
        t += &format!("    rl_mode::RL_MODE_{},\n", m.as_str().to_uppercase());
    }
    t += "];\n";
    t
}

fn options_struct(fields: &[Field]) -> String {
    let ends = version_ends(fields);
    let known = ends
        .iter()
        .map(|(v, _)| {
            let last = fields.iter().rfind(|f| f.version == *v).expect("a field");
            format!("{v} (up to `{}`)", last.c_name)
        })
        .collect::<Vec<_>>()
        .join(", ");
    let mut t = doc(
        "",
        &format!(
            "How a limiter behaves. Initialise with `rl_options_default()` (or zero it and set \
             `struct_size = sizeof(rl_options)`), then change the fields you care about: a zero or \
             NULL field means \"the default\", so a zeroed struct is all defaults. The caller owns \
             the struct and every string it points to; the library copies what it needs during \
             `rl_limiter_open` and keeps no pointer.\n\n\
             Each field is the core's option of the same name (see the README's option table), so \
             every rule about the values (ranges, and how they relate to each other) is the core's: \
             a value it refuses makes `rl_limiter_open` return `RL_INVALID_ARGUMENT` with a message \
             naming the option, e.g. \"invalid argument `recover_rtt_ms`: ...\".\n\n\
             ABI evolution: later versions only append fields. `struct_size` tells the library which \
             version of the struct the caller was compiled against, so an old program keeps working \
             with a newer library: fields past its `struct_size` are never read and take their \
             defaults. Known versions: {known}."
        ),
    );
    t += "#[repr(C)]\n#[derive(Debug, Clone, Copy)]\npub struct rl_options {\n";
    t += "    /// Must be `sizeof(rl_options)` as seen by the caller; `rl_options_default()` sets it.\n";
    t += "    pub struct_size: usize,\n";
    for f in fields {
        t += &doc("    ", &format!("{}\n\n{}", f.spec.doc, c_detail(f)));
        t += &format!("    pub {}: {},\n", f.c_name, c_type(f.spec.kind));
    }
    t += "}\n\n";
    t += "/// Every field after `struct_size`, in struct order: the option it sets, the struct version\n";
    t += "/// that added it, where it is, and how C spells its default.\n";
    t += "pub(crate) static OPTION_FIELDS: &[OptionField] = &[\n";
    for f in fields {
        let conv = match (f.conv, f.spec.kind) {
            (Conv::Inverted, _) => "InvertedFlag",
            (Conv::MaxForZero(_), _) => "MaxForZero",
            (Conv::Plain, Kind::Text) => "Text",
            (Conv::Plain, Kind::Bool) => "Flag",
            (Conv::Plain, Kind::Millis | Kind::Count) => "Number",
        };
        t += &format!(
            "    OptionField {{\n        option: {:?},\n        version: {},\n        offset: offset_of!(rl_options, {}),\n        convention: Convention::{conv},\n    }},\n",
            f.spec.name, f.version, f.c_name
        );
    }
    t += "];\n\n/// The size of each version of `rl_options`: (version, size).\n";
    t += &format!(
        "pub(crate) const OPTIONS_SIZES: [(u32, usize); {}] = [\n",
        ends.len()
    );
    for (v, e) in &ends {
        t += &format!("    ({v}, {e}),\n");
    }
    t += "];\n\n";
    t += "/// What `sizeof` gives a struct whose last field ends before `offset`.\n";
    t += "const fn padded(offset: usize) -> usize {\n";
    t += "    offset.next_multiple_of(align_of::<rl_options>())\n}\n";
    t
}

fn stats_struct() -> String {
    let mut t = doc(
        "",
        "What `rl_stats_get` reports: which path decides now, how often each path decided, the \
         fallback state machine's transitions, and Redis round-trip times; the fields are the core's \
         stats fields in order. Plain numbers and fixed-size strings: the caller owns the struct \
         (usually on the stack) and must set `struct_size` to `sizeof(rl_stats)` before the call; \
         the library writes every other field.\n\n\
         Counters count since the limiter was opened. ABI evolution as for `rl_options`: later \
         versions only append fields.",
    );
    t += "#[repr(C)]\n#[derive(Debug, Clone, Copy)]\npub struct rl_stats {\n";
    t += "    /// Set by the caller to `sizeof(rl_stats)`; the library leaves it as it was.\n";
    t += "    pub struct_size: usize,\n";
    for f in STATS_FIELDS {
        let (ty, more) = match f.kind {
            StatsKind::Mode => (
                "rl_mode".to_string(),
                "\n\nAs an `rl_mode`: `RL_MODE_` and the name in capitals.".to_string(),
            ),
            StatsKind::Count => ("u64".to_string(), String::new()),
            StatsKind::Text => {
                let n = text_capacity(f.name);
                (
                    format!("[c_char; {n}]"),
                    format!(
                        "\n\nNUL-terminated UTF-8, truncated to {} bytes (at a character boundary) if longer.",
                        n - 1
                    ),
                )
            }
        };
        t += &doc("    ", &format!("{}{more}", f.doc));
        t += &format!("    pub {}: {ty},\n", f.name);
    }
    t += "}\n\nimpl rl_stats {\n";
    t += "    /// `fields` (`Stats::fields()`) in `STATS_FIELDS` order, which is this struct's order.\n";
    t += "    pub(crate) fn from_fields(\n        struct_size: usize,\n        fields: &mut impl Iterator<Item = (&'static StatsField, Value)>,\n    ) -> Result<Self, Failure> {\n";
    t += "        Ok(rl_stats {\n            struct_size,\n";
    for f in STATS_FIELDS {
        t += &format!("            {0}: take(fields, {0:?})?,\n", f.name);
    }
    t += "        })\n    }\n}\n";
    t
}

fn generated(fields: &[Field]) -> String {
    let mut t = crate::banner("//");
    t += "\nuse std::ffi::c_char;\nuse std::mem::{align_of, offset_of, size_of};\n\n";
    t += "use rl_core::options::Value;\nuse rl_core::StatsField;\n\n";
    t += "use crate::errors::Failure;\nuse crate::options::{Convention, OptionField};\nuse crate::stats::take;\n\n";
    t += &mode_enum();
    t += "\n";
    t += &options_struct(fields);
    t += "\n";
    t += &stats_struct();
    t
}

/// The README's table of `rl_options` fields.
fn readme_table(fields: &[Field]) -> String {
    let mut t = String::from(
        "| field | zero / NULL means | accepts | what |\n| --- | --- | --- | --- |\n\
         | `struct_size` | (must be set) | `sizeof(rl_options)` | set by `rl_options_default()`; see ABI evolution |\n",
    );
    for f in fields {
        let s = f.spec;
        let default = show(&(s.default)(), s.kind);
        let (zero, accepts) = match f.conv {
            Conv::Inverted => (
                format!("`{}` = {default}", s.name),
                "`true` / `false`".to_string(),
            ),
            Conv::MaxForZero(c) => {
                let u = unit(s.kind);
                (default, format!("{}–{}{u}; `{c}` for 0{u}", s.min, s.max))
            }
            Conv::Plain => (default, crate::readme::range(s.kind, s.min, s.max)),
        };
        let since = if f.version > 1 {
            format!(" (v{})", f.version)
        } else {
            String::new()
        };
        t += &format!(
            "| `{}`{since} | {zero} | {accepts} | {} |\n",
            f.c_name, s.doc
        );
    }
    t
}

pub fn outputs() -> Vec<Output> {
    let fields = fields();
    vec![
        Output::File {
            path: GENERATED,
            text: generated(&fields),
        },
        Output::Region {
            path: "bindings-c/README.md",
            comment: "<!--",
            text: readme_table(&fields),
        },
    ]
}
