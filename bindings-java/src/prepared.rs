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
use crate::convert::{self, key_bytes, limiter, unsigned};
use crate::error::{entry, Failure};
use crate::future::{start_ready, Outcome};
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

/// A decision and its response in the form `Native.policyResponseOf` reads: the composite
/// decision's longs (`convert::composite_vec`) then two more, the byte lengths of the fields and of
/// the body (-1: none); and one text, each field as `name \n value \n`, then the body (UTF-8).
/// Two arrays, each filled with one JNI call, rather than Java objects built from
/// native code: each `New*` call allocates outside the compiled Java fast path, and on a
/// middleware's path (a request every few ms, caches cold) they were half of rl's time.
fn encode(c: &CompositeDecision, r: &Response) -> (Vec<jlong>, Vec<u8>) {
    let mut longs = convert::composite_vec(c, 2);
    let mut text = Vec::with_capacity(128 + r.body.as_ref().map_or(0, String::len));
    for (name, value) in &r.headers {
        text.extend_from_slice(name.as_bytes());
        text.push(b'\n');
        text.extend_from_slice(value.as_bytes());
        text.push(b'\n');
    }
    longs.push(text.len() as jlong);
    match &r.body {
        Some(b) => {
            text.extend_from_slice(b.as_bytes());
            longs.push(b.len() as jlong);
        }
        None => longs.push(-1),
    }
    (longs, text)
}

/// A decision made on the runtime, for its future: `Object[] {long[], byte[]}` (see [`encode`]).
pub fn responded<'l>(
    env: &mut JNIEnv<'l>,
    c: &CompositeDecision,
    r: &Response,
) -> Result<JObject<'l>, Failure> {
    let (longs, text) = encode(c, r);
    let out = env.new_long_array(longs.len() as i32)?;
    env.set_long_array_region(&out, 0, &longs)?;
    let text = env.byte_array_from_slice(&text)?;
    let class = <&JClass>::from(cache()?.object_class.as_obj());
    let pair = env.new_object_array(2, class, JObject::null())?;
    env.set_object_array_element(&pair, 0, &out)?;
    env.set_object_array_element(&pair, 1, &text)?;
    Ok(pair.into())
}

/// A decision made on the caller's thread, written into the caller's arrays: `out` (exactly
/// the longs [`encode`] makes; Java sizes it from the policy count) and `text` when the text
/// fits, else a new `byte[]` holding it, returned (null when it fit).
fn fill(
    env: &mut JNIEnv,
    out: &JLongArray,
    text: &JByteArray,
    c: &CompositeDecision,
    r: &Response,
) -> Result<jobject, Failure> {
    let (longs, bytes) = encode(c, r);
    if env.get_array_length(out)? as usize != longs.len() {
        return Err(Failure::Internal(format!(
            "Native.acquirePolicies: out has room for {} longs, the decision needs {}",
            env.get_array_length(out)?,
            longs.len()
        )));
    }
    env.set_long_array_region(out, 0, &longs)?;
    if bytes.len() <= env.get_array_length(text)? as usize {
        // SAFETY: u8 and i8 have the same size and alignment; the slice is only read.
        let signed =
            unsafe { std::slice::from_raw_parts(bytes.as_ptr().cast::<i8>(), bytes.len()) };
        env.set_byte_array_region(text, 0, signed)?;
        Ok(std::ptr::null_mut())
    } else {
        Ok(env.byte_array_from_slice(&bytes)?.into_raw())
    }
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
    out: JLongArray<'l>,
    text: JByteArray<'l>,
) -> jobject {
    entry(&mut env, std::ptr::null_mut(), |env| {
        let l = limiter(handle)?;
        let call = Call::new(env, policies, &key, cost, &grp)?;
        let c = blocking(|| l.acquire_all(&call.rules, call.group.as_deref()))?;
        let r = call.prepared.respond(&c)?;
        fill(env, &out, &text, &c, &r)
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
    out: JLongArray<'l>,
    text: JByteArray<'l>,
) -> jobject {
    entry(&mut env, std::ptr::null_mut(), |env| {
        let l = limiter(handle)?.as_async().clone();
        let call = Call::new(env, policies, &key, cost, &grp)?;
        let ready = start_ready(env, &future, async move {
            let c = l.acquire_all(&call.rules, call.group.as_deref()).await?;
            if let Some(r) = call.rules.first() {
                test_panic(TestPanic::Future, &r.key);
            }
            let r = call.prepared.respond(&c)?;
            Ok(Outcome::Responded(c, r))
        })?;
        match ready {
            Some(Outcome::Responded(c, r)) => fill(env, &out, &text, &c, &r),
            Some(_) => Err(Failure::Internal(
                "acquirePoliciesAsync: the call answered with something else".into(),
            )),
            // Left as Java set it (-1 in the fields' length): the future has the answer.
            None => Ok(std::ptr::null_mut()),
        }
    })
}
