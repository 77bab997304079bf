//! HTTP response fields and the problem body for an `rl_acquire_all` result, rendered by the core
//! (`rl_core::headers`): the IETF `RateLimit-Policy` / `RateLimit` fields, `Retry-After` on a
//! denial, the legacy `X-RateLimit-*` fields on request, and the RFC 9457 body of a 429.

use std::ffi::{c_char, c_int, CString};
use std::panic::{catch_unwind, AssertUnwindSafe};

use rl_core::headers::{problem_body, render};
use rl_core::{CompositeDecision, Decision, HeaderStyle, Policy};

use crate::composite::{read_composite, rl_composite};
use crate::errors::{invalid, rl_error, rl_status, Failure};
use crate::panic::boundary;
use crate::policies::{policies_ref, rl_policies};
use crate::types::non_null;

/// Which fields `rl_headers_render` writes; the values are `rl_core::HeaderStyle::ALL`'s order.
/// Passed in as an `int`, so any value is safe (an unknown one is refused).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum rl_header_style {
    /// `RateLimit-Policy` and `RateLimit` (draft-ietf-httpapi-ratelimit-headers).
    RL_HEADER_STYLE_IETF = 0,
    /// `X-RateLimit-Limit`, `X-RateLimit-Remaining`, `X-RateLimit-Reset` (seconds) for the policy
    /// closest to denying.
    RL_HEADER_STYLE_LEGACY = 1,
    /// Both sets.
    RL_HEADER_STYLE_BOTH = 2,
    /// No rate-limit fields (a denial still gets `Retry-After`).
    RL_HEADER_STYLE_NONE = 3,
}

/// A list of response fields: `(name, value)` pairs of NUL-terminated ASCII, in the order to send
/// them. Opaque; made by `rl_headers_render`, freed by `rl_headers_free`. Immutable, so it may be
/// read from several threads at once.
pub struct rl_headers {
    fields: Vec<(CString, CString)>,
}

/// The policies paired with the result's decisions, which must be as many, in the same order.
fn pairs<'a>(
    policies: &'a [Policy],
    c: &'a CompositeDecision,
) -> Result<Vec<(&'a Policy, &'a Decision)>, Failure> {
    if policies.len() != c.decisions.len() {
        return Err(invalid(
            "policies",
            format!(
                "holds {} policies but the result has {} decisions; give one policy per rule, in the rules' order",
                policies.len(),
                c.decisions.len()
            ),
        ));
    }
    Ok(policies.iter().zip(&c.decisions).collect())
}

fn c_string(s: String, what: &str) -> Result<CString, Failure> {
    CString::new(s).map_err(|_| {
        Failure::Internal(format!(
            "internal error: the {what} holds a NUL (please report this)"
        ))
    })
}

/// Renders the response fields for a request decided by `rl_acquire_all` under `policies`: policy
/// `i` describes rule `i` (build the rules from the policies, in their order: `limit` and
/// `window_ms` from policy `i`).
///
/// For `RL_HEADER_STYLE_IETF` (RFC 9651 lists; `q` the limit, `w` the window in seconds rounded
/// up, `r` what is left, `t` seconds until the policy's window is empty (allowed) or until it has
/// room (denied)):
/// ```text
/// RateLimit-Policy: "burst";q=100;w=60, "daily";q=1000;w=86400
/// RateLimit: "burst";r=50;t=30, "daily";r=900;t=86400
/// ```
/// A denied result also gets `Retry-After` (whole seconds, at least 1, never earlier than any
/// denying policy's `t`); an allowed one never does.
///
/// - `policies`, `composite`: must not be NULL; `composite` is a result `rl_acquire_all` wrote
///   (read during the call only).
/// - `style`: an `rl_header_style` value.
/// - `out`: must not be NULL. On success `*out` is a new list the caller owns and frees with
///   `rl_headers_free`; on failure `*out` is set to NULL.
/// - `err`: as for `rl_limiter_open`.
///
/// Returns `RL_OK`, `RL_INVALID_ARGUMENT` (a NULL argument; "policies" when their count is not
/// the result's `n_decisions`; "style" for an unknown style; "composite" for a bad `struct_size`)
/// or `RL_PANIC`. Does no I/O. Thread-safe.
///
/// # Safety
/// `policies` is NULL or live; `composite` is NULL or an `rl_composite` of `struct_size` bytes
/// whose `decisions` holds `n_decisions` readable entries; `out` and `err` are NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn rl_headers_render(
    policies: *const rl_policies,
    composite: *const rl_composite,
    style: c_int,
    out: *mut *mut rl_headers,
    err: *mut *mut rl_error,
) -> rl_status {
    boundary("rl_headers_render", err, || {
        non_null(out, "out")?;
        // SAFETY (every block below): forwarded from the caller's promises above.
        unsafe { *out = std::ptr::null_mut() };
        let ps = unsafe { policies_ref(policies) }?;
        non_null(composite, "composite")?;
        let c = unsafe { read_composite(composite, "composite") }?;
        let style = usize::try_from(style)
            .ok()
            .and_then(|i| HeaderStyle::ALL.get(i).copied())
            .ok_or_else(|| {
                invalid(
                    "style",
                    format!("is {style}; use an rl_header_style (RL_HEADER_STYLE_IETF ..)"),
                )
            })?;
        let fields = render(
            &pairs(&ps.policies, &c)?,
            c.allowed,
            c.retry_after_ms,
            style,
        )
        .into_iter()
        .map(|(n, v)| {
            Ok((
                c_string(n.into(), "field name")?,
                c_string(v, "field value")?,
            ))
        })
        .collect::<Result<_, Failure>>()?;
        unsafe { *out = Box::into_raw(Box::new(rl_headers { fields })) };
        Ok(())
    })
}

