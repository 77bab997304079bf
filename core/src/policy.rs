//! Policy strings: `"100/s; 5000/h"`, the notation of Python's `limits` and flask-limiter, parsed
//! once here so that every binding, middleware and `rl serve` reads the same text the same way and
//! refuses the same mistakes with the same message.
//!
//! Grammar (case-insensitive, spaces anywhere between tokens):
//! ```text
//! policies := policy ( (";" | "," | "|") policy )*
//! policy   := [ name ":" ] count ( "/" | "per" ) [ multiple ] unit
//! unit     := ms | millisecond(s) | s | sec | second(s) | m | min | minute(s) | h | hr | hour(s)
//!           | d | day(s) | month(s) | y | year(s)
//! ```
//! A month is 30 days and a year 360, as in `limits` (a year is then longer than the longest
//! window the limiter keeps, and is refused as such). `name` is what the IETF `RateLimit`
//! headers and the problem body call the policy; without one, a policy is named by its canonical
//! text (`100/1s`). Names are unique within one string, because a header that names two policies
//! alike cannot be read.

use std::fmt;

use crate::error::{Error, Result};
use crate::validate::{MAX_PERMITS, MAX_WINDOW_MS};

/// One limit: at most `limit` permits in any span of `window_ms`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Policy {
    /// What headers and problem bodies call this policy.
    pub name: String,
    pub limit: u64,
    pub window_ms: u64,
}

/// The longest policy name: a header is not the place for an essay, and a bounded name keeps
/// metric labels bounded.
pub const MAX_POLICY_NAME: usize = 64;

const UNITS: &[(&[&str], u64)] = &[
    (&["ms", "millisecond", "milliseconds"], 1),
    (&["s", "sec", "secs", "second", "seconds"], 1_000),
    (&["m", "min", "mins", "minute", "minutes"], 60_000),
    (&["h", "hr", "hrs", "hour", "hours"], 3_600_000),
    (&["d", "day", "days"], 86_400_000),
    (&["month", "months"], 30 * 86_400_000),
    (&["y", "year", "years"], 360 * 86_400_000),
];

impl Policy {
    /// A policy from its parts, checked like a parsed one; `name` defaults to the canonical text.
    pub fn new(name: Option<&str>, limit: u64, window_ms: u64) -> Result<Policy> {
        let text = format!("{limit}/{window_ms}ms");
        check_limit(&text, limit)?;
        check_window(&text, window_ms)?;
        let name = match name {
            Some(n) => check_name(&text, n)?,
            None => canonical(limit, window_ms),
        };
        Ok(Policy {
            name,
            limit,
            window_ms,
        })
    }

    /// Parses a string of one or more policies.
    pub fn parse_many(text: &str) -> Result<Vec<Policy>> {
        if text.trim().is_empty() {
            return Err(bad(
                text,
                "is empty; write a policy like 100/s or 5000 per hour",
            ));
        }
        let mut out: Vec<Policy> = Vec::new();
        for item in text.split([';', ',', '|']) {
            if item.trim().is_empty() {
                return Err(bad(text, "has an empty policy between separators"));
            }
            let p = parse_one(item)?;
            if out.iter().any(|q| q.name == p.name) {
                return Err(bad(
                    text,
                    &format!(
                        "names the policy {:?} twice; give each a distinct name: prefix",
                        p.name
                    ),
                ));
            }
            out.push(p);
        }
        Ok(out)
    }

    /// Checks a list of policies given as objects (not text) for one middleware: at least one,
    /// at most [`crate::MAX_RULES`] (one rule each per request), names distinct (the header
    /// fields and the problem body tell the policies apart by name). Errors name `policies`, so a
    /// mistake shows at setup rather than as every request's `rules` error.
    pub fn check_list(list: &[Policy]) -> Result<()> {
        if list.is_empty() {
            return Err(Error::invalid(
                "policies",
                "is empty; give at least one policy".to_string(),
            ));
        }
        if list.len() > crate::MAX_RULES {
            return Err(Error::invalid(
                "policies",
                format!(
                    "holds {} policies; at most {} are allowed",
                    list.len(),
                    crate::MAX_RULES
                ),
            ));
        }
        for (i, p) in list.iter().enumerate() {
            if list[..i].iter().any(|q| q.name == p.name) {
                return Err(Error::invalid(
                    "policies",
                    format!(
                        "names the policy {:?} twice; give each a distinct name",
                        p.name
                    ),
                ));
            }
        }
        Ok(())
    }

    /// Parses exactly one policy.
    pub fn parse(text: &str) -> Result<Policy> {
        let mut all = Policy::parse_many(text)?;
        if all.len() != 1 {
            return Err(bad(text, "holds several policies where one is expected"));
        }
        Ok(all.remove(0))
    }
}

impl fmt::Display for Policy {
    /// The text that parses back to this policy (`name: limit/window`).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let c = canonical(self.limit, self.window_ms);
        if self.name == c {
            f.write_str(&c)
        } else {
            write!(f, "{}: {c}", self.name)
        }
    }
}

