//! Async calls and the `CompletableFuture`s they complete.
//!
//! A call starts through `rl_core::runtime::run_or_spawn` on the calling Java thread (so argument
//! errors throw at the call site, and an answer that is already there, as with the memory
//! backend, costs no thread hop); if it is not done, it continues on the core's tokio runtime,
//! and the runtime thread that finishes it
//! (attached to the JVM once, as a daemon) completes the future through a global reference,
//! deleted right after. Every JNI call there runs inside its own local frame, so a permanently
//! attached thread accumulates no local references.

use std::future::Future;

use jni::objects::{GlobalRef, JObject, JValueOwned};
use jni::signature::{Primitive, ReturnType};
use jni::sys::jvalue;
use jni::JNIEnv;

use rl_core::runtime::Started;
use rl_core::unwind::CatchUnwind;
use rl_core::{CompositeDecision, Decision, Error};

use crate::cache::{self, cache};
use crate::convert::{self, decision};
use crate::error::{throwable, Failure};

/// What an async call produces for Java.
pub enum Outcome {
    Decision(Decision),
    Composite(CompositeDecision),
    /// A prepared-policies call: the decision and its rendered response (`prepared::responded`).
    Responded(CompositeDecision, rl_core::headers::Response),
    Unit,
}

/// The result of a core future run under `CatchUnwind`: `Err` holds a panic's message.
type Finished = Result<rl_core::Result<Outcome>, String>;

/// Completes `future` (a `CompletableFuture`) with `result`, from a thread attached to the JVM.
fn deliver(env: &mut JNIEnv, future: &JObject, result: Finished) -> Result<(), Failure> {
    let c = cache()?;
    env.with_local_frame(8, |env| -> Result<(), Failure> {
        let value = match result {
            Ok(Ok(Outcome::Decision(d))) => Ok(decision(env, &d)?),
            Ok(Ok(Outcome::Composite(c))) => Ok(convert::composite(env, &c)?),
            Ok(Ok(Outcome::Responded(c, r))) => Ok(crate::prepared::responded(env, &c, &r)?),
            Ok(Ok(Outcome::Unit)) => Ok(JObject::null()),
            Ok(Err(e)) => Err(throwable(env, &Failure::Core(e))?),
            Err(panic) => Err(throwable(env, &Failure::Internal(panic))?),
        };
        let (method, arg) = match &value {
            Ok(v) => (c.complete, v.as_raw()),
            Err(t) => (c.fail, t.as_raw()),
        };
        let args = [jvalue { l: future.as_raw() }, jvalue { l: arg }];
        // SAFETY: `complete` and `fail` were looked up on `native` with exactly these signatures.
        let _: JValueOwned = unsafe {
            env.call_static_method_unchecked(
                &c.native,
                method,
                ReturnType::Primitive(Primitive::Void),
                &args,
            )
        }?;
        Ok(())
    })
}

/// The Java future of a call that continues on the runtime: a global reference, completed and
/// deleted once. Dropped without completing (the runtime dropped the task), it fails the future
/// rather than leave the caller waiting forever.
struct Completion(Option<GlobalRef>);

impl Completion {
    fn finish(&mut self, result: Finished) {
        let Some(future) = self.0.take() else { return };
        let Some(c) = cache::get() else { return };
        // A runtime worker is attached once and stays attached (as a daemon, so it never keeps
        // the JVM alive); jni-rs detaches it if the thread ever exits.
        let first_time = c.vm.get_env().is_err();
        let Ok(mut env) = c.vm.attach_current_thread_as_daemon() else {
            return;
        };
        if first_time {
            // Give the Java side of the thread the runtime's name ("rl-runtime") for thread dumps.
            let _ = env.with_local_frame(4, |env| -> Result<(), Failure> {
                let name = env.new_string(std::thread::current().name().unwrap_or("rl-runtime"))?;
                let args = [jvalue { l: name.as_raw() }];
                // SAFETY: `threadAttached` was looked up on `native` with exactly this signature.
                unsafe {
                    env.call_static_method_unchecked(
                        &c.native,
                        c.thread_attached,
                        ReturnType::Primitive(Primitive::Void),
                        &args,
                    )
                }?;
                Ok(())
            });
        }
        let _ = deliver(&mut env, future.as_obj(), result);
        // No Java frame will see an exception raised here (a completion callback that threw is
        // already caught by CompletableFuture; this is for JNI failures such as OutOfMemoryError).
        if env.exception_check().unwrap_or(false) {
            let _ = env.exception_describe();
            let _ = env.exception_clear();
        }
        drop(future); // DeleteGlobalRef, on this attached thread
    }
}

