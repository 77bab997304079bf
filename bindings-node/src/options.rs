//! A JavaScript options object as `rl_core::Options`. Each own enumerable key is the camelCase
//! spelling of an option in `rl_core::OPTIONS` (`retryDelayMs` → `retry_delay_ms`), its value is
//! converted by its JavaScript type only, and `Options::set` checks the rest. No option is named
//! here: a new row in the core's table works in Node as it is.

use std::ptr;

use napi::bindgen_prelude::*;
use napi::sys;
use rl_core::options::{camel_case, snake_case, spec, Value, OPTIONS};
use rl_core::unwind::{test_panic, TestPanic};
use rl_core::Options;

use crate::convert;

/// The options in `object` on top of the defaults. The outer `Result` is napi failing (a getter
/// that throws); the inner one is the core refusing a key or a value, naming the core's option.
pub(crate) fn from_object(object: &Object<'_>) -> Result<rl_core::Result<Options>> {
    let mut options = Options::default();
    for key in own_keys(object)? {
        // Only the camelCase spelling is an option (`key_prefix` is not `keyPrefix`).
        let Some(spec) = spec(&snake_case(&key)).filter(|s| camel_case(s.name) == key) else {
            return Ok(Err(unknown(&key)));
        };
        let value = match convert::value(object.get_named_property_unchecked(&key)?)? {
            Ok(v) => v,
            Err(what) => {
                return Ok(Err(rl_core::Error::InvalidType {
                    name: spec.name,
                    message: format!("is {what}; must be {}", spec.kind.describe()),
                }))
            }
        };
        if let Value::Text(s) = &value {
            test_panic(TestPanic::Caller, s.as_bytes());
        }
        if let Err(e) = options.set(spec.name, value) {
            return Ok(Err(e));
        }
    }
    Ok(Ok(options))
}

fn unknown(key: &str) -> rl_core::Error {
    let names: Vec<String> = OPTIONS.iter().map(|s| camel_case(s.name)).collect();
    rl_core::Error::InvalidArgument {
        name: "options",
        message: format!(
            "{key:?} is not an option; the options are {}",
            names.join(", ")
        ),
    }
}

/// `Object.keys(object)`: own, enumerable, string keys (symbols skipped).
fn own_keys(object: &Object<'_>) -> Result<Vec<String>> {
    let env = object.value().env;
    let mut names = ptr::null_mut();
    check_status!(unsafe {
        sys::napi_get_all_property_names(
            env,
            object.raw(),
            sys::KeyCollectionMode::own_only,
            sys::KeyFilter::enumerable | sys::KeyFilter::skip_symbols,
            sys::KeyConversion::numbers_to_strings,
            &mut names,
        )
    })?;
    let names = unsafe { Object::from_napi_value(env, names)? };
    (0..names.get_array_length()?)
        .map(|i| names.get_element::<String>(i))
        .collect()
}
