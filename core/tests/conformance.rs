//! Every row of `tests/conformance/invalid.json` that the Rust API can express, through rl_core:
//! the error kind and the argument it names, refused before any I/O (memory backend, a closed
//! port, and a real Redis whose command counts and keyspace must not move). Also lints the table
//! itself, so the four binding suites can trust its shape: known fields, calls, tags and value
//! encodings, and every tag a value implies present in the row's `needs`.

mod common;

use std::collections::{BTreeMap, BTreeSet};

use common::*;
use rl_core::options::Value;
use rl_core::{blocking, Error, ErrorKind, Limiter, Options, Rule};
use serde_json::{Map, Value as Json};

const TABLE: &str = include_str!("../../tests/conformance/invalid.json");

/// Every tag, and whether the core can express it in option values (`options::Value`, when
/// `values` is true) and elsewhere (`u64` arguments, `&[u8]` keys, a `&str` URL); `Err` is the
/// reason it cannot.
fn support(tag: &str, values: bool) -> Result<(), &'static str> {
    match (tag, values) {
        ("beyond_i64" | "inexact_double" | "zero_option", _) => Ok(()),
        ("dynamic_types" | "float_numbers" | "negative" | "beyond_u64", true) => Ok(()),
        ("unknown_option", _) => Ok(()),
        ("dynamic_types", false) => Err("call arguments and the URL are typed (u64, &[u8], &str)"),
        ("float_numbers", false) => Err("call arguments are u64, not floats"),
        ("negative" | "beyond_u64", false) => Err("call arguments are u64"),
        ("compound_values", _) => Err("options::Value has no list or map"),
        ("null_key", _) => Err("a Rust key cannot be null"),
        ("distinct_float", _) => {
            Err("Value::Float is a JavaScript-style number, not a distinct float type")
        }
        ("byte_strings", _) => Err("URLs and prefixes are &str, always UTF-8"),
        ("lone_surrogate", _) => Err("a Rust string cannot hold a lone surrogate"),
        _ => panic!("unknown need {tag:?}: add it to every suite (tests/conformance/README.md)"),
    }
}

const ROW_FIELDS: [&str; 8] = [
    "id",
    "call",
    "args",
    "error",
    "argument",
    "needs",
    "shows",
    "message_lacks",
];

/// A value as the core sees it: an integer (wide), a float, text, bytes, bool, or something the
/// core has no type for.
#[derive(Debug, Clone)]
enum V {
    Null,
    Bool(bool),
    Int(i128),
    /// Above i128: only the lint looks at it.
    Huge,
    Float(f64),
    Text(String),
    Bytes(Vec<u8>),
    Utf16,
    Compound,
}

fn decode(j: &Json) -> V {
    match j {
        Json::Null => V::Null,
        Json::Bool(b) => V::Bool(*b),
        Json::Number(n) => {
            let i = n.as_i64().unwrap_or_else(|| {
                panic!("plain number {n} must be an integer; use {{\"float\": ..}}")
            });
            assert!(
                i.unsigned_abs() <= 1 << 53,
                "{n}: integers beyond 2^53 are written {{\"int\": \"{n}\"}}"
            );
            V::Int(i as i128)
        }
        Json::String(s) => V::Text(s.clone()),
        Json::Array(_) => V::Compound,
        Json::Object(o) => {
            assert_eq!(o.len(), 1, "a tagged value has one key: {j}");
            let (tag, v) = o.iter().next().unwrap();
            match tag.as_str() {
                "int" => {
                    let s = v.as_str().expect("int is a decimal string");
                    s.parse::<i128>().map_or(V::Huge, V::Int)
                }
                "float" => V::Float(match v {
                    Json::String(s) if s == "nan" => f64::NAN,
                    Json::String(s) if s == "inf" => f64::INFINITY,
                    Json::String(s) if s == "-inf" => f64::NEG_INFINITY,
                    Json::Number(n) => n.as_f64().unwrap(),
                    _ => panic!("bad float {v}"),
                }),
                "bytes_hex" => V::Bytes(hex(v.as_str().expect("hex string"))),
                "utf16" => {
                    let s = v.as_str().unwrap();
                    assert!(
                        s.len().is_multiple_of(4) && hex(s).len() == s.len() / 2,
                        "{s}"
                    );
                    V::Utf16
                }
                "repeat" => {
                    let a = v.as_array().expect("repeat: [value, times]");
                    let n = a[1].as_u64().expect("times") as usize;
                    match decode(&a[0]) {
                        V::Text(s) => V::Text(s.repeat(n)),
                        V::Bytes(b) => V::Bytes(b.repeat(n)),
                        other => panic!("repeat of {other:?}"),
                    }
                }
                "object" => {
                    assert!(v.is_object(), "{j}");
                    V::Compound
                }
                _ => panic!("unknown value tag {tag:?} in {j}"),
            }
        }
    }
}