/// `100/1s`, `10/90s`, `5/250ms`: the largest whole unit that divides the window.
fn canonical(limit: u64, window_ms: u64) -> String {
    for (unit, ms) in [
        ("d", 86_400_000),
        ("h", 3_600_000),
        ("m", 60_000),
        ("s", 1_000),
    ] {
        if window_ms.is_multiple_of(ms) {
            return format!("{limit}/{}{unit}", window_ms / ms);
        }
    }
    format!("{limit}/{window_ms}ms")
}

fn bad(text: &str, why: &str) -> Error {
    Error::invalid("policy", format!("{:?} {why}", text.trim()))
}

fn parse_one(item: &str) -> Result<Policy> {
    let (name, rest) = match item.split_once(':') {
        Some((n, r)) => (Some(n), r),
        None => (None, item),
    };
    let rest = rest.trim();
    let digits = rest
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(rest.len());
    if digits == 0 {
        return Err(bad(
            item,
            "does not start with a count; write a policy like 100/s or 5000 per hour",
        ));
    }
    let limit: u64 = rest[..digits]
        .parse()
        .map_err(|_| bad(item, &format!("has a count above {MAX_PERMITS}")))?;
    let after = rest[digits..].trim_start();
    let per = if let Some(r) = after.strip_prefix('/') {
        r
    } else if let Some(r) = strip_prefix_ignore_case(after, "per") {
        r
    } else {
        return Err(bad(
            item,
            "has no \"/\" or \"per\" between the count and the window",
        ));
    };
    let per = per.trim_start();
    let digits = per.find(|c: char| !c.is_ascii_digit()).unwrap_or(per.len());
    let multiple: u64 = if digits == 0 {
        1
    } else {
        per[..digits]
            .parse()
            .map_err(|_| bad(item, "has a window multiple too large to count"))?
    };
    let unit = per[digits..].trim();
    let scale = UNITS
        .iter()
        .find(|(names, _)| names.iter().any(|n| n.eq_ignore_ascii_case(unit)))
        .map(|(_, ms)| *ms)
        .ok_or_else(|| {
            bad(
                item,
                &format!(
                    "has the unit {unit:?}; use ms, s, m (minute), h, d, month or year, or their long names"
                ),
            )
        })?;
    if multiple == 0 {
        return Err(bad(item, "has a window of 0"));
    }
    let window_ms = multiple
        .checked_mul(scale)
        .filter(|w| *w <= MAX_WINDOW_MS)
        .ok_or_else(|| {
            bad(
                item,
                &format!("has a window longer than the longest kept, {MAX_WINDOW_MS} ms (30 days)"),
            )
        })?;
    check_limit(item, limit)?;
    let name = match name {
        Some(n) => check_name(item, n)?,
        None => canonical(limit, window_ms),
    };
    Ok(Policy {
        name,
        limit,
        window_ms,
    })
}

/// `text` after a leading `prefix` (ASCII, any case). Compared by bytes: slicing the text at
/// `prefix.len()` could cut a multi-byte character (`"1 a€/s"` once panicked here; found by
/// `fuzz/`'s `policy` target).
fn strip_prefix_ignore_case<'a>(text: &'a str, prefix: &str) -> Option<&'a str> {
    let head = text.as_bytes().get(..prefix.len())?;
    // An ASCII prefix that matches ends on a character boundary.
    head.eq_ignore_ascii_case(prefix.as_bytes())
        .then(|| &text[prefix.len()..])
}

fn check_limit(text: &str, limit: u64) -> Result<()> {
    if limit == 0 || limit > MAX_PERMITS {
        return Err(bad(
            text,
            &format!("has the count {limit}; it must be 1..={MAX_PERMITS}"),
        ));
    }
    Ok(())
}

fn check_window(text: &str, window_ms: u64) -> Result<()> {
    if window_ms == 0 || window_ms > MAX_WINDOW_MS {
        return Err(bad(
            text,
            &format!("has the window {window_ms} ms; it must be 1..={MAX_WINDOW_MS}"),
        ));
    }
    Ok(())
}

/// A name is printable ASCII without `"` or `\` (it travels as a Structured Fields String and as
/// a JSON string) and at most [`MAX_POLICY_NAME`] bytes.
fn check_name(text: &str, name: &str) -> Result<String> {
    let n = name.trim();
    if n.is_empty() {
        return Err(bad(text, "has an empty name before \":\""));
    }
    if n.len() > MAX_POLICY_NAME {
        return Err(bad(
            text,
            &format!("has a name longer than {MAX_POLICY_NAME} bytes"),
        ));
    }
    if let Some(c) = n
        .chars()
        .find(|c| !(' '..='~').contains(c) || *c == '"' || *c == '\\')
    {
        return Err(bad(
            text,
            &format!("has the character {c:?} in its name; names are printable ASCII without quotes or backslashes"),
        ));
    }
    Ok(n.to_string())
}

