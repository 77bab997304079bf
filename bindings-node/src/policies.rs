//! Policy strings and the HTTP surface of a composite decision, all done by the core
//! (`rl_core::Policy::parse_many`, `rl_core::headers`): this module only converts JavaScript
//! values to the core's types and back, and the core's errors to the wrapper's classes.
//!
//! These are functions, not limiter methods, so each takes the wrapper's `makeError` (see
//! `errors`) to raise the same classes a limiter does.

use napi::bindgen_prelude::*;
use napi_derive::napi;
use rl_core::headers::{problem_body as core_problem_body, render};
use rl_core::{CompositeDecision, Decision, HeaderStyle, Mode, Policy};

use crate::convert::number_of;
use crate::errors::{thrown, ErrorArgs, PANIC_CODE};
use crate::NativeDecision;

/// One policy as JavaScript sees it (`parsePolicies`' result, `renderHeaders`' argument).
#[napi(object)]
pub struct NativePolicy {
    pub name: String,
    pub limit: f64,
    pub window_ms: f64,
}

/// A CompositeDecision as `acquireAll` resolves it, read back for rendering.
#[napi(object)]
pub struct NativeComposite {
    pub allowed: bool,
    pub retry_after_ms: f64,
    pub mode: String,
    pub now_ms: f64,
    pub decisions: Vec<NativeDecision>,
}

pub(crate) type MakeError<'a> = Function<'a, ErrorArgs, Unknown<'static>>;

fn invalid(name: &'static str, message: String) -> rl_core::Error {
    rl_core::Error::InvalidArgument { name, message }
}

/// Runs `body`, raising its core error (or a panic) as the wrapper's class.
pub(crate) fn guarded<T>(
    env: &Env,
    make_error: &MakeError<'_>,
    body: impl FnOnce() -> rl_core::Result<T>,
) -> Result<T> {
    let raise = |code: &str, message: String, argument: Option<String>| {
        let v = make_error.call(FnArgs::from((code.to_string(), message, argument, vec![])));
        thrown(env, v.map(|v| v.raw()))
    };
    match rl_core::unwind::call(body) {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(e)) => {
            let (code, argument, message) = crate::errors::describe(&e);
            Err(raise(code, message, argument))
        }
        Err(panic) => Err(raise(PANIC_CODE, panic, None)),
    }
}

pub(crate) fn to_js(p: &Policy) -> NativePolicy {
    NativePolicy {
        name: p.name.clone(),
        limit: p.limit as f64,
        window_ms: p.window_ms as f64,
    }
}

/// Parses a policy string (`"burst: 100/s; 5000 per hour"`) with the core's grammar.
#[napi(
    catch_unwind,
    ts_args_type = "text: string, makeError: (code: string, message: string, argument: string | null, details: number[]) => Error"
)]
pub fn parse_policies(
    env: Env,
    text: String,
    make_error: MakeError<'_>,
) -> Result<Vec<NativePolicy>> {
    guarded(&env, &make_error, || {
        Policy::parse_many(&text).map(|ps| ps.iter().map(to_js).collect())
    })
}

fn whole(name: &'static str, what: &str, v: f64) -> rl_core::Result<u64> {
    number_of(v).ok_or_else(|| {
        invalid(
            name,
            format!("{what} is {v}; must be a whole number between 0 and 2^53 - 1"),
        )
    })
}

pub(crate) fn policies(list: Vec<NativePolicy>) -> rl_core::Result<Vec<Policy>> {
    list.into_iter()
        .enumerate()
        .map(|(i, p)| {
            let limit = whole("policies", &format!("policy {i}'s limit"), p.limit)?;
            let window = whole("policies", &format!("policy {i}'s windowMs"), p.window_ms)?;
            Policy::new(Some(&p.name), limit, window).map_err(|e| match e {
                rl_core::Error::InvalidArgument { message, .. } => {
                    invalid("policies", format!("policy {i}: {message}"))
                }
                e => e,
            })
        })
        .collect()
}

