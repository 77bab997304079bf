//! How a call's result crosses from the core's tokio runtime back to the JavaScript thread.
//!
//! Finished calls are pushed onto one queue per limiter, and one threadsafe function wakes the
//! JavaScript thread, which settles every promise that finished meanwhile in one go: under load,
//! one wake-up settles a whole batch instead of one uv_async round per call. The threadsafe
//! function is referenced (keeps the event loop alive) only while a call is in flight, so an idle
//! limiter, and a closed one, never keep the process alive.

use std::ptr;
use std::sync::atomic::{AtomicPtr, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

use napi::bindgen_prelude::*;
use napi::sys;
use napi::threadsafe_function::{ThreadsafeFunction, ThreadsafeFunctionCallMode};

use crate::errors::Factories;

/// A `napi_deferred` travelling to a runtime thread and back. It is only ever settled on the
/// JavaScript thread that made it (in the queue's drain).
pub(crate) struct Deferred(pub(crate) sys::napi_deferred);
// SAFETY: the pointer is never dereferenced off the JavaScript thread; it is only carried.
unsafe impl Send for Deferred {}

pub(crate) enum Outcome {
    Decision(rl_core::Decision),
    Composite(rl_core::CompositeDecision),
    /// `acquirePolicies`: the decision and the response the core rendered for it.
    Responded(rl_core::CompositeDecision, rl_core::headers::Response),
    Done,
    Failed(rl_core::Error),
    /// The call panicked; the panic's message.
    Panicked(String),
}

struct Completion {
    deferred: Deferred,
    outcome: Outcome,
}

pub(crate) type Notify = ThreadsafeFunction<(), Unknown<'static>, (), Status, false, true, 0>;

/// State shared by a limiter, its threadsafe function's callback and the runtime tasks.
pub(crate) struct Queue {
    done: Mutex<Vec<Completion>>,
    /// Calls handed out and not yet settled. Touched on the JavaScript thread only.
    pub(crate) pending: AtomicU32,
    /// The threadsafe function, for ref/unref from the JavaScript thread.
    pub(crate) tsfn: AtomicPtr<sys::napi_threadsafe_function__>,
    /// `close()` promises waiting for `pending` to reach 0.
    pub(crate) on_idle: Mutex<Vec<Deferred>>,
    pub(crate) factories: Factories,
}

/// What a runtime task needs to hand a result back.
pub(crate) struct Notifier {
    pub(crate) queue: Arc<Queue>,
    pub(crate) tsfn: Notify,
}

impl Notifier {
    pub(crate) fn complete(&self, deferred: Deferred, outcome: Outcome) {
        let was_empty = {
            let mut done = self.queue.done.lock().unwrap_or_else(|p| p.into_inner());
            let was_empty = done.is_empty();
            done.push(Completion { deferred, outcome });
            was_empty
        };
        // A non-empty queue already has a wake-up on its way that will drain this one too.
        if was_empty {
            self.tsfn.call((), ThreadsafeFunctionCallMode::NonBlocking);
        }
    }
}

/// The JavaScript value of an outcome: what its promise resolves to, or (`Failed`, `Panicked`)
/// the error it rejects with. A panic while building it is an `Err`.
pub(crate) fn value_of(
    env: &Env,
    factories: &Factories,
    outcome: &Outcome,
) -> Result<sys::napi_value> {
    rl_core::unwind::call(|| match outcome {
        Outcome::Decision(d) => factories.decision(env, d),
        Outcome::Composite(c) => factories.composite(env, c),
        Outcome::Responded(c, r) => factories.responded(env, c, r),
        Outcome::Done => unsafe { <()>::to_napi_value(env.raw(), ()) },
        Outcome::Failed(e) => factories.core_error(env, e),
        Outcome::Panicked(m) => factories.panic_error(env, m.clone()),
    })
    .unwrap_or_else(|m| Err(Error::new(Status::GenericFailure, m)))
}

/// Settles one promise on the JavaScript thread.
pub(crate) fn settle(env: &Env, factories: &Factories, deferred: Deferred, outcome: Outcome) {
    let raw = env.raw();
    // A panic while building the value still settles the promise (the fallback below).
    let value = value_of(env, factories, &outcome);
    unsafe {
        match (value, &outcome) {
            (Ok(v), Outcome::Failed(_) | Outcome::Panicked(_)) => {
                sys::napi_reject_deferred(raw, deferred.0, v)
            }
            (Ok(v), _) => sys::napi_resolve_deferred(raw, deferred.0, v),
            (Err(e), _) => {
                // Could not even build the value (a pending exception, a dying environment):
                // reject with whatever napi can still make, so the promise never hangs.
                let mut reason = ptr::null_mut();
                let mut pending = false;
                sys::napi_is_exception_pending(raw, &mut pending);
                if pending {
                    sys::napi_get_and_clear_last_exception(raw, &mut reason);
                } else {
                    let msg = format!("rl: cannot settle a call: {e}");
                    let mut m = ptr::null_mut();
                    sys::napi_create_string_utf8(
                        raw,
                        msg.as_ptr().cast(),
                        msg.len() as isize,
                        &mut m,
                    );
                    sys::napi_create_error(raw, ptr::null_mut(), m, &mut reason);
                }
                sys::napi_reject_deferred(raw, deferred.0, reason)
            }
        }
    };
}

impl Queue {
    pub(crate) fn new(factories: Factories) -> Self {
        Queue {
            done: Mutex::new(Vec::new()),
            pending: AtomicU32::new(0),
            tsfn: AtomicPtr::new(ptr::null_mut()),
            on_idle: Mutex::new(Vec::new()),
            factories,
        }
    }

    /// Runs on the JavaScript thread when woken: settles everything finished so far.
    pub(crate) fn drain(&self, env: &Env) {
        let items = std::mem::take(&mut *self.done.lock().unwrap_or_else(|p| p.into_inner()));
        if items.is_empty() {
            return;
        }
        let n = items.len() as u32;
        for c in items {
            let mut scope = ptr::null_mut();
            unsafe { sys::napi_open_handle_scope(env.raw(), &mut scope) };
            settle(env, &self.factories, c.deferred, c.outcome);
            unsafe { sys::napi_close_handle_scope(env.raw(), scope) };
        }
        self.finished(env, n);
    }

    /// `n` calls were settled: release the event loop when none is left in flight.
    fn finished(&self, env: &Env, n: u32) {
        let left = self.pending.load(Ordering::Relaxed).saturating_sub(n);
        self.pending.store(left, Ordering::Relaxed);
        if left == 0 {
            let tsfn = self.tsfn.load(Ordering::Relaxed);
            if !tsfn.is_null() {
                unsafe { sys::napi_unref_threadsafe_function(env.raw(), tsfn) };
            }
            let waiting =
                std::mem::take(&mut *self.on_idle.lock().unwrap_or_else(|p| p.into_inner()));
            for d in waiting {
                settle(env, &self.factories, d, Outcome::Done);
            }
        }
    }

    /// A call is about to go to the runtime: hold the event loop until it is settled.
    pub(crate) fn started(&self, env: &Env) {
        let before = self.pending.load(Ordering::Relaxed);
        self.pending.store(before + 1, Ordering::Relaxed);
        if before == 0 {
            let tsfn = self.tsfn.load(Ordering::Relaxed);
            if !tsfn.is_null() {
                unsafe { sys::napi_ref_threadsafe_function(env.raw(), tsfn) };
            }
        }
    }
}

pub(crate) fn new_promise(env: &Env) -> Result<(Deferred, sys::napi_value)> {
    let mut deferred = ptr::null_mut();
    let mut promise = ptr::null_mut();
    let status = unsafe { sys::napi_create_promise(env.raw(), &mut deferred, &mut promise) };
    if status != sys::Status::napi_ok {
        return Err(Error::new(
            Status::GenericFailure,
            "cannot create a promise",
        ));
    }
    Ok((Deferred(deferred), promise))
}
