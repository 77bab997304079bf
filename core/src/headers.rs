//! HTTP response fields for a decision, rendered once here for every middleware and `rl serve`:
//! the IETF `RateLimit-Policy` / `RateLimit` fields (draft-ietf-httpapi-ratelimit-headers-11,
//! both RFC 9651 Structured Field Lists), `Retry-After` (RFC 9110) on a denial, the RFC 9457
//! problem body with the draft's `violated-policies` member, and, for clients that expect them,
//! the legacy `X-RateLimit-*` fields.
//!
//! What the numbers mean for a sliding window (the draft leaves the algorithm open):
//! - `q` is the policy's limit and `w` its window in whole seconds, rounded up (a 250 ms window
//!   is advertised as `w=1`; the field has no finer unit).
//! - `r` is what is left in the window after this request.
//! - `t` is, for a policy that admitted the request, the seconds until its window is empty again
//!   (`reset_after_ms`), so that `r` is back to `q`; for a policy that denied it, the seconds
//!   until this request would fit (`retry_after_ms`), which is when it has room again.
//! - `Retry-After` is the seconds until every policy fits the request, rounded up: it is never
//!   earlier than any denying policy's `t`, so a client obeying either field does not come back
//!   too soon.
//!
//! Integers are clamped to 999,999,999,999,999, the largest a Structured Field Integer holds.

use crate::composite::CompositeDecision;
use crate::decision::Decision;
use crate::policy::Policy;

/// Which fields to render.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum HeaderStyle {
    /// `RateLimit-Policy` and `RateLimit` (the IETF draft).
    #[default]
    Ietf,
    /// `X-RateLimit-Limit`, `X-RateLimit-Remaining`, `X-RateLimit-Reset` (seconds) for the
    /// policy closest to denying.
    Legacy,
    /// Both sets.
    Both,
    /// No rate-limit fields (a denial still gets `Retry-After`).
    None,
}

impl HeaderStyle {
    pub const ALL: &'static [HeaderStyle] = &[
        HeaderStyle::Ietf,
        HeaderStyle::Legacy,
        HeaderStyle::Both,
        HeaderStyle::None,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            HeaderStyle::Ietf => "ietf",
            HeaderStyle::Legacy => "legacy",
            HeaderStyle::Both => "both",
            HeaderStyle::None => "none",
        }
    }

    pub fn from_name(name: &str) -> Option<HeaderStyle> {
        HeaderStyle::ALL
            .iter()
            .copied()
            .find(|s| s.as_str() == name)
    }
}

/// The problem type the draft registers for a request over quota.
pub const QUOTA_EXCEEDED_TYPE: &str =
    "https://iana.org/assignments/http-problem-types#quota-exceeded";
/// The media type of [`problem_body`].
pub const PROBLEM_CONTENT_TYPE: &str = "application/problem+json";

const SF_INTEGER_MAX: u64 = 999_999_999_999_999;

fn secs_up(ms: u64) -> u64 {
    ms.div_ceil(1000).min(SF_INTEGER_MAX)
}

/// Whether this policy denied the request (a composite call denies only through its rules).
fn denies(d: &Decision) -> bool {
    !d.allowed && d.retry_after_ms > 0
}

fn t_of(d: &Decision) -> u64 {
    if d.allowed {
        secs_up(d.reset_after_ms)
    } else {
        secs_up(d.retry_after_ms)
    }
}

/// The response fields for one request decided under `policies` (one decision per policy, in
/// the same order), as `(name, value)` pairs. `allowed` and `retry_after_ms` are the overall
/// decision's.
pub fn render(
    policies: &[(&Policy, &Decision)],
    allowed: bool,
    retry_after_ms: u64,
    style: HeaderStyle,
) -> Vec<(&'static str, String)> {
    let policy = (ietf(style) && !policies.is_empty())
        .then(|| policy_field(policies.iter().map(|(p, _)| *p)));
    render_with(policies, policy, allowed, retry_after_ms, style)
}

fn ietf(style: HeaderStyle) -> bool {
    matches!(style, HeaderStyle::Ietf | HeaderStyle::Both)
}

