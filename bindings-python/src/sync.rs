//! `rl.Limiter`: the synchronous API. Each call releases the GIL while it waits on Redis, so
//! many Python threads share one limiter (and its one multiplexed connection) concurrently.

use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyTuple};

use rl_core::unwind::{test_panic, TestPanic};

use crate::composite::{self, CompositeDecision};
use crate::convert::{self, Arg};
use crate::decision::Decision;
use crate::errors;
use crate::lifecycle;
use crate::open::open;
use crate::prepared::{self, Call};
use crate::slot::Slot;
use crate::stats::Stats;

/// The synchronous limiter: at most `limit` permits in any `window_ms` span per key. Thread-safe
/// (calls release the GIL while they wait on Redis; make one per process and share it).
/// `url=None` or "memory://" is the in-process memory backend; redis://, rediss://, unix://,
/// redis+sentinel:// and redis+cluster:// URLs use Redis, connected on first use. The keyword
/// options are the core's (`rl.LimiterOptions` lists them); one left out, or None, takes the
/// core's default.
#[pyclass(module = "rl", name = "Limiter", frozen, weakref)]
pub(crate) struct Limiter {
    slot: Slot,
}

const WHAT: &str = "Limiter";

/// A Redis-backed decision: decided right here, GIL held, when it needs no I/O (a lease, the
/// denial cache: no GIL hand-off, which under a threaded WSGI server can cost the request a
/// switch interval); otherwise the rest runs with the GIL released.
fn decide<T, F>(py: Python<'_>, fut: F) -> rl_core::Result<T>
where
    F: std::future::Future<Output = rl_core::Result<T>> + Send,
    T: Send,
{
    rl_core::runtime::run_here_or_block(fut, |wait| lifecycle::detached(py, wait))?
}

#[pymethods]
impl Limiter {
    #[new]
    #[pyo3(signature = (url=None, **options))]
    fn new<'py>(
        py: Python<'py>,
        url: Option<Bound<'py, PyAny>>,
        options: Option<Bound<'py, PyDict>>,
    ) -> PyResult<Self> {
        errors::guard(py, || {
            let opened = open(py, url.as_ref(), options.as_ref())?;
            Ok(Limiter {
                slot: Slot::new(opened),
            })
        })
    }

    /// Takes `cost` permits from `key`'s window if they fit; a denied request takes nothing.
    /// Raises InvalidArgument (ValueError; InvalidArgumentType is also a TypeError) for bad
    /// input, BackendUnavailable / BackendError for Redis trouble, LimiterClosed after close().
    #[pyo3(signature = (key, limit, window_ms, cost = Arg::Absent), text_signature = "(self, key, limit, window_ms, cost=1)")]
    fn acquire(
        &self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        limit: &Bound<'_, PyAny>,
        window_ms: &Bound<'_, PyAny>,
        cost: Arg<'_>,
    ) -> PyResult<Decision> {
        errors::guard(py, || {
            let key = convert::key(key)?;
            let limit = convert::u64_arg("limit", limit)?;
            let window_ms = convert::u64_arg("window_ms", window_ms)?;
            let cost = convert::u64_or("cost", &cost, 1)?;
            let l = self.slot.get(py, WHAT)?;
            let k = key.as_bytes();
            test_panic(TestPanic::Caller, k);
            let r = if self.slot.memory {
                l.acquire(k, limit, window_ms, cost)
            } else {
                decide(py, l.as_async().acquire(k, limit, window_ms, cost))
            };
            r.map(Decision::from).map_err(|e| errors::to_py(py, e))
        })
    }

    /// Takes every rule's cost if every rule fits, else nothing (one atomic decision; see the
    /// README's "Several limits at once"). `rules`: a list of `rl.Rule`; `group`: None, or a
    /// str/bytes name that becomes the keys' hash tag (needed when keys are on different Cluster
    /// slots). Errors as for `acquire`, naming the value and the rule.
    #[pyo3(signature = (rules, group = None))]
    fn acquire_all(
        &self,
        py: Python<'_>,
        rules: &Bound<'_, PyAny>,
        group: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<CompositeDecision> {
        errors::guard(py, || {
            let rules = composite::rules(rules)?;
            let group = composite::group(group)?;
            let l = self.slot.get(py, WHAT)?;
            if let Some(r) = rules.first() {
                test_panic(TestPanic::Caller, &r.key);
            }
            let g = group.as_deref();
            let r = if self.slot.memory {
                l.acquire_all(&rules, g)
            } else {
                decide(py, l.as_async().acquire_all(&rules, g))
            };
            r.map(CompositeDecision::from)
                .map_err(|e| errors::to_py(py, e))
        })
    }

    /// One rule per policy of `policies` (from `rl.prepare_policies`) on `key`, each taking
    /// `cost`, decided like `acquire_all`; returns `(decision, headers, body)`: the
    /// `CompositeDecision`, the response fields as `(name, value)` pairs and, on a denial, the
    /// `application/problem+json` body (else None), rendered by the core with the decision.
    #[pyo3(signature = (policies, key, cost = Arg::Absent, group = None), text_signature = "(self, policies, key, cost=1, group=None)")]
    fn acquire_policies<'py>(
        &self,
        py: Python<'py>,
        policies: &Bound<'py, PyAny>,
        key: &Bound<'py, PyAny>,
        cost: Arg<'py>,
        group: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyTuple>> {
        errors::guard(py, || {
            let call = Call::new(policies, key, &cost, group)?;
            let l = self.slot.get(py, WHAT)?;
            test_panic(TestPanic::Caller, &call.first_key());
            let g = call.group.as_deref();
            let r = if self.slot.memory {
                l.acquire_all(&call.rules, g)
            } else {
                decide(py, l.as_async().acquire_all(&call.rules, g))
            };
            let (c, response) = r
                .and_then(|c| call.respond(c))
                .map_err(|e| errors::to_py(py, e))?;
            prepared::responded(py, c, response)
        })
    }

    /// The window's state without taking anything; `allowed`: whether one permit would fit.
    fn peek(
        &self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        limit: &Bound<'_, PyAny>,
        window_ms: &Bound<'_, PyAny>,
    ) -> PyResult<Decision> {
        errors::guard(py, || {
            let key = convert::key(key)?;
            let limit = convert::u64_arg("limit", limit)?;
            let window_ms = convert::u64_arg("window_ms", window_ms)?;
            let l = self.slot.get(py, WHAT)?;
            let k = key.as_bytes();
            test_panic(TestPanic::Caller, k);
            let r = if self.slot.memory {
                l.peek(k, limit, window_ms)
            } else {
                decide(py, l.as_async().peek(k, limit, window_ms))
            };
            r.map(Decision::from).map_err(|e| errors::to_py(py, e))
        })
    }

    /// Forgets everything admitted on `key`.
    fn reset(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<()> {
        errors::guard(py, || {
            let key = convert::key(key)?;
            let l = self.slot.get(py, WHAT)?;
            let k = key.as_bytes();
            test_panic(TestPanic::Caller, k);
            let r = if self.slot.memory {
                l.reset(k)
            } else {
                lifecycle::detached(py, || l.reset(k))
            };
            r.map_err(|e| errors::to_py(py, e))
        })
    }

    /// Forgets everything admitted on `key` inside `group` (the window `acquire_all` keeps for it
    /// with that group); the same key ungrouped or in another group is untouched. `group` None is
    /// `reset`.
    fn reset_in_group(
        &self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        group: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<()> {
        errors::guard(py, || {
            let key = convert::key(key)?;
            let group = composite::group(group)?;
            let l = self.slot.get(py, WHAT)?;
            let k = key.as_bytes();
            test_panic(TestPanic::Caller, k);
            let g = group.as_deref();
            let r = if self.slot.memory {
                l.reset_in_group(k, g)
            } else {
                lifecycle::detached(py, || l.reset_in_group(k, g))
            };
            r.map_err(|e| errors::to_py(py, e))
        })
    }

    /// Connects if needed and checks that the backend answers (BackendUnavailable otherwise).
    fn ping(&self, py: Python<'_>) -> PyResult<()> {
        errors::guard(py, || {
            let l = self.slot.get(py, WHAT)?;
            let r = if self.slot.memory {
                l.ping()
            } else {
                lifecycle::detached(py, || l.ping())
            };
            r.map_err(|e| errors::to_py(py, e))
        })
    }

    /// The Redis key that holds `key`'s window.
    fn redis_key<'py>(
        &self,
        py: Python<'py>,
        key: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyBytes>> {
        errors::guard(py, || {
            let key = convert::key(key)?;
            let l = self.slot.get(py, WHAT)?;
            Ok(PyBytes::new(py, &l.redis_key(key.as_bytes())))
        })
    }

    /// Which path decides now, per-path counters, state transitions, Redis round trips. Never
    /// waits (no I/O); raises LimiterClosed after close().
    fn stats(&self, py: Python<'_>) -> PyResult<Stats> {
        errors::guard(py, || self.slot.stats(py, WHAT))
    }

    /// This limiter's id in the fleet's heartbeats in Redis; None for the memory backend.
    #[getter]
    fn instance_id(&self) -> Option<String> {
        self.slot.instance_id()
    }

    /// "redis" or "memory"; "closed" after close().
    #[getter]
    fn backend(&self) -> &'static str {
        self.slot.backend()
    }

    #[getter]
    fn closed(&self) -> bool {
        self.slot.is_closed()
    }

    /// Returns this limiter's unused leases to Redis (the core's close), then lets go of the
    /// connection (calls in flight finish); later calls raise LimiterClosed. Closing twice is fine.
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        errors::guard(py, || {
            self.slot.close(py);
            Ok(())
        })
    }

    fn __enter__(slf: Bound<'_, Self>) -> PyResult<Bound<'_, Self>> {
        if slf.get().slot.is_closed() {
            return Err(errors::closed(slf.py(), WHAT));
        }
        Ok(slf)
    }

    #[pyo3(signature = (*_exc))]
    fn __exit__(&self, py: Python<'_>, _exc: &Bound<'_, pyo3::types::PyTuple>) -> PyResult<()> {
        errors::guard(py, || {
            self.slot.close(py);
            Ok(())
        })
    }

    fn __repr__(&self) -> String {
        format!(
            "<rl.Limiter {} {}>",
            self.slot.target,
            if self.slot.is_closed() {
                "closed"
            } else {
                "open"
            }
        )
    }
}
