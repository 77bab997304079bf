//! `rl.Policy`, `rl.parse_policies`, `rl.render_headers` and `rl.problem_body`: the core's policy
//! strings and HTTP response fields (`rl_core::policy`, `rl_core::headers`). Parsing, the field
//! syntax and what `q`/`w`/`r`/`t` mean are the core's; this file converts types only.

use pyo3::prelude::*;
use pyo3::types::{PyList, PyString, PyTuple};

use rl_core::headers::{problem_body as core_problem_body, render};
use rl_core::HeaderStyle;

use crate::composite::CompositeDecision;
use crate::convert;
use crate::errors;

/// One limit with a name: at most `limit` permits in any `window_ms` span. The name is what the
/// RateLimit headers and the problem body call it (default: its canonical text, `100/1s`).
#[pyclass(module = "rl", name = "Policy", frozen, eq, hash)]
#[derive(Clone, PartialEq, Eq, Hash)]
pub(crate) struct Policy {
    pub(crate) inner: rl_core::Policy,
}

#[pymethods]
impl Policy {
    #[new]
    #[pyo3(signature = (limit, window_ms, name = None))]
    fn new(
        limit: &Bound<'_, PyAny>,
        window_ms: &Bound<'_, PyAny>,
        name: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Self> {
        let py = limit.py();
        errors::guard(py, || {
            let limit = convert::u64_arg("limit", limit)?;
            let window_ms = convert::u64_arg("window_ms", window_ms)?;
            let name = match name {
                Some(n) if !n.is_none() => Some(convert::str_arg("name", n)?),
                _ => None,
            };
            rl_core::Policy::new(name.as_deref(), limit, window_ms)
                .map(|inner| Policy { inner })
                .map_err(|e| errors::to_py(py, e))
        })
    }

    #[getter]
    fn name(&self) -> &str {
        &self.inner.name
    }

    #[getter]
    fn limit(&self) -> u64 {
        self.inner.limit
    }

    #[getter]
    fn window_ms(&self) -> u64 {
        self.inner.window_ms
    }

    /// The text that parses back to this policy (`name: limit/window`).
    fn __str__(&self) -> String {
        self.inner.to_string()
    }

    fn __repr__(&self) -> String {
        format!(
            "Policy(limit={}, window_ms={}, name='{}')",
            self.inner.limit, self.inner.window_ms, self.inner.name
        )
    }
}

/// Parses a policy string such as `"burst: 100/s; 5000 per hour"` (the core's grammar; errors
/// are `InvalidArgument` naming `policy`).
#[pyfunction]
pub(crate) fn parse_policies(py: Python<'_>, text: &Bound<'_, PyAny>) -> PyResult<Vec<Policy>> {
    errors::guard(py, || {
        let text = convert::str_arg("policy", text)?;
        rl_core::Policy::parse_many(&text)
            .map(|ps| ps.into_iter().map(|inner| Policy { inner }).collect())
            .map_err(|e| errors::to_py(py, e))
    })
}

/// The policies of a call paired with its decisions (one policy per rule, in the rules' order).
fn with_policies<R>(
    py: Python<'_>,
    policies: &Bound<'_, PyAny>,
    decision: &CompositeDecision,
    then: impl FnOnce(&[(&rl_core::Policy, &rl_core::Decision)]) -> R,
) -> PyResult<R> {
    let mut ps: Vec<rl_core::Policy> = Vec::new();
    let iter = policies.try_iter().map_err(|_| {
        errors::invalid_type(
            py,
            "policies",
            format!(
                "is {} ({}); must be a list of rl.Policy",
                convert::show(policies),
                convert::type_name(policies)
            ),
        )
    })?;
    for (i, item) in iter.enumerate() {
        let item = item?;
        let p = item.cast::<Policy>().map_err(|_| {
            errors::invalid_type(
                py,
                "policies",
                format!(
                    "item {i} is {} ({}); must be an rl.Policy",
                    convert::show(&item),
                    convert::type_name(&item)
                ),
            )
        })?;
        ps.push(p.get().inner.clone());
    }
    let ds = &decision.inner.decisions;
    if ps.len() != ds.len() {
        return Err(errors::invalid(
            py,
            "policies",
            format!(
                "holds {} policies but the decision has {} rules; give one policy per rule, in the rules' order",
                ps.len(),
                ds.len()
            ),
        ));
    }
    let pairs: Vec<_> = ps.iter().zip(ds.iter()).collect();
    Ok(then(&pairs))
}

/// The response fields for a request decided by `acquire_all` under `policies` (policy `i`
/// describes rule `i`), as `(name, value)` pairs in the order to send them. `style`: "ietf"
/// (RateLimit-Policy and RateLimit), "legacy" (X-RateLimit-*), "both" or "none"; a denial also
/// gets Retry-After.
#[pyfunction]
#[pyo3(signature = (policies, decision, style = None))]
pub(crate) fn render_headers<'py>(
    py: Python<'py>,
    policies: &Bound<'py, PyAny>,
    decision: &Bound<'py, CompositeDecision>,
    style: Option<&Bound<'py, PyAny>>,
) -> PyResult<Bound<'py, PyList>> {
    errors::guard(py, || {
        let style = style_arg(py, style)?;
        let d = decision.get();
        let fields = with_policies(py, policies, d, |pairs| {
            render(pairs, d.inner.allowed, d.inner.retry_after_ms, style)
        })?;
        let items: Vec<Bound<'py, PyTuple>> = fields
            .into_iter()
            .map(|(n, v)| {
                PyTuple::new(
                    py,
                    [
                        PyString::new(py, n).into_any(),
                        PyString::new(py, &v).into_any(),
                    ],
                )
            })
            .collect::<PyResult<_>>()?;
        PyList::new(py, items)
    })
}

/// A header style by name ("ietf", the default for None, "legacy", "both", "none"); errors name
/// `style`.
pub(crate) fn style_arg(py: Python<'_>, style: Option<&Bound<'_, PyAny>>) -> PyResult<HeaderStyle> {
    match style {
        None => Ok(HeaderStyle::default()),
        Some(s) if s.is_none() => Ok(HeaderStyle::default()),
        Some(s) => {
            let name = convert::str_arg("style", s)?;
            HeaderStyle::from_name(&name).ok_or_else(|| {
                let known: Vec<&str> = HeaderStyle::ALL.iter().map(|s| s.as_str()).collect();
                errors::invalid(
                    py,
                    "style",
                    format!("is {:?}; use one of {}", name, known.join(", ")),
                )
            })
        }
    }
}

/// The RFC 9457 body (JSON text, `rl.PROBLEM_CONTENT_TYPE`) of a 429 for a denied `acquire_all`
/// under `policies`, with the draft's `violated-policies` member.
#[pyfunction]
pub(crate) fn problem_body(
    py: Python<'_>,
    policies: &Bound<'_, PyAny>,
    decision: &Bound<'_, CompositeDecision>,
) -> PyResult<String> {
    errors::guard(py, || {
        let d = decision.get();
        with_policies(py, policies, d, |pairs| {
            core_problem_body(pairs, d.inner.retry_after_ms)
        })
    })
}
