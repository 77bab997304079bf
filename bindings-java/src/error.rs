//! Failures of an entry point, and the Java exceptions they become. Exceptions are built by Java
//! (`Native.error`, a static factory), so one code path makes them for synchronous calls (thrown
//! on the caller's thread) and for asynchronous ones (passed to
//! `CompletableFuture.completeExceptionally` from a runtime thread).

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};

use jni::objects::JThrowable;
use jni::signature::ReturnType;
use jni::sys::{jint, jlong, jvalue};
use jni::JNIEnv;

use rl_core::options::camel_case;
use rl_core::{Error, ErrorKind};

use crate::cache::cache;

/// Why an entry point failed, before it becomes a Java exception.
pub enum Failure {
    /// An error from the core (its `Display` is the message).
    Core(Error),
    /// A closed or null handle: `IllegalStateException`.
    State(String),
    /// A panic, or an internal JNI failure with no Java exception pending.
    Internal(String),
    /// A Java exception is already pending (a JNI call threw); it propagates as is.
    Pending,
}

impl From<Error> for Failure {
    fn from(e: Error) -> Self {
        Failure::Core(e)
    }
}

impl From<jni::errors::Error> for Failure {
    fn from(e: jni::errors::Error) -> Self {
        match e {
            jni::errors::Error::JavaException => Failure::Pending,
            other => Failure::Internal(format!("JNI: {other}")),
        }
    }
}

/// An argument error naming the argument as Java spells it: `retryDelayMs` after the builder
/// method the caller used, `windowMs` after the parameter, instead of the core's snake_case name.
/// Other errors pass unchanged.
pub fn java_named(e: Error) -> Error {
    match e {
        Error::InvalidArgument { name, message } => Error::InvalidArgument {
            name: java_name(name),
            message,
        },
        Error::InvalidType { name, message } => Error::InvalidType {
            name: java_name(name),
            message,
        },
        other => other,
    }
}

/// `camel_case(name)`, made once per name (the core's names are a small fixed set of `&'static
/// str`s) so the error can keep a `&'static str`.
fn java_name(name: &'static str) -> &'static str {
    static NAMES: OnceLock<Mutex<HashMap<&'static str, &'static str>>> = OnceLock::new();
    let mut names = NAMES
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|p| p.into_inner());
    names
        .entry(name)
        .or_insert_with(|| Box::leak(camel_case(name).into_boxed_str()))
}

// Exception kinds understood by `Native.error` (its switch names the same numbers).
const KIND_INTERNAL: jint = 0;
const KIND_INVALID_ARGUMENT: jint = 1;
const KIND_BACKEND_UNAVAILABLE: jint = 2;
const KIND_BACKEND: jint = 3;
const KIND_CLOCK_SKEW: jint = 4;
const KIND_ILLEGAL_STATE: jint = 5;

/// `(kind, message, clock-skew details)` for `Native.error`.
fn describe(f: &Failure) -> (jint, String, [jlong; 4]) {
    let none = [0; 4];
    match f {
        Failure::Core(e) => {
            if let Error::ClockSkew {
                client_ms,
                server_ms,
                skew_ms,
                max_skew_ms,
            } = e
            {
                let l = |v: &u64| i64::try_from(*v).unwrap_or(i64::MAX);
                let skew = [l(client_ms), l(server_ms), l(skew_ms), l(max_skew_ms)];
                return (KIND_CLOCK_SKEW, e.to_string(), skew);
            }
            let kind = match e.kind() {
                ErrorKind::InvalidArgument => KIND_INVALID_ARGUMENT,
                ErrorKind::BackendUnavailable => KIND_BACKEND_UNAVAILABLE,
                ErrorKind::Backend | ErrorKind::ClockSkew => KIND_BACKEND,
            };
            (kind, java_named_text(e), none)
        }
        Failure::State(m) => (KIND_ILLEGAL_STATE, m.clone(), none),
        Failure::Internal(m) => (KIND_INTERNAL, m.clone(), none),
        Failure::Pending => (KIND_INTERNAL, "a Java exception was pending".into(), none),
    }
}

/// `e`'s message with an argument named as Java spells it.
fn java_named_text(e: &Error) -> String {
    match e {
        Error::InvalidArgument { name, message } | Error::InvalidType { name, message } => {
            format!("invalid argument `{}`: {message}", java_name(name))
        }
        other => other.to_string(),
    }
}

/// A Java exception object for `f`, made by `Native.error`.
pub fn throwable<'l>(env: &mut JNIEnv<'l>, f: &Failure) -> Result<JThrowable<'l>, Failure> {
    let c = cache()?;
    let (kind, message, skew) = describe(f);
    let message = env.new_string(message)?;
    let args = [
        jvalue { i: kind },
        jvalue {
            l: message.as_raw(),
        },
        jvalue { j: skew[0] },
        jvalue { j: skew[1] },
        jvalue { j: skew[2] },
        jvalue { j: skew[3] },
    ];
    // SAFETY: `error` was looked up on `native` with exactly this signature.
    let obj =
        unsafe { env.call_static_method_unchecked(&c.native, c.error, ReturnType::Object, &args) }?
            .l()?;
    Ok(JThrowable::from(obj))
}

/// Raises `f` as the pending Java exception of this thread.
fn throw(env: &mut JNIEnv, f: Failure) {
    if matches!(f, Failure::Pending) || env.exception_check().unwrap_or(true) {
        return;
    }
    match throwable(env, &f) {
        Ok(t) => {
            let _ = env.throw(t);
        }
        Err(_) => {
            if !env.exception_check().unwrap_or(true) {
                let _ = env.throw_new("java/lang/RuntimeException", describe(&f).1);
            }
        }
    }
}

/// Runs an entry point's body: a failure or a panic becomes a pending Java exception and the
/// entry point returns `default`.
pub fn entry<'l, T>(
    env: &mut JNIEnv<'l>,
    default: T,
    body: impl FnOnce(&mut JNIEnv<'l>) -> Result<T, Failure>,
) -> T {
    match rl_core::unwind::call(|| body(env)) {
        Ok(Ok(v)) => v,
        Ok(Err(f)) => {
            throw(env, f);
            default
        }
        Err(panic) => {
            throw(env, Failure::Internal(panic));
            default
        }
    }
}
