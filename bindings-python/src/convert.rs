//! Python values → the core's argument types. Only *type* conversion happens here (is it an int,
//! does it fit in 64 bits, is the key str or bytes); every range rule (limit ≥ 1, cost ≤ limit,
//! window ≤ 30 days, key not empty ...) is the core's, so all bindings say the same thing.
//!
//! Rules, documented in the README and the stubs:
//! - integers: `int` (or anything with `__index__`, e.g. numpy integers); `bool` is refused (a
//!   `True` limit is a bug, not a 1), and so are `float` (including whole, NaN and infinite
//!   floats), `None`, `str` ... → `InvalidArgumentType` (a `TypeError`); a negative int or one
//!   above 2**64-1 → `InvalidArgument` (a `ValueError`).
//! - keys: `str` (UTF-8 encoded) or `bytes`; anything else → `InvalidArgumentType`.

use pyo3::exceptions::PyOverflowError;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyBytes, PyFloat, PyInt, PyString};

use crate::errors;

/// An optional argument that was not passed, told apart from an explicit `None` (which is refused).
pub(crate) enum Arg<'py> {
    Absent,
    Given(Bound<'py, PyAny>),
}

impl<'py> FromPyObject<'_, 'py> for Arg<'py> {
    type Error = PyErr;
    fn extract(obj: Borrowed<'_, 'py, PyAny>) -> PyResult<Self> {
        Ok(Arg::Given(obj.to_owned()))
    }
}

/// `repr(obj)`, shortened so a huge argument cannot flood a log line.
pub(crate) fn show(obj: &Bound<'_, PyAny>) -> String {
    let r = obj
        .repr()
        .map(|r| r.to_string_lossy().into_owned())
        .unwrap_or_else(|_| "<unprintable>".into());
    if r.chars().count() > 80 {
        let head: String = r.chars().take(77).collect();
        format!("{head}...")
    } else {
        r
    }
}

pub(crate) fn type_name(obj: &Bound<'_, PyAny>) -> String {
    obj.get_type()
        .name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|_| "?".into())
}

/// A user key as bytes: `bytes` as is, `str` encoded as UTF-8.
pub(crate) fn key<'py>(obj: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyBytes>> {
    let py = obj.py();
    if let Ok(b) = obj.cast::<PyBytes>() {
        return Ok(b.clone());
    }
    if let Ok(s) = obj.cast::<PyString>() {
        return s.encode_utf8().map_err(|e| {
            errors::invalid(
                py,
                "key",
                format!("{} cannot be encoded as UTF-8 ({})", show(obj), e.value(py)),
            )
        });
    }
    if obj.is_none() {
        return Err(errors::invalid_type(
            py,
            "key",
            "is None; must be str or bytes".into(),
        ));
    }
    Err(errors::invalid_type(
        py,
        "key",
        format!(
            "is {} ({}); must be str or bytes",
            show(obj),
            type_name(obj)
        ),
    ))
}

/// A non-negative integer that fits in 64 bits.
pub(crate) fn u64_arg(name: &str, obj: &Bound<'_, PyAny>) -> PyResult<u64> {
    let py = obj.py();
    if let Ok(i) = obj.cast_exact::<PyInt>() {
        return int_to_u64(name, i.as_any());
    }
    if obj.is_instance_of::<PyBool>() {
        return Err(errors::invalid_type(
            py,
            name,
            format!("is {}, a bool; must be an int", show(obj)),
        ));
    }
    if obj.is_none() {
        return Err(errors::invalid_type(
            py,
            name,
            "is None; must be an int".into(),
        ));
    }
    if obj.is_instance_of::<PyFloat>() {
        return Err(errors::invalid_type(
            py,
            name,
            format!("is {}, a float; must be an int", show(obj)),
        ));
    }
    // int subclasses, numpy integers and anything else that is an integer by `__index__`.
    match py
        .import("operator")
        .and_then(|op| op.getattr("index"))
        .and_then(|index| index.call1((obj,)))
    {
        Ok(i) => int_to_u64(name, &i),
        Err(_) => Err(errors::invalid_type(
            py,
            name,
            format!("is {} ({}); must be an int", show(obj), type_name(obj)),
        )),
    }
}

fn int_to_u64(name: &str, i: &Bound<'_, PyAny>) -> PyResult<u64> {
    let py = i.py();
    match i.extract::<u64>() {
        Ok(v) => Ok(v),
        Err(e) if e.is_instance_of::<PyOverflowError>(py) => {
            let negative = i.lt(0).unwrap_or(false);
            Err(errors::invalid(
                py,
                name,
                if negative {
                    format!("is {}; must not be negative", show(i))
                } else {
                    format!(
                        "is {}, which does not fit in 64 bits (at most {})",
                        show(i),
                        u64::MAX
                    )
                },
            ))
        }
        Err(e) => Err(e),
    }
}

/// `u64_arg` for an optional argument: absent → `default`.
pub(crate) fn u64_or(name: &str, arg: &Arg<'_>, default: u64) -> PyResult<u64> {
    match arg {
        Arg::Absent => Ok(default),
        Arg::Given(obj) => u64_arg(name, obj),
    }
}

/// A text argument: `str` only.
pub(crate) fn str_arg(name: &str, obj: &Bound<'_, PyAny>) -> PyResult<String> {
    match obj.cast::<PyString>() {
        Ok(s) => s.extract::<String>(),
        Err(_) => Err(errors::invalid_type(
            obj.py(),
            name,
            format!("is {} ({}); must be a str", show(obj), type_name(obj)),
        )),
    }
}

/// A name given as `str` (UTF-8 encoded) or `bytes`, like a key; the core checks its length.
pub(crate) fn bytes_arg(name: &str, obj: &Bound<'_, PyAny>) -> PyResult<Vec<u8>> {
    if let Ok(b) = obj.cast::<PyBytes>() {
        return Ok(b.as_bytes().to_vec());
    }
    if let Ok(s) = obj.cast::<PyString>() {
        return s.encode_utf8().map(|b| b.as_bytes().to_vec()).map_err(|e| {
            let py = obj.py();
            errors::invalid(
                py,
                name,
                format!("{} cannot be encoded as UTF-8 ({})", show(obj), e.value(py)),
            )
        });
    }
    Err(errors::invalid_type(
        obj.py(),
        name,
        format!(
            "is {} ({}); must be str or bytes",
            show(obj),
            type_name(obj)
        ),
    ))
}
