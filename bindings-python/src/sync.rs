//! `rl.Limiter`: the synchronous API. Each call releases the GIL while it waits on Redis, so
//! many Python threads share one limiter (and its one multiplexed connection) concurrently.

use std::sync::Mutex;

use pyo3::prelude::*;
use pyo3::types::PyBytes;

use rl_core::unwind::{test_panic, TestPanic};

use crate::convert::{self, Arg};
use crate::decision::Decision;
use crate::errors;
use crate::lifecycle;
use crate::options;
use crate::stats::Stats;

/// The limiter a binding object holds, shared by the sync and async classes: `None` once closed.
/// The mutex is only ever taken with the GIL held and never across a blocking call, so it is
/// uncontended and never held at a `fork()` (CPython forks with the GIL held).
pub(crate) struct Slot {
    inner: Mutex<Option<rl_core::blocking::Limiter>>,
    pub memory: bool,
    pub target: String,
    /// This limiter's id in the fleet's heartbeats when it was opened (None for memory); a
    /// forked child is a new instance with its own id, read live from the core while open.
    opened_instance_id: Option<String>,
    generation: u64,
}

impl Slot {
    pub fn new(opened: options::Opened) -> Slot {
        let memory = opened.limiter.backend() == rl_core::BackendKind::Memory;
        let opened_instance_id = opened.limiter.instance_id().map(str::to_owned);
        Slot {
            inner: Mutex::new(Some(opened.limiter)),
            memory,
            target: opened.target,
            opened_instance_id,
            generation: lifecycle::generation(),
        }
    }

    pub fn get(&self, py: Python<'_>, what: &str) -> PyResult<rl_core::blocking::Limiter> {
        match &*self.inner.lock().unwrap_or_else(|p| p.into_inner()) {
            Some(l) => Ok(l.clone()),
            None => Err(errors::closed(py, what)),
        }
    }

    /// The limiter's `Stats` (no I/O, never waits); LimiterClosed after close().
    pub fn stats(&self, py: Python<'_>, what: &str) -> PyResult<Stats> {
        Ok(Stats::from(self.get(py, what)?.stats()))
    }

    /// The id of this process's instance (each fork generation has its own); after close(), the
    /// id it had when opened.
    pub fn instance_id(&self) -> Option<String> {
        match &*self.inner.lock().unwrap_or_else(|p| p.into_inner()) {
            Some(l) => l.instance_id().map(str::to_owned),
            None => self.opened_instance_id.clone(),
        }
    }

    pub fn is_closed(&self) -> bool {
        self.inner
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .is_none()
    }

    /// Lets go of the limiter (calls in flight finish with their own reference).
    pub fn close(&self) {
        let taken = self.inner.lock().unwrap_or_else(|p| p.into_inner()).take();
        self.release(taken);
    }

    fn release(&self, taken: Option<rl_core::blocking::Limiter>) {
        if let Some(l) = taken {
            if lifecycle::generation() != self.generation {
                // Inherited across fork(): see lifecycle.rs for why it must not be dropped here.
                std::mem::forget(l);
            }
        }
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        let taken = self
            .inner
            .get_mut()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        self.release(taken);
    }
}

/// The synchronous limiter: at most `limit` permits in any `window_ms` span per key. Thread-safe
/// (calls release the GIL while they wait on Redis; make one per process and share it).
/// `url=None` or "memory://" is the in-process memory backend; redis://, rediss://, unix://,
/// redis+sentinel:// and redis+cluster:// URLs use Redis, connected on first use. Options left out
/// (or None) take the core's defaults: key_prefix "rl:", connect_timeout_ms 500,
/// request_timeout_ms 500, max_clock_skew_ms 1000, retry_delay_ms 50, local_fallback True,
/// degrade_rtt_ms 5, degrade_after_ms 100, recover_rtt_ms 2, recover_after_ms 500, instances None
/// (counted from the fleet's heartbeats), local_max_keys 10000.
#[pyclass(module = "rl", name = "Limiter", frozen, weakref)]
pub(crate) struct Limiter {
    slot: Slot,
}

const WHAT: &str = "Limiter";

#[pymethods]
impl Limiter {
    #[new]
    #[pyo3(signature = (url=None, *, key_prefix=None, connect_timeout_ms=None, request_timeout_ms=None, max_clock_skew_ms=None,
        retry_delay_ms=None, local_fallback=None, degrade_rtt_ms=None, degrade_after_ms=None, recover_rtt_ms=None,
        recover_after_ms=None, instances=None, local_max_keys=None))]
    #[allow(clippy::too_many_arguments)]
    fn new<'py>(
        py: Python<'py>,
        url: Option<Bound<'py, PyAny>>,
        key_prefix: Option<Bound<'py, PyAny>>,
        connect_timeout_ms: Option<Bound<'py, PyAny>>,
        request_timeout_ms: Option<Bound<'py, PyAny>>,
        max_clock_skew_ms: Option<Bound<'py, PyAny>>,
        retry_delay_ms: Option<Bound<'py, PyAny>>,
        local_fallback: Option<Bound<'py, PyAny>>,
        degrade_rtt_ms: Option<Bound<'py, PyAny>>,
        degrade_after_ms: Option<Bound<'py, PyAny>>,
        recover_rtt_ms: Option<Bound<'py, PyAny>>,
        recover_after_ms: Option<Bound<'py, PyAny>>,
        instances: Option<Bound<'py, PyAny>>,
        local_max_keys: Option<Bound<'py, PyAny>>,
    ) -> PyResult<Self> {
        errors::guard(py, || {
            let opened = options::open(
                py,
                options::Args {
                    url,
                    key_prefix,
                    connect_timeout_ms,
                    request_timeout_ms,
                    max_clock_skew_ms,
                    retry_delay_ms,
                    local_fallback,
                    degrade_rtt_ms,
                    degrade_after_ms,
                    recover_rtt_ms,
                    recover_after_ms,
                    instances,
                    local_max_keys,
                },
            )?;
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
                lifecycle::detached(py, || l.acquire(k, limit, window_ms, cost))
            };
            r.map(Decision::from).map_err(|e| errors::to_py(py, e))
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
                lifecycle::detached(py, || l.peek(k, limit, window_ms))
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

    /// "redis" or "memory".
    #[getter]
    fn backend(&self) -> &'static str {
        if self.slot.memory {
            "memory"
        } else {
            "redis"
        }
    }

    #[getter]
    fn closed(&self) -> bool {
        self.slot.is_closed()
    }

    /// Lets go of the connection (calls in flight finish); later calls raise LimiterClosed.
    /// Closing twice is fine.
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        errors::guard(py, || {
            self.slot.close();
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
            self.slot.close();
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