/// A header style by name (`ietf`, `legacy`, `both`, `none`); the error names `style`.
pub(crate) fn header_style(style: &str) -> rl_core::Result<HeaderStyle> {
    HeaderStyle::from_name(style).ok_or_else(|| {
        let names: Vec<&str> = HeaderStyle::ALL.iter().map(|s| s.as_str()).collect();
        invalid(
            "style",
            format!("is {style:?}; must be one of {}", names.join(", ")),
        )
    })
}

fn mode(name: &str) -> rl_core::Result<Mode> {
    Mode::from_name(name).ok_or_else(|| {
        invalid(
            "decision",
            format!("has the mode {name:?}, which is not one of the core's modes"),
        )
    })
}

fn composite(c: NativeComposite) -> rl_core::Result<CompositeDecision> {
    let decisions = c
        .decisions
        .into_iter()
        .enumerate()
        .map(|(i, d)| {
            let n = |field: &str, v: f64| whole("decision", &format!("decisions[{i}].{field}"), v);
            Ok(Decision {
                allowed: d.allowed,
                remaining: n("remaining", d.remaining)?,
                used: n("used", d.used)?,
                retry_after_ms: n("retryAfterMs", d.retry_after_ms)?,
                reset_after_ms: n("resetAfterMs", d.reset_after_ms)?,
                mode: mode(&d.mode)?,
                now_ms: n("nowMs", d.now_ms)?,
            })
        })
        .collect::<rl_core::Result<Vec<_>>>()?;
    Ok(CompositeDecision {
        allowed: c.allowed,
        retry_after_ms: whole("decision", "retryAfterMs", c.retry_after_ms)?,
        mode: mode(&c.mode)?,
        now_ms: whole("decision", "nowMs", c.now_ms)?,
        decisions,
    })
}

/// The policies and the decision, paired: one policy per rule, in the rules' order.
fn paired(
    list: Vec<NativePolicy>,
    decision: NativeComposite,
) -> rl_core::Result<(Vec<Policy>, CompositeDecision)> {
    let ps = policies(list)?;
    let c = composite(decision)?;
    if ps.len() != c.decisions.len() {
        return Err(invalid(
            "policies",
            format!(
                "holds {} policies but the decision has {} rules; give one policy per rule, in the rules' order",
                ps.len(),
                c.decisions.len()
            ),
        ));
    }
    Ok((ps, c))
}

/// The response fields for a composite decision under `policies` (policy i describes rule i):
/// `[name, value]` pairs in the order to send them.
#[napi(
    catch_unwind,
    ts_args_type = "policies: NativePolicy[], decision: NativeComposite, style: string, makeError: (code: string, message: string, argument: string | null, details: number[]) => Error",
    ts_return_type = "Array<[string, string]>"
)]
pub fn render_headers(
    env: Env,
    policies: Vec<NativePolicy>,
    decision: NativeComposite,
    style: String,
    make_error: MakeError<'_>,
) -> Result<Vec<Vec<String>>> {
    guarded(&env, &make_error, || {
        let style = header_style(&style)?;
        let (ps, c) = paired(policies, decision)?;
        let pairs: Vec<(&Policy, &Decision)> = ps.iter().zip(&c.decisions).collect();
        Ok(render(&pairs, c.allowed, c.retry_after_ms, style)
            .into_iter()
            .map(|(n, v)| vec![n.to_string(), v])
            .collect())
    })
}

/// The RFC 9457 `application/problem+json` body of a 429 for a denied composite decision.
#[napi(
    catch_unwind,
    ts_args_type = "policies: NativePolicy[], decision: NativeComposite, makeError: (code: string, message: string, argument: string | null, details: number[]) => Error"
)]
pub fn problem_body(
    env: Env,
    policies: Vec<NativePolicy>,
    decision: NativeComposite,
    make_error: MakeError<'_>,
) -> Result<String> {
    guarded(&env, &make_error, || {
        let (ps, c) = paired(policies, decision)?;
        let pairs: Vec<(&Policy, &Decision)> = ps.iter().zip(&c.decisions).collect();
        Ok(core_problem_body(&pairs, c.retry_after_ms))
    })
}