fn hex(s: &str) -> Vec<u8> {
    assert!(s.len().is_multiple_of(2), "{s}");
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).expect("hex"))
        .collect()
}

/// The tags a value needs whatever parameter it goes to.
fn implied(param: &str, v: &V, needs: &mut BTreeSet<&'static str>) {
    match v {
        V::Int(n) => {
            if *n < 0 {
                needs.insert("negative");
            }
            if *n > i64::MAX as i128 || *n < i64::MIN as i128 {
                needs.insert("beyond_i64");
            }
            if *n > u64::MAX as i128 {
                needs.insert("beyond_u64");
            }
            if (*n as f64) as i128 != *n {
                needs.insert("inexact_double");
            }
        }
        V::Huge => {
            needs.extend(["beyond_i64", "beyond_u64", "inexact_double"]);
        }
        V::Compound => {
            needs.extend(["compound_values", "dynamic_types"]);
        }
        V::Utf16 => {
            needs.insert("lone_surrogate");
        }
        V::Null if param == "key" => {
            needs.insert("null_key");
        }
        V::Bytes(b) if param != "key" && std::str::from_utf8(b).is_err() => {
            needs.insert("byte_strings");
        }
        _ => {}
    }
}

#[derive(Clone)]
struct Row {
    id: String,
    call: String,
    args: Map<String, Json>,
    error: String,
    argument: String,
    needs: Vec<String>,
    shows: Option<String>,
    lacks: Option<String>,
}

fn table() -> (Json, Vec<Row>) {
    let doc: Json = serde_json::from_str(TABLE).expect("invalid.json parses");
    let rows = doc["rows"]
        .as_array()
        .expect("rows")
        .iter()
        .map(|r| {
            let o = r.as_object().expect("row is an object");
            for k in o.keys() {
                assert!(
                    ROW_FIELDS.contains(&k.as_str()),
                    "unknown row field {k:?} in {r}"
                );
            }
            let s = |k: &str| o.get(k).and_then(Json::as_str).map(String::from);
            Row {
                id: s("id").expect("id"),
                call: s("call").expect("call"),
                args: o["args"].as_object().expect("args").clone(),
                error: s("error").expect("error"),
                argument: s("argument").expect("argument"),
                needs: o.get("needs").map_or(vec![], |n| {
                    n.as_array()
                        .expect("needs is a list")
                        .iter()
                        .map(|t| t.as_str().unwrap().to_string())
                        .collect()
                }),
                shows: s("shows"),
                lacks: s("message_lacks"),
            }
        })
        .collect();
    (doc, rows)
}

#[test]
fn the_table_is_well_formed() {
    let (doc, rows) = table();
    let declared: BTreeSet<&str> = doc["needs"]
        .as_object()
        .expect("needs")
        .keys()
        .map(String::as_str)
        .collect();
    for tag in &declared {
        // Panics for a tag this suite does not know.
        let _ = support(tag, true);
    }
    let mut ids = BTreeSet::new();
    for r in &rows {
        assert!(ids.insert(r.id.clone()), "duplicate id {}", r.id);
        let params: Vec<&str> = doc["calls"][&r.call]["params"]
            .as_array()
            .unwrap_or_else(|| panic!("{}: unknown call {}", r.id, r.call))
            .iter()
            .map(|p| p.as_str().unwrap())
            .collect();
        assert!(
            ["invalid_argument", "invalid_type"].contains(&r.error.as_str()),
            "{}: error {}",
            r.id,
            r.error
        );
        for t in &r.needs {
            assert!(
                declared.contains(t.as_str()),
                "{}: undeclared need {t}",
                r.id
            );
        }
        let mut want = BTreeSet::new();
        for (p, v) in &r.args {
            assert!(
                params.contains(&p.as_str()),
                "{}: {p} is no parameter of {}",
                r.id,
                r.call
            );
            if p == "rules" {
                for rule in v.as_array().expect("rules is a list of rule objects") {
                    for (f, v) in rule.as_object().expect("a rule is an object") {
                        assert!(
                            ["key", "limit", "window_ms", "cost"].contains(&f.as_str()),
                            "{}: {f} is no field of a rule",
                            r.id
                        );
                        implied(f, &decode(v), &mut want);
                    }
                }
            } else if p == "options" {
                for (name, v) in v.as_object().expect("options is an object") {
                    let v = decode(v);
                    if matches!(v, V::Int(0)) {
                        want.insert("zero_option");
                    }
                    implied(name, &v, &mut want);
                }
            } else {
                implied(p, &decode(v), &mut want);
            }
        }
        let have: BTreeSet<&str> = r.needs.iter().map(String::as_str).collect();
        assert!(
            want.is_subset(&have),
            "{}: needs {want:?}, has {have:?}",
            r.id
        );
    }
}

