//! The entry points on a limiter. A handle is a `Box<rl_core::blocking::Limiter>` turned into a
//! `long`; Java guards it (`dev.rl.NativeHandle`): no call enters after `close()`, and the box is
//! freed exactly once, by whoever leaves last. Handle 0 is refused with `IllegalStateException`.

use jni::objects::{JByteArray, JClass, JObject, JObjectArray, JString};
use jni::sys::{jbyteArray, jlong, jobject, jstring};
use jni::JNIEnv;

use rl_core::blocking::Limiter;
use rl_core::unwind::{test_panic, TestPanic};

use crate::convert::{self, key_bytes, limiter, unsigned};
use crate::error::{entry, Failure};
use crate::future::{start, start_flat, Outcome};

/// Runs a blocking core call. On a thread inside the core's runtime (a Java callback of an async
/// call, running on a runtime worker, that calls a synchronous method), it first hands the
/// worker's other tasks to another thread, so a blocked callback cannot starve the runtime.
pub(crate) fn blocking<T>(f: impl FnOnce() -> rl_core::Result<T>) -> Result<T, Failure> {
    let r = if tokio::runtime::Handle::try_current().is_ok() {
        tokio::task::block_in_place(f)
    } else {
        f()
    };
    r.map_err(Failure::Core)
}

/// A limiter on `url` with the options the builder was given: `names[i]` (external snake_case
/// names) set to `values[i]`; every other option keeps the core's default.
#[no_mangle]
pub extern "system" fn Java_dev_rl_Native_open<'l>(
    mut env: JNIEnv<'l>,
    _class: JClass<'l>,
    url: JString<'l>,
    names: JObjectArray<'l>,
    values: JObjectArray<'l>,
) -> jlong {
    entry(&mut env, 0, |env| {
        let url = convert::optional_string(env, &url)?;
        let options = convert::options(env, &names, &values)?;
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

/// The core's close: returns the limiter's unused leases to Redis. Best effort, so never throws
/// for Redis trouble: leases Redis does not take back age out, as after a crash.
#[no_mangle]
pub extern "system" fn Java_dev_rl_Native_returnLeases<'l>(
    mut env: JNIEnv<'l>,
    _class: JClass<'l>,
    handle: jlong,
) {
    entry(&mut env, (), |_| {
        let l = limiter(handle)?;
        let _ = blocking(|| l.close());
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
// Synchronous calls (rl_core::blocking)

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
        Ok(convert::decision_longs(env, &d)?.into_raw())
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
        Ok(convert::decision(env, &d)?.into_raw())
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
        Ok(convert::stats(env, &l.stats())?.into_raw())
    })
}

// ---------------------------------------------------------------------------------------------
// Asynchronous calls (CompletableFuture). The test build's panic hook fires for the marker key
// `rl-test-panic:future` once the core has answered: on the runtime, for a Redis call.

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
) -> jobject {
    entry(&mut env, std::ptr::null_mut(), |env| {
        let l = limiter(handle)?.as_async().clone();
        let key = key_bytes(env, &key)?;
        let (limit, window_ms, cost) = (
            unsigned("limit", limit)?,
            unsigned("window_ms", window_ms)?,
            unsigned("cost", cost)?,
        );
        let ready = start_flat(env, &future, async move {
            let d = l.acquire(&key, limit, window_ms, cost).await;
            test_panic(TestPanic::Future, &key);
            d.map(Outcome::Decision)
        })?;
        Ok(ready.map_or(std::ptr::null_mut(), |a| a.into_raw()))
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
            let d = l.peek(&key, limit, window_ms).await;
            test_panic(TestPanic::Future, &key);
            d.map(Outcome::Decision)
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
            let r = l.reset(&key).await;
            test_panic(TestPanic::Future, &key);
            r.map(|()| Outcome::Unit)
        })
    })
}
