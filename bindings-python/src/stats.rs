//! `rl.Stats`: the core's `Stats` (what `Limiter.stats()` returns), immutable, with typed
//! attributes in the core's order. Plain numbers, copied once; reading them never touches Redis.

use std::borrow::Cow;

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyTuple};

/// Defines the class from its integer fields before and after `state_reason` (the core's order).
macro_rules! stats_class {
    ([$($a:ident),*], [$($b:ident),*]) => {
        /// A snapshot of a limiter's state and counters (`Limiter.stats()`).
        #[pyclass(module = "rl", name = "Stats", frozen, eq)]
        #[derive(Clone, PartialEq, Eq)]
        pub(crate) struct Stats {
            mode: Cow<'static, str>,
            topology: Cow<'static, str>,
            $(#[pyo3(get)] $a: u64,)*
            #[pyo3(get)]
            state_reason: String,
            $(#[pyo3(get)] $b: u64,)*
        }

        impl From<rl_core::Stats> for Stats {
            fn from(s: rl_core::Stats) -> Self {
                Stats {
                    mode: Cow::Borrowed(s.mode.as_str()),
                    topology: Cow::Borrowed(s.topology),
                    $($a: s.$a,)*
                    state_reason: s.state_reason,
                    $($b: s.$b,)*
                }
            }
        }

        impl Stats {
            /// The attribute names, in the constructor's order.
            const FIELDS: &'static [&'static str] =
                &["mode", "topology", $(stringify!($a),)* "state_reason", $(stringify!($b)),*];

            fn values<'py>(&self, py: Python<'py>) -> PyResult<Vec<Bound<'py, PyAny>>> {
                let mut v = vec![
                    self.mode.as_ref().into_pyobject(py)?.into_any(),
                    self.topology.as_ref().into_pyobject(py)?.into_any(),
                ];
                $(v.push(self.$a.into_pyobject(py)?.into_any());)*
                v.push(self.state_reason.as_str().into_pyobject(py)?.into_any());
                $(v.push(self.$b.into_pyobject(py)?.into_any());)*
                Ok(v)
            }
        }

        #[pymethods]
        impl Stats {
            /// Stats come from limiters; building one by hand is for tests of code that reads them.
            #[new]
            #[pyo3(signature = (mode, topology, $($a,)* state_reason, $($b),*))]
            #[allow(clippy::too_many_arguments)]
            fn new(mode: String, topology: String, $($a: u64,)* state_reason: String, $($b: u64),*) -> Self {
                Stats { mode: Cow::Owned(mode), topology: Cow::Owned(topology), $($a,)* state_reason, $($b),* }
            }

            /// The path new decisions take now: "normal" (Redis), "local" (fallback) or "memory".
            #[getter]
            fn mode(&self) -> &str {
                &self.mode
            }

            /// "standalone", "sentinel", "cluster" or "memory".
            #[getter]
            fn topology(&self) -> &str {
                &self.topology
            }

            #[classattr]
            fn __match_args__(py: Python<'_>) -> PyResult<Bound<'_, PyTuple>> {
                PyTuple::new(py, Stats::FIELDS)
            }

            /// Every attribute in a new dict (for logs and metrics exporters).
            fn as_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
                let d = PyDict::new(py);
                for (k, v) in Stats::FIELDS.iter().zip(self.values(py)?) {
                    d.set_item(*k, v)?;
                }
                Ok(d)
            }

            fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
                let mut parts = Vec::with_capacity(Stats::FIELDS.len());
                for (k, v) in Stats::FIELDS.iter().zip(self.values(py)?) {
                    parts.push(format!("{k}={}", v.repr()?.to_string_lossy()));
                }
                Ok(format!("Stats({})", parts.join(", ")))
            }

            fn __reduce__<'py>(slf: &Bound<'py, Self>) -> PyResult<(Bound<'py, PyAny>, Bound<'py, PyTuple>)> {
                let py = slf.py();
                Ok((slf.get_type().into_any(), PyTuple::new(py, slf.get().values(py)?)?))
            }
        }
    };
}

stats_class!(
    [
        decisions_normal,
        decisions_local,
        decisions_memory,
        transitions_to_local,
        transitions_to_normal,
        state_ms
    ],
    [
        redis_errors,
        retries,
        probes,
        repairs,
        repaired_permits,
        failovers,
        instances,
        local_keys,
        rtt_samples,
        rtt_last_us,
        rtt_p50_us,
        rtt_p99_us,
        rtt_max_us
    ]
);
