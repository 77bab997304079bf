//! The option, stats and mode tables against independent facts: the `Stats` struct's own
//! (derived) field list, the struct defaults, and the rules each row promises.

use rl_core::options::{camel_case, snake_case, spec, Value, OPTIONS};
use rl_core::{Error, ErrorKind, Mode, Options, Stats, STATS_FIELDS};

#[test]
fn stats_table_lists_every_field_of_the_struct_in_order() {
    let s = rl_core::Limiter::memory(Options::default())
        .unwrap()
        .stats();
    // `Stats` derives Debug, so its output lists the struct's fields as the compiler sees them.
    let debug = format!("{s:?}");
    let names: Vec<&str> = debug
        .trim_start_matches("Stats {")
        .split(", ")
        .filter_map(|part| part.trim().split(':').next())
        .collect();
    let table: Vec<&str> = STATS_FIELDS.iter().map(|f| f.name).collect();
    assert_eq!(names, table);
    let _: &Stats = &s;
}

#[test]
fn every_option_reads_back_its_documented_default() {
    let o = Options::default();
    for s in OPTIONS {
        assert_eq!(s.get(&o), (s.default)(), "{}", s.name);
    }
    assert!(o.validate().is_ok());
}

#[test]
fn set_checks_type_wholeness_and_range_and_names_the_key() {
    for s in OPTIONS {
        let mut o = Options::default();
        let (bad_type, err_kind_type) = match s.kind {
            rl_core::options::Kind::Text => (Value::Int(1), true),
            _ => (Value::Text("5".into()), true),
        };
        let e = o.set(s.name, bad_type).unwrap_err();
        assert_eq!(e.argument(), Some(s.name), "{e}");
        assert_eq!(matches!(e, Error::InvalidType { .. }), err_kind_type, "{e}");
        assert_eq!(e.kind(), ErrorKind::InvalidArgument);
        if matches!(
            s.kind,
            rl_core::options::Kind::Millis | rl_core::options::Kind::Count
        ) {
            for v in [
                Value::Int(s.max as i128 + 1),
                Value::Int(-1),
                Value::Float(1.5),
            ] {
                let e = o.set(s.name, v.clone()).unwrap_err();
                assert_eq!(e.argument(), Some(s.name), "{v:?}: {e}");
            }
            o.set(s.name, Value::Int(s.max as i128)).unwrap();
            assert_eq!(s.get(&o), Value::Int(s.max as i128));
            o.set(s.name, Value::Float(s.min as f64)).unwrap();
            assert_eq!(s.get(&o), Value::Int(s.min as i128));
        }
        o.set(s.name, Value::Null).unwrap();
        assert_eq!(
            s.get(&o),
            (s.default)(),
            "null restores {}'s default",
            s.name
        );
    }
}

#[test]
fn a_huge_float_is_shown_as_given() {
    let e = Options::default()
        .set("retry_delay_ms", Value::Float(1e300))
        .unwrap_err();
    assert!(e.to_string().contains("is 1000000000"), "{e}");
}

#[test]
fn unknown_options_and_cross_rules_are_refused_by_name() {
    let e = Options::default()
        .set("retry_delay", Value::Int(5))
        .unwrap_err();
    assert!(
        e.to_string().contains("\"retry_delay\" is not an option"),
        "{e}"
    );
    let e = Options::from_pairs([
        ("degrade_rtt_ms", Value::Int(3)),
        ("recover_rtt_ms", Value::Int(4)),
    ])
    .unwrap_err();
    assert_eq!(e.argument(), Some("recover_rtt_ms"));
    // A struct field set directly is checked by the same table, under the external name.
    let o = Options {
        retry_delay: std::time::Duration::from_secs(61),
        ..Options::default()
    };
    assert_eq!(o.validate().unwrap_err().argument(), Some("retry_delay_ms"));
}

#[test]
fn client_clock_sets_this_hosts_clock() {
    let o = Options::from_pairs([("client_clock", Value::Bool(true))]).unwrap();
    assert!(o.clock.is_some());
    assert_eq!(spec("client_clock").unwrap().get(&o), Value::Bool(true));
}

#[test]
fn spellings_round_trip_and_modes_are_listed_once() {
    for s in OPTIONS {
        assert_eq!(snake_case(&camel_case(s.name)), s.name);
    }
    assert_eq!(camel_case("retry_delay_ms"), "retryDelayMs");
    for m in Mode::ALL {
        assert_eq!(Mode::from_name(m.as_str()), Some(*m));
    }
}

#[test]
fn text_values_parse_by_kind_and_are_range_checked() {
    let mut o = Options::default();
    o.set_text("retry_delay_ms=250ms").unwrap();
    assert_eq!(o.retry_delay, std::time::Duration::from_millis(250));
    o.set_text("retry_delay_ms=20").unwrap();
    assert_eq!(o.retry_delay, std::time::Duration::from_millis(20));
    o.set_text("local_fallback=false").unwrap();
    assert!(!o.local_fallback);
    o.set_text("instances=4").unwrap();
    assert_eq!(o.instances, Some(4));
    o.set_text("instances=default").unwrap();
    assert_eq!(o.instances, None);
    o.set_text("key_prefix=gw:").unwrap();
    assert_eq!(o.key_prefix, "gw:");
    let e = o.set_text("local_fallback=yes").unwrap_err();
    assert!(
        matches!(
            e,
            Error::InvalidType {
                name: "local_fallback",
                ..
            }
        ),
        "{e}"
    );
    let e = o.set_text("degrade_rtt_ms=2m").unwrap_err();
    assert_eq!(e.argument(), Some("degrade_rtt_ms"), "{e}");
    let e = o.set_text("nope=1").unwrap_err();
    assert_eq!(e.argument(), Some("options"), "{e}");
    let e = o.set_text("retry_delay_ms").unwrap_err();
    assert_eq!(e.argument(), Some("options"), "{e}");
}

#[test]
fn a_config_file_spelling_finds_the_option_and_its_text_is_read_by_kind() {
    use rl_core::options::parse_as_spelled;
    for spelled in ["lease_ms", "lease-ms", "leaseMs"] {
        let (name, value) = parse_as_spelled(spelled, "2s").unwrap();
        assert_eq!(
            (name.as_str(), value),
            ("lease_ms", Value::Int(2000)),
            "{spelled}"
        );
    }
    let (name, value) = parse_as_spelled("local-fallback", "false").unwrap();
    assert_eq!(
        (name.as_str(), value),
        ("local_fallback", Value::Bool(false))
    );
    let e = parse_as_spelled("local-fallback", "off").unwrap_err();
    assert_eq!(e.argument(), Some("local_fallback"), "{e}");
    // An unknown name reaches `Options::set`, which refuses it listing the options.
    let (name, value) = parse_as_spelled("lease-time", "1s").unwrap();
    let e = Options::from_pairs([(name, value)]).unwrap_err();
    assert_eq!(e.argument(), Some("options"), "{e}");
    assert!(
        e.to_string().contains("\"lease-time\" is not an option"),
        "{e}"
    );
}
