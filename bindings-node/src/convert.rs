//! Values between JavaScript and the core: option values by their JavaScript type, decisions,
//! stats objects, keys and numbers.

use std::ptr;

use napi::bindgen_prelude::*;
use napi::sys;
use napi::ValueType;
use rl_core::options::{camel_case, Value};
use rl_core::Mode;

use crate::errors::Factories;

/// A JavaScript value as the core's [`Value`], by its JavaScript type only (the core checks it
/// against the option). `Err` describes a type no option takes (an object, a function ...).
pub(crate) fn value(v: Unknown<'_>) -> Result<std::result::Result<Value, &'static str>> {
    Ok(Ok(match v.get_type()? {
        ValueType::Undefined | ValueType::Null => Value::Null,
        ValueType::Boolean => Value::Bool(unsafe { v.cast::<bool>()? }),
        ValueType::Number => number(unsafe { v.cast::<f64>()? }),
        ValueType::BigInt => {
            let b = unsafe { v.cast::<BigInt>()? };
            match b.get_i128() {
                (n, true) => Value::Int(n),
                // Beyond i128: out of every range all the same; the core's error shows the bound.
                _ if b.sign_bit => Value::Int(i128::MIN),
                _ => Value::Int(i128::MAX),
            }
        }
        ValueType::String => Value::Text(unsafe { v.cast::<String>()? }),
        ValueType::Symbol => return Ok(Err("a symbol")),
        ValueType::Function => return Ok(Err("a function")),
        _ => return Ok(Err("an object")),
    }))
}

/// A JavaScript number: `Int` when it is a safe integer (so the core's messages show it as one),
/// `Float` otherwise (the core refuses fractions, NaN and infinities, and ranges the rest).
fn number(f: f64) -> Value {
    const MAX_SAFE: f64 = 9_007_199_254_740_991.0;
    if f.fract() == 0.0 && f.abs() <= MAX_SAFE {
        Value::Int(f as i128)
    } else {
        Value::Float(f)
    }
}

/// An acquire/peek number as the core's `u64`. The one check of its shape (the wrapper checks
/// only that it is a number); ranges are the core's. `name` is the core's name for it.
pub(crate) fn whole(name: &'static str, v: f64) -> rl_core::Result<u64> {
    number_of(v).ok_or_else(|| rl_core::Error::InvalidArgument {
        name,
        message: format!("is {v}; must be a whole number between 0 and 2^53 - 1"),
    })
}

/// `v` as a `u64` when it is a whole number between 0 and 2^53 - 1.
pub(crate) fn number_of(v: f64) -> Option<u64> {
    match number(v) {
        Value::Int(n) if n >= 0 => Some(n as u64),
        _ => None,
    }
}

pub(crate) fn key_bytes(key: Either<String, BufferSlice>) -> Vec<u8> {
    match key {
        Either::A(s) => s.into_bytes(),
        Either::B(b) => b.to_vec(),
    }
}

/// `stats` as a plain object, one camelCase property per [`rl_core::Stats::fields`] (numbers are
/// exact: counters stay far below 2^53).
pub(crate) fn stats(env: &Env, stats: &rl_core::Stats) -> Result<Unknown<'static>> {
    let mut o = Object::new(env)?;
    for (field, v) in stats.fields() {
        let name = camel_case(field.name);
        match v {
            Value::Int(n) => o.set_named_property(&name, n as f64)?,
            Value::Float(f) => o.set_named_property(&name, f)?,
            Value::Bool(b) => o.set_named_property(&name, b)?,
            Value::Text(s) => o.set_named_property(&name, s)?,
            Value::Null => o.set_named_property(&name, Null)?,
        }
    }
    Ok(unsafe { Unknown::from_raw_unchecked(env.raw(), o.raw()) })
}

impl Factories {
    /// A Decision object, from `makeDecision(allowed, remaining, used, retryAfterMs, resetAfterMs,
    /// mode, nowMs)`: an object literal made in JavaScript is several times cheaper than one
    /// assembled property by property through napi, and this runs for every settled call (hence
    /// the raw napi calls). `mode` is an index into [`crate::modes`], or the name of a mode missing there.
    pub(crate) fn decision(&self, env: &Env, d: &rl_core::Decision) -> Result<sys::napi_value> {
        let raw = env.raw();
        let f = self.make_decision.borrow_back(env)?.raw();
        let mut args = [ptr::null_mut(); 7];
        let mut recv = ptr::null_mut();
        let mut out = ptr::null_mut();
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
            ok &= mode_value(raw, d.mode, &mut args[5]);
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

/// A decision's mode for the JavaScript factories: its index into [`crate::modes`], or its name
/// when it is missing there. False when napi failed.
///
/// # Safety
/// `raw` is the current environment and `slot` a place for one value.
pub(crate) unsafe fn mode_value(
    raw: sys::napi_env,
    mode: Mode,
    slot: &mut sys::napi_value,
) -> bool {
    let status = match Mode::ALL.iter().position(|m| *m == mode) {
        Some(i) => sys::napi_create_int32(raw, i as i32, slot),
        None => {
            let name = mode.as_str();
            sys::napi_create_string_utf8(raw, name.as_ptr().cast(), name.len() as isize, slot)
        }
    };
    status == sys::Status::napi_ok
}
