//! Composite acquire (`acquireAll`): several rules, all or nothing, one atomic decision in the
//! core (`rl_core::Limiter::acquire_all`). Java passes the rules as parallel arrays (keys as
//! UTF-8 or raw bytes, limits, windows, costs); the core checks every value.

use jni::objects::{JByteArray, JClass, JLongArray, JObject, JObjectArray};
use jni::sys::{jlong, jobject};
use jni::JNIEnv;

use rl_core::unwind::{test_panic, TestPanic};
use rl_core::{Error, Rule};

use crate::convert::{self, key_bytes, limiter, unsigned};
use crate::error::{entry, Failure};
use crate::future::{start, start_flat, Outcome};
use crate::limiter::blocking;

/// A value the binding refused, its message saying which rule it is in (as the core's do).
fn in_rule(f: Failure, i: usize) -> Failure {
    match f {
        Failure::Core(Error::InvalidArgument { name, message }) => {
            Failure::Core(Error::InvalidArgument {
                name,
                message: format!("{message} (rule {i})"),
            })
        }
        f => f,
    }
}

fn null(name: &'static str) -> Failure {
    Failure::Core(Error::InvalidArgument {
        name,
        message: "must not be null".into(),
    })
}

/// A Java `long[]`, which must hold `n` values (Java builds all four arrays from one list).
fn longs(env: &mut JNIEnv, a: &JLongArray, n: usize) -> Result<Vec<jlong>, Failure> {
    let mut out = vec![0; n];
    if n > 0 {
        env.get_long_array_region(a, 0, &mut out)?;
    }
    Ok(out)
}

/// The rules of a call, from `keys[i]`, `limits[i]`, `windows[i]`, `costs[i]`.
pub fn rules(
    env: &mut JNIEnv,
    keys: &JObjectArray,
    limits: &JLongArray,
    windows: &JLongArray,
    costs: &JLongArray,
) -> Result<Vec<Rule>, Failure> {
    if keys.is_null() || limits.is_null() || windows.is_null() || costs.is_null() {
        return Err(null("rules"));
    }
    let n = env.get_array_length(keys)? as usize;
    let (l, w, c) = (
        longs(env, limits, n)?,
        longs(env, windows, n)?,
        longs(env, costs, n)?,
    );
    let mut out = Vec::with_capacity(n);
    for i in 0..n {
        let key = JByteArray::from(env.get_object_array_element(keys, i as i32)?);
        let bytes = convert::key_bytes(env, &key).map_err(|f| in_rule(f, i))?;
        env.delete_local_ref(key)?;
        let rule = (|| {
            Ok::<_, Failure>(Rule::new(
                bytes,
                unsigned("limit", l[i])?,
                unsigned("window_ms", w[i])?,
                unsigned("cost", c[i])?,
            ))
        })()
        .map_err(|f| in_rule(f, i))?;
        out.push(rule);
    }
    Ok(out)
}

pub(crate) fn group(env: &mut JNIEnv, group: &JByteArray) -> Result<Option<Vec<u8>>, Failure> {
    if group.is_null() {
        return Ok(None);
    }
    Ok(Some(env.convert_byte_array(group)?))
}

#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub extern "system" fn Java_dev_rl_Native_acquireAll<'l>(
    mut env: JNIEnv<'l>,
    _class: JClass<'l>,
    handle: jlong,
    keys: JObjectArray<'l>,
    limits: JLongArray<'l>,
    windows: JLongArray<'l>,
    costs: JLongArray<'l>,
    grp: JByteArray<'l>,
) -> jobject {
    entry(&mut env, std::ptr::null_mut(), |env| {
        let l = limiter(handle)?;
        let rules = rules(env, &keys, &limits, &windows, &costs)?;
        let g = group(env, &grp)?;
        let c = blocking(|| l.acquire_all(&rules, g.as_deref()))?;
        Ok(convert::composite_longs(env, &c)?.into_raw())
    })
}

#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub extern "system" fn Java_dev_rl_Native_acquireAllAsync<'l>(
    mut env: JNIEnv<'l>,
    _class: JClass<'l>,
    handle: jlong,
    keys: JObjectArray<'l>,
    limits: JLongArray<'l>,
    windows: JLongArray<'l>,
    costs: JLongArray<'l>,
    grp: JByteArray<'l>,
    future: JObject<'l>,
) -> jobject {
    entry(&mut env, std::ptr::null_mut(), |env| {
        let l = limiter(handle)?.as_async().clone();
        let rules = rules(env, &keys, &limits, &windows, &costs)?;
        let g = group(env, &grp)?;
        let ready = start_flat(env, &future, async move {
            let c = l.acquire_all(&rules, g.as_deref()).await;
            if let Some(r) = rules.first() {
                test_panic(TestPanic::Future, &r.key);
            }
            c.map(Outcome::Composite)
        })?;
        Ok(ready.map_or(std::ptr::null_mut(), |a| a.into_raw()))
    })
}

#[no_mangle]
pub extern "system" fn Java_dev_rl_Native_resetInGroup<'l>(
    mut env: JNIEnv<'l>,
    _class: JClass<'l>,
    handle: jlong,
    key: JByteArray<'l>,
    grp: JByteArray<'l>,
) {
    entry(&mut env, (), |env| {
        let l = limiter(handle)?;
        let key = key_bytes(env, &key)?;
        let g = group(env, &grp)?;
        blocking(|| l.reset_in_group(&key, g.as_deref()))
    })
}

#[no_mangle]
pub extern "system" fn Java_dev_rl_Native_resetInGroupAsync<'l>(
    mut env: JNIEnv<'l>,
    _class: JClass<'l>,
    handle: jlong,
    key: JByteArray<'l>,
    grp: JByteArray<'l>,
    future: JObject<'l>,
) {
    entry(&mut env, (), |env| {
        let l = limiter(handle)?.as_async().clone();
        let key = key_bytes(env, &key)?;
        let g = group(env, &grp)?;
        start(env, &future, async move {
            let r = l.reset_in_group(&key, g.as_deref()).await;
            test_panic(TestPanic::Future, &key);
            r.map(|()| Outcome::Unit)
        })
    })
}