/// How many fields `headers` holds; 0 for NULL. Never fails. Thread-safe.
///
/// # Safety
/// `headers` is NULL or live.
#[no_mangle]
pub unsafe extern "C" fn rl_headers_len(headers: *const rl_headers) -> usize {
    if headers.is_null() {
        return 0;
    }
    // SAFETY: the caller promises a live list.
    unsafe { (*headers).fields.len() }
}

/// Stores field `index`'s name ("RateLimit-Policy", "RateLimit", "X-RateLimit-Limit",
/// "X-RateLimit-Remaining", "X-RateLimit-Reset", "Retry-After") in `*name` and its value in
/// `*value`: NUL-terminated ASCII owned by `headers`, valid until `rl_headers_free`.
///
/// `headers`, `name` and `value` must not be NULL; they are written on `RL_OK` only; `err` as for
/// `rl_limiter_open`. Returns `RL_OK`, `RL_INVALID_ARGUMENT` (NULL, or `index` not below
/// `rl_headers_len`) or `RL_PANIC`. Thread-safe.
///
/// # Safety
/// `headers` is NULL or live; `name`, `value` and `err` are NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn rl_headers_get(
    headers: *const rl_headers,
    index: usize,
    name: *mut *const c_char,
    value: *mut *const c_char,
    err: *mut *mut rl_error,
) -> rl_status {
    boundary("rl_headers_get", err, || {
        non_null(headers, "headers")?;
        non_null(name, "name")?;
        non_null(value, "value")?;
        // SAFETY: non-NULL and live by the caller's promise.
        let fields = unsafe { &(*headers).fields };
        let (n, v) = fields.get(index).ok_or_else(|| {
            invalid(
                "index",
                format!("is {index}; the list holds {} fields", fields.len()),
            )
        })?;
        // SAFETY: non-NULL and writable by the caller's promise.
        unsafe {
            name.write(n.as_ptr());
            value.write(v.as_ptr());
        }
        Ok(())
    })
}

/// Frees a list from `rl_headers_render` (and every name and value read from it). NULL is
/// accepted and does nothing; freeing twice, or using the list after, is undefined behaviour.
/// Never fails.
///
/// # Safety
/// `headers` is NULL or a live list no other thread is using.
#[no_mangle]
pub unsafe extern "C" fn rl_headers_free(headers: *mut rl_headers) {
    if headers.is_null() {
        return;
    }
    // SAFETY: the caller promises a live list from Box::into_raw in rl_headers_render.
    let owned = unsafe { Box::from_raw(headers) };
    let _ = catch_unwind(AssertUnwindSafe(move || drop(owned)));
}

/// Writes the RFC 9457 `application/problem+json` body of a 429 for a denied `rl_acquire_all`
/// result to `*out`: the draft's quota-exceeded problem type, status 429, a detail, and
/// `violated-policies` naming the policies that denied, e.g.
/// `{"detail":"over the limit of burst; retry in 2 s","status":429,"title":"...","type":
/// "https://iana.org/assignments/http-problem-types#quota-exceeded","violated-policies":["burst"]}`.
///
/// `policies` and `composite` as for `rl_headers_render` (the same count and order). `out` must not
/// be NULL: on success `*out` is a new NUL-terminated UTF-8 string the caller owns and frees with
/// `rl_string_free`; on failure it is set to NULL. `err` as for `rl_limiter_open`. Returns `RL_OK`,
/// `RL_INVALID_ARGUMENT` (as for `rl_headers_render`) or `RL_PANIC`. Does no I/O. Thread-safe.
///
/// # Safety
/// As for `rl_headers_render`.
#[no_mangle]
pub unsafe extern "C" fn rl_problem_body(
    policies: *const rl_policies,
    composite: *const rl_composite,
    out: *mut *mut c_char,
    err: *mut *mut rl_error,
) -> rl_status {
    boundary("rl_problem_body", err, || {
        non_null(out, "out")?;
        // SAFETY (every block below): forwarded from the caller's promises above.
        unsafe { *out = std::ptr::null_mut() };
        let ps = unsafe { policies_ref(policies) }?;
        non_null(composite, "composite")?;
        let c = unsafe { read_composite(composite, "composite") }?;
        let body = c_string(
            problem_body(&pairs(&ps.policies, &c)?, c.retry_after_ms),
            "problem body",
        )?;
        unsafe { *out = body.into_raw() };
        Ok(())
    })
}

/// Frees a string this library returned for the caller to own (`rl_problem_body`). NULL is
/// accepted and does nothing; freeing twice, or a string from anywhere else, is undefined
/// behaviour. Never fails.
///
/// # Safety
/// `s` is NULL or a live string from this library, not used after this call.
#[no_mangle]
pub unsafe extern "C" fn rl_string_free(s: *mut c_char) {
    if s.is_null() {
        return;
    }
    // SAFETY: the caller promises a string from CString::into_raw in this library.
    let owned = unsafe { CString::from_raw(s) };
    let _ = catch_unwind(AssertUnwindSafe(move || drop(owned)));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn styles_are_the_cores_in_order() {
        use rl_header_style::*;
        let c = [
            RL_HEADER_STYLE_IETF,
            RL_HEADER_STYLE_LEGACY,
            RL_HEADER_STYLE_BOTH,
            RL_HEADER_STYLE_NONE,
        ];
        assert_eq!(c.len(), HeaderStyle::ALL.len());
        for (c, s) in c.iter().zip(HeaderStyle::ALL) {
            let name = format!("{c:?}")
                .trim_start_matches("RL_HEADER_STYLE_")
                .to_lowercase();
            assert_eq!(name, s.as_str());
            assert_eq!(HeaderStyle::ALL[*c as usize], *s);
        }
    }
}
