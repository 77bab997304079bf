//! The Node.js binding of rl: a thin napi-rs layer over `rl_core::Limiter`.
//!
//! Every call returns a Promise at once. The decision itself runs on the core's tokio runtime
//! (`rl_core::runtime::handle()`), never on the JavaScript thread. Finished calls are pushed onto
//! one queue per limiter, and one threadsafe function wakes the JavaScript thread, which settles
//! every promise that finished meanwhile in one go: under load, one wake-up settles a whole batch
//! instead of one uv_async round per call.
//!
//! The threadsafe function is referenced (keeps the event loop alive) only while a call is in
//! flight, so an idle limiter, and a closed one, never keep the process alive. The memory backend
//! (no URL) decides inline: it never waits on anything.
//!
//! A panic never crosses into Node (that aborts the process) and never leaves a promise pending
//! (that hangs its caller and keeps the process alive): every method body runs under
//! `rl_core::unwind::call` and every call's future under `rl_core::unwind::CatchUnwind`, and the
//! panic becomes a `NativePanicError` (code `ERR_RL_INTERNAL`), thrown or rejecting the promise.
//! `catch_unwind` on each `#[napi]` item also covers napi-rs's own argument conversions.
//!
//! Argument *types* are checked by the JavaScript wrapper (`limiter.js`), which also defines the
//! error classes; this layer re-checks number shapes defensively and maps `rl_core::Error` to those
//! classes through the factories the wrapper hands to each limiter.

#![deny(clippy::all)]

