//! `rl.prepare_policies` and `acquire_policies`: a middleware's whole check in one native call
//! per request. The policies and the header style are converted and checked once, into a
//! `PreparedPolicies`; a request then decides (one rule per policy on its key, like
//! `acquire_all`) and gets the core's response fields and, on a denial, its problem body
//! (`rl_core::headers::Prepared`), rendered with the decision. Per request that saves building a
//! `Rule` per policy in Python and converting the policies again to render (`render_headers`).

use std::sync::Arc;

use pyo3::prelude::*;
use pyo3::types::{PyList, PyString, PyTuple};

use rl_core::headers::{Prepared, Response};

use crate::composite::{self, CompositeDecision};
use crate::convert::{self, Arg};
use crate::errors;
use crate::policies::Policy;

/// Policies and a header style, checked once, for `acquire_policies`. Made by
/// `rl.prepare_policies`; immutable.
#[pyclass(module = "rl", name = "PreparedPolicies", frozen)]
pub(crate) struct PreparedPolicies {
    prepared: Arc<Prepared>,
}

#[pymethods]
impl PreparedPolicies {
    /// The policies, in order (rule i of a call is policy i on the call's key).
    #[getter]
    fn policies(&self) -> Vec<Policy> {
        self.prepared
            .policies()
            .iter()
            .map(|p| Policy { inner: p.clone() })
            .collect()
    }

    /// The header style: "ietf", "legacy", "both" or "none".
    #[getter]
    fn style(&self) -> &'static str {
        self.prepared.style().as_str()
    }

    fn __repr__(&self) -> String {
        let text: Vec<String> = self
            .prepared
            .policies()
            .iter()
            .map(|p| p.to_string())
            .collect();
        format!(
            "PreparedPolicies('{}', style='{}')",
            text.join("; "),
            self.prepared.style().as_str()
        )
    }
}

/// Checks `policies` (a policy string such as `"burst: 100/s; 5000/h"`, or a list of
/// `rl.Policy`) and `style` ("ietf" by default, "legacy", "both" or "none") once, for
/// `acquire_policies`. Errors are `InvalidArgument` naming `policies` or `style`.
#[pyfunction]
#[pyo3(signature = (policies, style = None))]
pub(crate) fn prepare_policies(
    policies: &Bound<'_, PyAny>,
    style: Option<&Bound<'_, PyAny>>,
) -> PyResult<PreparedPolicies> {
    let py = policies.py();
    errors::guard(py, || {
        let list: Vec<rl_core::Policy> = if let Ok(text) = policies.cast::<PyString>() {
            rl_core::Policy::parse_many(&text.to_cow()?).map_err(|e| match e {
                rl_core::Error::InvalidArgument { message, .. } => {
                    errors::invalid(py, "policies", message)
                }
                e => errors::to_py(py, e),
            })?
        } else {
            let wrong = |what: String| {
                errors::invalid_type(
                    py,
                    "policies",
                    format!("{what}; must be a policy string or a list of rl.Policy"),
                )
            };
            let iter = policies.try_iter().map_err(|_| {
                wrong(format!(
                    "is {} ({})",
                    convert::show(policies),
                    convert::type_name(policies)
                ))
            })?;
            let mut out = Vec::new();
            for (i, item) in iter.enumerate() {
                let item = item?;
                let p = item.cast::<Policy>().map_err(|_| {
                    wrong(format!(
                        "item {i} is {} ({})",
                        convert::show(&item),
                        convert::type_name(&item)
                    ))
                })?;
                out.push(p.get().inner.clone());
            }
            out
        };
        let style = crate::policies::style_arg(py, style)?;
        let prepared = Prepared::new(list, style).map_err(|e| errors::to_py(py, e))?;
        Ok(PreparedPolicies {
            prepared: Arc::new(prepared),
        })
    })
}

/// One `acquire_policies` call's arguments, converted: the rules (one per policy on the key),
/// the group, and what the response is rendered from.
pub(crate) struct Call {
    pub(crate) rules: Vec<rl_core::Rule>,
    pub(crate) group: Option<Vec<u8>>,
    prepared: Arc<Prepared>,
}

impl Call {
    /// `policies` must be a `PreparedPolicies` (anything else is `InvalidArgumentType` naming
    /// `policies`); `key`, `cost` and `group` are converted as for `acquire` / `acquire_all`.
    pub(crate) fn new(
        policies: &Bound<'_, PyAny>,
        key: &Bound<'_, PyAny>,
        cost: &Arg<'_>,
        group: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Call> {
        let py = policies.py();
        let prepared = policies.cast::<PreparedPolicies>().map_err(|_| {
            errors::invalid_type(
                py,
                "policies",
                format!(
                    "is {} ({}); must be the result of rl.prepare_policies()",
                    convert::show(policies),
                    convert::type_name(policies)
                ),
            )
        })?;
        let p = prepared.get();
        let key = convert::key(key)?;
        let cost = convert::u64_or("cost", cost, 1)?;
        Ok(Call {
            rules: p.prepared.rules(key.as_bytes(), cost),
            group: composite::group(group)?,
            prepared: p.prepared.clone(),
        })
    }

    /// The first rule's key (for the test-only panic hooks).
    pub(crate) fn first_key(&self) -> Vec<u8> {
        self.rules
            .first()
            .map(|r| r.key.clone())
            .unwrap_or_default()
    }

    /// What the call resolves to, rendered by the core from its decision.
    pub(crate) fn respond(
        &self,
        c: rl_core::CompositeDecision,
    ) -> rl_core::Result<(rl_core::CompositeDecision, Response)> {
        let r = self.prepared.respond(&c)?;
        Ok((c, r))
    }
}

/// `(decision, headers, body)`: the `CompositeDecision`, the response fields as `(name, value)`
/// pairs in the order to send them, and the `application/problem+json` body of a denial (else
/// None).
pub(crate) fn responded<'py>(
    py: Python<'py>,
    c: rl_core::CompositeDecision,
    r: Response,
) -> PyResult<Bound<'py, PyTuple>> {
    let headers = PyList::empty(py);
    for (name, value) in &r.headers {
        headers.append(PyTuple::new(
            py,
            [field_name(py, name), PyString::new(py, value)],
        )?)?;
    }
    let body = match &r.body {
        Some(b) => PyString::new(py, b).into_any(),
        None => py.None().into_bound(py),
    };
    PyTuple::new(
        py,
        [
            Bound::new(py, CompositeDecision::from(c))?.into_any(),
            headers.into_any(),
            body,
        ],
    )
}

/// A field name as a Python string made once per process (the core's names are a fixed set),
/// not on every response.
fn field_name<'py>(py: Python<'py>, name: &'static str) -> Bound<'py, PyString> {
    match name {
        "RateLimit-Policy" => pyo3::intern!(py, "RateLimit-Policy").clone(),
        "RateLimit" => pyo3::intern!(py, "RateLimit").clone(),
        "Retry-After" => pyo3::intern!(py, "Retry-After").clone(),
        "X-RateLimit-Limit" => pyo3::intern!(py, "X-RateLimit-Limit").clone(),
        "X-RateLimit-Remaining" => pyo3::intern!(py, "X-RateLimit-Remaining").clone(),
        "X-RateLimit-Reset" => pyo3::intern!(py, "X-RateLimit-Reset").clone(),
        other => PyString::new(py, other),
    }
}
