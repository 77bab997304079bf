//! The JNI layer of rl's Java binding: `librl_java.so`, loaded by `dev.rl.NativeLoader` and called
//! only through the package-private `dev.rl.Native` class.
//!
//! This layer converts types and errors only; every rule (validation, messages, semantics) lives
//! in rl-core. Conventions:
//!
//! - Every entry point runs its body under [`catch_unwind`]: a panic becomes a
//!   `dev.rl.NativePanicException` in Java and never unwinds into the JVM.
//! - A limiter handle is a `Box<rl_core::blocking::Limiter>` turned into a `long`. Java guards it
//!   (`dev.rl.NativeHandle`): no call enters after `close()`, and the box is freed exactly once,
//!   by whoever leaves last. Here, handle 0 is refused with an `IllegalStateException`.
//! - Exceptions are built by Java (`Native.error`, a static factory), so one code path makes them
//!   for synchronous calls (thrown on the caller's thread) and for asynchronous ones (passed to
//!   `CompletableFuture.completeExceptionally` from a runtime thread).
//! - Async calls are polled once on the calling Java thread (so argument errors throw at the call
//!   site, and an answer that is already there, as with the memory backend, costs no thread hop);
//!   if they are not done, they continue on the core's tokio runtime, and the runtime thread that
//!   finishes them (attached to the JVM once, as a daemon) completes the `CompletableFuture`
//!   through a global reference, deleted right after. Every JNI call there runs inside its own
//!   local frame, so a permanently attached thread accumulates no local references.
//! - Classes and method ids are looked up once, in `Native.init` (on a Java thread, with the
//!   class loader that loaded `dev.rl.Native`), because `FindClass` on a native thread would use
//!   the system class loader and miss classes loaded by an application or plugin loader.

#![deny(unsafe_op_in_unsafe_fn)]

use std::future::Future;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::pin::Pin;
use std::sync::{Arc, OnceLock};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use jni::objects::{
    GlobalRef, JByteArray, JClass, JObject, JStaticMethodID, JString, JThrowable, JValueOwned,
};
use jni::signature::{Primitive, ReturnType};
use jni::sys::{jboolean, jbyteArray, jint, jlong, jobject, jstring, jvalue, JNI_TRUE};
use jni::{JNIEnv, JavaVM};

use rl_core::blocking::Limiter;
use rl_core::{Decision, Error, Mode, Options, SystemClock, MAX_PERMITS, MAX_WINDOW_MS};

/// Bumped whenever a `native` signature in `dev.rl.Native` changes; Java refuses a library whose
/// number differs (a stale `librl_java.so` on `java.library.path`).
const ABI_VERSION: jint = 2;

// ---------------------------------------------------------------------------------------------
// Errors

/// Why an entry point failed, before it becomes a Java exception.
enum Failure {
    /// An error from the core (its `Display` is the message).
    Core(Error),
    /// A conversion failed (a negative Java `long` where the core takes an unsigned value, a
    /// null where a value is required): `IllegalArgumentException`.
    Arg(String),
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

// Exception kinds understood by `Native.error` (keep in sync with Native.java).
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
            let kind = match e {
                Error::InvalidArgument { .. } => KIND_INVALID_ARGUMENT,
                Error::BackendUnavailable(_) => KIND_BACKEND_UNAVAILABLE,
                Error::Backend(_) => KIND_BACKEND,
                Error::ClockSkew {
                    client_ms,
                    server_ms,
                    skew_ms,
                    max_skew_ms,
                } => {
                    let l = |v: &u64| i64::try_from(*v).unwrap_or(i64::MAX);
                    return (
                        KIND_CLOCK_SKEW,
                        e.to_string(),
                        [l(client_ms), l(server_ms), l(skew_ms), l(max_skew_ms)],
                    );
                }
                // A kind added to the core after this binding was built.
                _ => KIND_BACKEND,
            };
            (kind, e.to_string(), none)
        }
        Failure::Arg(m) => (KIND_INVALID_ARGUMENT, m.clone(), none),
        Failure::State(m) => (KIND_ILLEGAL_STATE, m.clone(), none),
        Failure::Internal(m) => (KIND_INTERNAL, m.clone(), none),
        Failure::Pending => (KIND_INTERNAL, "a Java exception was pending".into(), none),
    }
}

// ---------------------------------------------------------------------------------------------
// The cache of classes and methods, filled by Native.init

