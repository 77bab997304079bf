//! `rl.Decision`: the core's `Decision`, immutable, with typed attributes.

use std::borrow::Cow;

use pyo3::prelude::*;
use pyo3::types::PyTuple;

/// The constructor's arguments, in order (what `__reduce__` gives pickle).
type Fields = (bool, u64, u64, u64, u64, String, u64);

/// The answer to one `acquire` or `peek`.
#[pyclass(module = "rl", name = "Decision", frozen, eq, hash)]
#[derive(Clone, PartialEq, Eq, Hash)]
pub(crate) struct Decision {
    #[pyo3(get)]
    allowed: bool,
    #[pyo3(get)]
    remaining: u64,
    #[pyo3(get)]
    used: u64,
    #[pyo3(get)]
    retry_after_ms: u64,
    #[pyo3(get)]
    reset_after_ms: u64,
    mode: Cow<'static, str>,
    #[pyo3(get)]
    now_ms: u64,
}

impl From<rl_core::Decision> for Decision {
    fn from(d: rl_core::Decision) -> Self {
        Decision {
            allowed: d.allowed,
            remaining: d.remaining,
            used: d.used,
            retry_after_ms: d.retry_after_ms,
            reset_after_ms: d.reset_after_ms,
            mode: Cow::Borrowed(d.mode.as_str()),
            now_ms: d.now_ms,
        }
    }
}

#[pymethods]
impl Decision {
    /// Decisions come from limiters; building one by hand is for tests of code that consumes them.
    #[new]
    #[pyo3(signature = (allowed, remaining, used, retry_after_ms, reset_after_ms, mode, now_ms))]
    fn new(
        allowed: bool,
        remaining: u64,
        used: u64,
        retry_after_ms: u64,
        reset_after_ms: u64,
        mode: String,
        now_ms: u64,
    ) -> Self {
        Decision {
            allowed,
            remaining,
            used,
            retry_after_ms,
            reset_after_ms,
            mode: Cow::Owned(mode),
            now_ms,
        }
    }

    /// Which path decided: one of `rl.MODES`.
    #[getter]
    fn mode(&self) -> &str {
        &self.mode
    }

    #[classattr]
    fn __match_args__(py: Python<'_>) -> PyResult<Bound<'_, PyTuple>> {
        PyTuple::new(
            py,
            [
                "allowed",
                "remaining",
                "used",
                "retry_after_ms",
                "reset_after_ms",
                "mode",
                "now_ms",
            ],
        )
    }

    pub(crate) fn __repr__(&self) -> String {
        format!(
            "Decision(allowed={}, remaining={}, used={}, retry_after_ms={}, reset_after_ms={}, mode='{}', now_ms={})",
            if self.allowed { "True" } else { "False" },
            self.remaining,
            self.used,
            self.retry_after_ms,
            self.reset_after_ms,
            self.mode,
            self.now_ms
        )
    }

    fn __reduce__<'py>(slf: &Bound<'py, Self>) -> PyResult<(Bound<'py, PyAny>, Fields)> {
        let d = slf.get();
        Ok((
            slf.get_type().into_any(),
            (
                d.allowed,
                d.remaining,
                d.used,
                d.retry_after_ms,
                d.reset_after_ms,
                d.mode.to_string(),
                d.now_ms,
            ),
        ))
    }
}
