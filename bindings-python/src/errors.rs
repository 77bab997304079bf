//! Core errors → the `rl` exception hierarchy (defined in Python, `rl/_errors.py`, so that
//! `InvalidArgument` can also be a `ValueError` and `InvalidArgumentType` a `TypeError`).

use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::PyType;

pub(crate) struct Classes {
    pub base: Py<PyType>,
    pub invalid: Py<PyType>,
    pub invalid_type: Py<PyType>,
    pub unavailable: Py<PyType>,
    pub backend: Py<PyType>,
    pub clock_skew: Py<PyType>,
    pub closed: Py<PyType>,
    pub panic: Py<PyType>,
}

static CLASSES: PyOnceLock<Classes> = PyOnceLock::new();

fn classes(py: Python<'_>) -> PyResult<&Classes> {
    CLASSES.get_or_try_init(py, || -> PyResult<Classes> {
        let m = py.import("rl._errors")?;
        let get = |name: &str| -> PyResult<Py<PyType>> {
            Ok(m.getattr(name)?.cast_into::<PyType>()?.unbind())
        };
        Ok(Classes {
            base: get("RateLimitError")?,
            invalid: get("InvalidArgument")?,
            invalid_type: get("InvalidArgumentType")?,
            unavailable: get("BackendUnavailable")?,
            backend: get("BackendError")?,
            clock_skew: get("ClockSkewError")?,
            closed: get("LimiterClosed")?,
            panic: get("NativePanicError")?,
        })
    })
}

/// `cls(message)` with `attrs` set on it, as a `PyErr`; if the classes cannot be loaded, the
/// import error says why. The instance is made here, with C-level constructors only (the classes
/// define no Python `__init__`), so raising never runs Python code under a Rust frame.
fn raise(
    py: Python<'_>,
    pick: impl FnOnce(&Classes) -> &Py<PyType>,
    message: String,
    attrs: &[(&str, Bound<'_, PyAny>)],
) -> PyErr {
    let make = || -> PyResult<PyErr> {
        let c = classes(py)?;
        let exc = pick(c).bind(py).call1((message,))?;
        for (name, value) in attrs {
            exc.setattr(*name, value)?;
        }
        Ok(PyErr::from_value(exc))
    };
    make().unwrap_or_else(|e| e)
}

fn s<'py>(py: Python<'py>, v: &str) -> Bound<'py, PyAny> {
    pyo3::types::PyString::new(py, v).into_any()
}

fn n(py: Python<'_>, v: u64) -> Bound<'_, PyAny> {
    v.into_pyobject(py).expect("u64 converts").into_any()
}

/// A bad value: `InvalidArgument(message)` with `.argument`.
pub(crate) fn invalid(py: Python<'_>, argument: &str, message: String) -> PyErr {
    raise(
        py,
        |c| &c.invalid,
        format!("invalid argument `{argument}`: {message}"),
        &[("argument", s(py, argument))],
    )
}

/// A value of the wrong type: `InvalidArgumentType` (also a `TypeError`) with `.argument`.
pub(crate) fn invalid_type(py: Python<'_>, argument: &str, message: String) -> PyErr {
    raise(
        py,
        |c| &c.invalid_type,
        format!("invalid argument `{argument}`: {message}"),
        &[("argument", s(py, argument))],
    )
}

pub(crate) fn closed(py: Python<'_>, what: &str) -> PyErr {
    raise(
        py,
        |c| &c.closed,
        format!("this {what} is closed; make a new one"),
        &[],
    )
}

/// A panic inside the native module: `NativePanicError(message)`.
pub(crate) fn panicked(py: Python<'_>, message: String) -> PyErr {
    raise(py, |c| &c.panic, message, &[])
}

/// Runs a method's body; a panic in it is raised as `NativePanicError`, a `RateLimitError`,
/// rather than PyO3's `PanicException`, a `BaseException` that `except Exception` misses.
pub(crate) fn guard<T>(py: Python<'_>, body: impl FnOnce() -> PyResult<T>) -> PyResult<T> {
    rl_core::unwind::call(body).unwrap_or_else(|m| Err(panicked(py, m)))
}

pub(crate) fn to_py(py: Python<'_>, e: rl_core::Error) -> PyErr {
    let message = e.to_string();
    match e {
        rl_core::Error::InvalidArgument { name, .. } => {
            raise(py, |c| &c.invalid, message, &[("argument", s(py, name))])
        }
        rl_core::Error::InvalidType { name, .. } => raise(
            py,
            |c| &c.invalid_type,
            message,
            &[("argument", s(py, name))],
        ),
        rl_core::Error::BackendUnavailable(_) => raise(py, |c| &c.unavailable, message, &[]),
        rl_core::Error::Backend(_) => raise(py, |c| &c.backend, message, &[]),
        rl_core::Error::ClockSkew {
            client_ms,
            server_ms,
            skew_ms,
            max_skew_ms,
        } => raise(
            py,
            |c| &c.clock_skew,
            message,
            &[
                ("client_ms", n(py, client_ms)),
                ("server_ms", n(py, server_ms)),
                ("skew_ms", n(py, skew_ms)),
                ("max_skew_ms", n(py, max_skew_ms)),
            ],
        ),
        // A kind added to the core later still arrives as an rl error, never as a bare Exception.
        #[allow(unreachable_patterns)]
        _ => raise(py, |c| &c.base, message, &[]),
    }
}
