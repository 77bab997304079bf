//! Keyword options → `rl_core::Options`. `None` (or leaving one out) means the core's default;
//! the core checks ranges (and names the option in its error: e.g. `recover_rtt` for a
//! `recover_rtt_ms` it refuses, as with `request_timeout`).

use std::time::Duration;

use pyo3::prelude::*;
use pyo3::types::{PyBool, PyString};

use crate::convert::{show, u64_arg};
use crate::errors;

pub(crate) struct Opened {
    pub limiter: rl_core::blocking::Limiter,
    /// Printable, without the password.
    pub target: String,
}

/// The constructor's keyword arguments, as given (`None`: left out or passed as `None`).
pub(crate) struct Args<'py> {
    pub url: Option<Bound<'py, PyAny>>,
    pub key_prefix: Option<Bound<'py, PyAny>>,
    pub connect_timeout_ms: Option<Bound<'py, PyAny>>,
    pub request_timeout_ms: Option<Bound<'py, PyAny>>,
    pub max_clock_skew_ms: Option<Bound<'py, PyAny>>,
    pub retry_delay_ms: Option<Bound<'py, PyAny>>,
    pub local_fallback: Option<Bound<'py, PyAny>>,
    pub degrade_rtt_ms: Option<Bound<'py, PyAny>>,
    pub degrade_after_ms: Option<Bound<'py, PyAny>>,
    pub recover_rtt_ms: Option<Bound<'py, PyAny>>,
    pub recover_after_ms: Option<Bound<'py, PyAny>>,
    pub instances: Option<Bound<'py, PyAny>>,
    pub local_max_keys: Option<Bound<'py, PyAny>>,
}

fn millis(name: &str, v: &Bound<'_, PyAny>) -> PyResult<Duration> {
    Ok(Duration::from_millis(u64_arg(name, v)?))
}

pub(crate) fn open(py: Python<'_>, a: Args<'_>) -> PyResult<Opened> {
    let url: Option<String> = match &a.url {
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
    let mut options = rl_core::Options::default();
    if let Some(p) = &a.key_prefix {
        match p.cast::<PyString>() {
            Ok(s) => options.key_prefix = s.to_cow()?.into_owned(),
            Err(_) => {
                return Err(errors::invalid_type(
                    py,
                    "key_prefix",
                    format!("is {}; must be a str", show(p)),
                ))
            }
        }
    }
    if let Some(v) = &a.connect_timeout_ms {
        options.connect_timeout = millis("connect_timeout_ms", v)?;
    }
    if let Some(v) = &a.request_timeout_ms {
        options.request_timeout = millis("request_timeout_ms", v)?;
    }
    if let Some(v) = &a.max_clock_skew_ms {
        options.max_clock_skew_ms = u64_arg("max_clock_skew_ms", v)?;
    }
    if let Some(v) = &a.retry_delay_ms {
        options.retry_delay = millis("retry_delay_ms", v)?;
    }
    if let Some(v) = &a.local_fallback {
        match v.cast::<PyBool>() {
            Ok(b) => options.local_fallback = b.is_true(),
            Err(_) => {
                return Err(errors::invalid_type(
                    py,
                    "local_fallback",
                    format!("is {}; must be a bool", show(v)),
                ))
            }
        }
    }
    if let Some(v) = &a.degrade_rtt_ms {
        options.degrade_rtt = millis("degrade_rtt_ms", v)?;
    }
    if let Some(v) = &a.degrade_after_ms {
        options.degrade_after = millis("degrade_after_ms", v)?;
    }
    if let Some(v) = &a.recover_rtt_ms {
        options.recover_rtt = millis("recover_rtt_ms", v)?;
    }
    if let Some(v) = &a.recover_after_ms {
        options.recover_after = millis("recover_after_ms", v)?;
    }
    if let Some(v) = &a.instances {
        options.instances = Some(u64_arg("instances", v)?);
    }
    if let Some(v) = &a.local_max_keys {
        let n = u64_arg("local_max_keys", v)?;
        options.local_max_keys = usize::try_from(n).map_err(|_| {
            errors::invalid(
                py,
                "local_max_keys",
                format!("is {n}, which does not fit in this platform's usize"),
            )
        })?;
    }
    let target = match &url {
        None => "memory://".to_string(),
        Some(u) => redact(u),
    };
    rl_core::unwind::test_panic(
        rl_core::unwind::TestPanic::Caller,
        options.key_prefix.as_bytes(),
    );
    let limiter = rl_core::blocking::Limiter::open(url.as_deref(), options)
        .map_err(|e| errors::to_py(py, e))?;
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
