//! The asyncio API's native half. A call is decided at once if it can be, else it continues on
//! the core's tokio runtime and is resolved through an `asyncio.Future` of the running loop (see
//! bridge.rs); no thread is started or blocked per call. Everything that talks to the event loop is done by the Python
//! half (`rl/__init__.py`); the methods here only move data.

use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyTuple};

use rl_core::unwind::{test_panic, TestPanic};

use crate::bridge::{Bridge, Outcome};
use crate::composite::{self, CompositeDecision};
use crate::convert::{self, Arg};
use crate::decision::Decision;
use crate::errors;
use crate::open::open;
use crate::prepared::{self, Call};
use crate::slot::Slot;
use crate::stats::Stats;

/// The async limiter's native half; `rl.AsyncLimiter` wraps it in coroutines. Each method
/// starts the call on `bridge` and returns its result if it is decided at once, else `fut`, which
/// the bridge resolves. With the memory backend use the `decide_*` methods, which answer in place
/// with no future at all.
#[pyclass(module = "rl._rl", name = "AsyncCore", frozen, weakref)]
pub(crate) struct AsyncCore {
    slot: Slot,
}

const WHAT: &str = "AsyncLimiter";

#[pymethods]
impl AsyncCore {
    #[new]
    #[pyo3(signature = (url=None, **options))]
    fn new<'py>(
        py: Python<'py>,
        url: Option<Bound<'py, PyAny>>,
        options: Option<Bound<'py, PyDict>>,
    ) -> PyResult<Self> {
        errors::guard(py, || {
            let opened = open(py, url.as_ref(), options.as_ref())?;
            Ok(AsyncCore {
                slot: Slot::new(opened),
            })
        })
    }

    #[pyo3(signature = (bridge, fut, key, limit, window_ms, cost = Arg::Absent), text_signature = "(self, bridge, fut, key, limit, window_ms, cost=1)")]
    #[allow(clippy::too_many_arguments)]
    fn acquire<'py>(
        &self,
        py: Python<'py>,
        bridge: &Bound<'py, Bridge>,
        fut: &Bound<'py, PyAny>,
        key: &Bound<'py, PyAny>,
        limit: &Bound<'py, PyAny>,
        window_ms: &Bound<'py, PyAny>,
        cost: Arg<'py>,
    ) -> PyResult<Bound<'py, PyAny>> {
        errors::guard(py, || {
            let key = convert::key(key)?;
            let limit = convert::u64_arg("limit", limit)?;
            let window_ms = convert::u64_arg("window_ms", window_ms)?;
            let cost = convert::u64_or("cost", &cost, 1)?;
            let l = self.slot.get(py, WHAT)?.as_async().clone();
            let key = key.as_bytes().to_vec();
            test_panic(TestPanic::Caller, &key);
            bridge.get().start(py, fut, async move {
                let r = l.acquire(&key, limit, window_ms, cost).await;
                // After the core's call: for Redis that is in the task on the runtime (the first
                // poll, on this thread, only started it).
                test_panic(TestPanic::Future, &key);
                r.map(Outcome::Decision)
            })
        })
    }

    #[pyo3(signature = (bridge, fut, rules, group = None))]
    fn acquire_all<'py>(
        &self,
        py: Python<'py>,
        bridge: &Bound<'py, Bridge>,
        fut: &Bound<'py, PyAny>,
        rules: &Bound<'py, PyAny>,
        group: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        errors::guard(py, || {
            let rules = composite::rules(rules)?;
            let group = composite::group(group)?;
            let l = self.slot.get(py, WHAT)?.as_async().clone();
            let first = rules.first().map(|r| r.key.clone()).unwrap_or_default();
            test_panic(TestPanic::Caller, &first);
            bridge.get().start(py, fut, async move {
                let r = l.acquire_all(&rules, group.as_deref()).await;
                test_panic(TestPanic::Future, &first);
                r.map(Outcome::Composite)
            })
        })
    }

    #[pyo3(signature = (bridge, fut, policies, key, cost = Arg::Absent, group = None), text_signature = "(self, bridge, fut, policies, key, cost=1, group=None)")]
    #[allow(clippy::too_many_arguments)]
    fn acquire_policies<'py>(
        &self,
        py: Python<'py>,
        bridge: &Bound<'py, Bridge>,
        fut: &Bound<'py, PyAny>,
        policies: &Bound<'py, PyAny>,
        key: &Bound<'py, PyAny>,
        cost: Arg<'py>,
        group: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        errors::guard(py, || {
            let call = Call::new(policies, key, &cost, group)?;
            let l = self.slot.get(py, WHAT)?.as_async().clone();
            let first = call.first_key();
            test_panic(TestPanic::Caller, &first);
            bridge.get().start(py, fut, async move {
                let r = l.acquire_all(&call.rules, call.group.as_deref()).await;
                test_panic(TestPanic::Future, &first);
                let (c, response) = call.respond(r?)?;
                Ok(Outcome::Responded(c, response))
            })
        })
    }

    fn peek<'py>(
        &self,
        py: Python<'py>,
        bridge: &Bound<'py, Bridge>,
        fut: &Bound<'py, PyAny>,
        key: &Bound<'py, PyAny>,
        limit: &Bound<'py, PyAny>,
        window_ms: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        errors::guard(py, || {
            let key = convert::key(key)?;
            let limit = convert::u64_arg("limit", limit)?;
            let window_ms = convert::u64_arg("window_ms", window_ms)?;
            let l = self.slot.get(py, WHAT)?.as_async().clone();
            let key = key.as_bytes().to_vec();
            test_panic(TestPanic::Caller, &key);
            bridge.get().start(py, fut, async move {
                let r = l.peek(&key, limit, window_ms).await;
                test_panic(TestPanic::Future, &key);
                r.map(Outcome::Decision)
            })
        })
    }

    fn reset<'py>(
        &self,
        py: Python<'py>,
        bridge: &Bound<'py, Bridge>,
        fut: &Bound<'py, PyAny>,
        key: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        errors::guard(py, || {
            let key = convert::key(key)?;
            let l = self.slot.get(py, WHAT)?.as_async().clone();
            let key = key.as_bytes().to_vec();
            test_panic(TestPanic::Caller, &key);
            bridge.get().start(py, fut, async move {
                let r = l.reset(&key).await;
                test_panic(TestPanic::Future, &key);
                r.map(|_| Outcome::Done)
            })
        })
    }

    fn reset_in_group<'py>(
        &self,
        py: Python<'py>,
        bridge: &Bound<'py, Bridge>,
        fut: &Bound<'py, PyAny>,
        key: &Bound<'py, PyAny>,
        group: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        errors::guard(py, || {
            let key = convert::key(key)?;
            let group = composite::group(group)?;
            let l = self.slot.get(py, WHAT)?.as_async().clone();
            let key = key.as_bytes().to_vec();
            test_panic(TestPanic::Caller, &key);
            bridge.get().start(py, fut, async move {
                let r = l.reset_in_group(&key, group.as_deref()).await;
                test_panic(TestPanic::Future, &key);
                r.map(|_| Outcome::Done)
            })
        })
    }

    fn ping<'py>(
        &self,
        py: Python<'py>,
        bridge: &Bound<'py, Bridge>,
        fut: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        errors::guard(py, || {
            let l = self.slot.get(py, WHAT)?.as_async().clone();
            bridge.get().start(
                py,
                fut,
                async move { l.ping().await.map(|_| Outcome::Done) },
            )
        })
    }

    /// Memory backend: decides in place (no I/O), like the sync limiter.
    #[pyo3(signature = (key, limit, window_ms, cost = Arg::Absent), text_signature = "(self, key, limit, window_ms, cost=1)")]
    fn decide_acquire(
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
            test_panic(TestPanic::Caller, key.as_bytes());
            l.acquire(key.as_bytes(), limit, window_ms, cost)
                .map(Decision::from)
                .map_err(|e| errors::to_py(py, e))
        })
    }

    /// Memory backend: `acquire_all` decided in place.
    #[pyo3(signature = (rules, group = None))]
    fn decide_acquire_all(
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
            l.acquire_all(&rules, group.as_deref())
                .map(CompositeDecision::from)
                .map_err(|e| errors::to_py(py, e))
        })
    }

    #[pyo3(signature = (policies, key, cost = Arg::Absent, group = None), text_signature = "(self, policies, key, cost=1, group=None)")]
    fn decide_acquire_policies<'py>(
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
            let (c, response) = l
                .acquire_all(&call.rules, call.group.as_deref())
                .and_then(|c| call.respond(c))
                .map_err(|e| errors::to_py(py, e))?;
            prepared::responded(py, c, response)
        })
    }

    fn decide_peek(
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
            test_panic(TestPanic::Caller, key.as_bytes());
            l.peek(key.as_bytes(), limit, window_ms)
                .map(Decision::from)
                .map_err(|e| errors::to_py(py, e))
        })
    }

    fn decide_reset(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<()> {
        errors::guard(py, || {
            let key = convert::key(key)?;
            let l = self.slot.get(py, WHAT)?;
            test_panic(TestPanic::Caller, key.as_bytes());
            l.reset(key.as_bytes()).map_err(|e| errors::to_py(py, e))
        })
    }

    fn decide_reset_in_group(
        &self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        group: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<()> {
        errors::guard(py, || {
            let key = convert::key(key)?;
            let group = composite::group(group)?;
            let l = self.slot.get(py, WHAT)?;
            test_panic(TestPanic::Caller, key.as_bytes());
            l.reset_in_group(key.as_bytes(), group.as_deref())
                .map_err(|e| errors::to_py(py, e))
        })
    }

    /// Raises `LimiterClosed` if closed (for the memory backend's ping).
    fn check_open(&self, py: Python<'_>) -> PyResult<()> {
        self.slot.get(py, WHAT).map(|_| ())
    }

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

    /// See `Limiter.stats`: never waits, so it is not a coroutine.
    fn stats(&self, py: Python<'_>) -> PyResult<Stats> {
        errors::guard(py, || self.slot.stats(py, WHAT))
    }

    #[getter]
    fn instance_id(&self) -> Option<String> {
        self.slot.instance_id()
    }

    #[getter]
    fn backend(&self) -> &'static str {
        self.slot.backend()
    }

    #[getter]
    fn closed(&self) -> bool {
        self.slot.is_closed()
    }

    /// Blocks (GIL released) while the core's close returns unused leases; `aclose` awaits it.
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        errors::guard(py, || {
            self.slot.close(py);
            Ok(())
        })
    }

    /// Closes now and returns the unused leases on `bridge`: `fut` resolves when they are back,
    /// or None when nothing is to return (memory, already closed). Refund errors resolve it all
    /// the same (see `Slot::close`).
    fn aclose<'py>(
        &self,
        py: Python<'py>,
        bridge: &Bound<'py, Bridge>,
        fut: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        errors::guard(py, || {
            let Some(l) = self.slot.take_for_close() else {
                return Ok(py.None().into_bound(py));
            };
            let l = l.as_async().clone();
            bridge.get().start(py, fut, async move {
                let _ = l.close().await;
                Ok(Outcome::Done)
            })
        })
    }

    #[getter]
    fn target(&self) -> &str {
        &self.slot.target
    }
}