struct Cache {
    vm: JavaVM,
    /// `dev.rl.Native`.
    native: GlobalRef,
    /// `static Decision decision(boolean, long, long, long, long, int, String, long)`
    decision: JStaticMethodID,
    /// `static Stats stats(int, String, String, String, long[])`
    stats: JStaticMethodID,
    /// `static RuntimeException error(int, String, long, long, long, long)`
    error: JStaticMethodID,
    /// `static void complete(CompletableFuture, Object)`
    complete: JStaticMethodID,
    /// `static void fail(CompletableFuture, Throwable)`
    fail: JStaticMethodID,
    /// `static void threadAttached(String)`
    thread_attached: JStaticMethodID,
}

static CACHE: OnceLock<Cache> = OnceLock::new();

fn cache() -> Result<&'static Cache, Failure> {
    CACHE
        .get()
        .ok_or_else(|| Failure::Internal("dev.rl.Native.init was not called".into()))
}

/// A Java exception object for `f`, made by `Native.error`.
fn throwable<'l>(env: &mut JNIEnv<'l>, f: &Failure) -> Result<JThrowable<'l>, Failure> {
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
fn entry<'l, T>(
    env: &mut JNIEnv<'l>,
    default: T,
    body: impl FnOnce(&mut JNIEnv<'l>) -> Result<T, Failure>,
) -> T {
    match catch_unwind(AssertUnwindSafe(|| body(env))) {
        Ok(Ok(v)) => v,
        Ok(Err(f)) => {
            throw(env, f);
            default
        }
        Err(payload) => {
            throw(env, Failure::Internal(rl_core::unwind::message(payload)));
            default
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Conversions

fn limiter<'a>(handle: jlong) -> Result<&'a Limiter, Failure> {
    // SAFETY: a non-zero handle was made by `open` from `Box::into_raw` and is freed only by
    // `close`, which Java calls once, after the last call that entered with it has left.
    unsafe { (handle as *const Limiter).as_ref() }
        .ok_or_else(|| Failure::State("the RateLimiter is closed".into()))
}

fn key_bytes(env: &mut JNIEnv, key: &JByteArray) -> Result<Vec<u8>, Failure> {
    if key.is_null() {
        return Err(Failure::Arg(
            "invalid argument `key`: must not be null".into(),
        ));
    }
    Ok(env.convert_byte_array(key)?)
}

/// A Java `long` where the core takes a `u64`: negative is an argument error naming the value,
/// in the core's words for its range.
fn unsigned(name: &'static str, v: jlong) -> Result<u64, Failure> {
    u64::try_from(v).map_err(|_| {
        let range = match name {
            "limit" => format!("must be between 1 and {MAX_PERMITS}"),
            "window_ms" => format!("must be between 1 and {MAX_WINDOW_MS} (30 days)"),
            "cost" => "must be at least 1".to_string(),
            _ => "must not be negative".to_string(),
        };
        Failure::Arg(format!("invalid argument `{name}`: is {v}; {range}"))
    })
}

fn optional_string(env: &mut JNIEnv, s: &JString) -> Result<Option<String>, Failure> {
    if s.is_null() {
        return Ok(None);
    }
    Ok(Some(env.get_string(s)?.into()))
}

/// The mode as a small integer Java maps to a constant; -1 (with the name) for a mode this build
/// does not know.
fn mode_code(m: Mode) -> jint {
    match m {
        Mode::Normal => 0,
        Mode::Memory => 1,
        Mode::Local => 2,
        _ => -1,
    }
}

fn long(v: u64) -> jlong {
    i64::try_from(v).unwrap_or(i64::MAX)
}

/// A `dev.rl.Decision`, made by `Native.decision`.
fn decision<'l>(env: &mut JNIEnv<'l>, d: &Decision) -> Result<JObject<'l>, Failure> {
    let c = cache()?;
    let code = mode_code(d.mode);
    let name = if code < 0 {
        env.new_string(d.mode.as_str())?
    } else {
        JString::from(JObject::null())
    };
    let args = [
        jvalue {
            z: d.allowed as jboolean,
        },
        jvalue {
            j: long(d.remaining),
        },
        jvalue { j: long(d.used) },
        jvalue {
            j: long(d.retry_after_ms),
        },
        jvalue {
            j: long(d.reset_after_ms),
        },
        jvalue { i: code },
        jvalue { l: name.as_raw() },
        jvalue { j: long(d.now_ms) },
    ];
    // SAFETY: `decision` was looked up on `native` with exactly this signature.
    let obj = unsafe {
        env.call_static_method_unchecked(&c.native, c.decision, ReturnType::Object, &args)
    }?
    .l()?;
    Ok(obj)
}

/// A `dev.rl.Stats`, made by `Native.stats`.
fn stats<'l>(env: &mut JNIEnv<'l>, s: &rl_core::Stats) -> Result<JObject<'l>, Failure> {
    let c = cache()?;
    let code = mode_code(s.mode);
    let name = if code < 0 {
        env.new_string(s.mode.as_str())?
    } else {
        JString::from(JObject::null())
    };
    let topology = env.new_string(s.topology)?;
    let reason = env.new_string(&s.state_reason)?;
    // In the order of the record's long components (see Native.stats).
    let numbers = [
        s.decisions_normal,
        s.decisions_local,
        s.decisions_memory,
        s.transitions_to_local,
        s.transitions_to_normal,
        s.state_ms,
        s.redis_errors,
        s.retries,
        s.probes,
        s.repairs,
        s.repaired_permits,
        s.failovers,
        s.instances,
        s.local_keys,
        s.rtt_samples,
        s.rtt_last_us,
        s.rtt_p50_us,
        s.rtt_p99_us,
        s.rtt_max_us,
    ]
    .map(long);
    let array = env.new_long_array(numbers.len() as i32)?;
    env.set_long_array_region(&array, 0, &numbers)?;
    let args = [
        jvalue { i: code },
        jvalue { l: name.as_raw() },
        jvalue {
            l: topology.as_raw(),
        },
        jvalue { l: reason.as_raw() },
        jvalue { l: array.as_raw() },
    ];
    // SAFETY: `stats` was looked up on `native` with exactly this signature.
    let obj =
        unsafe { env.call_static_method_unchecked(&c.native, c.stats, ReturnType::Object, &args) }?
            .l()?;
    Ok(obj)
}

