//! The boundary every fallible export goes through: no panic unwinds into C, and a failure
//! becomes a status plus (if the caller asked) an `rl_error`.

use std::ffi::CString;
use std::panic::{catch_unwind, AssertUnwindSafe};

use crate::errors::{rl_error, rl_status, Failure};

fn panic_message(payload: &(dyn std::any::Any + Send)) -> &str {
    if let Some(s) = payload.downcast_ref::<&str>() {
        s
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s
    } else {
        "non-string panic payload"
    }
}

/// Runs `body` under `catch_unwind`, stores the error for the caller if asked, returns the
/// status. The success path is kept to a few instructions; everything about failures lives in the
/// cold `fail`.
#[inline(always)]
pub(crate) fn boundary(
    function: &'static str,
    err: *mut *mut rl_error,
    body: impl FnOnce() -> Result<(), Failure>,
) -> rl_status {
    match catch_unwind(AssertUnwindSafe(body)) {
        Ok(Ok(())) => {
            if !err.is_null() {
                // SAFETY: the caller promises a non-NULL `err` points to a writable `rl_error *`.
                unsafe { *err = std::ptr::null_mut() };
            }
            rl_status::RL_OK
        }
        Ok(Err(f)) => fail(err, f),
        Err(payload) => fail(
            err,
            Failure::Internal(format!(
                "internal error: panic in {function}: {} (please report this)",
                panic_message(&*payload)
            )),
        ),
    }
}

/// Turns a failure into its status and, if the caller asked, an `rl_error`.
#[cold]
#[inline(never)]
fn fail(err: *mut *mut rl_error, failure: Failure) -> rl_status {
    let status = failure.status();
    if !err.is_null() {
        // Building the error allocates; keep even that from unwinding into C.
        let made = catch_unwind(AssertUnwindSafe(|| {
            let message = CString::new(failure.message().replace('\0', "\\0")).unwrap_or_default();
            Box::into_raw(Box::new(rl_error { status, message }))
        }))
        .unwrap_or(std::ptr::null_mut());
        // SAFETY: the caller promises a non-NULL `err` points to a writable `rl_error *`.
        unsafe { *err = made };
    }
    status
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::errors::{invalid, message, rl_error_code};
    use std::ptr::null_mut;

    #[test]
    fn a_panic_becomes_rl_panic_with_a_message() {
        let mut e = null_mut();
        let st = boundary("rl_test", &mut e, || panic!("boom"));
        assert_eq!(st, rl_status::RL_PANIC);
        assert_eq!(unsafe { rl_error_code(e) }, rl_status::RL_PANIC);
        let m = message(e);
        assert!(m.contains("panic in rl_test: boom"), "{m}");
        // Without an error out-param the status alone comes back.
        assert_eq!(
            boundary("rl_test", null_mut(), || panic!("boom")),
            rl_status::RL_PANIC
        );
    }

    #[test]
    fn nul_bytes_in_messages_are_escaped() {
        let mut e = null_mut();
        let st = boundary("rl_test", &mut e, || Err(invalid("key", "has \0 inside")));
        assert_eq!(st, rl_status::RL_INVALID_ARGUMENT);
        assert_eq!(message(e), "invalid argument `key`: has \\0 inside");
    }
}
