//! The middleware's call per request, as a plain JavaScript function bound to one limiter and one
//! prepared policy list: `decide(key, cost, group)`.
//!
//! Why not a `#[napi]` method: a profile of the Fastify bench app (leases on, 500 req/s) put half
//! of the native call's time in what napi-rs does around a method for its safety in general
//! (unwrapping and type-checking `this` and the policies object, its borrow tracking, converting
//! the key through a zeroed buffer) and in calling back into JavaScript to build the result.
//! Here the limiter and the policies come with the function itself (its `data`), the key is read
//! in one call, and a result decided at once (a lease, the denial cache, the memory backend) is
//! returned as one string, the response's fields and body, with its numbers in the limiter's
//! scratch array (see `Factories::write_scratch`); `limiter.js` builds the objects from the two.
//! A call that waits on Redis, or fails, returns a promise like `acquirePolicies`.
//!
//! The same rules as every method hold: nothing panics into Node (the body runs under
//! `rl_core::unwind::call`, the call's future under `CatchUnwind`), errors are the wrapper's
//! classes, and a closed limiter rejects.

use std::ffi::c_void;
use std::ptr;
use std::sync::Arc;

use napi::bindgen_prelude::*;
use napi::sys;
use rl_core::headers::Prepared;
use rl_core::unwind::{test_panic, TestPanic};

use crate::bridge::{Outcome, Queue};
use crate::convert::whole;
use crate::errors::Factories;
use crate::limiter::{start, Open};
use crate::prepared::policies_call;

/// What a decider function carries: freed by its finalizer when V8 collects the function.
struct Decider {
    open: Open,
    queue: Arc<Queue>,
    prepared: Arc<Prepared>,
}

/// A new decider function for `prepared` on the limiter behind `open`.
pub(crate) fn create(
    env: &Env,
    open: Open,
    queue: Arc<Queue>,
    prepared: Arc<Prepared>,
) -> Result<Unknown<'static>> {
    let data = Box::into_raw(Box::new(Decider {
        open,
        queue,
        prepared,
    }));
    let raw = env.raw();
    let name = "decide";
    let mut f = ptr::null_mut();
    // SAFETY: `data` is a live box until the finalizer (or the failure path below) frees it.
    unsafe {
        let made = sys::napi_create_function(
            raw,
            name.as_ptr().cast(),
            name.len() as isize,
            Some(call),
            data.cast(),
            &mut f,
        ) == sys::Status::napi_ok
            && sys::napi_add_finalizer(
                raw,
                f,
                data.cast(),
                Some(finalize),
                ptr::null_mut(),
                ptr::null_mut(),
            ) == sys::Status::napi_ok;
        if !made {
            drop(Box::from_raw(data));
            return Err(Error::new(
                Status::GenericFailure,
                "cannot create the decider function",
            ));
        }
        Ok(Unknown::from_raw_unchecked(raw, f))
    }
}

unsafe extern "C" fn finalize(_env: sys::napi_env, data: *mut c_void, _hint: *mut c_void) {
    // SAFETY: `data` is the box `create` leaked for this function, finalized once.
    drop(unsafe { Box::from_raw(data.cast::<Decider>()) });
}

/// `decide(key, cost, group)`.
unsafe extern "C" fn call(raw: sys::napi_env, info: sys::napi_callback_info) -> sys::napi_value {
    let mut argv = [ptr::null_mut(); 3];
    let mut argc = argv.len();
    let mut data = ptr::null_mut();
    // SAFETY: napi's callback contract; `data` is this function's `Decider` (see `create`),
    // alive while the function is.
    let got = unsafe {
        sys::napi_get_cb_info(
            raw,
            info,
            &mut argc,
            argv.as_mut_ptr(),
            ptr::null_mut(),
            &mut data,
        )
    };
    let env = Env::from_raw(raw);
    if got != sys::Status::napi_ok || data.is_null() {
        throw(
            &env,
            Error::new(Status::GenericFailure, "internal: no decider"),
        );
        return ptr::null_mut();
    }
    let decider = unsafe { &*data.cast::<Decider>() };
    let factories = &decider.queue.factories;
    let body = || -> Result<sys::napi_value> {
        let key = bytes(&env, factories, argv[0], "key")?;
        test_panic(TestPanic::Caller, &key);
        let cost = number(&env, factories, argv[1])?;
        let group = if argc < 3 || is_nullish(&env, argv[2])? {
            None
        } else {
            Some(bytes(&env, factories, argv[2], "group")?)
        };
        let prepared = decider.prepared.clone();
        let cost = whole("cost", cost);
        let ready = |env: &Env, out: &Outcome| match out {
            Outcome::Responded(c, r) => factories.responded_text(env, c, r),
            _ => Err(Error::new(
                Status::GenericFailure,
                "internal: a decider call ended without a response",
            )),
        };
        let v = start(
            &env,
            &decider.open,
            &decider.queue,
            move |core| policies_call(core, prepared, key, cost, group),
            Some(&ready),
        )?;
        Ok(v.raw())
    };
    match rl_core::unwind::call(body) {
        Ok(Ok(v)) => v,
        Ok(Err(e)) => {
            throw(&env, e);
            ptr::null_mut()
        }
        Err(panic) => {
            let e = crate::errors::thrown(&env, factories.panic_error(&env, panic));
            throw(&env, e);
            ptr::null_mut()
        }
    }
}