fn check(r: &Row, e: Error, where_: &str) {
    let ctx = format!("{} ({where_}): {e}", r.id);
    assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{ctx}");
    match r.error.as_str() {
        "invalid_type" => assert!(
            matches!(e, Error::InvalidType { .. }),
            "{ctx}: want InvalidType"
        ),
        _ => assert!(
            matches!(e, Error::InvalidArgument { .. }),
            "{ctx}: want InvalidArgument"
        ),
    }
    assert_eq!(e.argument(), Some(r.argument.as_str()), "{ctx}");
    let text = e.to_string();
    if let Some(s) = &r.shows {
        assert!(text.contains(s.as_str()), "{ctx}: should show {s:?}");
    }
    if let Some(s) = &r.lacks {
        assert!(!text.contains(s.as_str()), "{ctx}: must not show {s:?}");
    }
}

fn option_value(v: &V) -> Value {
    match v.clone() {
        V::Null => Value::Null,
        V::Bool(b) => Value::Bool(b),
        V::Int(n) => Value::Int(n),
        V::Float(f) => Value::Float(f),
        V::Text(s) => Value::Text(s),
        other => panic!("no Value for {other:?} (the row's needs should have skipped it)"),
    }
}

fn open_row(r: &Row) -> Error {
    let pairs: Vec<(String, Value)> =
        r.args
            .get("options")
            .and_then(Json::as_object)
            .map_or(vec![], |o| {
                o.iter()
                    .map(|(k, v)| (k.clone(), option_value(&decode(v))))
                    .collect()
            });
    let url = r.args.get("url").map(|u| match decode(u) {
        V::Text(s) => s,
        other => panic!("url {other:?}"),
    });
    let opened = Options::from_pairs(pairs).and_then(|o| Limiter::open(url.as_deref(), o));
    match opened {
        Ok(_) => panic!("{}: opened", r.id),
        Err(e) => e,
    }
}

/// A call row's arguments: key bytes and u64 numbers, with the table's defaults.
fn call_args(doc: &Json, r: &Row) -> (Vec<u8>, u64, u64, u64) {
    let mut a = doc["calls"][&r.call]["defaults"]
        .as_object()
        .unwrap()
        .clone();
    a.extend(r.args.clone());
    let key = match decode(&a["key"]) {
        V::Text(s) => s.into_bytes(),
        V::Bytes(b) => b,
        other => panic!("{}: key {other:?}", r.id),
    };
    let num = |p: &str| {
        a.get(p).map_or(1, |v| match decode(v) {
            V::Int(n) => u64::try_from(n).unwrap_or_else(|_| panic!("{}: {p} {n}", r.id)),
            other => panic!("{}: {p} {other:?}", r.id),
        })
    };
    (key, num("limit"), num("window_ms"), num("cost"))
}

/// A policy string the core must refuse (`Policy::parse_many`).
fn policies_row(r: &Row) -> Error {
    match decode(&r.args["text"]) {
        V::Text(text) => rl_core::Policy::parse_many(&text).expect_err(&r.id),
        other => panic!("{}: text {other:?}", r.id),
    }
}

