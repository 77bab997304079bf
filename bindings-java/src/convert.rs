//! Conversions between Java values and the core's: arguments and options in, decisions and stats
//! out. Nothing here knows a range, a default or an option name: the core's tables do.

use jni::objects::{JByteArray, JClass, JLongArray, JObject, JObjectArray, JString};
use jni::signature::ReturnType;
use jni::sys::{jboolean, jint, jlong, jvalue};
use jni::JNIEnv;

use rl_core::blocking::Limiter;
use rl_core::options::{self, Value};
use rl_core::unwind::{test_panic, TestPanic};
use rl_core::{CompositeDecision, Decision, Error, Mode, Options, StatsKind, STATS_FIELDS};

use crate::cache::cache;
use crate::error::{java_named, Failure};

pub fn limiter<'a>(handle: jlong) -> Result<&'a Limiter, Failure> {
    // SAFETY: a non-zero handle was made by `open` from `Box::into_raw` and is freed only by
    // `close`, which Java calls once, after the last call that entered with it has left.
    unsafe { (handle as *const Limiter).as_ref() }
        .ok_or_else(|| Failure::State("the RateLimiter is closed".into()))
}

fn must_not_be_null(name: &'static str) -> Failure {
    Failure::Core(Error::InvalidArgument {
        name,
        message: "must not be null".into(),
    })
}

/// A key's bytes. The test build's panic hook (`test-panic` feature) fires here, on the caller's
/// thread, for the marker key `rl-test-panic:caller`.
pub fn key_bytes(env: &mut JNIEnv, key: &JByteArray) -> Result<Vec<u8>, Failure> {
    if key.is_null() {
        return Err(must_not_be_null("key"));
    }
    let key = env.convert_byte_array(key)?;
    test_panic(TestPanic::Caller, &key);
    Ok(key)
}

/// A Java `long` where the core takes a `u64`. Java has no unsigned type, so a negative value is
/// refused here, naming it; every other rule about the value is the core's.
pub fn unsigned(name: &'static str, v: jlong) -> Result<u64, Failure> {
    u64::try_from(v).map_err(|_| {
        Failure::Core(Error::InvalidArgument {
            name,
            message: format!("is {v}; must not be negative"),
        })
    })
}

/// The `CompletableFuture` an async call completes.
pub fn future<'a, 'l>(future: &'a JObject<'l>) -> Result<&'a JObject<'l>, Failure> {
    if future.is_null() {
        return Err(must_not_be_null("future"));
    }
    Ok(future)
}

pub fn optional_string(env: &mut JNIEnv, s: &JString) -> Result<Option<String>, Failure> {
    if s.is_null() {
        return Ok(None);
    }
    Ok(Some(env.get_string(s)?.into()))
}

/// A Java `String[]`.
pub fn strings<'l>(env: &mut JNIEnv<'l>, items: &[&str]) -> Result<JObjectArray<'l>, Failure> {
    let class = <&JClass>::from(cache()?.string_class.as_obj());
    let array = env.new_object_array(items.len() as jint, class, JObject::null())?;
    for (i, s) in items.iter().enumerate() {
        let s = env.new_string(s)?;
        env.set_object_array_element(&array, i as jint, &s)?;
        env.delete_local_ref(s)?;
    }
    Ok(array)
}

/// The options the builder was given: `names[i]` (external snake_case names) set to `values[i]`
/// on top of the core's defaults, then validated by the core. Errors name the option as Java
/// spells it.
pub fn options(
    env: &mut JNIEnv,
    names: &JObjectArray,
    values: &JObjectArray,
) -> Result<Options, Failure> {
    let mut pairs = Vec::new();
    for i in 0..env.get_array_length(names)? {
        let name = JString::from(env.get_object_array_element(names, i)?);
        let name_text: String = env.get_string(&name)?.into();
        env.delete_local_ref(name)?;
        let value = env.get_object_array_element(values, i)?;
        let converted = if env.is_instance_of(&value, "dev/rl/OptionsBuilder$Text")? {
            // `option(name, text)`: the name as a config file spells it, the text read by kind.
            let text = env.get_field(&value, "text", "Ljava/lang/String;")?.l()?;
            let text: String = env.get_string(&JString::from(text))?.into();
            options::parse_as_spelled(&name_text, &text)
                .map_err(|e| Failure::Core(java_named(e)))?
        } else {
            match option_value(env, &name_text, &value) {
                Err(Failure::Core(e)) => return Err(Failure::Core(java_named(e))),
                other => (name_text, other?),
            }
        };
        env.delete_local_ref(value)?;
        pairs.push(converted);
    }
    Options::from_pairs(pairs).map_err(|e| Failure::Core(java_named(e)))
}