/// `RateLimit-Policy`'s value: it depends on the policies alone.
fn policy_field<'a>(policies: impl Iterator<Item = &'a Policy>) -> String {
    let mut out = String::with_capacity(64);
    for (i, p) in policies.enumerate() {
        if i > 0 {
            out.push_str(", ");
        }
        member(
            &mut out,
            &p.name,
            ";q=",
            p.limit.min(SF_INTEGER_MAX),
            ";w=",
            secs_up(p.window_ms),
        );
    }
    out
}

/// One list member, `"name";<a><x>;<b><y>`. Written with `push_str` and `itoa` rather than
/// `format!`: a middleware renders these on every request, mostly with cold caches between
/// requests, where the formatting machinery's code costs more than the work.
fn member(out: &mut String, name: &str, a: &str, x: u64, b: &str, y: u64) {
    let mut n = itoa::Buffer::new();
    out.push('"');
    out.push_str(name);
    out.push('"');
    out.push_str(a);
    out.push_str(n.format(x));
    out.push_str(b);
    out.push_str(n.format(y));
}

fn number(x: u64) -> String {
    itoa::Buffer::new().format(x).to_owned()
}

/// [`render`] with `RateLimit-Policy`'s value given (rendered ahead by [`Prepared`]).
fn render_with(
    policies: &[(&Policy, &Decision)],
    policy: Option<String>,
    allowed: bool,
    retry_after_ms: u64,
    style: HeaderStyle,
) -> Vec<(&'static str, String)> {
    let mut out = Vec::with_capacity(5);
    if let Some(policy) = policy {
        let mut state = String::with_capacity(32 * policies.len());
        for (i, (p, d)) in policies.iter().enumerate() {
            if i > 0 {
                state.push_str(", ");
            }
            member(
                &mut state,
                &p.name,
                ";r=",
                d.remaining.min(SF_INTEGER_MAX),
                ";t=",
                t_of(d),
            );
        }
        out.push(("RateLimit-Policy", policy));
        out.push(("RateLimit", state));
    }
    if matches!(style, HeaderStyle::Legacy | HeaderStyle::Both) {
        if let Some((p, d)) = closest(policies) {
            out.push(("X-RateLimit-Limit", number(p.limit)));
            out.push(("X-RateLimit-Remaining", number(d.remaining)));
            out.push(("X-RateLimit-Reset", number(t_of(d))));
        }
    }
    if !allowed {
        out.push(("Retry-After", number(secs_up(retry_after_ms).max(1))));
    }
    out
}

/// The policy closest to denying: a denying one with the longest wait, else the one with the
/// least left relative to its limit.
fn closest<'a>(policies: &[(&'a Policy, &'a Decision)]) -> Option<(&'a Policy, &'a Decision)> {
    let worst_denial = policies
        .iter()
        .filter(|(_, d)| denies(d))
        .max_by_key(|(_, d)| d.retry_after_ms);
    worst_denial
        .or_else(|| {
            policies.iter().min_by(|(pa, da), (pb, db)| {
                // remaining/limit compared without floats.
                (da.remaining as u128 * pb.limit as u128)
                    .cmp(&(db.remaining as u128 * pa.limit as u128))
            })
        })
        .map(|(p, d)| (*p, *d))
}

/// The names of the policies that denied.
pub fn violated<'a>(policies: &[(&'a Policy, &'a Decision)]) -> Vec<&'a str> {
    policies
        .iter()
        .filter(|(_, d)| denies(d))
        .map(|(p, _)| p.name.as_str())
        .collect()
}

/// The RFC 9457 body of a 429: the draft's quota-exceeded problem type with `violated-policies`.
pub fn problem_body(policies: &[(&Policy, &Decision)], retry_after_ms: u64) -> String {
    let names = violated(policies);
    serde_json::json!({
        "type": QUOTA_EXCEEDED_TYPE,
        "title": "Request cannot be satisfied as assigned quota has been exceeded",
        "status": 429,
        "detail": format!(
            "over the limit of {}; retry in {} s",
            names.join(", "),
            secs_up(retry_after_ms).max(1)
        ),
        "violated-policies": names,
    })
    .to_string()
}

/// What a middleware sends for one composite decision: the fields of [`render`] and, on a
/// denial, the [`problem_body`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Response {
    pub headers: Vec<(&'static str, String)>,
    /// The `application/problem+json` body; `None` when the request was allowed.
    pub body: Option<String>,
}

