//! A constructor's arguments → an open core limiter (the sync and async classes share it).

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyString};

use crate::convert::show;
use crate::{errors, options};

pub(crate) struct Opened {
    pub limiter: rl_core::blocking::Limiter,
    /// Printable, without the password.
    pub target: String,
}

/// `url` (a str, or None for the memory backend) and the keyword options, opened by the core.
pub(crate) fn open(
    py: Python<'_>,
    url: Option<&Bound<'_, PyAny>>,
    kwargs: Option<&Bound<'_, PyDict>>,
) -> PyResult<Opened> {
    let url: Option<String> = match url.filter(|u| !u.is_none()) {
        None => None,
        Some(u) => match u.cast::<PyString>() {
            Ok(s) => Some(s.to_cow()?.into_owned()),
            Err(_) => {
                return Err(errors::invalid_type(
                    py,
                    "url",
                    format!("is {}; must be a str or None", show(u)),
                ))
            }
        },
    };
    let options = options::parse(py, kwargs)?;
    let target = url.as_deref().map_or("memory://".into(), rl_core::redact);
    rl_core::unwind::test_panic(
        rl_core::unwind::TestPanic::Caller,
        options.key_prefix.as_bytes(),
    );
    let limiter = rl_core::blocking::Limiter::open(url.as_deref(), options)
        .map_err(|e| errors::to_py(py, e))?;
    Ok(Opened { limiter, target })
}
