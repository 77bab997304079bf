//! The policies file: ratelimit's schema accepted, mistakes refused with the line and reason.

use std::path::PathBuf;

use rl_serve::config::{load, ConfigError};
use rl_serve::metrics::Metrics;

fn write(name: &str, text: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("rl-serve-config-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

fn refused(name: &str, text: &str) -> ConfigError {
    let p = write(name, text);
    load(&p, &Metrics::default()).expect_err("must be refused")
}

#[test]
fn an_unknown_key_is_refused_with_its_line() {
    let e = refused(
        "unknown.yaml",
        "domain: d\ndescriptors:\n  - key: a\n    rate_limit:\n      unit: second\n      requests_per_unit: 1\n      burst: 5\n",
    );
    assert_eq!(e.line, Some(7), "{e}");
    assert!(e.reason.contains("unknown field `burst`"), "{e}");
    let e = refused("unknown2.yaml", "domain: d\ndescriptor:\n  - key: a\n");
    assert_eq!(e.line, Some(2), "{e}");
    assert!(e.reason.contains("unknown field `descriptor`"), "{e}");
    assert!(
        e.to_string()
            .starts_with(&format!("{}:2:", e.file.display())),
        "{e}"
    );
}

#[test]
fn bad_values_are_refused_with_their_line_and_reason() {
    let cases: &[(&str, usize, &str)] = &[
        (
            "domain: d\ndescriptors:\n  - key: a\n    rate_limit:\n      unit: fortnight\n      requests_per_unit: 1\n",
            5,
            "invalid rate limit unit \"fortnight\"",
        ),
        (
            "domain: d\ndescriptors:\n  - key: a\n    rate_limit:\n      unit: year\n      requests_per_unit: 1\n",
            3,
            "30 days",
        ),
        (
            "domain: d\ndescriptors:\n  - key: a\n    rate_limit:\n      unlimited: true\n      unit: second\n",
            3,
            "unlimited",
        ),
        (
            "domain: d\ndescriptors:\n  - key: a\n  - key: a\n",
            3,
            "duplicate descriptor \"a\"",
        ),
        (
            "domain: d\ndescriptors:\n  - key: a\n    value: v\n    rate_limit:\n      requests_per_unit: 3\n",
            3,
            "needs a unit",
        ),
        ("domain: d\ndescriptors:\n  - key: a\n    share_threshold: true\n", 3, "share_threshold"),
        ("domain: d\n---\ndomain: d\n", 3, "duplicate domain"),
        ("domain: d\ndescriptors:\n  - key: [1]\n", 3, "expected a string"),
        ("domain: d\ndescriptors: [\n", 3, ""),
    ];
    for (i, (text, line, reason)) in cases.iter().enumerate() {
        let e = refused(&format!("bad{i}.yaml"), text);
        eprintln!("case {i}: {e}");
        assert_eq!(e.line, Some(*line), "case {i}: {e}");
        assert!(e.reason.contains(reason), "case {i}: {e}");
    }
}

#[test]
fn ratelimits_schema_loads() {
    let p = write(
        "ok.yaml",
        r#"
domain: rl
descriptors:
  - key: category
    value: account
    rate_limit:
      replaces:
        - name: bkthomps
      unit: MINUTE
      requests_per_unit: 4
  - key: foo
    detailed_metric: true
    value_to_metric: true
    metadata: {anything: [1, 2]}
    rate_limit: {unit: minute, requests_per_unit: 2}
    descriptors:
      - key: bar
        value: banned
        rate_limit: {name: banned_limit, unit: minute, requests_per_unit: 0}
      - key: baz
        value: shady
        shadow_mode: true
        quota_mode: false
        rate_limit: {unit: minute, requests_per_unit: 3}
      - key: files*
        share_threshold: true
        rate_limit: {unlimited: true}
  - key: port
    value: 8080
    rate_limit: {window_ms: 250, requests_per_unit: 5}
---
domain: other
descriptors:
"#,
    );
    let p = load(&p, &Metrics::default()).unwrap();
    assert_eq!(p.domains.len(), 2);
    assert_eq!(p.count(), 6);
}

#[test]
fn a_directory_holds_one_domain_per_file_and_refuses_a_domain_twice() {
    let dir = std::env::temp_dir().join(format!("rl-serve-config-dir-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let a = "domain: a\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 1}\n";
    std::fs::write(dir.join("a.yaml"), a).unwrap();
    std::fs::write(dir.join("b.yml"), a.replace("domain: a", "domain: b")).unwrap();
    std::fs::write(dir.join("notes.txt"), "not a policy").unwrap();
    let p = load(&dir, &Metrics::default()).unwrap();
    assert_eq!(p.domains.len(), 2);
    assert_eq!(p.files.len(), 2);
    std::fs::write(dir.join("c.yaml"), a).unwrap();
    let e = load(&dir, &Metrics::default()).unwrap_err();
    assert!(e.file.ends_with("c.yaml"), "{e}");
    assert!(e.reason.contains("duplicate domain \"a\""), "{e}");
}