/// A middleware's policies and header style, checked once at setup, with `RateLimit-Policy`
/// rendered then: it depends on the policies alone, so a request renders only its decision's
/// fields. Every binding's `PreparedPolicies` holds one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Prepared {
    policies: Vec<Policy>,
    style: HeaderStyle,
    /// `RateLimit-Policy`'s value, when `style` renders the IETF fields.
    policy_field: Option<String>,
}

impl Prepared {
    /// `policies` checked as one middleware's list ([`Policy::check_list`]: errors name
    /// `policies`).
    pub fn new(policies: Vec<Policy>, style: HeaderStyle) -> crate::Result<Prepared> {
        Policy::check_list(&policies)?;
        let policy_field = ietf(style).then(|| policy_field(policies.iter()));
        Ok(Prepared {
            policies,
            style,
            policy_field,
        })
    }

    pub fn policies(&self) -> &[Policy] {
        &self.policies
    }

    pub fn style(&self) -> HeaderStyle {
        self.style
    }

    /// `RateLimit-Policy`'s value, the same for every response (`None` when the style renders
    /// no IETF fields).
    pub fn policy_field(&self) -> Option<&str> {
        self.policy_field.as_deref()
    }

    /// The rules of one request: one per policy on `key`, each taking `cost`.
    pub fn rules(&self, key: &[u8], cost: u64) -> Vec<crate::Rule> {
        self.policies
            .iter()
            .map(|p| crate::Rule::from_policy(p, key, cost))
            .collect()
    }

