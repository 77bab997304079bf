//! Status codes and error objects: how a core error (or a caught panic) reaches C.

use std::ffi::{c_char, c_int, CStr, CString};
use std::panic::{catch_unwind, AssertUnwindSafe};

use rl_core::{Error, ErrorKind};

/// The outcome of a fallible call. `RL_OK` is 0; every other value is an error. New codes may be
/// added in later versions: treat unknown non-zero values as errors (`rl_status_name` names them
/// "unknown").
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum rl_status {
    /// Success.
    RL_OK = 0,
    /// The caller passed a value the limiter cannot honour (NULL pointer, empty or oversized key,
    /// limit/window/cost out of range, bad URL or option). Nothing was sent to the backend.
    RL_INVALID_ARGUMENT = 1,
    /// The backend could not be reached in time (refused, timed out, dropped). Retrying later may
    /// succeed.
    RL_BACKEND_UNAVAILABLE = 2,
    /// The backend answered with an error (wrong type at the key, script error, auth, OOM ...).
    RL_BACKEND_ERROR = 3,
    /// With `rl_options.client_clock` set: this host's clock is further than
    /// `max_clock_skew_ms` from Redis TIME, so the call was refused.
    RL_CLOCK_SKEW = 4,
    /// An internal error: a panic inside the library was caught at the boundary, or the core
    /// returned something this build of the binding does not know. Please report it.
    RL_PANIC = 5,
}

/// An error's details: a status code and a message. Opaque; made by the library when the caller
/// asks for it through an `rl_error **` out-parameter, owned by the caller from then on and freed
/// with `rl_error_free`. Immutable, so it may be read from several threads.
pub struct rl_error {
    pub(crate) status: rl_status,
    pub(crate) message: CString,
}

/// What went wrong inside one call, before it becomes a status and a message.
pub(crate) enum Failure {
    Core(Error),
    Internal(String),
}

impl From<Error> for Failure {
    fn from(e: Error) -> Self {
        Failure::Core(e)
    }
}

impl Failure {
    pub(crate) fn status(&self) -> rl_status {
        match self {
            Failure::Core(e) => match e.kind() {
                ErrorKind::InvalidArgument => rl_status::RL_INVALID_ARGUMENT,
                ErrorKind::BackendUnavailable => rl_status::RL_BACKEND_UNAVAILABLE,
                ErrorKind::Backend => rl_status::RL_BACKEND_ERROR,
                ErrorKind::ClockSkew => rl_status::RL_CLOCK_SKEW,
            },
            Failure::Internal(_) => rl_status::RL_PANIC,
        }
    }

    pub(crate) fn message(&self) -> String {
        match self {
            Failure::Core(e) => e.to_string(),
            Failure::Internal(m) => m.clone(),
        }
    }
}

/// The core's own error for a bad argument of a C function (a pointer, a buffer size), so
/// messages read the same as from every binding.
pub(crate) fn invalid(name: &'static str, message: impl Into<String>) -> Failure {
    Failure::Core(Error::InvalidArgument {
        name,
        message: message.into(),
    })
}

/// The status code stored in `err`; `RL_OK` for NULL. Thread-safe.
///
/// # Safety
/// `err` is NULL or a live error from this library.
#[no_mangle]
pub unsafe extern "C" fn rl_error_code(err: *const rl_error) -> rl_status {
    if err.is_null() {
        return rl_status::RL_OK;
    }
    // SAFETY: the caller promises a live error.
    unsafe { (*err).status }
}

/// The error's message: NUL-terminated UTF-8 naming what went wrong and the offending value. By
/// status:
/// - `RL_INVALID_ARGUMENT`: "invalid argument `PARAM`: WHAT", e.g.
///   "invalid argument `window_ms`: is 0; must be between 1 and 2592000000 (30 days)",
///   "invalid argument `key`: must not be NULL", "invalid argument `url`: is not valid UTF-8 ...";
///   an option is named as its `rl_options` field (see there);
/// - `RL_BACKEND_UNAVAILABLE`: "backend unavailable: ..."; `RL_BACKEND_ERROR`: "backend error: ...";
/// - `RL_CLOCK_SKEW`: "clock skew: ..."; `RL_PANIC`: "internal error: ...".
///
/// Owned by `err` and valid until `rl_error_free(err)`. For NULL, returns "" (a static string).
/// Thread-safe.
///
/// # Safety
/// `err` is NULL or a live error from this library.
#[no_mangle]
pub unsafe extern "C" fn rl_error_message(err: *const rl_error) -> *const c_char {
    if err.is_null() {
        return c"".as_ptr();
    }
    // SAFETY: the caller promises a live error.
    unsafe { (*err).message.as_ptr() }
}

/// Frees an error from an `rl_error **` out-parameter. NULL is accepted and does nothing; freeing
/// twice is undefined behaviour. Never fails.
///
/// # Safety
/// `err` is NULL or a live error from this library, not used after this call.
#[no_mangle]
pub unsafe extern "C" fn rl_error_free(err: *mut rl_error) {
    if err.is_null() {
        return;
    }
    // SAFETY: the caller promises it came from Box::into_raw in `panic::fail` and is freed once.
    let owned = unsafe { Box::from_raw(err) };
    let _ = catch_unwind(AssertUnwindSafe(move || drop(owned)));
}

/// The name of a status: "ok", "invalid_argument", "backend_unavailable", "backend_error",
/// "clock_skew", "panic"; "unknown" for any other value. Returns a static string: never NULL,
/// never freed. Thread-safe.
#[no_mangle]
pub extern "C" fn rl_status_name(status: c_int) -> *const c_char {
    status_name(status).as_ptr()
}

fn status_name(status: c_int) -> &'static CStr {
    use rl_status::*;
    match status {
        s if s == RL_OK as c_int => c"ok",
        s if s == RL_INVALID_ARGUMENT as c_int => c"invalid_argument",
        s if s == RL_BACKEND_UNAVAILABLE as c_int => c"backend_unavailable",
        s if s == RL_BACKEND_ERROR as c_int => c"backend_error",
        s if s == RL_CLOCK_SKEW as c_int => c"clock_skew",
        s if s == RL_PANIC as c_int => c"panic",
        _ => c"unknown",
    }
}

/// The message of `e`, which is freed (for tests).
#[cfg(test)]
pub(crate) fn message(e: *mut rl_error) -> String {
    let s = unsafe { CStr::from_ptr(rl_error_message(e)) }
        .to_string_lossy()
        .into_owned();
    unsafe { rl_error_free(e) };
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_names_match_the_core() {
        for (s, kind) in [
            (rl_status::RL_INVALID_ARGUMENT, ErrorKind::InvalidArgument),
            (
                rl_status::RL_BACKEND_UNAVAILABLE,
                ErrorKind::BackendUnavailable,
            ),
            (rl_status::RL_BACKEND_ERROR, ErrorKind::Backend),
            (rl_status::RL_CLOCK_SKEW, ErrorKind::ClockSkew),
        ] {
            assert_eq!(status_name(s as c_int).to_str().unwrap(), kind.as_str());
        }
        assert_eq!(status_name(-1).to_str().unwrap(), "unknown");
    }
}
