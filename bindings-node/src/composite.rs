//! `acquireAll`: several rules, all-or-nothing, in one atomic decision
//! (`rl_core::Limiter::acquire_all`). The wrapper checks the JavaScript types of the rules and
//! hands them over flattened (keys, and `limit, windowMs, cost` per rule); number shapes are
//! checked here, everything else by the core.

use std::ptr;

use napi::bindgen_prelude::*;
use napi::sys;
use napi_derive::napi;
use rl_core::headers::Response;
use rl_core::unwind::{test_panic, TestPanic};
use rl_core::{CompositeDecision, Rule};

use crate::bridge::Outcome;
use crate::convert::{key_bytes, mode_value, number_of};
use crate::errors::Factories;
use crate::limiter::NativeLimiter;

/// A core error about one rule's field, named as the caller wrote it: `rules[].limit` (the
/// core's message says which rule). Other names (`rules`, `group`, `key_shards`) stay.
pub(crate) fn in_rules(e: rl_core::Error) -> rl_core::Error {
    match e {
        rl_core::Error::InvalidArgument { name, message } => rl_core::Error::InvalidArgument {
            name: match name {
                "key" => "rules[].key",
                "limit" => "rules[].limit",
                "window_ms" => "rules[].windowMs",
                "cost" => "rules[].cost",
                other => other,
            },
            message,
        },
        e => e,
    }
}

/// The rules from the wrapper's flattened form: `nums` holds `limit, windowMs, cost` per key.
fn rules(keys: Vec<Either<String, BufferSlice>>, nums: &[f64]) -> rl_core::Result<Vec<Rule>> {
    if nums.len() != keys.len() * 3 {
        return Err(rl_core::Error::InvalidArgument {
            name: "rules",
            message: format!(
                "internal: {} keys but {} numbers (please report this)",
                keys.len(),
                nums.len()
            ),
        });
    }
    keys.into_iter()
        .zip(nums.chunks_exact(3))
        .enumerate()
        .map(|(i, (key, n))| {
            let whole = |name: &'static str, v: f64| {
                number_of(v).ok_or_else(|| rl_core::Error::InvalidArgument {
                    name,
                    message: format!(
                        "is {v}; must be a whole number between 0 and 2^53 - 1 (rule {i})"
                    ),
                })
            };
            Ok(Rule::new(
                key_bytes(key),
                whole("rules[].limit", n[0])?,
                whole("rules[].windowMs", n[1])?,
                whole("rules[].cost", n[2])?,
            ))
        })
        .collect()
}

#[napi]
impl NativeLimiter {
    /// `keys`: one per rule; `nums`: `limit, windowMs, cost` per rule (numbers, the wrapper
    /// checks that much); `group`: the call's hash tag, or null.
    #[napi(catch_unwind, ts_return_type = "Promise<object>")]
    pub fn acquire_all(
        &self,
        env: Env,
        keys: Vec<Either<String, BufferSlice>>,
        nums: Vec<f64>,
        group: Option<Either<String, BufferSlice>>,
    ) -> Result<Unknown<'static>> {
        self.factories().guard(&env, || {
            let rules = rules(keys, &nums);
            let group = group.map(key_bytes);
            if let Ok(r) = &rules {
                if let Some(first) = r.first() {
                    test_panic(TestPanic::Caller, &first.key);
                }
            }
            self.run(&env, move |core| async move {
                let rules = rules?;
                let r = core.acquire_all(&rules, group.as_deref()).await;
                if let Some(first) = rules.first() {
                    test_panic(TestPanic::Future, &first.key);
                }
                r.map(Outcome::Composite).map_err(in_rules)
            })
        })
    }
}

impl Factories {
    /// A CompositeDecision object: `{allowed, retryAfterMs, mode, nowMs, decisions}`, each
    /// decision made like `acquire`'s.
    pub(crate) fn composite(&self, env: &Env, c: &CompositeDecision) -> Result<sys::napi_value> {
        self.make_composite(env, c, None)
    }

    /// `makeComposite(allowed, retryAfterMs, mode, nowMs, decisions[, headers, body])`: the
    /// objects are literals made in JavaScript (one shape each, no property set one napi call at
    /// a time: on a request that finds the process idle every napi call runs cold, and this is
    /// on every middleware request). With `response`, `acquirePolicies`' `{ decision, headers,
    /// body }`: `headers` flat (`[name, value, ...]`), `body` a denial's problem body or
    /// undefined.
    pub(crate) fn make_composite(
        &self,
        env: &Env,
        c: &CompositeDecision,
        response: Option<&Response>,
    ) -> Result<sys::napi_value> {
        let raw = env.raw();
        let f = self.make_composite.borrow_back(env)?.raw();
        let mut args = [ptr::null_mut(); 7];
        let mut list = env.create_array(c.decisions.len() as u32)?;
        for (i, d) in c.decisions.iter().enumerate() {
            let v = self.decision(env, d)?;
            list.set(i as u32, unsafe { Unknown::from_raw_unchecked(raw, v) })?;
        }
        args[4] = unsafe { Array::to_napi_value(raw, list)? };
        let mut argc = 5;
        let mut recv = ptr::null_mut();
        let mut out = ptr::null_mut();
        let mut ok = unsafe {
            let mut ok =
                sys::napi_get_boolean(raw, c.allowed, &mut args[0]) == sys::Status::napi_ok;
            ok &= sys::napi_create_double(raw, c.retry_after_ms as f64, &mut args[1])
                == sys::Status::napi_ok;
            ok &= mode_value(raw, c.mode, &mut args[2]);
            ok &=
                sys::napi_create_double(raw, c.now_ms as f64, &mut args[3]) == sys::Status::napi_ok;
            ok & (sys::napi_get_undefined(raw, &mut recv) == sys::Status::napi_ok)
        };
        if let Some(r) = response {
            let mut headers = env.create_array(2 * r.headers.len() as u32)?;
            for (i, (name, value)) in r.headers.iter().enumerate() {
                headers.set(2 * i as u32, *name)?;
                headers.set(2 * i as u32 + 1, value.as_str())?;
            }
            args[5] = unsafe { Array::to_napi_value(raw, headers)? };
            args[6] = match &r.body {
                Some(body) => unsafe { <&str>::to_napi_value(raw, body.as_str())? },
                None => recv,
            };
            argc = 7;
        }
        ok = ok
            && unsafe { sys::napi_call_function(raw, recv, f, argc, args.as_ptr(), &mut out) }
                == sys::Status::napi_ok;
        if ok {
            Ok(out)
        } else {
            Err(Error::new(
                Status::GenericFailure,
                "cannot build a CompositeDecision",
            ))
        }
    }
}