    /// What a middleware sends for a decision of [`Prepared::rules`]: [`render`]'s fields and,
    /// on a denial, the [`problem_body`]. An error only for a decision not made from these
    /// policies (not one decision per policy): a bug in the caller.
    pub fn respond(&self, decision: &CompositeDecision) -> crate::Result<Response> {
        if self.policies.len() != decision.decisions.len() {
            return Err(crate::Error::InvalidArgument {
                name: "policies",
                message: format!(
                    "internal: a decision of {} rules answered {} policies (please report this)",
                    decision.decisions.len(),
                    self.policies.len()
                ),
            });
        }
        let pairs: Vec<(&Policy, &Decision)> =
            self.policies.iter().zip(&decision.decisions).collect();
        let headers = render_with(
            &pairs,
            self.policy_field.clone(),
            decision.allowed,
            decision.retry_after_ms,
            self.style,
        );
        let body = (!decision.allowed).then(|| problem_body(&pairs, decision.retry_after_ms));
        Ok(Response { headers, body })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decision::Mode;

    fn d(allowed: bool, remaining: u64, retry: u64, reset: u64) -> Decision {
        Decision {
            allowed,
            remaining,
            used: 0,
            retry_after_ms: retry,
            reset_after_ms: reset,
            mode: Mode::Memory,
            now_ms: 0,
        }
    }

    #[test]
    fn ietf_fields_for_two_policies() {
        let burst = Policy::parse("burst: 100/m").unwrap();
        let daily = Policy::parse("daily: 1000/d").unwrap();
        let (a, b) = (d(true, 50, 0, 29_001), d(true, 900, 0, 86_400_000));
        let h = render(&[(&burst, &a), (&daily, &b)], true, 0, HeaderStyle::Ietf);
        assert_eq!(
            h,
            [
                (
                    "RateLimit-Policy",
                    "\"burst\";q=100;w=60, \"daily\";q=1000;w=86400".to_string()
                ),
                (
                    "RateLimit",
                    "\"burst\";r=50;t=30, \"daily\";r=900;t=86400".to_string()
                ),
            ]
        );
    }

    #[test]
    fn a_denial_gets_retry_after_no_earlier_than_t_and_a_problem_body() {
        let burst = Policy::parse("burst: 10/s").unwrap();
        let daily = Policy::parse("daily: 1000/d").unwrap();
        let (a, b) = (d(false, 0, 1500, 1900), d(true, 3, 0, 50_000));
        let h = render(
            &[(&burst, &a), (&daily, &b)],
            false,
            1500,
            HeaderStyle::Both,
        );
        let get = |n: &str| h.iter().find(|(k, _)| *k == n).map(|(_, v)| v.clone());
        assert_eq!(get("Retry-After").as_deref(), Some("2"));
        assert_eq!(
            get("RateLimit").as_deref(),
            Some("\"burst\";r=0;t=2, \"daily\";r=3;t=50")
        );
        assert_eq!(get("X-RateLimit-Limit").as_deref(), Some("10"));
        assert_eq!(get("X-RateLimit-Reset").as_deref(), Some("2"));
        let body: serde_json::Value =
            serde_json::from_str(&problem_body(&[(&burst, &a), (&daily, &b)], 1500)).unwrap();
        assert_eq!(body["violated-policies"], serde_json::json!(["burst"]));
        assert_eq!(body["type"], QUOTA_EXCEEDED_TYPE);
        assert_eq!(body["status"], 429);
    }

    #[test]
    fn sub_second_windows_and_huge_numbers() {
        let p = Policy::new(None, crate::MAX_PERMITS, 250).unwrap();
        let x = d(true, crate::MAX_PERMITS, 0, 1);
        let h = render(&[(&p, &x)], true, 0, HeaderStyle::Ietf);
        assert_eq!(h[0].1, "\"1000000000000000/250ms\";q=999999999999999;w=1");
        assert_eq!(h[1].1, "\"1000000000000000/250ms\";r=999999999999999;t=1");
        assert!(render(&[(&p, &x)], true, 0, HeaderStyle::None).is_empty());
    }

    #[test]
    fn legacy_names_the_policy_closest_to_denying() {
        let a = Policy::parse("a: 100/s").unwrap();
        let b = Policy::parse("b: 10/m").unwrap();
        let (da, db) = (d(true, 40, 0, 1000), d(true, 2, 0, 60_000));
        let h = render(&[(&a, &da), (&b, &db)], true, 0, HeaderStyle::Legacy);
        assert_eq!(
            h,
            [
                ("X-RateLimit-Limit", "10".to_string()),
                ("X-RateLimit-Remaining", "2".to_string()),
                ("X-RateLimit-Reset", "60".to_string())
            ]
        );
    }

    #[test]
    fn prepared_responds_with_renders_fields_and_the_body_only_on_a_denial() {
        let burst = Policy::parse("burst: 10/s").unwrap();
        let daily = Policy::parse("daily: 1000/d").unwrap();
        let denied = CompositeDecision {
            allowed: false,
            retry_after_ms: 1500,
            mode: Mode::Memory,
            now_ms: 0,
            decisions: vec![d(false, 0, 1500, 1900), d(true, 3, 0, 50_000)],
        };
        let allowed = CompositeDecision {
            allowed: true,
            retry_after_ms: 0,
            decisions: vec![d(true, 9, 0, 1000), d(true, 900, 0, 86_400_000)],
            ..denied.clone()
        };
        for &style in HeaderStyle::ALL {
            let p = Prepared::new(vec![burst.clone(), daily.clone()], style).unwrap();
            for c in [&denied, &allowed] {
                let pairs = [(&burst, &c.decisions[0]), (&daily, &c.decisions[1])];
                let r = p.respond(c).unwrap();
                assert_eq!(
                    r.headers,
                    render(&pairs, c.allowed, c.retry_after_ms, style),
                    "{style:?}"
                );
                let body = (!c.allowed).then(|| problem_body(&pairs, c.retry_after_ms));
                assert_eq!(r.body, body, "{style:?}");
            }
            let field = matches!(style, HeaderStyle::Ietf | HeaderStyle::Both)
                .then_some("\"burst\";q=10;w=1, \"daily\";q=1000;w=86400");
            assert_eq!(p.policy_field(), field, "{style:?}");
        }
        let p = Prepared::new(vec![burst.clone()], HeaderStyle::Ietf).unwrap();
        let e = p.respond(&denied).unwrap_err();
        assert!(e.to_string().contains("policies"), "{e}");
        assert_eq!(p.rules(b"k", 3), [crate::Rule::new("k", 10, 1000, 3)]);
    }

    #[test]
    fn prepared_refuses_what_check_list_refuses_naming_policies() {
        let a = Policy::parse("a: 10/s").unwrap();
        for list in [vec![], vec![a.clone(), a.clone()]] {
            let e = Prepared::new(list, HeaderStyle::Ietf).unwrap_err();
            assert!(
                matches!(
                    &e,
                    crate::Error::InvalidArgument {
                        name: "policies",
                        ..
                    }
                ),
                "{e:?}"
            );
        }
    }
}