impl Drop for Completion {
    fn drop(&mut self) {
        if self.0.is_some() {
            self.finish(Ok(Err(Error::Backend(
                "the rl runtime dropped the call before it finished".into(),
            ))));
        }
    }
}

/// Starts an async call through the core's `run_or_spawn`: decided at once (argument errors
/// throw at the call site, a ready answer completes the future here), or continued on the
/// runtime, which completes the future through a global reference made only then.
pub fn start<F>(env: &mut JNIEnv, future: &JObject, call: F) -> Result<(), Failure>
where
    F: Future<Output = rl_core::Result<Outcome>> + Send + 'static,
{
    start_with(env, future, call, false).map(drop)
}

/// [`start`] for a call whose Java side completes the future itself with a decision made at
/// once (a lease, the denial cache, the memory backend): that decision comes back as a `long[]`
/// (`convert::decision_longs`, `convert::composite_longs`; a prepared-policies call's as
/// `prepared::responded`'s array), with no upcall into Java; `None` when the future is completed
/// from here or from the runtime.
pub fn start_flat<'l, F>(
    env: &mut JNIEnv<'l>,
    future: &JObject,
    call: F,
) -> Result<Option<JObject<'l>>, Failure>
where
    F: Future<Output = rl_core::Result<Outcome>> + Send + 'static,
{
    match start_with(env, future, call, true)? {
        Some(Outcome::Decision(d)) => Ok(Some(convert::decision_longs(env, &d)?.into())),
        Some(Outcome::Composite(c)) => Ok(Some(convert::composite_longs(env, &c)?.into())),
        Some(other) => deliver(env, convert::future(future)?, Ok(Ok(other))).map(|()| None),
        None => Ok(None),
    }
}

/// [`start`] for a call whose Java side takes an answer made at once itself, in whatever form
/// the caller writes it (`prepared::fill`): `Some` when it was made at once, `None` when the
/// future is completed from here (an error) or from the runtime.
pub fn start_ready<F>(
    env: &mut JNIEnv,
    future: &JObject,
    call: F,
) -> Result<Option<Outcome>, Failure>
where
    F: Future<Output = rl_core::Result<Outcome>> + Send + 'static,
{
    start_with(env, future, call, true)
}

fn start_with<F>(
    env: &mut JNIEnv,
    future: &JObject,
    call: F,
    flat: bool,
) -> Result<Option<Outcome>, Failure>
where
    F: Future<Output = rl_core::Result<Outcome>> + Send + 'static,
{
    let future = convert::future(future)?;
    let mut no_ref = None;
    let started = rl_core::runtime::run_or_spawn(CatchUnwind::new(call), || {
        let mut completion = match env.new_global_ref(future) {
            Ok(g) => Completion(Some(g)),
            Err(e) => {
                no_ref = Some(e);
                Completion(None)
            }
        };
        move |result: Finished| completion.finish(result)
    })?;
    if let Some(e) = no_ref {
        return Err(e.into());
    }
    match started {
        Started::Ready(Ok(Err(e))) if e.kind() == rl_core::ErrorKind::InvalidArgument => {
            Err(Failure::Core(e))
        }
        Started::Ready(Ok(Ok(outcome))) if flat => Ok(Some(outcome)),
        Started::Ready(result) => deliver(env, future, result).map(|()| None),
        Started::Spawned => Ok(None),
    }
}