use std::future::Future;
use std::ptr;
use std::sync::atomic::{AtomicPtr, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use napi::bindgen_prelude::*;
use napi::sys;
use napi::threadsafe_function::{ThreadsafeFunction, ThreadsafeFunctionCallMode};
use napi_derive::napi;
use rl_core::unwind::{test_panic, CatchUnwind, TestPanic};

/// One decision, as the promise of `acquire`/`peek` resolves it.
#[napi(object)]
pub struct NativeDecision {
    pub allowed: bool,
    pub remaining: f64,
    pub used: f64,
    pub retry_after_ms: f64,
    pub reset_after_ms: f64,
    pub mode: String,
    pub now_ms: f64,
}

/// The limiter options, as `limiter.js` passes them (already type-checked there); absent fields
/// keep the core's defaults.
#[napi(object)]
pub struct NativeOptions {
    pub key_prefix: Option<String>,
    pub connect_timeout_ms: Option<f64>,
    pub request_timeout_ms: Option<f64>,
    pub max_clock_skew_ms: Option<f64>,
    pub retry_delay_ms: Option<f64>,
    pub local_fallback: Option<bool>,
    pub degrade_rtt_ms: Option<f64>,
    pub degrade_after_ms: Option<f64>,
    pub recover_rtt_ms: Option<f64>,
    pub recover_after_ms: Option<f64>,
    pub instances: Option<f64>,
    pub local_max_keys: Option<f64>,
}

/// `rl_core::Stats`, as `stats()` returns it (numbers are exact: counters stay far below 2^53).
#[napi(object)]
pub struct NativeStats {
    pub mode: String,
    pub topology: String,
    pub decisions_normal: f64,
    pub decisions_local: f64,
    pub decisions_memory: f64,
    pub transitions_to_local: f64,
    pub transitions_to_normal: f64,
    pub state_ms: f64,
    pub state_reason: String,
    pub redis_errors: f64,
    pub retries: f64,
    pub probes: f64,
    pub repairs: f64,
    pub repaired_permits: f64,
    pub failovers: f64,
    pub instances: f64,
    pub local_keys: f64,
    pub rtt_samples: f64,
    pub rtt_last_us: f64,
    pub rtt_p50_us: f64,
    pub rtt_p99_us: f64,
    pub rtt_max_us: f64,
}

impl From<rl_core::Stats> for NativeStats {
    fn from(s: rl_core::Stats) -> Self {
        NativeStats {
            mode: s.mode.as_str().to_string(),
            topology: s.topology.to_string(),
            decisions_normal: s.decisions_normal as f64,
            decisions_local: s.decisions_local as f64,
            decisions_memory: s.decisions_memory as f64,
            transitions_to_local: s.transitions_to_local as f64,
            transitions_to_normal: s.transitions_to_normal as f64,
            state_ms: s.state_ms as f64,
            state_reason: s.state_reason,
            redis_errors: s.redis_errors as f64,
            retries: s.retries as f64,
            probes: s.probes as f64,
            repairs: s.repairs as f64,
            repaired_permits: s.repaired_permits as f64,
            failovers: s.failovers as f64,
            instances: s.instances as f64,
            local_keys: s.local_keys as f64,
            rtt_samples: s.rtt_samples as f64,
            rtt_last_us: s.rtt_last_us as f64,
            rtt_p50_us: s.rtt_p50_us as f64,
            rtt_p99_us: s.rtt_p99_us as f64,
            rtt_max_us: s.rtt_max_us as f64,
        }
    }
}

/// A `napi_deferred` travelling to a runtime thread and back. It is only ever settled on the
/// JavaScript thread that made it (in the queue's drain).
struct Deferred(sys::napi_deferred);
// SAFETY: the pointer is never dereferenced off the JavaScript thread; it is only carried.
unsafe impl Send for Deferred {}

enum Outcome {
    Decision(rl_core::Decision),
    Done,
    Failed(rl_core::Error),
    /// The call panicked; the panic's message.
    Panicked(String),
}

struct Completion {
    deferred: Deferred,
    outcome: Outcome,
}

type Notify = ThreadsafeFunction<(), Unknown<'static>, (), Status, false, true, 0>;

/// State shared by a limiter, its threadsafe function's callback and the runtime tasks.
struct Queue {
    done: Mutex<Vec<Completion>>,
    /// Calls handed out and not yet settled. Touched on the JavaScript thread only.
    pending: AtomicU32,
    /// The threadsafe function, for ref/unref from the JavaScript thread.
    tsfn: AtomicPtr<sys::napi_threadsafe_function__>,
    /// `close()` promises waiting for `pending` to reach 0.
    on_idle: Mutex<Vec<Deferred>>,
    factories: Factories,
}

/// What a runtime task needs to hand a result back.
struct Notifier {
    queue: Arc<Queue>,
    tsfn: Notify,
}

impl Notifier {
    fn complete(&self, deferred: Deferred, outcome: Outcome) {
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

/// The wrapper's factories, given to each limiter by `limiter.js`: `makeError(code, message,
/// argument, details)` turns core errors into its error classes; `makeDecision(allowed, remaining,
/// used, retryAfterMs, resetAfterMs, mode, nowMs)` builds a Decision (an object literal made in
/// JavaScript is several times cheaper than one assembled property by property through napi).
/// `mode` is an index into `['normal', 'memory', 'local', 'lease']`, or the mode's name for any
/// other. Kept per limiter, so each limiter uses the classes of the `limiter.js` that made it.
/// (napi-rs releases a `FunctionRef` safely from any thread and after its environment is gone.)
type ErrorArgs = FnArgs<(String, String, Option<String>, Vec<f64>)>;
struct Factories {
    make_error: FunctionRef<ErrorArgs, Unknown<'static>>,
    make_decision: FunctionRef<(), Unknown<'static>>,
}

const PANIC_CODE: &str = "ERR_RL_INTERNAL";

/// A JavaScript error value as a `napi::Error`, to be thrown when the method returns.
fn thrown(env: &Env, value: Result<sys::napi_value>) -> Error {
    match value {
        Ok(v) => Error::from(unsafe { Unknown::from_raw_unchecked(env.raw(), v) }),
        Err(e) => e,
    }
}

fn error_parts(e: &rl_core::Error) -> (&'static str, Option<String>, Vec<f64>) {
    match e {
        rl_core::Error::InvalidArgument { name, .. } => {
            ("ERR_RL_INVALID_ARGUMENT", Some((*name).to_string()), vec![])
        }
        rl_core::Error::BackendUnavailable(_) => ("ERR_RL_BACKEND_UNAVAILABLE", None, vec![]),
        rl_core::Error::ClockSkew {
            client_ms,
            server_ms,
            skew_ms,
            max_skew_ms,
        } => (
            "ERR_RL_CLOCK_SKEW",
            None,
            vec![
                *client_ms as f64,
                *server_ms as f64,
                *skew_ms as f64,
                *max_skew_ms as f64,
            ],
        ),
        _ => ("ERR_RL_BACKEND", None, vec![]),
    }
}

/// The JavaScript error for `e`: an instance of the wrapper's classes when a factory is
/// registered, otherwise a plain `Error` with `code`.
impl Factories {
    /// The JavaScript error for `code`: an instance of the wrapper's classes.
    fn error(
        &self,
        env: &Env,
        code: &str,
        message: String,
        argument: Option<String>,
        details: Vec<f64>,
    ) -> Result<sys::napi_value> {
        let f = self.make_error.borrow_back(env)?;
        let v = f.call(FnArgs::from((code.to_string(), message, argument, details)))?;
        Ok(v.raw())
    }

    fn core_error(&self, env: &Env, e: &rl_core::Error) -> Result<sys::napi_value> {
        let (code, argument, details) = error_parts(e);
        self.error(env, code, e.to_string(), argument, details)
    }

    fn panic_error(&self, env: &Env, message: String) -> Result<sys::napi_value> {
        self.error(env, PANIC_CODE, message, None, vec![])
    }

    /// Runs a method's body: a panic in it is thrown as a `NativePanicError`.
    fn guard<T>(&self, env: &Env, body: impl FnOnce() -> Result<T>) -> Result<T> {
        rl_core::unwind::call(body).unwrap_or_else(|m| Err(thrown(env, self.panic_error(env, m))))
    }

    fn closed_error(&self, env: &Env) -> Result<sys::napi_value> {
        self.error(
            env,
            "ERR_RL_CLOSED",
            "the limiter is closed".into(),
            None,
            vec![],
        )
    }

    /// A Decision object, from `makeDecision` (raw napi calls: this runs for every settled call).
    fn decision(&self, env: &Env, d: &rl_core::Decision) -> Result<sys::napi_value> {
        let raw = env.raw();
        let f = self.make_decision.borrow_back(env)?.raw();
        let mut args = [ptr::null_mut(); 7];
        let mut recv = ptr::null_mut();
        let mut out = ptr::null_mut();
        let mode = match d.mode {
            rl_core::Mode::Normal => Some(0),
            rl_core::Mode::Memory => Some(1),
            rl_core::Mode::Local => Some(2),
            _ => None,
        };
        let ok = unsafe {
            let mut ok =
                sys::napi_get_boolean(raw, d.allowed, &mut args[0]) == sys::Status::napi_ok;
            for (slot, v) in
                args[1..5]
                    .iter_mut()
                    .zip([d.remaining, d.used, d.retry_after_ms, d.reset_after_ms])
            {
                ok &= sys::napi_create_double(raw, v as f64, slot) == sys::Status::napi_ok;
            }
            ok &= match mode {
                Some(i) => sys::napi_create_int32(raw, i, &mut args[5]),
                None => {
                    let name = d.mode.as_str();
                    sys::napi_create_string_utf8(
                        raw,
                        name.as_ptr().cast(),
                        name.len() as isize,
                        &mut args[5],
                    )
                }
            } == sys::Status::napi_ok;
            ok &=
                sys::napi_create_double(raw, d.now_ms as f64, &mut args[6]) == sys::Status::napi_ok;
            ok &= sys::napi_get_undefined(raw, &mut recv) == sys::Status::napi_ok;
            ok && sys::napi_call_function(raw, recv, f, args.len(), args.as_ptr(), &mut out)
                == sys::Status::napi_ok
        };
        if ok {
            Ok(out)
        } else {
            Err(Error::new(
                Status::GenericFailure,
                "cannot build a Decision",
            ))
        }
    }
}

/// Settles one promise on the JavaScript thread.
fn settle(env: &Env, factories: &Factories, deferred: Deferred, outcome: Outcome) {
    let raw = env.raw();
    // A panic while building the value still settles the promise (the fallback below).
    let value = rl_core::unwind::call(|| match &outcome {
        Outcome::Decision(d) => factories.decision(env, d),
        Outcome::Done => unsafe { <()>::to_napi_value(raw, ()) },
        Outcome::Failed(e) => factories.core_error(env, e),
        Outcome::Panicked(m) => factories.panic_error(env, m.clone()),
    })
    .unwrap_or_else(|m| Err(Error::new(Status::GenericFailure, m)));
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
    /// Runs on the JavaScript thread when woken: settles everything finished so far.
    fn drain(&self, env: &Env) {
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
    fn started(&self, env: &Env) {
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

/// A number from JavaScript as the core's `u64`; the wrapper has already checked the shape, this
/// guards direct callers of the native module.
fn whole(name: &'static str, v: f64) -> std::result::Result<u64, rl_core::Error> {
    if v.is_finite() && v >= 0.0 && v.fract() == 0.0 && v <= 9_007_199_254_740_991.0 {
        Ok(v as u64)
    } else {
        Err(rl_core::Error::InvalidArgument {
            name,
            message: format!("is {v}; must be a non-negative safe integer"),
        })
    }
}

fn key_bytes(key: Either<String, BufferSlice>) -> Vec<u8> {
    match key {
        Either::A(s) => s.into_bytes(),
        Either::B(b) => b.to_vec(),
    }
}

fn new_promise(env: &Env) -> Result<(Deferred, sys::napi_value)> {
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

/// The native limiter behind `Limiter` in `limiter.js`. Not meant to be used directly.
#[napi]
pub struct NativeLimiter {
    core: Option<rl_core::Limiter>,
    inline: bool,
    instance_id: Option<String>,
    runtime: tokio::runtime::Handle,
    queue: Arc<Queue>,
    notifier: Option<Arc<Notifier>>,
}

#[napi]
impl NativeLimiter {
    /// `url`: `redis://...`, `rediss://...`, `memory://` or null/undefined (memory).
    /// `makeError`/`makeDecision`: see `Factories`; `wake`: any function (the threadsafe
    /// function's target, called once per batch of settled calls).
    #[napi(
        constructor,
        catch_unwind,
        ts_args_type = "url: string | undefined | null, options: NativeOptions, makeError: (code: string, message: string, argument: string | null, details: number[]) => Error, makeDecision: (allowed: boolean, remaining: number, used: number, retryAfterMs: number, resetAfterMs: number, mode: number | string, nowMs: number) => NativeDecision, wake: () => void"
    )]
    pub fn new(
        env: Env,
        url: Option<String>,
        options: NativeOptions,
        make_error: Function<ErrorArgs, Unknown<'static>>,
        make_decision: Function<(), Unknown<'static>>,
        wake: Function<(), Unknown<'static>>,
    ) -> Result<Self> {
        rl_core::unwind::call(|| Self::open(&env, url, options, &make_error, &make_decision, &wake))
            .unwrap_or_else(|m| {
                let e = make_error.call(FnArgs::from((PANIC_CODE.to_string(), m, None, vec![])));
                Err(e.map(Error::from).unwrap_or_else(|e| e))
            })
    }

    fn open(
        env: &Env,
        url: Option<String>,
        options: NativeOptions,
        make_error: &Function<ErrorArgs, Unknown<'static>>,
        make_decision: &Function<(), Unknown<'static>>,
        wake: &Function<(), Unknown<'static>>,
    ) -> Result<Self> {
        let factories = Factories {
            make_error: make_error.create_ref()?,
            make_decision: make_decision.create_ref()?,
        };
        let fail = |e: rl_core::Error| -> Error { thrown(env, factories.core_error(env, &e)) };
        let NativeOptions {
            key_prefix,
            connect_timeout_ms,
            request_timeout_ms,
            max_clock_skew_ms,
            retry_delay_ms,
            local_fallback,
            degrade_rtt_ms,
            degrade_after_ms,
            recover_rtt_ms,
            recover_after_ms,
            instances,
            local_max_keys,
        } = options;
        let millis = |name: &'static str, v: f64| whole(name, v).map(Duration::from_millis);
        let mut options = rl_core::Options::default();
        if let Some(p) = key_prefix {
            test_panic(TestPanic::Caller, p.as_bytes());
            options.key_prefix = p;
        }
        if let Some(v) = connect_timeout_ms {
            options.connect_timeout =
                Duration::from_millis(whole("connectTimeoutMs", v).map_err(fail)?);
        }
        if let Some(v) = request_timeout_ms {
            options.request_timeout =
                Duration::from_millis(whole("requestTimeoutMs", v).map_err(fail)?);
        }
        if let Some(v) = max_clock_skew_ms {
            options.max_clock_skew_ms = whole("maxClockSkewMs", v).map_err(fail)?;
        }
        if let Some(v) = retry_delay_ms {
            options.retry_delay = millis("retryDelayMs", v).map_err(fail)?;
        }
        if let Some(v) = local_fallback {
            options.local_fallback = v;
        }
        if let Some(v) = degrade_rtt_ms {
            options.degrade_rtt = millis("degradeRttMs", v).map_err(fail)?;
        }
        if let Some(v) = degrade_after_ms {
            options.degrade_after = millis("degradeAfterMs", v).map_err(fail)?;
        }
        if let Some(v) = recover_rtt_ms {
            options.recover_rtt = millis("recoverRttMs", v).map_err(fail)?;
        }
        if let Some(v) = recover_after_ms {
            options.recover_after = millis("recoverAfterMs", v).map_err(fail)?;
        }
        if let Some(v) = instances {
            options.instances = Some(whole("instances", v).map_err(fail)?);
        }
        if let Some(v) = local_max_keys {
            let n = whole("localMaxKeys", v).map_err(fail)?;
            options.local_max_keys = usize::try_from(n).map_err(|_| {
                fail(rl_core::Error::InvalidArgument {
                    name: "localMaxKeys",
                    message: format!("is {n}, which does not fit in this platform's usize"),
                })
            })?;
        }
        let core = rl_core::Limiter::open(url.as_deref(), options).map_err(fail)?;
        let inline = core.backend() == rl_core::BackendKind::Memory;
        let instance_id = core.instance_id().map(str::to_owned);
        let runtime = rl_core::runtime::handle().map_err(fail)?;

        let queue = Arc::new(Queue {
            done: Mutex::new(Vec::new()),
            pending: AtomicU32::new(0),
            tsfn: AtomicPtr::new(ptr::null_mut()),
            on_idle: Mutex::new(Vec::new()),
            factories,
        });
        let for_callback = queue.clone();
        let tsfn: Notify = wake
            .build_threadsafe_function::<()>()
            .weak::<true>()
            .callee_handled::<false>()
            .build_callback(move |ctx| {
                for_callback.drain(&ctx.env);
                Ok(())
            })?;
        queue.tsfn.store(tsfn.raw(), Ordering::Relaxed);
        Ok(NativeLimiter {
            core: Some(core),
            inline,
            instance_id,
            runtime,
            queue: queue.clone(),
            notifier: Some(Arc::new(Notifier { queue, tsfn })),
        })
    }

    /// `"redis"` or `"memory"`.
    #[napi(getter, catch_unwind)]
    pub fn backend(&self) -> String {
        match &self.core {
            Some(c) => c.backend().to_string(),
            None => "closed".into(),
        }
    }

    #[napi(getter, catch_unwind)]
    pub fn closed(&self) -> bool {
        self.core.is_none()
    }

    /// This limiter's id in the fleet's heartbeats in Redis; null for the memory backend. Kept
    /// after `close()`.
    #[napi(getter, catch_unwind)]
    pub fn instance_id(&self) -> Option<String> {
        self.instance_id.clone()
    }

    /// The core's `Stats` (no I/O, never waits); null once closed (the wrapper throws then).
    #[napi(catch_unwind)]
    pub fn stats(&self, env: Env) -> Result<Option<NativeStats>> {
        self.queue.factories.guard(&env, || {
            Ok(self.core.as_ref().map(|c| NativeStats::from(c.stats())))
        })
    }

    #[napi(catch_unwind, ts_return_type = "Promise<NativeDecision>")]
    pub fn acquire(
        &self,
        env: Env,
        key: Either<String, BufferSlice>,
        limit: f64,
        window_ms: f64,
        cost: f64,
    ) -> Result<Unknown<'static>> {
        self.queue.factories.guard(&env, || {
            let nums = whole("limit", limit)
                .and_then(|l| Ok((l, whole("windowMs", window_ms)?, whole("cost", cost)?)));
            let key = key_bytes(key);
            test_panic(TestPanic::Caller, &key);
            self.run(&env, move |core| async move {
                test_panic(TestPanic::Future, &key);
                let (l, w, c) = nums?;
                core.acquire(key, l, w, c).await.map(Outcome::Decision)
            })
        })
    }

    #[napi(catch_unwind, ts_return_type = "Promise<NativeDecision>")]
    pub fn peek(
        &self,
        env: Env,
        key: Either<String, BufferSlice>,
        limit: f64,
        window_ms: f64,
    ) -> Result<Unknown<'static>> {
        self.queue.factories.guard(&env, || {
            let nums = whole("limit", limit).and_then(|l| Ok((l, whole("windowMs", window_ms)?)));
            let key = key_bytes(key);
            test_panic(TestPanic::Caller, &key);
            self.run(&env, move |core| async move {
                test_panic(TestPanic::Future, &key);
                let (l, w) = nums?;
                core.peek(key, l, w).await.map(Outcome::Decision)
            })
        })
    }

    #[napi(catch_unwind, ts_return_type = "Promise<void>")]
    pub fn reset(&self, env: Env, key: Either<String, BufferSlice>) -> Result<Unknown<'static>> {
        self.queue.factories.guard(&env, || {
            let key = key_bytes(key);
            test_panic(TestPanic::Caller, &key);
            self.run(&env, move |core| async move {
                test_panic(TestPanic::Future, &key);
                core.reset(key).await.map(|()| Outcome::Done)
            })
        })
    }

    #[napi(catch_unwind, ts_return_type = "Promise<void>")]
    pub fn ping(&self, env: Env) -> Result<Unknown<'static>> {
        self.queue.factories.guard(&env, || {
            self.run(&env, move |core| async move {
                core.ping().await.map(|()| Outcome::Done)
            })
        })
    }

    /// Refuses new calls; the promise resolves once every call in flight is settled. Idempotent.
    #[napi(catch_unwind, ts_return_type = "Promise<void>")]
    pub fn close(&mut self, env: Env) -> Result<Unknown<'static>> {
        let queue = self.queue.clone();
        queue.factories.guard(&env, || {
            self.core = None;
            let (deferred, promise) = new_promise(&env)?;
            if queue.pending.load(Ordering::Relaxed) == 0 {
                settle(&env, &queue.factories, deferred, Outcome::Done);
            } else {
                queue
                    .on_idle
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .push(deferred);
            }
            // Tasks in flight keep their own clone; the threadsafe function is released with the
            // last.
            self.notifier = None;
            Ok(unsafe { Unknown::from_raw_unchecked(env.raw(), promise) })
        })
    }

    fn run<F, Fut>(&self, env: &Env, call: F) -> Result<Unknown<'static>>
    where
        F: FnOnce(rl_core::Limiter) -> Fut,
        Fut: Future<Output = rl_core::Result<Outcome>> + Send + 'static,
    {
        let (deferred, promise) = new_promise(env)?;
        let promise = unsafe { Unknown::from_raw_unchecked(env.raw(), promise) };
        let (Some(core), Some(notifier)) = (&self.core, &self.notifier) else {
            let e = self.queue.factories.closed_error(env)?;
            unsafe { sys::napi_reject_deferred(env.raw(), deferred.0, e) };
            return Ok(promise);
        };
        // Polled here or on the runtime, a panic in the call settles its promise all the same.
        let mut fut = Box::pin(CatchUnwind::new(call(core.clone())));
        let outcome = |r: std::result::Result<rl_core::Result<Outcome>, String>| match r {
            Ok(r) => r.unwrap_or_else(Outcome::Failed),
            Err(panic) => Outcome::Panicked(panic),
        };
        if self.inline {
            // The memory backend never waits: decide right here, no thread hop. (Should it ever
            // wait, the call simply continues on the runtime below.)
            if let Poll::Ready(r) = fut.as_mut().poll(&mut Context::from_waker(Waker::noop())) {
                settle(env, &self.queue.factories, deferred, outcome(r));
                return Ok(promise);
            }
        }
        self.queue.started(env);
        let notifier = notifier.clone();
        self.runtime.spawn(async move {
            let outcome = outcome(fut.await);
            notifier.complete(deferred, outcome);
        });
        Ok(promise)
    }
}