/// Runs a blocking core call. On a thread inside the core's runtime (a Java callback of an async
/// call, running on a runtime worker, that calls a synchronous method), it first hands the
/// worker's other tasks to another thread, so a blocked callback cannot starve the runtime.
fn blocking<T>(f: impl FnOnce() -> rl_core::Result<T>) -> Result<T, Failure> {
    let r = if tokio::runtime::Handle::try_current().is_ok() {
        tokio::task::block_in_place(f)
    } else {
        f()
    };
    r.map_err(Failure::Core)
}

// ---------------------------------------------------------------------------------------------
// Entry points: setup and lifecycle

#[no_mangle]
pub extern "system" fn Java_dev_rl_Native_abiVersion(_env: JNIEnv, _class: JClass) -> jint {
    ABI_VERSION
}

#[no_mangle]
pub extern "system" fn Java_dev_rl_Native_init<'l>(mut env: JNIEnv<'l>, class: JClass<'l>) {
    entry(&mut env, (), |env| {
        if CACHE.get().is_some() {
            return Ok(());
        }
        let vm = env.get_java_vm()?;
        let native = env.new_global_ref(&class)?;
        let decision = env.get_static_method_id(
            &class,
            "decision",
            "(ZJJJJILjava/lang/String;J)Ldev/rl/Decision;",
        )?;
        let stats = env.get_static_method_id(
            &class,
            "stats",
            "(ILjava/lang/String;Ljava/lang/String;Ljava/lang/String;[J)Ldev/rl/Stats;",
        )?;
        let error = env.get_static_method_id(
            &class,
            "error",
            "(ILjava/lang/String;JJJJ)Ljava/lang/RuntimeException;",
        )?;
        let complete = env.get_static_method_id(
            &class,
            "complete",
            "(Ljava/util/concurrent/CompletableFuture;Ljava/lang/Object;)V",
        )?;
        let fail = env.get_static_method_id(
            &class,
            "fail",
            "(Ljava/util/concurrent/CompletableFuture;Ljava/lang/Throwable;)V",
        )?;
        let thread_attached =
            env.get_static_method_id(&class, "threadAttached", "(Ljava/lang/String;)V")?;
        // A racing second init loses harmlessly: both looked up the same things.
        let _ = CACHE.set(Cache {
            vm,
            native,
            decision,
            stats,
            error,
            complete,
            fail,
            thread_attached,
        });
        Ok(())
    })
}

