//! Policy strings and HTTP response fields, for middleware: parsed and rendered by the core
//! (`rl_core::policy`, `rl_core::headers`) so that every language reads `"burst: 10/s; 100/m"`
//! the same way and sends the same `RateLimit-Policy` / `RateLimit` / `Retry-After` fields and
//! problem body. Policies cross JNI as parallel arrays (names, limits, windows), decisions as
//! six `long`s each (see `decisions`).

use jni::objects::{JClass, JLongArray, JObject, JObjectArray, JString};
use jni::sys::{jboolean, jint, jlong, jobjectArray, jstring};
use jni::JNIEnv;

use rl_core::headers::{problem_body, render, PROBLEM_CONTENT_TYPE};
use rl_core::{Decision, Error, HeaderStyle, Mode, Policy};

use crate::convert::{long, strings, unsigned};
use crate::error::{entry, Failure};

fn invalid(name: &'static str, message: String) -> Failure {
    Failure::Core(Error::InvalidArgument { name, message })
}

/// Policies from parallel arrays, each checked by the core (`Policy::new`).
pub(crate) fn policies(
    env: &mut JNIEnv,
    names: &JObjectArray,
    limits: &JLongArray,
    windows: &JLongArray,
) -> Result<Vec<Policy>, Failure> {
    if names.is_null() || limits.is_null() || windows.is_null() {
        return Err(invalid("policies", "must not be null".into()));
    }
    let n = env.get_array_length(names)? as usize;
    let (mut l, mut w) = (vec![0; n], vec![0; n]);
    if n > 0 {
        env.get_long_array_region(limits, 0, &mut l)?;
        env.get_long_array_region(windows, 0, &mut w)?;
    }
    let mut out = Vec::with_capacity(n);
    for i in 0..n {
        let name = JString::from(env.get_object_array_element(names, i as jint)?);
        let name_text: Option<String> = if name.is_null() {
            None
        } else {
            Some(env.get_string(&name)?.into())
        };
        env.delete_local_ref(name)?;
        out.push(Policy::new(
            name_text.as_deref(),
            unsigned("limit", l[i])?,
            unsigned("window_ms", w[i])?,
        )?);
    }
    Ok(out)
}

/// A header style by the core's name of it.
pub(crate) fn style(env: &mut JNIEnv, style: &JString) -> Result<HeaderStyle, Failure> {
    if style.is_null() {
        return Err(invalid("style", "must not be null".into()));
    }
    let text: String = env.get_string(style)?.into();
    HeaderStyle::from_name(&text).ok_or_else(|| {
        let known: Vec<&str> = HeaderStyle::ALL.iter().map(|s| s.as_str()).collect();
        invalid(
            "style",
            format!("is {text:?}; use one of {}", known.join(", ")),
        )
    })
}

/// Decisions flattened by Java, six `long`s each: allowed (0/1), remaining, used, retry_after_ms,
/// reset_after_ms, now_ms (the mode does not change a header).
fn decisions(env: &mut JNIEnv, flat: &JLongArray) -> Result<Vec<Decision>, Failure> {
    if flat.is_null() {
        return Err(invalid("decision", "must not be null".into()));
    }
    let n = env.get_array_length(flat)? as usize;
    let mut v = vec![0; n];
    if n > 0 {
        env.get_long_array_region(flat, 0, &mut v)?;
    }
    v.chunks_exact(6)
        .map(|d| {
            Ok(Decision {
                allowed: d[0] != 0,
                remaining: unsigned("remaining", d[1])?,
                used: unsigned("used", d[2])?,
                retry_after_ms: unsigned("retry_after_ms", d[3])?,
                reset_after_ms: unsigned("reset_after_ms", d[4])?,
                mode: Mode::ALL[0],
                now_ms: unsigned("now_ms", d[5])?,
            })
        })
        .collect()
}

/// The policies paired with the decision's per-rule decisions, which must be as many.
fn pairs<'a>(
    ps: &'a [Policy],
    ds: &'a [Decision],
) -> Result<Vec<(&'a Policy, &'a Decision)>, Failure> {
    if ps.len() != ds.len() {
        return Err(invalid(
            "policies",
            format!(
                "holds {} policies but the decision has {} rule decisions; give one policy per rule, in the rules' order",
                ps.len(),
                ds.len()
            ),
        ));
    }
    Ok(ps.iter().zip(ds).collect())
}

