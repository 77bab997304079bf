//! The JNI layer of rl's Java binding: `librl_java.so`, loaded by `dev.rl.NativeLoader` and called
//! only through the package-private `dev.rl.Native` class.
//!
//! This layer converts types and errors only; every rule (validation, messages, defaults,
//! semantics) lives in rl-core, and the Java surface that mirrors its tables (the builder's
//! option setters, the `Stats` record) is generated from them by rl-gen. Split by concern, after
//! OpenDAL's Java binding:
//!
//! - [`error`]: a failure becomes a Java exception (made by `Native.error`); every entry point
//!   runs under [`error::entry`], so a panic never unwinds into the JVM;
//! - [`convert`]: Java values to core arguments and options, core results to Java objects;
//! - [`cache`]: classes and method ids, looked up once by `Native.init` on a Java thread (with the
//!   class loader that loaded `dev.rl.Native`: `FindClass` on a native thread would miss it);
//! - [`future`]: async calls and the `CompletableFuture`s they complete;
//! - [`limiter`]: the entry points on a limiter handle;
//! - [`composite`]: `acquireAll`, several rules in one atomic decision;
//! - [`headers`]: policy strings, response fields and the problem body, for middleware;
//! - [`prepared`]: a middleware's policies checked once, then one call per request that decides
//!   and renders.

#![deny(unsafe_op_in_unsafe_fn)]

mod cache;
mod composite;
mod convert;
mod error;
mod future;
mod headers;
mod limiter;
mod prepared;

use jni::objects::JClass;
use jni::sys::{jint, jobjectArray};
use jni::JNIEnv;

/// Bumped whenever a `native` signature in `dev.rl.Native`, or a Java method native code calls,
/// changes; Java refuses a library whose number differs (a stale `librl_java.so`).
const ABI_VERSION: jint = 5;

#[no_mangle]
pub extern "system" fn Java_dev_rl_Native_abiVersion(_env: JNIEnv, _class: JClass) -> jint {
    ABI_VERSION
}

#[no_mangle]
pub extern "system" fn Java_dev_rl_Native_init<'l>(mut env: JNIEnv<'l>, class: JClass<'l>) {
    error::entry(&mut env, (), |env| cache::init(env, &class))
}

/// The names of `rl_core::Mode::ALL`, in order: a decision's mode crosses JNI as its index.
#[no_mangle]
pub extern "system" fn Java_dev_rl_Native_modes<'l>(
    mut env: JNIEnv<'l>,
    _class: JClass<'l>,
) -> jobjectArray {
    error::entry(&mut env, std::ptr::null_mut(), |env| {
        let names: Vec<&str> = rl_core::Mode::ALL.iter().map(|m| m.as_str()).collect();
        Ok(convert::strings(env, &names)?.into_raw())
    })
}
