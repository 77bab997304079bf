//! Panics at the bindings' edges. A panic must never cross into a foreign runtime (unwinding out
//! of an `extern "C"` function aborts the process) nor silently end a task whose caller waits on
//! it (a promise or asyncio future that never settles, a Node process kept alive forever). The
//! bindings run their entry points under [`call`] and the futures they hand to the runtime under
//! [`CatchUnwind`], and turn the panic's [`message`] into their language's error.
//!
//! [`test_panic`] is the test suites' way to make a call panic on demand. It does nothing unless
//! the crate is built with the `test-panic` feature, which only the bindings' test scripts enable.

use std::any::Any;
use std::future::Future;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::pin::Pin;
use std::task::{Context, Poll};

/// The text of a panic, as the bindings' errors carry it.
pub fn message(payload: Box<dyn Any + Send>) -> String {
    let what = if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "(no message)".to_string()
    };
    format!("panic in the rl native library (a bug in rl, please report it): {what}")
}

/// Runs `f`; a panic becomes `Err(message)`. The limiter stays in use afterwards: the core's locks
/// recover from poisoning (`unwrap_or_else(into_inner)`), so later calls still run.
pub fn call<T>(f: impl FnOnce() -> T) -> Result<T, String> {
    catch_unwind(AssertUnwindSafe(f)).map_err(message)
}

/// A future whose panic (in any poll) becomes `Err(message)`, so whoever waits on it is answered.
/// It wraps the future in place (no allocation): the bindings' calls are a hot path.
pub struct CatchUnwind<F>(F);

impl<F: Future> CatchUnwind<F> {
    pub fn new(future: F) -> Self {
        CatchUnwind(future)
    }
}

impl<F: Future> Future for CatchUnwind<F> {
    type Output = Result<F::Output, String>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        // SAFETY: structural pinning of the only field: it is never moved out, `CatchUnwind` has
        // no `Drop` and is `Unpin` only when `F` is.
        let inner = unsafe { self.map_unchecked_mut(|s| &mut s.0) };
        match catch_unwind(AssertUnwindSafe(|| inner.poll(cx))) {
            Ok(Poll::Pending) => Poll::Pending,
            Ok(Poll::Ready(v)) => Poll::Ready(Ok(v)),
            Err(payload) => Poll::Ready(Err(message(payload))),
        }
    }
}

/// Where [`test_panic`] panics.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TestPanic {
    /// On the caller's thread, in the entry point itself: the value is `rl-test-panic:caller`.
    Caller,
    /// Inside the call's future, wherever it is polled (the runtime, for a Redis call): the value
    /// is `rl-test-panic:future`.
    Future,
}

/// Test suites only: panics when `value` (a key, a key prefix) is the marker for `at`. Without the
/// `test-panic` feature this is an empty function, so no input can reach a panic through it.
#[inline(always)]
pub fn test_panic(at: TestPanic, value: &[u8]) {
    #[cfg(feature = "test-panic")]
    {
        let marker: &[u8] = match at {
            TestPanic::Caller => b"rl-test-panic:caller",
            TestPanic::Future => b"rl-test-panic:future",
        };
        if value == marker {
            panic!("test-panic hook ({at:?})");
        }
    }
    #[cfg(not(feature = "test-panic"))]
    let _ = (at, value);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_panicking_future_ends_with_its_message() {
        let fut = CatchUnwind::new(async {
            panic!("boom");
        });
        let mut fut = std::pin::pin!(fut);
        let r = fut
            .as_mut()
            .poll(&mut Context::from_waker(std::task::Waker::noop()));
        match r {
            Poll::Ready(Err(m)) => assert!(m.ends_with(": boom"), "{m}"),
            other => panic!("expected the panic's message, got {other:?}"),
        }
    }

    /// A normal build must not be able to panic through the hook, whatever the input.
    #[cfg(not(feature = "test-panic"))]
    #[test]
    fn the_hook_is_inert_without_the_feature() {
        test_panic(TestPanic::Caller, b"rl-test-panic:caller");
        test_panic(TestPanic::Future, b"rl-test-panic:future");
    }

    #[cfg(feature = "test-panic")]
    #[test]
    fn the_hook_panics_only_on_its_marker() {
        test_panic(TestPanic::Caller, b"rl-test-panic:future");
        test_panic(TestPanic::Future, b"rl-test-panic:caller");
        test_panic(TestPanic::Caller, b"an ordinary key");
        let m = call(|| test_panic(TestPanic::Caller, b"rl-test-panic:caller")).unwrap_err();
        assert!(m.ends_with("test-panic hook (Caller)"), "{m}");
    }

    #[test]
    fn a_panicking_call_ends_with_its_message() {
        let m = call(|| -> u8 { panic!("{}", String::from("owned")) }).unwrap_err();
        assert!(m.ends_with(": owned"), "{m}");
        assert_eq!(call(|| 7), Ok(7));
    }
}
