//! The Java binding's generated surface: `OptionsBuilder` (the builder's option setters, one per
//! row of `OPTIONS`, with its doc, default and range as Javadoc) and the `Stats` record (one
//! component per `STATS_FIELDS` entry, in order: the JNI layer calls its canonical constructor
//! with `Stats::fields()`).

use rl_core::options::{camel_case, Kind, Value, OPTIONS};
use rl_core::{StatsKind, STATS_FIELDS};

use crate::readme::{range, show};
use crate::Output;

pub fn outputs() -> Vec<Output> {
    vec![
        Output::File {
            path: "bindings-java/src/main/java/dev/rl/OptionsBuilder.java",
            text: options_builder(),
        },
        Output::File {
            path: "bindings-java/src/main/java/dev/rl/Stats.java",
            text: stats(),
        },
        Output::Region {
            path: "bindings-java/README.md",
            comment: "<!--",
            text: readme_table(),
        },
    ]
}

/// The Java type of an option's setter parameter.
fn java_type(kind: Kind) -> &'static str {
    match kind {
        Kind::Millis | Kind::Count => "long",
        Kind::Bool => "boolean",
        Kind::Text => "String",
    }
}

/// `text` safe inside Javadoc, with every option name it mentions linked to its setter (`link`
/// is the class prefix, empty inside `OptionsBuilder` itself).
fn javadoc(text: &str, link: &str) -> String {
    let mut out = text
        .replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('@', "&#64;");
    // Only names with an underscore: a one-word name (`instances`) is also an ordinary word.
    for s in OPTIONS.iter().filter(|s| s.name.contains('_')) {
        let setter = format!(
            "{{@link {link}#{}({}) {}}}",
            camel_case(s.name),
            java_type(s.kind),
            camel_case(s.name)
        );
        out = out.replace(s.name, &setter);
    }
    out
}

fn default(v: &Value, kind: Kind) -> String {
    match v {
        Value::Null => "unset (discovered)".into(),
        Value::Bool(b) => format!("{{@code {b}}}"),
        Value::Int(n) if kind == Kind::Millis => format!("{n} ms"),
        Value::Int(n) => n.to_string(),
        Value::Float(f) => f.to_string(),
        Value::Text(s) => format!("{{@code {s:?}}}"),
    }
}

fn options_builder() -> String {
    let mut t = crate::banner("//");
    t += r#"package dev.rl;

import java.time.Duration;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Objects;

/**
 * The option setters of {@link RateLimiter.Builder}, one per option of rl-core's table, named
 * after the option (camelCase, with its unit: {@code retryDelayMs}); millisecond options also
 * take a {@link Duration}. Only the options set are passed to the core, by name; the core holds
 * every default and rule, and its errors name the option as the setter is spelled.
 *
 * @param <B> the builder type the setters return
 */
public abstract class OptionsBuilder<B extends OptionsBuilder<B>> {
    /** The options set so far: rl-core's external (snake_case) name to the value given. */
    final Map<String, Object> options = new LinkedHashMap<>();

    OptionsBuilder() {}

    @SuppressWarnings("unchecked")
    private B set(String name, Object value) {
        options.put(name, value);
        return (B) this;
    }

    /** A value given as text, for rl-core to read by the option's kind. */
    static final class Text {
        final String text;

        Text(String text) {
            this.text = text;
        }
    }

    /**
     * Sets the option {@code name} from text, as a configuration file gives it (Spring's
     * {@code rl.options.*}, a properties file). {@code name} is rl's option name as snake_case
     * ({@code lease_ms}), kebab-case ({@code lease-ms}) or camelCase ({@code leaseMs}); rl-core reads
     * {@code text} as {@code rl -o NAME=VALUE} does: {@code true}/{@code false}, a whole number or a
     * duration ({@code 250ms}, {@code 2s}) for milliseconds, the text itself for text options, and
     * {@code default} for the default. An unknown name or a bad value fails {@code build()} with an
     * {@link IllegalArgumentException} naming the option.
     */
    public final B option(String name, String text) {
        Objects.requireNonNull(name, "option name");
        return set(name, new Text(Objects.requireNonNull(text, name)));
    }
"#;
    for s in OPTIONS {
        let camel = camel_case(s.name);
        let ty = java_type(s.kind);
        let accepts = match s.kind {
            Kind::Millis => format!(" Accepts {} to {} ms.", s.min, s.max),
            Kind::Count => format!(" Accepts {} to {}.", s.min, s.max),
            Kind::Bool | Kind::Text => String::new(),
        };
        let value = match s.kind {
            Kind::Text => format!("Objects.requireNonNull(value, \"{camel}\")"),
            _ => "value".into(),
        };
        t += &format!(
            r#"
    /**
     * {doc}
     *
     * <p>Default: {default}.{accepts} (rl option {{@code {name}}}.)
     */
    public final B {camel}({ty} value) {{
        return set("{name}", {value});
    }}
"#,
            doc = javadoc(s.doc, ""),
            default = default(&(s.default)(), s.kind),
            name = s.name,
        );
        if s.kind == Kind::Millis {
            let short = camel_case(s.name.strip_suffix("_ms").unwrap_or(s.name));
            t += &format!(
                r#"
    /**
     * {{@link #{camel}(long)}} as a {{@link Duration}}, in whole milliseconds (a fraction of a
     * millisecond is dropped); errors name {{@code {camel}}}.
     */
    public final B {short}(Duration value) {{
        return set("{name}", Objects.requireNonNull(value, "{short}"));
    }}
"#,
                name = s.name,
            );
        }
    }
    t += "}\n";
    t
}

/// The README's table of builder options.
fn readme_table() -> String {
    let mut t =
        String::from("| builder method | default | accepts | what |\n| --- | --- | --- | --- |\n");
    for s in OPTIONS {
        let camel = camel_case(s.name);
        let mut setters = format!("`{camel}({})`", java_type(s.kind));
        if s.kind == Kind::Millis {
            let short = camel_case(s.name.strip_suffix("_ms").unwrap_or(s.name));
            setters += &format!(", `{short}(Duration)`");
        }
        let mut doc = s.doc.to_string();
        for o in OPTIONS.iter().filter(|o| o.name.contains('_')) {
            doc = doc.replace(o.name, &format!("`{}`", camel_case(o.name)));
        }
        t += &format!(
            "| {setters} | {} | {} | {doc} |\n",
            show(&(s.default)(), s.kind),
            range(s.kind, s.min, s.max),
        );
    }
    t
}

fn stats() -> String {
    let mut t = crate::banner("//");
    t += "package dev.rl;\n\n/**\n * What {@link RateLimiter#stats()} reports: which path decides now, how often each path decided,\n * the local fallback's state machine, and Redis round trips: every field of rl-core's stats, in\n * its order. Counters count since the limiter was opened.\n *\n";
    for f in STATS_FIELDS {
        let doc = javadoc(f.doc, "OptionsBuilder");
        t += &format!(" * @param {} {doc}\n", camel_case(f.name));
    }
    t += " */\npublic record Stats(\n";
    let components: Vec<String> = STATS_FIELDS
        .iter()
        .map(|f| {
            let ty = match f.kind {
                StatsKind::Count => "long",
                StatsKind::Mode | StatsKind::Text => "String",
            };
            format!("        {ty} {}", camel_case(f.name))
        })
        .collect();
    t += &components.join(",\n");
    t += ") {}\n";
    t
}