/// A boxed Java value as the core takes it: `Long`/`Integer`/`Short`/`Byte` → `Int`,
/// `Double`/`Float` → `Float`, `Boolean` → `Bool`, `String` → `Text`, `null` → `Null` (the
/// default), and a `java.time.Duration` → `Int` milliseconds, exactly (an `i128`, so a duration
/// no `long` of milliseconds holds still reaches the core's range check with its value).
fn option_value(env: &mut JNIEnv, name: &str, v: &JObject) -> Result<Value, Failure> {
    if v.is_null() {
        return Ok(Value::Null);
    }
    let is = |env: &mut JNIEnv, class: &str| env.is_instance_of(v, class);
    if is(env, "java/lang/Boolean")? {
        return Ok(Value::Bool(
            env.call_method(v, "booleanValue", "()Z", &[])?.z()?,
        ));
    }
    if is(env, "java/lang/String")? {
        let s = env.get_string(<&JString>::from(v))?;
        return Ok(Value::Text(s.into()));
    }
    if is(env, "java/time/Duration")? {
        let seconds = env.call_method(v, "getSeconds", "()J", &[])?.j()?;
        let nanos = env.call_method(v, "getNano", "()I", &[])?.i()?;
        return Ok(Value::Int(
            seconds as i128 * 1000 + (nanos / 1_000_000) as i128,
        ));
    }
    if is(env, "java/lang/Double")? || is(env, "java/lang/Float")? {
        return Ok(Value::Float(
            env.call_method(v, "doubleValue", "()D", &[])?.d()?,
        ));
    }
    for whole in [
        "java/lang/Long",
        "java/lang/Integer",
        "java/lang/Short",
        "java/lang/Byte",
    ] {
        if is(env, whole)? {
            return Ok(Value::Int(
                env.call_method(v, "longValue", "()J", &[])?.j()? as i128,
            ));
        }
    }
    let class = env
        .call_method(v, "getClass", "()Ljava/lang/Class;", &[])?
        .l()?;
    let class = env
        .call_method(&class, "getName", "()Ljava/lang/String;", &[])?
        .l()?;
    let class: String = env.get_string(&JString::from(class))?.into();
    Err(Failure::Core(Error::InvalidType {
        name: options::spec(name).map_or("options", |s| s.name),
        message: format!("is a {class}, which no option takes"),
    }))
}

pub fn long(v: u64) -> jlong {
    i64::try_from(v).unwrap_or(i64::MAX)
}

/// A mode as its index in `Mode::ALL` (Java holds the names, from `Native.modes`).
fn mode_index(m: Mode) -> jint {
    Mode::ALL
        .iter()
        .position(|x| *x == m)
        .map_or(-1, |i| i as jint)
}

/// A decision as the seven `long`s `Native.decisionOf` reads: allowed (0/1), remaining, used,
/// retry_after_ms, reset_after_ms, the mode's index, now_ms.
fn push_decision(out: &mut Vec<jlong>, d: &Decision) {
    out.extend_from_slice(&[
        d.allowed as jlong,
        long(d.remaining),
        long(d.used),
        long(d.retry_after_ms),
        long(d.reset_after_ms),
        mode_index(d.mode) as jlong,
        long(d.now_ms),
    ]);
}

fn long_array<'l>(env: &mut JNIEnv<'l>, v: &[jlong]) -> Result<JLongArray<'l>, Failure> {
    let a = env.new_long_array(v.len() as jint)?;
    env.set_long_array_region(&a, 0, v)?;
    Ok(a)
}

/// A decision as a `long[]` (see `push_decision`), for `Native.decisionOf`. A call's answer
/// crosses JNI this way rather than as an object a native call builds through upcalls into
/// Java: two cheap array calls instead of one or more `Call*Method`s, which cost most on a
/// gateway's cold path (a request every few milliseconds, caches cold each time).
pub fn decision_longs<'l>(env: &mut JNIEnv<'l>, d: &Decision) -> Result<JLongArray<'l>, Failure> {
    let mut v = Vec::with_capacity(7);
    push_decision(&mut v, d);
    long_array(env, &v)
}

/// A composite decision as a `long[]` for `Native.compositeOf`: allowed (0/1), retry_after_ms,
/// the mode's index, now_ms, then each rule's decision as `push_decision` writes it.
pub fn composite_longs<'l>(
    env: &mut JNIEnv<'l>,
    c: &CompositeDecision,
) -> Result<JLongArray<'l>, Failure> {
    long_array(env, &composite_vec(c, 0))
}

