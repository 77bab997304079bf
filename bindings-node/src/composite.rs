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
use rl_core::{CompositeDecision, Mode, Rule};

use crate::bridge::Outcome;
use crate::convert::{key_bytes, number_of};
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

    /// `makeComposite(pairs, body, name, value, ...)`: the numbers of `c` go into the scratch
    /// array (`allowed, retryAfterMs, mode, nowMs, count`, then `allowed, remaining, used,
    /// retryAfterMs, resetAfterMs, mode, nowMs` per rule; a mode as its index in
    /// `rl_core::Mode::ALL`), and only the strings are JavaScript values; the function builds the
    /// objects as literals (one shape each). On a request that finds the process idle every napi
    /// call runs cold, and this is on every middleware request. `pairs` is -1 without a
    /// `response` (acquireAll's CompositeDecision), else the number of header fields that follow
    /// (`{ decision, headers, body }`, `headers` flat, `body` a denial's problem body or
    /// undefined).
    pub(crate) fn make_composite(
        &self,
        env: &Env,
        c: &CompositeDecision,
        response: Option<&Response>,
    ) -> Result<sys::napi_value> {
        let raw = env.raw();
        let fail = |what: &str| {
            Err(Error::new(
                Status::GenericFailure,
                format!("cannot build a CompositeDecision: {what}"),
            ))
        };
        if response.is_some_and(|r| r.headers.len() > MAX_PAIRS) {
            return fail("too many header fields");
        }
        self.write_scratch(c, &[])?;
        let f = self.make_composite.borrow_back(env)?.raw();
        let mut args = [ptr::null_mut(); 2 + 2 * MAX_PAIRS];
        let mut recv = ptr::null_mut();
        let mut out = ptr::null_mut();
        let mut argc = 1;
        let mut ok = unsafe {
            let pairs = response.map_or(-1, |r| r.headers.len() as i32);
            (sys::napi_create_int32(raw, pairs, &mut args[0]) == sys::Status::napi_ok)
                & (sys::napi_get_undefined(raw, &mut recv) == sys::Status::napi_ok)
        };
        if let Some(r) = response {
            let string = |text: &str, slot: &mut sys::napi_value| unsafe {
                sys::napi_create_string_utf8(raw, text.as_ptr().cast(), text.len() as isize, slot)
                    == sys::Status::napi_ok
            };
            args[1] = recv;
            if let Some(body) = &r.body {
                ok &= string(body, &mut args[1]);
            }
            for (i, (name, value)) in r.headers.iter().enumerate() {
                ok &= string(name, &mut args[2 + 2 * i]);
                ok &= string(value, &mut args[3 + 2 * i]);
            }
            argc = 2 + 2 * r.headers.len();
        }
        ok = ok
            && unsafe { sys::napi_call_function(raw, recv, f, argc, args.as_ptr(), &mut out) }
                == sys::Status::napi_ok;
        if ok {
            Ok(out)
        } else {
            fail("napi failed")
        }
    }
}

/// Most header fields one response has (`both`: two IETF, three legacy, and Retry-After);
/// `makeComposite` takes as many name/value pairs.
const MAX_PAIRS: usize = 6;

impl Factories {
    /// Writes `c`'s numbers into the scratch array (see `make_composite`), then `extra`.
    pub(crate) fn write_scratch(&self, c: &CompositeDecision, extra: &[f64]) -> Result<()> {
        let need = 5 + 7 * c.decisions.len() + extra.len();
        if self.scratch.len < need {
            return Err(Error::new(
                Status::GenericFailure,
                "cannot build a CompositeDecision: too many rules for the scratch array",
            ));
        }
        let mode = |m: rl_core::Mode| {
            Mode::ALL
                .iter()
                .position(|x| *x == m)
                .map_or(-1.0, |i| i as f64)
        };
        // SAFETY: the scratch array's memory, `len` doubles (checked above), on the JavaScript
        // thread (see `Scratch`); nothing else runs until JavaScript has read it.
        let s = unsafe { std::slice::from_raw_parts_mut(self.scratch.ptr, need) };
        s[..5].copy_from_slice(&[
            f64::from(u8::from(c.allowed)),
            c.retry_after_ms as f64,
            mode(c.mode),
            c.now_ms as f64,
            c.decisions.len() as f64,
        ]);
        for (d, out) in c.decisions.iter().zip(s[5..].chunks_exact_mut(7)) {
            out.copy_from_slice(&[
                f64::from(u8::from(d.allowed)),
                d.remaining as f64,
                d.used as f64,
                d.retry_after_ms as f64,
                d.reset_after_ms as f64,
                mode(d.mode),
                d.now_ms as f64,
            ]);
        }
        s[5 + 7 * c.decisions.len()..].copy_from_slice(extra);
        Ok(())
    }

    /// A decider's result decided at once (see `decider`): the numbers of `c` in the scratch
    /// array followed by the number of header fields, and one string: each field's name and
    /// value, each ended by `\n` (the core renders neither with a line break), then the body of
    /// a denial. `limiter.js` (`respondedFromScratch`) reads the two back.
    pub(crate) fn responded_text(
        &self,
        env: &Env,
        c: &CompositeDecision,
        r: &Response,
    ) -> Result<sys::napi_value> {
        self.write_scratch(c, &[r.headers.len() as f64])?;
        let size = r
            .headers
            .iter()
            .map(|(n, v)| n.len() + v.len() + 2)
            .sum::<usize>()
            + r.body.as_ref().map_or(0, |b| b.len());
        let mut text = String::with_capacity(size);
        for (name, value) in &r.headers {
            debug_assert!(!name.contains('\n') && !value.contains('\n'));
            text.push_str(name);
            text.push('\n');
            text.push_str(value);
            text.push('\n');
        }
        if let Some(body) = &r.body {
            text.push_str(body);
        }
        let mut out = ptr::null_mut();
        let status = unsafe {
            sys::napi_create_string_utf8(
                env.raw(),
                text.as_ptr().cast(),
                text.len() as isize,
                &mut out,
            )
        };
        if status == sys::Status::napi_ok {
            Ok(out)
        } else {
            Err(Error::new(
                Status::GenericFailure,
                "cannot build the response's text",
            ))
        }
    }
}