#[cfg(test)]
mod tests {
    use super::Policy;

    fn one(text: &str) -> (String, u64, u64) {
        let p = Policy::parse(text).unwrap_or_else(|e| panic!("{text}: {e}"));
        (p.name, p.limit, p.window_ms)
    }

    #[test]
    fn the_limits_notation() {
        assert_eq!(one("100/s"), ("100/1s".into(), 100, 1000));
        assert_eq!(one("100/second"), ("100/1s".into(), 100, 1000));
        assert_eq!(one("5 per minute"), ("5/1m".into(), 5, 60_000));
        assert_eq!(one("10 PER 2 Hours"), ("10/2h".into(), 10, 7_200_000));
        assert_eq!(one("1/3 days"), ("1/3d".into(), 1, 3 * 86_400_000));
        assert_eq!(one(" 7 / 250ms "), ("7/250ms".into(), 7, 250));
        assert_eq!(one("2/month"), ("2/30d".into(), 2, 30 * 86_400_000));
        assert_eq!(one("9/90s"), ("9/90s".into(), 9, 90_000));
        assert_eq!(one("burst: 100/s"), ("burst".into(), 100, 1000));
    }

    #[test]
    fn several_with_every_separator() {
        let all =
            Policy::parse_many("burst: 100/s; daily: 5000/day, 10/m | 1 per 2 seconds").unwrap();
        let got: Vec<_> = all
            .iter()
            .map(|p| (p.name.as_str(), p.limit, p.window_ms))
            .collect();
        assert_eq!(
            got,
            [
                ("burst", 100, 1000),
                ("daily", 5000, 86_400_000),
                ("10/1m", 10, 60_000),
                ("1/2s", 1, 2000)
            ]
        );
    }

    #[test]
    fn display_parses_back() {
        for text in ["100/s", "burst: 5/250ms", "3 per 7 minutes", "daily: 1/d"] {
            let p = Policy::parse(text).unwrap();
            assert_eq!(Policy::parse(&p.to_string()).unwrap(), p, "{text} -> {p}");
        }
    }

    #[test]
    fn mistakes_are_named() {
        for (text, says) in [
            ("", "is empty"),
            ("100", "no \"/\" or \"per\""),
            ("/s", "does not start with a count"),
            ("100/fortnight", "has the unit \"fortnight\""),
            ("0/s", "has the count 0"),
            ("100/0s", "window of 0"),
            ("1/year", "longer than the longest kept"),
            ("99999999999999999999999/s", "count above"),
            ("100/s;", "empty policy between separators"),
            ("a: 1/s; a: 2/m", "names the policy \"a\" twice"),
            ("1/s; 1/s", "names the policy \"1/1s\" twice"),
            (": 1/s", "empty name"),
            ("x\"y: 1/s", "in its name"),
            ("-5/s", "does not start with a count"),
            ("1.5/s", "no \"/\" or \"per\""),
        ] {
            let err = Policy::parse_many(text).expect_err(text).to_string();
            assert!(err.contains(says), "{text:?}: {err}");
            assert!(err.contains("`policy`"), "{text:?}: {err}");
        }
    }

    #[test]
    fn new_checks_like_parse() {
        assert_eq!(Policy::new(None, 5, 1500).unwrap().name, "5/1500ms");
        assert!(Policy::new(Some("a\\b"), 5, 1500).is_err());
        assert!(Policy::new(None, 0, 1500).is_err());
        assert!(Policy::new(None, 1, 0).is_err());
    }

    #[test]
    fn a_multi_byte_character_where_per_may_stand_is_refused_not_a_panic() {
        for text in ["1 a€/s", "1😀", "5 p€r s", "1 pe\u{e9}/s"] {
            let e = Policy::parse_many(text).unwrap_err();
            assert_eq!(e.argument(), Some("policy"), "{text}: {e}");
        }
        assert_eq!(Policy::parse("3 PER 2 s").unwrap().window_ms, 2000);
    }

    #[test]
    fn a_list_of_policies_is_checked_naming_policies() {
        let p = |name: &str| Policy::new(Some(name), 10, 1000).unwrap();
        let said = |list: &[Policy]| match Policy::check_list(list) {
            Err(crate::Error::InvalidArgument { name, message }) => (name, message),
            other => panic!("{other:?}"),
        };
        assert!(Policy::check_list(&[p("a"), p("b")]).is_ok());
        assert_eq!(said(&[]).0, "policies");
        assert!(said(&[]).1.contains("empty"));
        assert!(said(&[p("a"), p("b"), p("a")]).1.contains("\"a\" twice"));
        let many: Vec<Policy> = (0..=crate::MAX_RULES)
            .map(|i| p(&format!("p{i}")))
            .collect();
        assert!(said(&many).1.contains("at most 16"));
    }
}