fn throw(env: &Env, e: Error) {
    // SAFETY: on the JavaScript thread, inside a callback.
    unsafe { JsError::from(e).throw_into(env.raw()) }
}

fn type_error(name: &'static str, message: &str) -> rl_core::Error {
    rl_core::Error::InvalidType {
        name,
        message: message.to_string(),
    }
}

/// The wrapper's TypeError for a bad argument (it checks types first, so this is a backstop).
fn refused(env: &Env, factories: &Factories, name: &'static str, message: &str) -> Error {
    factories.throw(env, &type_error(name, message))
}

fn value_type(env: &Env, v: sys::napi_value) -> Result<sys::napi_valuetype> {
    let mut t = 0;
    let status = unsafe { sys::napi_typeof(env.raw(), v, &mut t) };
    if status == sys::Status::napi_ok {
        Ok(t)
    } else {
        Err(Error::new(
            Status::GenericFailure,
            "cannot read an argument",
        ))
    }
}

fn is_nullish(env: &Env, v: sys::napi_value) -> Result<bool> {
    let t = value_type(env, v)?;
    Ok(t == sys::ValueType::napi_undefined || t == sys::ValueType::napi_null)
}

/// A key or group: a string's UTF-8 (read in one call when it is short) or a Buffer's bytes.
fn bytes(
    env: &Env,
    factories: &Factories,
    v: sys::napi_value,
    name: &'static str,
) -> Result<Vec<u8>> {
    let raw = env.raw();
    let not_bytes = || refused(env, factories, name, "must be a string or a Buffer");
    if value_type(env, v)? == sys::ValueType::napi_string {
        let mut buf = [0u8; 256];
        let mut len = 0usize;
        let status = unsafe {
            sys::napi_get_value_string_utf8(raw, v, buf.as_mut_ptr().cast(), buf.len(), &mut len)
        };
        if status != sys::Status::napi_ok {
            return Err(not_bytes());
        }
        // napi writes whole characters only (up to 4 bytes of UTF-8 each) and leaves room for a
        // NUL: a string cut short filled at least `buf.len() - 4` bytes. Fewer: it is whole.
        if len + 4 < buf.len() {
            return Ok(buf[..len].to_vec());
        }
        let mut total = 0usize;
        unsafe { sys::napi_get_value_string_utf8(raw, v, ptr::null_mut(), 0, &mut total) };
        let mut out = vec![0u8; total + 1];
        unsafe {
            sys::napi_get_value_string_utf8(raw, v, out.as_mut_ptr().cast(), out.len(), &mut len)
        };
        out.truncate(len);
        return Ok(out);
    }
    let mut data = ptr::null_mut();
    let mut len = 0usize;
    let status = unsafe { sys::napi_get_buffer_info(raw, v, &mut data, &mut len) };
    if status != sys::Status::napi_ok {
        return Err(not_bytes());
    }
    if len == 0 {
        return Ok(Vec::new());
    }
    // SAFETY: the Buffer's memory, `len` bytes, alive during this call.
    Ok(unsafe { std::slice::from_raw_parts(data.cast::<u8>(), len) }.to_vec())
}

fn number(env: &Env, factories: &Factories, v: sys::napi_value) -> Result<f64> {
    let mut n = 0f64;
    let status = unsafe { sys::napi_get_value_double(env.raw(), v, &mut n) };
    if status == sys::Status::napi_ok {
        Ok(n)
    } else {
        Err(refused(env, factories, "cost", "must be a number"))
    }
}