/// A composite decision's longs (see `composite_longs`), with room for `extra` more.
pub fn composite_vec(c: &CompositeDecision, extra: usize) -> Vec<jlong> {
    let mut v = Vec::with_capacity(4 + 7 * c.decisions.len() + extra);
    v.extend_from_slice(&[
        c.allowed as jlong,
        long(c.retry_after_ms),
        mode_index(c.mode) as jlong,
        long(c.now_ms),
    ]);
    for d in &c.decisions {
        push_decision(&mut v, d);
    }
    v
}

/// A `dev.rl.Decision`, made by `Native.decision`.
pub fn decision<'l>(env: &mut JNIEnv<'l>, d: &Decision) -> Result<JObject<'l>, Failure> {
    let c = cache()?;
    let args = [
        jvalue {
            z: d.allowed as jboolean,
        },
        jvalue {
            j: long(d.remaining),
        },
        jvalue { j: long(d.used) },
        jvalue {
            j: long(d.retry_after_ms),
        },
        jvalue {
            j: long(d.reset_after_ms),
        },
        jvalue {
            i: mode_index(d.mode),
        },
        jvalue { j: long(d.now_ms) },
    ];
    // SAFETY: `decision` was looked up on `native` with exactly this signature.
    let obj = unsafe {
        env.call_static_method_unchecked(&c.native, c.decision, ReturnType::Object, &args)
    }?
    .l()?;
    Ok(obj)
}

/// A `dev.rl.CompositeDecision`, made by `Native.composite` from its decisions (an `Object[]`:
/// `java/lang/Object` is found by any thread's class loader, `dev/rl/Decision` might not be).
pub fn composite<'l>(env: &mut JNIEnv<'l>, c: &CompositeDecision) -> Result<JObject<'l>, Failure> {
    let cache = cache()?;
    let list = env.new_object_array(
        c.decisions.len() as jint,
        <&JClass>::from(cache.object_class.as_obj()),
        JObject::null(),
    )?;
    for (i, d) in c.decisions.iter().enumerate() {
        let obj = decision(env, d)?;
        env.set_object_array_element(&list, i as jint, &obj)?;
        env.delete_local_ref(obj)?;
    }
    let args = [
        jvalue {
            z: c.allowed as jboolean,
        },
        jvalue {
            j: long(c.retry_after_ms),
        },
        jvalue {
            i: mode_index(c.mode),
        },
        jvalue { j: long(c.now_ms) },
        jvalue { l: list.as_raw() },
    ];
    // SAFETY: `composite` was looked up on `native` with exactly this signature.
    let obj = unsafe {
        env.call_static_method_unchecked(&cache.native, cache.composite, ReturnType::Object, &args)
    }?
    .l()?;
    env.delete_local_ref(list)?;
    Ok(obj)
}

/// A `dev.rl.Stats`: its canonical constructor, given `Stats::fields()` in `STATS_FIELDS` order
/// (the record's components, generated from the same table, are in that order).
pub fn stats<'l>(env: &mut JNIEnv<'l>, s: &rl_core::Stats) -> Result<JObject<'l>, Failure> {
    enum Arg<'l> {
        Long(jlong),
        Str(JString<'l>),
    }
    let c = cache()?;
    let mut fields = Vec::with_capacity(STATS_FIELDS.len());
    for (f, value) in s.fields() {
        // Each field as the kind `cache::stats_signature` declared for it, or not at all.
        fields.push(match (f.kind, value) {
            (StatsKind::Count, Value::Int(n)) => Arg::Long(i64::try_from(n).unwrap_or(i64::MAX)),
            (StatsKind::Mode | StatsKind::Text, Value::Text(t)) => Arg::Str(env.new_string(t)?),
            (_, other) => {
                return Err(Failure::Internal(format!(
                    "stats field {} is {other:?}, not its declared kind",
                    f.name
                )))
            }
        });
    }
    let args: Vec<jvalue> = fields
        .iter()
        .map(|a| match a {
            Arg::Long(j) => jvalue { j: *j },
            Arg::Str(s) => jvalue { l: s.as_raw() },
        })
        .collect();
    let class = <&JClass>::from(c.stats.as_obj());
    // SAFETY: `stats_new` is the constructor of `stats`, with the signature `stats_signature`
    // made from `STATS_FIELDS`, which `fields` follows kind by kind (checked above).
    let obj = unsafe { env.new_object_unchecked(class, c.stats_new, &args) }?;
    Ok(obj)
}
