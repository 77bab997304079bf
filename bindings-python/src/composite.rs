//! `rl.Rule` and `rl.CompositeDecision`: the core's composite acquire (`acquire_all`) in Python
//! types. Only type conversion happens here; every rule about a call (at most 16 rules, one cost
//! per key, one Cluster slot unless grouped ...) is the core's (`rl_core::composite`).

use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList};

use crate::convert::{self, Arg};
use crate::decision::Decision;
use crate::errors;
use crate::policies::Policy;

/// One rule of `acquire_all`: at most `limit` permits in any `window_ms` span of `key`, and the
/// call asks for `cost` of them. Immutable; ranges are checked by `acquire_all`.
#[pyclass(module = "rl", name = "Rule", frozen, eq, hash)]
#[derive(Clone, PartialEq, Eq, Hash)]
pub(crate) struct Rule {
    pub(crate) inner: rl_core::Rule,
}

#[pymethods]
impl Rule {
    #[new]
    #[pyo3(signature = (key, limit, window_ms, cost = Arg::Absent), text_signature = "(key, limit, window_ms, cost=1)")]
    fn new(
        key: &Bound<'_, PyAny>,
        limit: &Bound<'_, PyAny>,
        window_ms: &Bound<'_, PyAny>,
        cost: Arg<'_>,
    ) -> PyResult<Self> {
        errors::guard(key.py(), || {
            let k = convert::key(key)?;
            Ok(Rule {
                inner: rl_core::Rule::new(
                    k.as_bytes(),
                    convert::u64_arg("limit", limit)?,
                    convert::u64_arg("window_ms", window_ms)?,
                    convert::u64_or("cost", &cost, 1)?,
                ),
            })
        })
    }

    /// The rule `policy` sets on `key` (its limit and window), asking for `cost` permits.
    #[staticmethod]
    #[pyo3(signature = (policy, key, cost = Arg::Absent), text_signature = "(policy, key, cost=1)")]
    fn from_policy(
        policy: &Bound<'_, Policy>,
        key: &Bound<'_, PyAny>,
        cost: Arg<'_>,
    ) -> PyResult<Self> {
        errors::guard(key.py(), || {
            let k = convert::key(key)?;
            let cost = convert::u64_or("cost", &cost, 1)?;
            Ok(Rule {
                inner: rl_core::Rule::from_policy(&policy.get().inner, k.as_bytes(), cost),
            })
        })
    }

    /// The key as bytes (a `str` key is its UTF-8 encoding).
    #[getter]
    fn key<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, &self.inner.key)
    }

    #[getter]
    fn limit(&self) -> u64 {
        self.inner.limit
    }

    #[getter]
    fn window_ms(&self) -> u64 {
        self.inner.window_ms
    }

    #[getter]
    fn cost(&self) -> u64 {
        self.inner.cost
    }

    fn __repr__(&self, py: Python<'_>) -> String {
        let key = PyBytes::new(py, &self.inner.key);
        format!(
            "Rule(key={}, limit={}, window_ms={}, cost={})",
            convert::show(key.as_any()),
            self.inner.limit,
            self.inner.window_ms,
            self.inner.cost
        )
    }
}

/// The rules of a call: any iterable of `Rule` (anything else is `InvalidArgumentType` naming
/// `rules`).
pub(crate) fn rules(obj: &Bound<'_, PyAny>) -> PyResult<Vec<rl_core::Rule>> {
    let py = obj.py();
    if obj.is_instance_of::<pyo3::types::PyString>() || obj.is_instance_of::<PyBytes>() {
        return Err(errors::invalid_type(
            py,
            "rules",
            format!(
                "is {} ({}); must be a list of rl.Rule",
                convert::show(obj),
                convert::type_name(obj)
            ),
        ));
    }
    let iter = obj.try_iter().map_err(|_| {
        errors::invalid_type(
            py,
            "rules",
            format!(
                "is {} ({}); must be a list of rl.Rule",
                convert::show(obj),
                convert::type_name(obj)
            ),
        )
    })?;
    let mut out = Vec::new();
    for (i, item) in iter.enumerate() {
        let item = item?;
        let rule = item.cast::<Rule>().map_err(|_| {
            errors::invalid_type(
                py,
                "rules",
                format!(
                    "item {i} is {} ({}); must be an rl.Rule",
                    convert::show(&item),
                    convert::type_name(&item)
                ),
            )
        })?;
        out.push(rule.get().inner.clone());
    }
    Ok(out)
}

/// A call's group: `None`, or a `str` / `bytes` name (its hash tag).
pub(crate) fn group(obj: Option<&Bound<'_, PyAny>>) -> PyResult<Option<Vec<u8>>> {
    match obj {
        None => Ok(None),
        Some(o) if o.is_none() => Ok(None),
        Some(o) => convert::bytes_arg("group", o).map(Some),
    }
}

/// The answer to one `acquire_all`: the overall decision and one `Decision` per rule.
#[pyclass(module = "rl", name = "CompositeDecision", frozen)]
pub(crate) struct CompositeDecision {
    pub(crate) inner: rl_core::CompositeDecision,
}

impl From<rl_core::CompositeDecision> for CompositeDecision {
    fn from(inner: rl_core::CompositeDecision) -> Self {
        CompositeDecision { inner }
    }
}

#[pymethods]
impl CompositeDecision {
    /// Whether the cost was taken from every rule (if False, nothing was taken from any).
    #[getter]
    fn allowed(&self) -> bool {
        self.inner.allowed
    }

    /// 0 if allowed; otherwise the wait after which every rule fits.
    #[getter]
    fn retry_after_ms(&self) -> u64 {
        self.inner.retry_after_ms
    }

    #[getter]
    fn mode(&self) -> &'static str {
        self.inner.mode.as_str()
    }

    #[getter]
    fn now_ms(&self) -> u64 {
        self.inner.now_ms
    }

    /// One decision per rule, in the rules' order (a new list each time).
    #[getter]
    fn decisions<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        PyList::new(py, self.inner.decisions.iter().map(|d| Decision::from(*d)))
    }

    fn __eq__(&self, other: &Bound<'_, PyAny>) -> bool {
        other
            .cast::<CompositeDecision>()
            .is_ok_and(|o| o.get().inner == self.inner)
    }

    fn __repr__(&self) -> String {
        let decisions: Vec<String> = self
            .inner
            .decisions
            .iter()
            .map(|d| Decision::from(*d).__repr__())
            .collect();
        format!(
            "CompositeDecision(allowed={}, retry_after_ms={}, mode='{}', now_ms={}, decisions=[{}])",
            if self.inner.allowed { "True" } else { "False" },
            self.inner.retry_after_ms,
            self.inner.mode.as_str(),
            self.inner.now_ms,
            decisions.join(", ")
        )
    }
}
