//! `NativeLimiter`, the class `limiter.js` wraps: opens the core's limiter and starts each call
//! with `rl_core::runtime::run_or_spawn`, settling its promise at once or through `bridge`.

use std::future::Future;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

use napi::bindgen_prelude::*;
use napi::sys;
use napi_derive::napi;
use rl_core::runtime::{run_or_spawn, Started};
use rl_core::unwind::{test_panic, CatchUnwind, TestPanic};

use crate::bridge::{new_promise, settle, Deferred, Notifier, Notify, Outcome, Queue};
use crate::convert::{self, key_bytes, whole};
use crate::errors::{ErrorArgs, Factories, Scratch, PANIC_CODE};
use crate::options;

/// What starts a call: the core, and the way back to the JavaScript thread.
#[derive(Clone)]
pub(crate) struct Caller {
    core: rl_core::Limiter,
    notifier: Arc<Notifier>,
}

/// A limiter's `Caller` while it is open (`None` after `close()`), shared by the limiter and the
/// middleware's deciders (see `decider`), so that closing the one closes them all.
pub(crate) type Open = Arc<Mutex<Option<Caller>>>;

fn caller_of(open: &Open) -> Option<Caller> {
    open.lock().unwrap_or_else(|p| p.into_inner()).clone()
}

/// The native limiter behind `Limiter` in `limiter.js`. Not meant to be used directly.
#[napi]
pub struct NativeLimiter {
    open: Open,
    instance_id: Option<String>,
    queue: Arc<Queue>,
}

