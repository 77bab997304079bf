//! Policies prepared once for a middleware, and the one call a request makes with them:
//! `acquirePolicies` decides (`rl_core::Limiter::acquire_all` with one rule per policy on the
//! request's key) and hands back the core's response fields and, on a denial, its problem body
//! (`rl_core::headers::Prepared`), rendered on the runtime with the decision. The policies and the
//! header style are converted and checked here once, at setup, not on every request.

use std::sync::Arc;

use napi::bindgen_prelude::*;
use napi::sys;
use napi_derive::napi;
use rl_core::headers::{Prepared, Response};
use rl_core::unwind::{test_panic, TestPanic};
use rl_core::{CompositeDecision, Policy};

use crate::bridge::Outcome;
use crate::convert::{key_bytes, whole};
use crate::errors::Factories;
use crate::limiter::NativeLimiter;
use crate::policies::{guarded, header_style, policies, to_js, MakeError, NativePolicy};

/// A policy string or a list of policies, with a header style: what a middleware limits by.
#[napi]
pub struct NativePolicies {
    prepared: Arc<Prepared>,
}

#[napi]
impl NativePolicies {
    /// `policies`: a policy string (`"burst: 100/s; 5000/h"`) or `parsePolicies`' objects;
    /// `style`: `ietf`, `legacy`, `both` or `none`.
    #[napi(
        constructor,
        catch_unwind,
        ts_args_type = "policies: string | NativePolicy[], style: string, makeError: (code: string, message: string, argument: string | null, details: number[]) => Error"
    )]
    pub fn new(
        env: Env,
        policies_arg: Either<String, Vec<NativePolicy>>,
        style: String,
        make_error: MakeError<'_>,
    ) -> Result<Self> {
        guarded(&env, &make_error, || {
            let list = match policies_arg {
                Either::A(text) => Policy::parse_many(&text).map_err(|e| match e {
                    rl_core::Error::InvalidArgument { message, .. } => {
                        rl_core::Error::InvalidArgument {
                            name: "policies",
                            message,
                        }
                    }
                    e => e,
                })?,
                Either::B(list) => policies(list)?,
            };
            Ok(NativePolicies {
                prepared: Arc::new(Prepared::new(list, header_style(&style)?)?),
            })
        })
    }

    /// The policies, as `parsePolicies` returns them.
    #[napi(getter, catch_unwind)]
    pub fn list(&self) -> Vec<NativePolicy> {
        self.prepared.policies().iter().map(to_js).collect()
    }

    #[napi(getter, catch_unwind)]
    pub fn style(&self) -> &'static str {
        self.prepared.style().as_str()
    }
}

#[napi]
impl NativeLimiter {
    /// One rule per policy of `policies` on `key`, each taking `cost`, decided at once; resolves
    /// to `{ decision, headers, body }`: `headers` flat (`[name, value, name, value...]`), `body`
    /// the problem body on a denial, else undefined.
    #[napi(
        catch_unwind,
        ts_return_type = "Promise<{ decision: object, headers: string[], body?: string }>"
    )]
    pub fn acquire_policies(
        &self,
        env: Env,
        policies: &NativePolicies,
        key: Either<String, BufferSlice>,
        cost: f64,
        group: Option<Either<String, BufferSlice>>,
    ) -> Result<Unknown<'static>> {
        self.factories().guard(&env, || {
            let key = key_bytes(key);
            test_panic(TestPanic::Caller, &key);
            let (prepared, cost, group) = (
                policies.prepared.clone(),
                whole("cost", cost),
                group.map(key_bytes),
            );
            self.run(&env, move |core| {
                policies_call(core, prepared, key, cost, group)
            })
        })
    }

    /// The function the middleware calls per request (see `decider`): `(key, cost, group)`
    /// with `policies`, on this limiter.
    #[napi(
        catch_unwind,
        ts_return_type = "(key: string | Buffer, cost: number, group?: string | Buffer) => string | Promise<{ decision: object, headers: string[], body?: string }>"
    )]
    pub fn decider(&self, env: Env, policies: &NativePolicies) -> Result<Unknown<'static>> {
        self.factories().guard(&env, || {
            let (open, queue) = self.shared();
            crate::decider::create(&env, open, queue, policies.prepared.clone())
        })
    }
}

/// The call `acquirePolicies` (and a decider) makes: one rule per policy on `key`, decided at
/// once, and the core's response for the decision. (`test_panic(Caller)` is the caller's.)
pub(crate) async fn policies_call(
    core: rl_core::Limiter,
    prepared: Arc<Prepared>,
    key: Vec<u8>,
    cost: rl_core::Result<u64>,
    group: Option<Vec<u8>>,
) -> rl_core::Result<Outcome> {
    let rules = prepared.rules(&key, cost?);
    let r = core.acquire_all(&rules, group.as_deref()).await;
    test_panic(TestPanic::Future, &key);
    let c = r?;
    let response = prepared.respond(&c)?;
    Ok(Outcome::Responded(c, response))
}

impl Factories {
    /// `{ decision, headers, body }` for `acquirePolicies` (see `Factories::make_composite`).
    pub(crate) fn responded(
        &self,
        env: &Env,
        c: &CompositeDecision,
        r: &Response,
    ) -> Result<sys::napi_value> {
        self.make_composite(env, c, Some(r))
    }
}
