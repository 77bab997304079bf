//! `rl_core::Error` as the wrapper's JavaScript error classes.
//!
//! `limiter.js` defines the classes and hands each limiter a `makeError(code, message, argument,
//! details)` factory; this module picks the code, names the argument as the caller wrote it and
//! passes the core's message through untouched.

use napi::bindgen_prelude::*;
use napi::sys;
use rl_core::options::camel_case;

/// The factories `limiter.js` gives each limiter: `makeError` (above), `makeDecision` (see
/// `convert`) and `makeComposite` (see `composite`). Kept per limiter, so each limiter uses the classes of the `limiter.js` that made
/// it. (napi-rs releases a `FunctionRef` safely from any thread and after its environment is
/// gone.)
pub(crate) struct Factories {
    pub(crate) make_error: FunctionRef<ErrorArgs, Unknown<'static>>,
    pub(crate) make_decision: FunctionRef<(), Unknown<'static>>,
    pub(crate) make_composite: FunctionRef<(), Unknown<'static>>,
    /// `makeComposite`'s numbers (see `composite`).
    pub(crate) scratch: Scratch,
}

/// The `Float64Array` `limiter.js` keeps for `makeComposite`: the native layer writes a composite
/// decision's numbers into it and then calls `makeComposite`, which reads them, instead of making
/// one JavaScript value per number (this is on every middleware request). The array is a
/// module-level constant of `limiter.js` that `makeComposite` refers to, so it lives as long as
/// the factories do; it is larger than V8's on-heap limit (its memory never moves), and only
/// ever touched on the JavaScript thread.
pub(crate) struct Scratch {
    pub(crate) ptr: *mut f64,
    pub(crate) len: usize,
}

// SAFETY: carried with the factories, dereferenced only on the JavaScript thread (see above).
unsafe impl Send for Scratch {}
unsafe impl Sync for Scratch {}

impl Scratch {
    /// The data of `array`, which must be a `Float64Array`.
    pub(crate) fn of(env: &Env, array: &Unknown<'_>) -> Result<Scratch> {
        let mut kind = sys::TypedarrayType::int8_array;
        let mut len = 0usize;
        let mut data = std::ptr::null_mut();
        let status = unsafe {
            sys::napi_get_typedarray_info(
                env.raw(),
                array.raw(),
                &mut kind,
                &mut len,
                &mut data,
                std::ptr::null_mut(),
                std::ptr::null_mut(),
            )
        };
        if status != sys::Status::napi_ok || kind != sys::TypedarrayType::float64_array {
            return Err(Error::new(
                Status::InvalidArg,
                "internal: the scratch argument must be a Float64Array",
            ));
        }
        Ok(Scratch {
            ptr: data.cast(),
            len,
        })
    }
}

pub(crate) type ErrorArgs = FnArgs<(String, String, Option<String>, Vec<f64>)>;

pub(crate) const PANIC_CODE: &str = "ERR_RL_INTERNAL";
/// `makeError`'s tag for `Error::InvalidType`: the wrapper raises its TypeError subclass, with
/// the public code `ERR_RL_INVALID_ARGUMENT`.
const INVALID_TYPE: &str = "ERR_RL_INVALID_TYPE";

/// The argument an error names, as a JavaScript caller wrote it: `key` and `url` are positional
/// (and `options` is the object itself), and so are the arguments of `acquireAll` and the policy
/// functions (`rules`, `rules[].limit`, `policy` (the policy text), `policies`, `decision`,
/// `style`); every other
/// name is a field of an options object, in camelCase (`window_ms` → `options.windowMs`,
/// `retry_delay_ms` → `options.retryDelayMs`).
pub(crate) fn js_argument(name: &str) -> String {
    match name {
        "key" | "url" | "options" | "policy" | "style" => name.to_string(),
        _ if ["rules", "policies", "decision"]
            .iter()
            .any(|p| name.starts_with(p)) =>
        {
            name.to_string()
        }
        _ => format!("options.{}", camel_case(name)),
    }
}

/// `makeError`'s code, argument, message and details for `e`.
fn parts(e: &rl_core::Error) -> (&'static str, Option<String>, String, Vec<f64>) {
    use rl_core::Error as E;
    match e {
        E::InvalidArgument { name, message } => (
            "ERR_RL_INVALID_ARGUMENT",
            Some(js_argument(name)),
            message.clone(),
            vec![],
        ),
        E::InvalidType { name, message } => (
            INVALID_TYPE,
            Some(js_argument(name)),
            message.clone(),
            vec![],
        ),
        E::BackendUnavailable(_) => ("ERR_RL_BACKEND_UNAVAILABLE", None, e.to_string(), vec![]),
        E::ClockSkew {
            client_ms,
            server_ms,
            skew_ms,
            max_skew_ms,
        } => (
            "ERR_RL_CLOCK_SKEW",
            None,
            e.to_string(),
            vec![
                *client_ms as f64,
                *server_ms as f64,
                *skew_ms as f64,
                *max_skew_ms as f64,
            ],
        ),
        _ => ("ERR_RL_BACKEND", None, e.to_string(), vec![]),
    }
}

/// `makeError`'s code, argument and message for `e` (for the functions that take no limiter).
pub(crate) fn describe(e: &rl_core::Error) -> (&'static str, Option<String>, String) {
    let (code, argument, message, _) = parts(e);
    (code, argument, message)
}

/// A JavaScript error value as a `napi::Error`, to be thrown when the method returns.
pub(crate) fn thrown(env: &Env, value: Result<sys::napi_value>) -> Error {
    match value {
        Ok(v) => Error::from(unsafe { Unknown::from_raw_unchecked(env.raw(), v) }),
        Err(e) => e,
    }
}

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

    pub(crate) fn core_error(&self, env: &Env, e: &rl_core::Error) -> Result<sys::napi_value> {
        let (code, argument, message, details) = parts(e);
        self.error(env, code, message, argument, details)
    }

    pub(crate) fn panic_error(&self, env: &Env, message: String) -> Result<sys::napi_value> {
        self.error(env, PANIC_CODE, message, None, vec![])
    }

    pub(crate) fn closed_error(&self, env: &Env) -> Result<sys::napi_value> {
        self.error(
            env,
            "ERR_RL_CLOSED",
            "the limiter is closed".into(),
            None,
            vec![],
        )
    }

    /// `e`, ready to be thrown by a synchronous method.
    pub(crate) fn throw(&self, env: &Env, e: &rl_core::Error) -> Error {
        thrown(env, self.core_error(env, e))
    }

    /// Runs a method's body: a panic in it is thrown as a `NativePanicError`.
    pub(crate) fn guard<T>(&self, env: &Env, body: impl FnOnce() -> Result<T>) -> Result<T> {
        rl_core::unwind::call(body).unwrap_or_else(|m| Err(thrown(env, self.panic_error(env, m))))
    }
}