/// `Policy.parseAll`: `[String[] names, long[] limits, long[] windowsMs]`.
#[no_mangle]
pub extern "system" fn Java_dev_rl_Native_parsePolicies<'l>(
    mut env: JNIEnv<'l>,
    _class: JClass<'l>,
    text: JString<'l>,
) -> jobjectArray {
    entry(&mut env, std::ptr::null_mut(), |env| {
        if text.is_null() {
            return Err(invalid("policy", "must not be null".into()));
        }
        let text: String = env.get_string(&text)?.into();
        let ps = Policy::parse_many(&text)?;
        let names: Vec<&str> = ps.iter().map(|p| p.name.as_str()).collect();
        let names = strings(env, &names)?;
        let limits = env.new_long_array(ps.len() as jint)?;
        let windows = env.new_long_array(ps.len() as jint)?;
        let l: Vec<jlong> = ps.iter().map(|p| long(p.limit)).collect();
        let w: Vec<jlong> = ps.iter().map(|p| long(p.window_ms)).collect();
        env.set_long_array_region(&limits, 0, &l)?;
        env.set_long_array_region(&windows, 0, &w)?;
        let out = env.new_object_array(3, "java/lang/Object", JObject::null())?;
        env.set_object_array_element(&out, 0, names)?;
        env.set_object_array_element(&out, 1, limits)?;
        env.set_object_array_element(&out, 2, windows)?;
        Ok(out.into_raw())
    })
}

/// `Policy.of`: the core's check of a policy from its parts; returns its name (the canonical text
/// when `name` is null).
#[no_mangle]
pub extern "system" fn Java_dev_rl_Native_policyName<'l>(
    mut env: JNIEnv<'l>,
    _class: JClass<'l>,
    name: JString<'l>,
    limit: jlong,
    window_ms: jlong,
) -> jstring {
    entry(&mut env, std::ptr::null_mut(), |env| {
        let name: Option<String> = if name.is_null() {
            None
        } else {
            Some(env.get_string(&name)?.into())
        };
        let p = Policy::new(
            name.as_deref(),
            unsigned("limit", limit)?,
            unsigned("window_ms", window_ms)?,
        )?;
        Ok(env.new_string(p.name)?.into_raw())
    })
}

/// `RateLimitHeaders.render`: the fields as `[name0, value0, name1, value1, ...]`.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub extern "system" fn Java_dev_rl_Native_renderHeaders<'l>(
    mut env: JNIEnv<'l>,
    _class: JClass<'l>,
    names: JObjectArray<'l>,
    limits: JLongArray<'l>,
    windows: JLongArray<'l>,
    flat: JLongArray<'l>,
    allowed: jboolean,
    retry_after_ms: jlong,
    style: JString<'l>,
) -> jobjectArray {
    entry(&mut env, std::ptr::null_mut(), |env| {
        let style = self::style(env, &style)?;
        let ps = policies(env, &names, &limits, &windows)?;
        let ds = decisions(env, &flat)?;
        let fields = render(
            &pairs(&ps, &ds)?,
            allowed != 0,
            unsigned("retry_after_ms", retry_after_ms)?,
            style,
        );
        let flat: Vec<&str> = fields.iter().flat_map(|(n, v)| [*n, v.as_str()]).collect();
        Ok(strings(env, &flat)?.into_raw())
    })
}

/// `RateLimitHeaders.problemBody`: the RFC 9457 body of a 429.
#[no_mangle]
pub extern "system" fn Java_dev_rl_Native_problemBody<'l>(
    mut env: JNIEnv<'l>,
    _class: JClass<'l>,
    names: JObjectArray<'l>,
    limits: JLongArray<'l>,
    windows: JLongArray<'l>,
    flat: JLongArray<'l>,
    retry_after_ms: jlong,
) -> jstring {
    entry(&mut env, std::ptr::null_mut(), |env| {
        let ps = policies(env, &names, &limits, &windows)?;
        let ds = decisions(env, &flat)?;
        let body = problem_body(
            &pairs(&ps, &ds)?,
            unsigned("retry_after_ms", retry_after_ms)?,
        );
        Ok(env.new_string(body)?.into_raw())
    })
}

#[no_mangle]
pub extern "system" fn Java_dev_rl_Native_problemContentType<'l>(
    mut env: JNIEnv<'l>,
    _class: JClass<'l>,
) -> jstring {
    entry(&mut env, std::ptr::null_mut(), |env| {
        Ok(env.new_string(PROBLEM_CONTENT_TYPE)?.into_raw())
    })
}