#[no_mangle]
pub extern "system" fn Java_dev_rl_Native_open<'l>(
    mut env: JNIEnv<'l>,
    _class: JClass<'l>,
    url: JString<'l>,
    key_prefix: JString<'l>,
    connect_timeout_ms: jlong,
    request_timeout_ms: jlong,
    client_clock: jboolean,
    max_clock_skew_ms: jlong,
    retry_delay_ms: jlong,
    local_fallback: jboolean,
    degrade_rtt_ms: jlong,
    degrade_after_ms: jlong,
    recover_rtt_ms: jlong,
    recover_after_ms: jlong,
    instances_set: jboolean,
    instances: jlong,
    local_max_keys: jlong,
) -> jlong {
    entry(&mut env, 0, |env| {
        let url = optional_string(env, &url)?;
        let mut options = Options::default();
        if let Some(p) = optional_string(env, &key_prefix)? {
            options.key_prefix = p;
        }
        options.connect_timeout =
            Duration::from_millis(unsigned("connect_timeout", connect_timeout_ms)?);
        options.request_timeout =
            Duration::from_millis(unsigned("request_timeout", request_timeout_ms)?);
        options.max_clock_skew_ms = unsigned("max_clock_skew_ms", max_clock_skew_ms)?;
        if client_clock == JNI_TRUE {
            options.clock = Some(Arc::new(SystemClock));
        }
        let ms = |name, v| unsigned(name, v).map(Duration::from_millis);
        options.retry_delay = ms("retry_delay", retry_delay_ms)?;
        options.local_fallback = local_fallback == JNI_TRUE;
        options.degrade_rtt = ms("degrade_rtt", degrade_rtt_ms)?;
        options.degrade_after = ms("degrade_after", degrade_after_ms)?;
        options.recover_rtt = ms("recover_rtt", recover_rtt_ms)?;
        options.recover_after = ms("recover_after", recover_after_ms)?;
        if instances_set == JNI_TRUE {
            options.instances = Some(unsigned("instances", instances)?);
        }
        let keys = unsigned("local_max_keys", local_max_keys)?;
        // Past usize (32-bit targets): the largest usize, which the core refuses by name.
        options.local_max_keys = usize::try_from(keys).unwrap_or(usize::MAX);
        let limiter = Limiter::open(url.as_deref(), options)?;
        Ok(Box::into_raw(Box::new(limiter)) as jlong)
    })
}

#[no_mangle]
pub extern "system" fn Java_dev_rl_Native_close<'l>(
    mut env: JNIEnv<'l>,
    _class: JClass<'l>,
    handle: jlong,
) {
    entry(&mut env, (), |_| {
        if handle != 0 {
            // SAFETY: see `limiter`; Java calls close once per handle, after every other call left.
            drop(unsafe { Box::from_raw(handle as *mut Limiter) });
        }
        Ok(())
    })
}

/// `lua/sliding_window.lua` as compiled into this library: what a script-calling gateway should
/// SCRIPT LOAD to share windows with it.
#[no_mangle]
pub extern "system" fn Java_dev_rl_Native_scriptSource<'l>(
    mut env: JNIEnv<'l>,
    _class: JClass<'l>,
) -> jstring {
    entry(&mut env, std::ptr::null_mut(), |env| {
        Ok(env.new_string(rl_core::SLIDING_WINDOW_LUA)?.into_raw())
    })
}

#[no_mangle]
pub extern "system" fn Java_dev_rl_Native_scriptSha<'l>(
    mut env: JNIEnv<'l>,
    _class: JClass<'l>,
) -> jstring {
    entry(&mut env, std::ptr::null_mut(), |env| {
        Ok(env.new_string(rl_core::sliding_window_sha())?.into_raw())
    })
}

#[no_mangle]
pub extern "system" fn Java_dev_rl_Native_backend<'l>(
    mut env: JNIEnv<'l>,
    _class: JClass<'l>,
    handle: jlong,
) -> jstring {
    entry(&mut env, std::ptr::null_mut(), |env| {
        let l = limiter(handle)?;
        Ok(env.new_string(l.backend().to_string())?.into_raw())
    })
}

