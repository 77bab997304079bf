//! Policy strings (`"burst: 100/s; 5000/h"`), parsed by the core's `Policy::parse_many` into an
//! opaque list the caller reads by index.

use std::ffi::{c_char, CString};
use std::panic::{catch_unwind, AssertUnwindSafe};

use rl_core::Policy;

use crate::errors::{invalid, rl_error, rl_status, Failure};
use crate::panic::boundary;
use crate::types::{non_null, opt_str};

/// A parsed policy string: one or more policies, in the string's order. Opaque; made by
/// `rl_policies_parse`, freed by `rl_policies_free`. Immutable, so it may be read from several
/// threads at once.
pub struct rl_policies {
    pub(crate) policies: Vec<Policy>,
    /// Each policy's name, NUL-terminated (names are printable ASCII, so never cut).
    names: Vec<CString>,
}

/// One policy of an `rl_policies`: at most `limit` permits in any span of `window_ms`.
/// Written by `rl_policies_get` into the caller's struct.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct rl_policy {
    /// What the RateLimit headers and the problem body call the policy: its name before ":" in
    /// the string, else its canonical text ("100/1s"). NUL-terminated printable ASCII, owned by
    /// the `rl_policies` and valid until `rl_policies_free`.
    pub name: *const c_char,
    pub limit: u64,
    pub window_ms: u64,
}

/// # Safety
/// `p` is NULL or a live `rl_policies`.
pub(crate) unsafe fn policies_ref<'a>(p: *const rl_policies) -> Result<&'a rl_policies, Failure> {
    non_null(p, "policies")?;
    // SAFETY: non-NULL; the caller promises it came from rl_policies_parse and was not freed.
    Ok(unsafe { &*p })
}

/// Parses a policy string, the notation of Python's `limits` and flask-limiter: policies
/// separated by ";", "," or "|", each `[name:] count (/ | per) [multiple] unit`, e.g.
/// "burst: 100/s; daily: 5000/day", "10 per 2 hours". Units: ms, s, m (minute), h, d, month (30
/// days), year (refused: longer than the longest window, 30 days), and their long names.
/// Names must be unique within the string.
///
/// - `text`: NUL-terminated UTF-8; must not be NULL; read during the call only.
/// - `out`: must not be NULL. On success `*out` is a new list the caller owns and frees with
///   `rl_policies_free`; on failure `*out` is set to NULL.
/// - `err`: as for `rl_limiter_open`.
///
/// Returns `RL_OK`, `RL_INVALID_ARGUMENT` (NULL `text` or `out`, or a string the core refuses:
/// the message, "invalid argument `policy`: ...", quotes the offending text and says what is
/// wrong), or `RL_PANIC`. Does no I/O. Thread-safe.
///
/// # Safety
/// `text` is NULL or NUL-terminated; `out` and `err` are NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn rl_policies_parse(
    text: *const c_char,
    out: *mut *mut rl_policies,
    err: *mut *mut rl_error,
) -> rl_status {
    boundary("rl_policies_parse", err, || {
        non_null(out, "out")?;
        // SAFETY: `out` is non-NULL and the caller promises it is writable.
        unsafe { *out = std::ptr::null_mut() };
        non_null(text, "text")?;
        // SAFETY: non-NULL and NUL-terminated by the caller's promise.
        let text = unsafe { opt_str(text, "text") }?.unwrap_or_default();
        let policies = Policy::parse_many(text)?;
        let names = policies
            .iter()
            .map(|p| {
                CString::new(p.name.as_str()).map_err(|_| {
                    Failure::Internal(format!(
                        "internal error: policy name {:?} holds a NUL (please report this)",
                        p.name
                    ))
                })
            })
            .collect::<Result<_, _>>()?;
        // SAFETY: as above.
        unsafe { *out = Box::into_raw(Box::new(rl_policies { policies, names })) };
        Ok(())
    })
}

/// How many policies `policies` holds; 0 for NULL. Never fails. Thread-safe.
///
/// # Safety
/// `policies` is NULL or live.
#[no_mangle]
pub unsafe extern "C" fn rl_policies_len(policies: *const rl_policies) -> usize {
    // SAFETY: forwarded from the caller.
    unsafe { policies_ref(policies) }.map_or(0, |p| p.policies.len())
}

/// Writes policy `index` (0-based, in the string's order) to `*out`; its `name` points into
/// `policies` and is valid until `rl_policies_free`.
///
/// `policies` and `out` must not be NULL; `out` is written on `RL_OK` only; `err` as for
/// `rl_limiter_open`. Returns `RL_OK`, `RL_INVALID_ARGUMENT` (NULL, or `index` not below
/// `rl_policies_len`) or `RL_PANIC`. Thread-safe.
///
/// # Safety
/// `policies` is NULL or live; `out` and `err` are NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn rl_policies_get(
    policies: *const rl_policies,
    index: usize,
    out: *mut rl_policy,
    err: *mut *mut rl_error,
) -> rl_status {
    boundary("rl_policies_get", err, || {
        // SAFETY: forwarded from the caller's promises above.
        let ps = unsafe { policies_ref(policies) }?;
        non_null(out, "out")?;
        let (Some(p), Some(name)) = (ps.policies.get(index), ps.names.get(index)) else {
            return Err(invalid(
                "index",
                format!("is {index}; the list holds {} policies", ps.policies.len()),
            ));
        };
        // SAFETY: non-NULL and writable by the caller's promise.
        unsafe {
            out.write(rl_policy {
                name: name.as_ptr(),
                limit: p.limit,
                window_ms: p.window_ms,
            })
        };
        Ok(())
    })
}

/// Frees a list from `rl_policies_parse` (and with it every `name` read from it). NULL is accepted
/// and does nothing; freeing twice, or using the list after, is undefined behaviour. Never fails.
///
/// # Safety
/// `policies` is NULL or a live list no other thread is using.
#[no_mangle]
pub unsafe extern "C" fn rl_policies_free(policies: *mut rl_policies) {
    if policies.is_null() {
        return;
    }
    // SAFETY: the caller promises a live list from Box::into_raw in rl_policies_parse.
    let owned = unsafe { Box::from_raw(policies) };
    let _ = catch_unwind(AssertUnwindSafe(move || drop(owned)));
}
