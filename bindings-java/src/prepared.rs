//! Prepared policies (`PreparedPolicies`, `RateLimiter.acquirePolicies`): a middleware's policies
//! and header style, checked once, then one native call per request that decides (one rule per
//! policy on the request's key, `acquire_all`) and renders the response fields and the problem
//! body (`rl_core::headers::Prepared`), as Python's `acquire_policies` and Node's
//! `acquirePolicies` do. Without it a request crossed JNI twice (decide, then render), and the
//! second crossing converted the policies and the decision back again.

use std::sync::Arc;

use jni::objects::{JByteArray, JClass, JLongArray, JObject, JObjectArray, JString};
use jni::sys::{jlong, jobject};
use jni::JNIEnv;

use rl_core::headers::{Prepared, Response};
use rl_core::unwind::{test_panic, TestPanic};
use rl_core::{CompositeDecision, Error, Rule};

use crate::cache::cache;
use crate::composite::group;
use crate::convert::{self, key_bytes, limiter, strings, unsigned};
use crate::error::{entry, Failure};
use crate::future::{start_flat, Outcome};
use crate::headers::{policies, style};
use crate::limiter::blocking;

/// What a `PreparedPolicies` holds natively (a boxed `Arc<Prepared>`): made by
/// `preparePolicies`, freed by `freePolicies` (its Java object's `Cleaner`); a call clones the
/// `Arc`, so a call still running on the runtime never reads a freed one.
type Handle = Arc<Prepared>;

fn prepared<'a>(handle: jlong) -> Result<&'a Handle, Failure> {
    // SAFETY: a non-zero handle was made by `preparePolicies` from `Box::into_raw`, and Java keeps
    // its `PreparedPolicies` reachable until every call that passes the handle has returned, so
    // the `Cleaner` cannot free it during one.
    unsafe { (handle as *const Handle).as_ref() }.ok_or_else(|| {
        Failure::Core(Error::InvalidArgument {
            name: "policies",
            message: "must not be null".into(),
        })
    })
}

/// `PreparedPolicies.of`: the policies (parallel arrays) and the style, checked by the core; a
/// handle for `acquirePolicies`.
#[no_mangle]
pub extern "system" fn Java_dev_rl_Native_preparePolicies<'l>(
    mut env: JNIEnv<'l>,
    _class: JClass<'l>,
    names: JObjectArray<'l>,
    limits: JLongArray<'l>,
    windows: JLongArray<'l>,
    style_name: JString<'l>,
) -> jlong {
    entry(&mut env, 0, |env| {
        let style = style(env, &style_name)?;
        let list = policies(env, &names, &limits, &windows)?;
        let p: Box<Handle> = Box::new(Arc::new(Prepared::new(list, style)?));
        Ok(Box::into_raw(p) as jlong)
    })
}

/// Frees what `preparePolicies` made (once: the `Cleaner` runs its action once).
#[no_mangle]
pub extern "system" fn Java_dev_rl_Native_freePolicies<'l>(
    mut env: JNIEnv<'l>,
    _class: JClass<'l>,
    handle: jlong,
) {
    entry(&mut env, (), |_| {
        if handle != 0 {
            // SAFETY: made by `preparePolicies` with `Box::into_raw`, freed only here, once.
            drop(unsafe { Box::from_raw(handle as *mut Handle) });
        }
        Ok(())
    })
}

/// One call's rules (each policy on `key`, asking `cost`), its group, and what it is rendered
/// with.
struct Call {
    rules: Vec<Rule>,
    group: Option<Vec<u8>>,
    prepared: Handle,
}

impl Call {
    fn new(
        env: &mut JNIEnv,
        policies: jlong,
        key: &JByteArray,
        cost: jlong,
        grp: &JByteArray,
    ) -> Result<Call, Failure> {
        let p = prepared(policies)?;
        let key = key_bytes(env, key)?;
        let cost = unsigned("cost", cost)?;
        Ok(Call {
            rules: p.rules(&key, cost),
            group: group(env, grp)?,
            prepared: p.clone(),
        })
    }
}

/// `[long[] decision, String[] fields, String body]`: the composite decision as
/// `convert::composite_longs`, the fields as `[name0, value0, name1, ...]`, the body of a denial
/// (else null). Java's `Native.policyResponseOf` reads it.
pub fn responded<'l>(
    env: &mut JNIEnv<'l>,
    c: &CompositeDecision,
    r: &Response,
) -> Result<JObject<'l>, Failure> {
    let decision = convert::composite_longs(env, c)?;
    let flat: Vec<&str> = r
        .headers
        .iter()
        .flat_map(|(n, v)| [*n, v.as_str()])
        .collect();
    let fields = strings(env, &flat)?;
    let class = <&JClass>::from(cache()?.object_class.as_obj());
    let out = env.new_object_array(3, class, JObject::null())?;
    env.set_object_array_element(&out, 0, &decision)?;
    env.set_object_array_element(&out, 1, &fields)?;
    if let Some(b) = &r.body {
        let body = env.new_string(b)?;
        env.set_object_array_element(&out, 2, &body)?;
    }
    Ok(out.into())
}

#[no_mangle]
pub extern "system" fn Java_dev_rl_Native_acquirePolicies<'l>(
    mut env: JNIEnv<'l>,
    _class: JClass<'l>,
    handle: jlong,
    policies: jlong,
    key: JByteArray<'l>,
    cost: jlong,
    grp: JByteArray<'l>,
) -> jobject {
    entry(&mut env, std::ptr::null_mut(), |env| {
        let l = limiter(handle)?;
        let call = Call::new(env, policies, &key, cost, &grp)?;
        let c = blocking(|| l.acquire_all(&call.rules, call.group.as_deref()))?;
        let r = call.prepared.respond(&c)?;
        Ok(responded(env, &c, &r)?.into_raw())
    })
}

/// Returns the response array when decided at once (a lease, the denial cache, memory), else null
/// and completes `future` with it.
#[no_mangle]
pub extern "system" fn Java_dev_rl_Native_acquirePoliciesAsync<'l>(
    mut env: JNIEnv<'l>,
    _class: JClass<'l>,
    handle: jlong,
    policies: jlong,
    key: JByteArray<'l>,
    cost: jlong,
    grp: JByteArray<'l>,
    future: JObject<'l>,
) -> jobject {
    entry(&mut env, std::ptr::null_mut(), |env| {
        let l = limiter(handle)?.as_async().clone();
        let call = Call::new(env, policies, &key, cost, &grp)?;
        let ready = start_flat(env, &future, async move {
            let c = l.acquire_all(&call.rules, call.group.as_deref()).await?;
            if let Some(r) = call.rules.first() {
                test_panic(TestPanic::Future, &r.key);
            }
            let r = call.prepared.respond(&c)?;
            Ok(Outcome::Responded(c, r))
        })?;
        Ok(ready.map_or(std::ptr::null_mut(), |a| a.into_raw()))
    })
}