/// A composite row's rules and group (`tests/conformance/README.md`, *Composite rows*).
fn composite_args(doc: &Json, r: &Row) -> (Vec<Rule>, Option<Vec<u8>>) {
    let defaults = doc["calls"]["acquire"]["defaults"].as_object().unwrap();
    let absent = Json::Array(vec![Json::Object(Map::new())]);
    let rules = r.args.get("rules").unwrap_or(&absent);
    let rules = rules
        .as_array()
        .expect("rules")
        .iter()
        .map(|rule| {
            let mut a = defaults.clone();
            a.extend(rule.as_object().expect("rule").clone());
            let mut row = Row {
                args: a,
                ..r.clone()
            };
            row.call = "acquire".into();
            let (key, limit, window, cost) = call_args(doc, &row);
            Rule::new(key, limit, window, cost)
        })
        .collect();
    let group = r.args.get("group").map(|g| match decode(g) {
        V::Text(s) => s.into_bytes(),
        V::Bytes(b) => b,
        other => panic!("{}: group {other:?}", r.id),
    });
    (rules, group)
}

/// The options a composite row opens its limiter with (on Redis only), if any.
fn row_options(r: &Row) -> Option<Options> {
    let o = r.args.get("options")?.as_object().expect("options");
    let mut pairs: Vec<(String, Value)> = vec![("local_fallback".into(), Value::Bool(false))];
    pairs.extend(o.iter().map(|(k, v)| (k.clone(), option_value(&decode(v)))));
    Some(Options::from_pairs(pairs).expect("a composite row's options are valid"))
}

fn call_row(doc: &Json, l: &blocking::Limiter, r: &Row) -> Error {
    if r.call == "acquire_all" {
        let (rules, group) = composite_args(doc, r);
        return l.acquire_all(&rules, group.as_deref()).expect_err(&r.id);
    }
    let (key, limit, window, cost) = call_args(doc, r);
    let result = match r.call.as_str() {
        "acquire" => l.acquire(&key, limit, window, cost),
        "peek" => l.peek(&key, limit, window),
        "reset" => l.reset(&key).map(|()| panic!("{}: reset succeeded", r.id)),
        c => panic!("unknown call {c}"),
    };
    result.expect_err(&r.id)
}

/// Lines of `INFO commandstats` except INFO's own, which our looking changes.
fn commands_other_than_info(server: &rl_harness::RedisServer) -> Vec<String> {
    let info = cmd(server, &[b"INFO", b"commandstats"]);
    let text = info.as_str().unwrap().to_string();
    text.lines()
        .filter(|l| l.starts_with("cmdstat_") && !l.starts_with("cmdstat_info:"))
        .map(String::from)
        .collect()
}

#[test]
fn every_expressible_row_fails_as_the_table_says_before_any_io() {
    let (doc, rows) = table();
    let server = server();
    let before = commands_other_than_info(&server);
    let memory = blocking::Limiter::open(Some("memory://"), strict()).unwrap();
    let closed = blocking::Limiter::open(Some("redis://127.0.0.1:1/"), strict()).unwrap();
    let redis = blocking_with(&server, strict());
    let mut asserted = 0;
    let mut skipped: BTreeMap<String, (usize, &str)> = BTreeMap::new();
    for r in &rows {
        let open = r.call == "open";
        // Options are Values; a URL that is not text is as inexpressible as a call's bad types.
        let values = open && r.args.get("url").is_none_or(Json::is_string);
        let why = r
            .needs
            .iter()
            .find_map(|t| support(t, values).err().map(|w| (t, w)));
        if let Some((tag, why)) = why {
            skipped.entry(tag.clone()).or_insert((0, why)).0 += 1;
            continue;
        }
        if open {
            check(r, open_row(r), "open");
        } else if r.call == "parse_policies" {
            check(r, policies_row(r), "parse_policies");
        } else if let Some(options) = row_options(r) {
            let l = blocking_with(&server, options);
            check(r, call_row(&doc, &l, r), "redis, the row's options");
        } else {
            for (name, l) in [
                ("memory", &memory),
                ("closed port", &closed),
                ("redis", &redis),
            ] {
                check(r, call_row(&doc, l, r), name);
            }
        }
        asserted += 1;
    }
    assert_eq!(
        commands_other_than_info(&server),
        before,
        "no command reached Redis"
    );
    assert_eq!(dbsize(&server), 0);
    let skipped_total: usize = skipped.values().map(|(n, _)| n).sum();
    println!("core: {asserted} rows asserted, {skipped_total} skipped");
    for (tag, (n, why)) in &skipped {
        println!("  skipped {n} needing {tag}: {why}");
    }
    assert_eq!(asserted + skipped_total, rows.len());
    assert!(asserted > 100, "{asserted}");
}
