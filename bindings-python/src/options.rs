//! Keyword options → `rl_core::Options`. `None` (or leaving one out) means the core's default;
//! the core checks ranges.

use std::time::Duration;

use pyo3::prelude::*;
use pyo3::types::PyString;

use crate::convert::{show, u64_arg};
use crate::errors;

pub(crate) struct Opened {
    pub limiter: rl_core::blocking::Limiter,
    /// Printable, without the password.
    pub target: String,
}

pub(crate) fn open(
    py: Python<'_>,
    url: Option<&Bound<'_, PyAny>>,
    key_prefix: Option<&Bound<'_, PyAny>>,
    connect_timeout_ms: Option<&Bound<'_, PyAny>>,
    request_timeout_ms: Option<&Bound<'_, PyAny>>,
    max_clock_skew_ms: Option<&Bound<'_, PyAny>>,
) -> PyResult<Opened> {
    let url: Option<String> = match url {
        None => None,
        Some(u) => match u.cast::<PyString>() {
            Ok(s) => Some(s.to_cow()?.into_owned()),
            Err(_) => return Err(errors::invalid_type(py, "url", format!("is {}; must be a str or None", show(u)))),
        },
    };
    let mut options = rl_core::Options::default();
    if let Some(p) = key_prefix {
        match p.cast::<PyString>() {
            Ok(s) => options.key_prefix = s.to_cow()?.into_owned(),
            Err(_) => return Err(errors::invalid_type(py, "key_prefix", format!("is {}; must be a str", show(p)))),
        }
    }
    if let Some(v) = connect_timeout_ms {
        options.connect_timeout = Duration::from_millis(u64_arg("connect_timeout_ms", v)?);
    }
    if let Some(v) = request_timeout_ms {
        options.request_timeout = Duration::from_millis(u64_arg("request_timeout_ms", v)?);
    }
    if let Some(v) = max_clock_skew_ms {
        options.max_clock_skew_ms = u64_arg("max_clock_skew_ms", v)?;
    }
    let target = match &url {
        None => "memory://".to_string(),
        Some(u) => redact(u),
    };
    let limiter = rl_core::blocking::Limiter::open(url.as_deref(), options).map_err(|e| errors::to_py(py, e))?;
    Ok(Opened { limiter, target })
}

/// The URL without its password, for `repr()`.
fn redact(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(s), Some(at)) if at > s => {
            let creds = &url[s + 3..at];
            match creds.find(':') {
                Some(c) => format!("{}{}:***{}", &url[..s + 3], &creds[..c], &url[at..]),
                None => format!("{}***{}", &url[..s + 3], &url[at..]),
            }
        }
        _ => url.to_string(),
    }
}