#[no_mangle]
pub extern "system" fn Java_dev_rl_Native_redisKey<'l>(
    mut env: JNIEnv<'l>,
    _class: JClass<'l>,
    handle: jlong,
    key: JByteArray<'l>,
) -> jbyteArray {
    entry(&mut env, std::ptr::null_mut(), |env| {
        let l = limiter(handle)?;
        let key = key_bytes(env, &key)?;
        Ok(env.byte_array_from_slice(&l.redis_key(key))?.into_raw())
    })
}

// ---------------------------------------------------------------------------------------------
// Entry points: synchronous calls (rl_core::blocking)

#[no_mangle]
pub extern "system" fn Java_dev_rl_Native_acquire<'l>(
    mut env: JNIEnv<'l>,
    _class: JClass<'l>,
    handle: jlong,
    key: JByteArray<'l>,
    limit: jlong,
    window_ms: jlong,
    cost: jlong,
) -> jobject {
    entry(&mut env, std::ptr::null_mut(), |env| {
        let l = limiter(handle)?;
        let key = key_bytes(env, &key)?;
        let (limit, window_ms, cost) = (
            unsigned("limit", limit)?,
            unsigned("window_ms", window_ms)?,
            unsigned("cost", cost)?,
        );
        let d = blocking(|| l.acquire(&key, limit, window_ms, cost))?;
        Ok(decision(env, &d)?.into_raw())
    })
}

#[no_mangle]
pub extern "system" fn Java_dev_rl_Native_peek<'l>(
    mut env: JNIEnv<'l>,
    _class: JClass<'l>,
    handle: jlong,
    key: JByteArray<'l>,
    limit: jlong,
    window_ms: jlong,
) -> jobject {
    entry(&mut env, std::ptr::null_mut(), |env| {
        let l = limiter(handle)?;
        let key = key_bytes(env, &key)?;
        let (limit, window_ms) = (unsigned("limit", limit)?, unsigned("window_ms", window_ms)?);
        let d = blocking(|| l.peek(&key, limit, window_ms))?;
        Ok(decision(env, &d)?.into_raw())
    })
}

#[no_mangle]
pub extern "system" fn Java_dev_rl_Native_reset<'l>(
    mut env: JNIEnv<'l>,
    _class: JClass<'l>,
    handle: jlong,
    key: JByteArray<'l>,
) {
    entry(&mut env, (), |env| {
        let l = limiter(handle)?;
        let key = key_bytes(env, &key)?;
        blocking(|| l.reset(&key))
    })
}

#[no_mangle]
pub extern "system" fn Java_dev_rl_Native_ping<'l>(
    mut env: JNIEnv<'l>,
    _class: JClass<'l>,
    handle: jlong,
) {
    entry(&mut env, (), |_| {
        let l = limiter(handle)?;
        blocking(|| l.ping())
    })
}

/// The limiter's statistics; never blocks (the core reads counters).
#[no_mangle]
pub extern "system" fn Java_dev_rl_Native_stats<'l>(
    mut env: JNIEnv<'l>,
    _class: JClass<'l>,
    handle: jlong,
) -> jobject {
    entry(&mut env, std::ptr::null_mut(), |env| {
        let l = limiter(handle)?;
        let s = l.stats();
        Ok(stats(env, &s)?.into_raw())
    })
}

// ---------------------------------------------------------------------------------------------
// Entry points: asynchronous calls (CompletableFuture)

/// What an async call produces for Java.
enum Outcome {
    Decision(Decision),
    Unit,
}

/// The result of a core future run under `catch_unwind`: `Err` holds a panic's message.
type Finished = Result<rl_core::Result<Outcome>, String>;

/// Polls the inner future under `catch_unwind`, so a panic inside the core becomes an exceptional
/// completion instead of a silently dropped task (and a future that never completes).
struct CatchUnwind<F>(Pin<Box<F>>);

impl<F: Future<Output = rl_core::Result<Outcome>>> Future for CatchUnwind<F> {
    type Output = Finished;
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Finished> {
        let inner = self.0.as_mut();
        match catch_unwind(AssertUnwindSafe(|| inner.poll(cx))) {
            Ok(Poll::Pending) => Poll::Pending,
            Ok(Poll::Ready(r)) => Poll::Ready(Ok(r)),
            Err(payload) => Poll::Ready(Err(rl_core::unwind::message(payload))),
        }
    }
}