#[napi]
impl NativeLimiter {
    /// `url`: `redis://...`, `rediss://...`, `memory://` or null/undefined (memory). `options`:
    /// the caller's options object, camelCase keys. `makeError`/`makeDecision`/`makeComposite`
    /// and `scratch` (the numbers `makeComposite` reads): see `Factories`;
    /// `wake`: any function (the threadsafe function's target, called once per batch of settled
    /// calls).
    #[allow(clippy::too_many_arguments)]
    #[napi(
        constructor,
        catch_unwind,
        ts_args_type = "url: string | undefined | null, options: object, makeError: (code: string, message: string, argument: string | null, details: number[]) => Error, makeDecision: (allowed: boolean, remaining: number, used: number, retryAfterMs: number, resetAfterMs: number, mode: number | string, nowMs: number) => NativeDecision, makeComposite: (pairs: number, body?: string, ...headers: string[]) => object, wake: () => void, scratch: Float64Array"
    )]
    pub fn new(
        env: Env,
        url: Option<String>,
        options: Object,
        make_error: Function<ErrorArgs, Unknown<'static>>,
        make_decision: Function<(), Unknown<'static>>,
        make_composite: Function<(), Unknown<'static>>,
        wake: Function<(), Unknown<'static>>,
        scratch: Unknown<'_>,
    ) -> Result<Self> {
        rl_core::unwind::call(|| {
            let makers = (&make_decision, &make_composite);
            let scratch = Scratch::of(&env, &scratch)?;
            Self::open(&env, url, &options, &make_error, makers, &wake, scratch)
        })
        .unwrap_or_else(|m| {
            let e = make_error.call(FnArgs::from((PANIC_CODE.to_string(), m, None, vec![])));
            Err(e.map(Error::from).unwrap_or_else(|e| e))
        })
    }

    fn open(
        env: &Env,
        url: Option<String>,
        options: &Object,
        make_error: &Function<ErrorArgs, Unknown<'static>>,
        (make_decision, make_composite): (
            &Function<(), Unknown<'static>>,
            &Function<(), Unknown<'static>>,
        ),
        wake: &Function<(), Unknown<'static>>,
        scratch: Scratch,
    ) -> Result<Self> {
        let factories = Factories {
            make_error: make_error.create_ref()?,
            make_decision: make_decision.create_ref()?,
            make_composite: make_composite.create_ref()?,
            scratch,
        };
        let options = options::from_object(options)?.map_err(|e| factories.throw(env, &e))?;
        let core = rl_core::Limiter::open(url.as_deref(), options)
            .map_err(|e| factories.throw(env, &e))?;
        let instance_id = core.instance_id().map(str::to_owned);

        let queue = Arc::new(Queue::new(factories));
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
        let notifier = Arc::new(Notifier {
            queue: queue.clone(),
            tsfn,
        });
        Ok(NativeLimiter {
            open: Arc::new(Mutex::new(Some(Caller { core, notifier }))),
            instance_id,
            queue,
        })
    }

    /// `"redis"` or `"memory"`; `"closed"` after `close()`.
    #[napi(getter, catch_unwind)]
    pub fn backend(&self) -> String {
        match caller_of(&self.open) {
            Some(c) => c.core.backend().to_string(),
            None => "closed".into(),
        }
    }

    #[napi(getter, catch_unwind)]
    pub fn closed(&self) -> bool {
        caller_of(&self.open).is_none()
    }

    /// This limiter's id in the fleet's heartbeats in Redis; null for the memory backend. Kept
    /// after `close()`.
    #[napi(getter, catch_unwind)]
    pub fn instance_id(&self) -> Option<String> {
        self.instance_id.clone()
    }

    /// The core's `Stats` as a plain object (no I/O, never waits); null once closed (the wrapper
    /// throws then).
    #[napi(
        catch_unwind,
        ts_return_type = "Record<string, string | number> | null"
    )]
    pub fn stats(&self, env: Env) -> Result<Option<Unknown<'static>>> {
        self.queue.factories.guard(&env, || {
            caller_of(&self.open)
                .map(|c| convert::stats(&env, &c.core.stats()))
                .transpose()
        })
    }

    /// `limit`, `windowMs`, `cost`: numbers (the wrapper checks that much); their shape is
    /// checked here, their range by the core.
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
                .and_then(|l| Ok((l, whole("window_ms", window_ms)?, whole("cost", cost)?)));
            let key = key_bytes(key);
            test_panic(TestPanic::Caller, &key);
            self.run(&env, move |core| async move {
                let (l, w, c) = nums?;
                let r = core.acquire(&key, l, w, c).await;
                // After the core's call: for Redis that is in the task on the runtime (the first
                // poll, on this thread, only started it), for memory on this thread.
                test_panic(TestPanic::Future, &key);
                r.map(Outcome::Decision)
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
            let nums = whole("limit", limit).and_then(|l| Ok((l, whole("window_ms", window_ms)?)));
            let key = key_bytes(key);
            test_panic(TestPanic::Caller, &key);
            self.run(&env, move |core| async move {
                let (l, w) = nums?;
                let r = core.peek(&key, l, w).await;
                test_panic(TestPanic::Future, &key);
                r.map(Outcome::Decision)
            })
        })
    }

    #[napi(catch_unwind, ts_return_type = "Promise<void>")]
    pub fn reset(&self, env: Env, key: Either<String, BufferSlice>) -> Result<Unknown<'static>> {
        self.queue.factories.guard(&env, || {
            let key = key_bytes(key);
            test_panic(TestPanic::Caller, &key);
            self.run(&env, move |core| async move {
                let r = core.reset(&key).await;
                test_panic(TestPanic::Future, &key);
                r.map(|()| Outcome::Done)
            })
        })
    }

    /// `group`: the hash tag of `acquireAll` calls, or null (then this is `reset`).
    #[napi(catch_unwind, ts_return_type = "Promise<void>")]
    pub fn reset_in_group(
        &self,
        env: Env,
        key: Either<String, BufferSlice>,
        group: Option<Either<String, BufferSlice>>,
    ) -> Result<Unknown<'static>> {
        self.queue.factories.guard(&env, || {
            let key = key_bytes(key);
            let group = group.map(key_bytes);
            test_panic(TestPanic::Caller, &key);
            self.run(&env, move |core| async move {
                let r = core.reset_in_group(&key, group.as_deref()).await;
                test_panic(TestPanic::Future, &key);
                r.map(|()| Outcome::Done)
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

    /// Refuses new calls and starts the core's close, which returns unused leases to Redis; the
    /// promise resolves once that and every other call in flight are settled. Idempotent. Best
    /// effort: a refund Redis does not take leaves the leases to age out, so it never rejects.
    #[napi(catch_unwind, ts_return_type = "Promise<void>")]
    pub fn close(&mut self, env: Env) -> Result<Unknown<'static>> {
        let queue = self.queue.clone();
        queue.factories.guard(&env, || {
            if caller_of(&self.open).is_some() {
                // Counted in flight like any call, so the close promise waits for it.
                self.run(&env, |core| async move {
                    let _ = core.close().await;
                    Ok(Outcome::Done)
                })?;
            }
            // Tasks in flight keep their own `Caller`; the threadsafe function is released with
            // the last.
            *self.open.lock().unwrap_or_else(|p| p.into_inner()) = None;
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
            Ok(unsafe { Unknown::from_raw_unchecked(env.raw(), promise) })
        })
    }

    pub(crate) fn factories(&self) -> &Factories {
        &self.queue.factories
    }

    /// This limiter's `Caller` while open and its queue, for a decider (see `decider`).
    pub(crate) fn shared(&self) -> (Open, Arc<Queue>) {
        (self.open.clone(), self.queue.clone())
    }

    /// Starts a call: decided at once if it can be (memory backend, argument error), else it goes
    /// on the core's runtime and the promise is settled through the queue. Polled here or there,
    /// a panic in the call settles its promise all the same.
    pub(crate) fn run<F, Fut>(&self, env: &Env, call: F) -> Result<Unknown<'static>>
    where
        F: FnOnce(rl_core::Limiter) -> Fut,
        Fut: Future<Output = rl_core::Result<Outcome>> + Send + 'static,
    {
        start(env, &self.open, &self.queue, call, None)
    }
}

/// The JavaScript value of a call decided at once with a result (see [`start`]).
pub(crate) type Ready<'a> = &'a dyn Fn(&Env, &Outcome) -> Result<sys::napi_value>;

/// Starts a call on `open`'s limiter (see [`NativeLimiter::run`]). With `ready`, a call decided
/// at once with a result (not an error) gives `ready`'s value for it, with no promise: what a
/// middleware's request needs when a lease or the memory backend decides, saving the promise,
/// its settling and a microtask turn. A call that waits, or fails, still gives a promise.
pub(crate) fn start<F, Fut>(
    env: &Env,
    open: &Open,
    queue: &Queue,
    call: F,
    ready: Option<Ready<'_>>,
) -> Result<Unknown<'static>>
where
    F: FnOnce(rl_core::Limiter) -> Fut,
    Fut: Future<Output = rl_core::Result<Outcome>> + Send + 'static,
{
    let factories = &queue.factories;
    let Some(Caller { core, notifier }) = caller_of(open) else {
        let (deferred, promise) = new_promise(env)?;
        let e = factories.closed_error(env)?;
        unsafe { sys::napi_reject_deferred(env.raw(), deferred.0, e) };
        return Ok(unsafe { Unknown::from_raw_unchecked(env.raw(), promise) });
    };
    // The promise is made up front, unless `ready` (then only if the call waits): one of the
    // two holders of its deferred settles it, never both.
    let mut made = if ready.is_some() {
        None
    } else {
        Some(new_promise(env)?)
    };
    let raw = made.as_ref().map(|(d, _)| d.0);
    let mut failed_promise = None;
    let started = run_or_spawn(CatchUnwind::new(call(core)), || {
        let raw = match raw {
            Some(raw) => Some(raw),
            None => match new_promise(env) {
                Ok((d, p)) => {
                    let raw = d.0;
                    made = Some((d, p));
                    Some(raw)
                }
                Err(e) => {
                    failed_promise = Some(e);
                    None
                }
            },
        };
        if raw.is_some() {
            queue.started(env);
        }
        let deferred = raw.map(Deferred);
        move |r| {
            if let Some(deferred) = deferred {
                notifier.complete(deferred, outcome(r))
            }
        }
    });
    if let Some(e) = failed_promise {
        return Err(e);
    }
    let promise = |made: Option<(Deferred, sys::napi_value)>| -> Result<_> {
        let (deferred, promise) = match made {
            Some(m) => m,
            None => new_promise(env)?,
        };
        Ok((deferred, unsafe {
            Unknown::from_raw_unchecked(env.raw(), promise)
        }))
    };
    match started {
        Ok(Started::Ready(r)) => {
            let out = outcome(r);
            if let Some(ready) = ready {
                if !matches!(out, Outcome::Failed(_) | Outcome::Panicked(_)) {
                    let v = ready(env, &out)?;
                    return Ok(unsafe { Unknown::from_raw_unchecked(env.raw(), v) });
                }
            }
            let (deferred, p) = promise(made)?;
            settle(env, factories, deferred, out);
            Ok(p)
        }
        Ok(Started::Spawned) => Ok(promise(made)?.1),
        Err(e) => {
            let (deferred, p) = promise(made)?;
            settle(env, factories, deferred, Outcome::Failed(e));
            Ok(p)
        }
    }
}

/// A finished call's future output as the promise settles it.
fn outcome(r: std::result::Result<rl_core::Result<Outcome>, String>) -> Outcome {
    match r {
        Ok(r) => r.unwrap_or_else(Outcome::Failed),
        Err(panic) => Outcome::Panicked(panic),
    }
}
