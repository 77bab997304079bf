//! Keyword options → `rl_core::Options`, through the core's table (`rl_core::options::OPTIONS`).
//! Each keyword's value becomes a `Value` by its Python type alone; `Options::set` then checks
//! it against the option's row (type, whole number, range) and names the option, so nothing here
//! knows any option by name and a new row in the core is a new keyword here.

use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyFloat, PyInt, PyString};

use rl_core::options::{spec, OptionSpec, Value};

use crate::convert::{show, type_name};
use crate::errors;

/// The options given as keywords (`None` for a value, or leaving a keyword out, is the default),
/// checked by the core: each one, then the rules between them.
pub(crate) fn parse(
    py: Python<'_>,
    kwargs: Option<&Bound<'_, PyDict>>,
) -> PyResult<rl_core::Options> {
    let mut options = rl_core::Options::default();
    for (key, obj) in kwargs.into_iter().flat_map(|d| d.iter()) {
        let name = key.cast::<PyString>()?.to_cow()?.into_owned();
        // An unknown keyword: the core's error (naming it and listing the options) comes from `set`.
        let value = match spec(&name) {
            Some(row) => value(row, &obj)?,
            None => Value::Null,
        };
        options
            .set(&name, value)
            .map_err(|e| errors::to_py(py, e))?;
    }
    options.validate().map_err(|e| errors::to_py(py, e))?;
    Ok(options)
}

/// `obj` as the core's `Value`. A `float` is a wrong type for every option (Python has `int`
/// for whole numbers, and rl refuses `1.0` wherever it wants an int); an `int` too large for the
/// core's `i128` cannot be handed over, so it is refused here, naming the option.
fn value(row: &OptionSpec, obj: &Bound<'_, PyAny>) -> PyResult<Value> {
    let py = obj.py();
    if obj.is_none() {
        return Ok(Value::Null);
    }
    // Before int: `bool` is an `int` subclass.
    if let Ok(b) = obj.cast::<PyBool>() {
        return Ok(Value::Bool(b.is_true()));
    }
    if let Ok(s) = obj.cast::<PyString>() {
        return s
            .to_cow()
            .map(|s| Value::Text(s.into_owned()))
            .map_err(|e| {
                errors::invalid(
                    py,
                    row.name,
                    format!("{} cannot be encoded as UTF-8 ({})", show(obj), e.value(py)),
                )
            });
    }
    if obj.is_instance_of::<PyFloat>() {
        return Err(errors::invalid_type(
            py,
            row.name,
            format!("is {}, a float; must be {}", show(obj), row.kind.describe()),
        ));
    }
    let int = if obj.is_instance_of::<PyInt>() {
        obj.clone()
    } else {
        // numpy integers and anything else that is an integer by `__index__`.
        match py.import("operator")?.getattr("index")?.call1((obj,)) {
            Ok(i) => i,
            Err(_) => {
                return Err(errors::invalid_type(
                    py,
                    row.name,
                    format!(
                        "is {} ({}); must be {}",
                        show(obj),
                        type_name(obj),
                        row.kind.describe()
                    ),
                ))
            }
        }
    };
    int.extract::<i128>().map(Value::Int).map_err(|_| {
        errors::invalid(
            py,
            row.name,
            format!("is {}, which does not fit in 128 bits", show(&int)),
        )
    })
}