/// Completes `future` (a `CompletableFuture`) with `result`, from a thread attached to the JVM.
fn deliver(env: &mut JNIEnv, future: &JObject, result: Finished) -> Result<(), Failure> {
    let c = cache()?;
    env.with_local_frame(8, |env| -> Result<(), Failure> {
        let value = match result {
            Ok(Ok(Outcome::Decision(d))) => Ok(decision(env, &d)?),
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
        let Some(c) = CACHE.get() else { return };
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

/// Starts an async call: polls it once here, then hands it to the core's runtime if it is not
/// done. Argument errors from that first poll throw at the call site.
fn start<F>(env: &mut JNIEnv, future: &JObject, call: F) -> Result<(), Failure>
where
    F: Future<Output = rl_core::Result<Outcome>> + Send + 'static,
{
    if future.is_null() {
        return Err(Failure::Arg(
            "invalid argument `future`: must not be null".into(),
        ));
    }
    let runtime = rl_core::runtime::handle()?;
    let mut call = CatchUnwind(Box::pin(call));
    let first = {
        let _in_runtime = runtime.enter();
        // The waker of this first poll is a no-op: the spawned task polls again at once and
        // registers its own, so no wake-up is lost.
        Pin::new(&mut call).poll(&mut Context::from_waker(Waker::noop()))
    };
    match first {
        Poll::Ready(Ok(Err(e @ Error::InvalidArgument { .. }))) => Err(Failure::Core(e)),
        Poll::Ready(result) => deliver(env, future, result),
        Poll::Pending => {
            let mut completion = Completion(Some(env.new_global_ref(future)?));
            runtime.spawn(async move {
                let result = call.await;
                completion.finish(result);
            });
            Ok(())
        }
    }
}

#[no_mangle]
pub extern "system" fn Java_dev_rl_Native_acquireAsync<'l>(
    mut env: JNIEnv<'l>,
    _class: JClass<'l>,
    handle: jlong,
    key: JByteArray<'l>,
    limit: jlong,
    window_ms: jlong,
    cost: jlong,
    future: JObject<'l>,
) {
    entry(&mut env, (), |env| {
        let l = limiter(handle)?.as_async().clone();
        let key = key_bytes(env, &key)?;
        let (limit, window_ms, cost) = (
            unsigned("limit", limit)?,
            unsigned("window_ms", window_ms)?,
            unsigned("cost", cost)?,
        );
        start(env, &future, async move {
            l.acquire(key, limit, window_ms, cost)
                .await
                .map(Outcome::Decision)
        })
    })
}

#[no_mangle]
pub extern "system" fn Java_dev_rl_Native_peekAsync<'l>(
    mut env: JNIEnv<'l>,
    _class: JClass<'l>,
    handle: jlong,
    key: JByteArray<'l>,
    limit: jlong,
    window_ms: jlong,
    future: JObject<'l>,
) {
    entry(&mut env, (), |env| {
        let l = limiter(handle)?.as_async().clone();
        let key = key_bytes(env, &key)?;
        let (limit, window_ms) = (unsigned("limit", limit)?, unsigned("window_ms", window_ms)?);
        start(env, &future, async move {
            l.peek(key, limit, window_ms).await.map(Outcome::Decision)
        })
    })
}

#[no_mangle]
pub extern "system" fn Java_dev_rl_Native_resetAsync<'l>(
    mut env: JNIEnv<'l>,
    _class: JClass<'l>,
    handle: jlong,
    key: JByteArray<'l>,
    future: JObject<'l>,
) {
    entry(&mut env, (), |env| {
        let l = limiter(handle)?.as_async().clone();
        let key = key_bytes(env, &key)?;
        start(env, &future, async move {
            l.reset(key).await.map(|()| Outcome::Unit)
        })
    })
}

/// For the test suite: panics inside the library so the tests can see panics become exceptions.
/// `where_` 0: in this entry point; 1: inside an async call, after it has moved to the runtime.
#[no_mangle]
pub extern "system" fn Java_dev_rl_Native_selfTestPanic<'l>(
    mut env: JNIEnv<'l>,
    _class: JClass<'l>,
    where_: jint,
    future: JObject<'l>,
) {
    entry(&mut env, (), |env| {
        if where_ == 0 {
            panic!("self-test panic (synchronous)");
        }
        start(env, &future, async {
            tokio::time::sleep(Duration::from_millis(1)).await;
            panic!("self-test panic (on the runtime)");
        })
    })
}
