//! The asyncio API's native half. A call queues the core's future for the core's tokio runtime
//! and is resolved through an `asyncio.Future` of the running loop; no thread is started or
//! blocked per call.
//!
//! Completion never takes the GIL on a runtime thread (that would stall the runtime behind the
//! event loop, and deadlock at interpreter exit). Instead each event loop gets a `Bridge`: a
//! queue of finished results plus a non-blocking pipe the loop watches (`loop.add_reader`). A
//! runtime task pushes its result and writes one byte only when the queue was empty, so a burst
//! of completions costs one wake-up; the loop thread then takes the batch and resolves the
//! futures. Likewise the calls made during one loop iteration reach the runtime with one spawn.
//!
//! A panic inside a call's future settles its asyncio future with `NativePanicError` (the future
//! runs under `rl_core::unwind::CatchUnwind`), so an awaiting coroutine never waits forever; a
//! panic in a method itself is raised the same way (`errors::guard`).
//!
//! Everything that talks to the event loop (get_running_loop, create_future, call_soon,
//! set_result, add_reader) is done by the Python half (`rl/__init__.py`), never under a Rust
//! frame: at interpreter exit CPython may end a daemon thread that runs Python code, and that
//! must not happen with PyO3's frames on its stack (see lifecycle.rs). The native methods here
//! only move data.

use std::collections::HashMap;
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use pyo3::exceptions::PyOSError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList, PyTuple};

use rl_core::unwind::{test_panic, CatchUnwind, TestPanic};

use crate::convert::{self, Arg};
use crate::decision::Decision;
use crate::errors;
use crate::lifecycle;
use crate::options;
use crate::stats::Stats;
use crate::sync::Slot;

enum Outcome {
    Decision(rl_core::Decision),
    Done,
}

/// A call's result, or the message of the panic that ended it.
type Finished = Result<rl_core::Result<Outcome>, String>;
type Completion = (u64, Finished);
type Job = std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>>;

/// The part of a bridge the runtime's tasks hold: results, and the pipe that wakes the loop.
struct Shared {
    queue: Mutex<(Vec<Completion>, bool)>,
    read_fd: RawFd,
    write_fd: RawFd,
}

impl Shared {
    fn new() -> std::io::Result<Shared> {
        let mut fds = [0 as libc::c_int; 2];
        // SAFETY: plain pipe(2) into a two-int array; both ends made non-blocking, close-on-exec.
        unsafe {
            if libc::pipe(fds.as_mut_ptr()) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            for fd in fds {
                libc::fcntl(
                    fd,
                    libc::F_SETFL,
                    libc::fcntl(fd, libc::F_GETFL) | libc::O_NONBLOCK,
                );
                libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC);
            }
        }
        Ok(Shared {
            queue: Mutex::new((Vec::new(), false)),
            read_fd: fds[0],
            write_fd: fds[1],
        })
    }

    /// Called on a runtime thread: never touches Python.
    fn complete(&self, c: Completion) {
        let wake = {
            let mut q = self.queue.lock().unwrap_or_else(|p| p.into_inner());
            q.0.push(c);
            !std::mem::replace(&mut q.1, true)
        };
        if wake {
            // A full pipe is fine (a wake-up is already pending), so the result is ignored.
            // SAFETY: writing one byte from a valid buffer to our own fd, which lives as long as self.
            unsafe { libc::write(self.write_fd, [1u8].as_ptr().cast(), 1) };
        }
    }

    fn take(&self) -> Vec<Completion> {
        let mut buf = [0u8; 64];
        // At most one byte is written per batch, so one read empties the pipe (if not, the loop
        // calls again: harmless). SAFETY: reading into a local buffer from our own fd.
        unsafe { libc::read(self.read_fd, buf.as_mut_ptr().cast(), buf.len()) };
        let mut q = self.queue.lock().unwrap_or_else(|p| p.into_inner());
        q.1 = false;
        std::mem::take(&mut q.0)
    }
}

impl Drop for Shared {
    fn drop(&mut self) {
        // SAFETY: our own fds, closed once.
        unsafe {
            libc::close(self.read_fd);
            libc::close(self.write_fd);
        }
    }
}

/// One event loop's end of the completion pipe (internal; made by `rl._bridge_for`).
#[pyclass(module = "rl._rl", name = "Bridge", frozen)]
pub(crate) struct Bridge {
    shared: Arc<Shared>,
    /// Futures waiting for a result, by call id. Only touched with the GIL held.
    pending: Mutex<HashMap<u64, Py<PyAny>>>,
    /// Calls made during the current loop iteration, handed to the runtime together by `submit`
    /// (one wake-up of the runtime per iteration instead of one per call). GIL-held only.
    outbox: Mutex<Vec<Job>>,
    next_id: AtomicU64,
    generation: u64,
}

#[pymethods]
impl Bridge {
    #[new]
    fn new() -> PyResult<Self> {
        let shared = Shared::new().map_err(|e| {
            PyOSError::new_err(format!("rl: cannot create the asyncio wake-up pipe: {e}"))
        })?;
        Ok(Bridge {
            shared: Arc::new(shared),
            pending: Mutex::new(HashMap::new()),
            outbox: Mutex::new(Vec::new()),
            next_id: AtomicU64::new(0),
            generation: lifecycle::generation(),
        })
    }

    /// The fd the loop watches (`loop.add_reader(bridge.fileno(), ...)`).
    fn fileno(&self) -> RawFd {
        self.shared.read_fd
    }

    /// Made before a fork() and now in the child: the runtime tasks that would complete into it
    /// do not exist here; make a new one.
    #[getter]
    fn stale(&self) -> bool {
        self.generation != lifecycle::generation()
    }

    /// Starts every call queued since the last submit, with one spawn (the runtime then spawns
    /// each call on its own, cheaply, from inside). The first call of a loop iteration schedules
    /// this with `call_soon`.
    fn submit(&self, py: Python<'_>) -> PyResult<()> {
        errors::guard(py, || {
            let jobs = std::mem::take(&mut *self.outbox.lock().unwrap_or_else(|p| p.into_inner()));
            if jobs.is_empty() {
                return Ok(());
            }
            let handle = rl_core::runtime::handle().map_err(|e| errors::to_py(py, e))?;
            if jobs.len() == 1 {
                handle.spawn(jobs.into_iter().next().expect("one job"));
            } else {
                handle.spawn(async move {
                    for job in jobs {
                        tokio::spawn(job);
                    }
                });
            }
            Ok(())
        })
    }

    /// Forgets every pending call: for a bridge whose loop is closed, whose futures can never be
    /// resolved (and would keep the loop alive).
    fn abandon(&self) {
        self.pending
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clear();
        self.outbox
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clear();
        drop(self.shared.take());
    }

    /// The finished calls: a list of `(future, ok, value)`, `value` being the result or the
    /// exception to set. Futures cancelled meanwhile are included (the caller skips them).
    fn take<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let done = self.shared.take();
        let out = PyList::empty(py);
        if done.is_empty() {
            return Ok(out);
        }
        let mut pending = self.pending.lock().unwrap_or_else(|p| p.into_inner());
        for (id, r) in done {
            let Some(fut) = pending.remove(&id) else {
                continue;
            };
            let item = match r {
                Ok(Ok(Outcome::Decision(d))) => PyTuple::new(
                    py,
                    [
                        fut.into_any(),
                        true.into_pyobject(py)?.to_owned().into_any().unbind(),
                        Py::new(py, Decision::from(d))?.into_any(),
                    ],
                )?,
                Ok(Ok(Outcome::Done)) => PyTuple::new(
                    py,
                    [
                        fut.into_any(),
                        true.into_pyobject(py)?.to_owned().into_any().unbind(),
                        py.None(),
                    ],
                )?,
                Ok(Err(e)) => PyTuple::new(
                    py,
                    [
                        fut.into_any(),
                        false.into_pyobject(py)?.to_owned().into_any().unbind(),
                        errors::to_py(py, e).into_value(py).into_any(),
                    ],
                )?,
                Err(panic) => PyTuple::new(
                    py,
                    [
                        fut.into_any(),
                        false.into_pyobject(py)?.to_owned().into_any().unbind(),
                        errors::panicked(py, panic).into_value(py).into_any(),
                    ],
                )?,
            };
            out.append(item)?;
        }
        Ok(out)
    }
}

impl Bridge {
    /// Queues `work` to resolve `fut`; true if it is the first of this loop iteration (the caller
    /// then schedules `submit`).
    fn queue<F>(&self, fut: &Bound<'_, PyAny>, work: F) -> bool
    where
        F: std::future::Future<Output = rl_core::Result<Outcome>> + Send + 'static,
    {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        self.pending
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(id, fut.clone().unbind());
        let shared = self.shared.clone();
        let job: Job = Box::pin(async move {
            let r = CatchUnwind::new(work).await;
            shared.complete((id, r));
        });
        let mut outbox = self.outbox.lock().unwrap_or_else(|p| p.into_inner());
        outbox.push(job);
        outbox.len() == 1
    }
}

/// The async limiter's native half; `rl.AsyncLimiter` wraps it in coroutines. Each method
/// queues the call on `bridge` to resolve `fut` and returns whether the caller must schedule
/// `bridge.submit`. With the memory backend use the `decide_*` methods, which answer in place.
#[pyclass(module = "rl._rl", name = "AsyncCore", frozen, weakref)]
pub(crate) struct AsyncCore {
    slot: Slot,
}

const WHAT: &str = "AsyncLimiter";

#[pymethods]
impl AsyncCore {
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
    ) -> PyResult<bool> {
        errors::guard(py, || {
            let key = convert::key(key)?;
            let limit = convert::u64_arg("limit", limit)?;
            let window_ms = convert::u64_arg("window_ms", window_ms)?;
            let cost = convert::u64_or("cost", &cost, 1)?;
            let l = self.slot.get(py, WHAT)?.as_async().clone();
            let key = key.as_bytes().to_vec();
            test_panic(TestPanic::Caller, &key);
            Ok(bridge.get().queue(fut, async move {
                test_panic(TestPanic::Future, &key);
                l.acquire(key, limit, window_ms, cost)
                    .await
                    .map(Outcome::Decision)
            }))
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
    ) -> PyResult<bool> {
        errors::guard(py, || {
            let key = convert::key(key)?;
            let limit = convert::u64_arg("limit", limit)?;
            let window_ms = convert::u64_arg("window_ms", window_ms)?;
            let l = self.slot.get(py, WHAT)?.as_async().clone();
            let key = key.as_bytes().to_vec();
            test_panic(TestPanic::Caller, &key);
            Ok(bridge.get().queue(fut, async move {
                test_panic(TestPanic::Future, &key);
                l.peek(key, limit, window_ms).await.map(Outcome::Decision)
            }))
        })
    }

    fn reset<'py>(
        &self,
        py: Python<'py>,
        bridge: &Bound<'py, Bridge>,
        fut: &Bound<'py, PyAny>,
        key: &Bound<'py, PyAny>,
    ) -> PyResult<bool> {
        errors::guard(py, || {
            let key = convert::key(key)?;
            let l = self.slot.get(py, WHAT)?.as_async().clone();
            let key = key.as_bytes().to_vec();
            test_panic(TestPanic::Caller, &key);
            Ok(bridge.get().queue(fut, async move {
                test_panic(TestPanic::Future, &key);
                l.reset(key).await.map(|_| Outcome::Done)
            }))
        })
    }

    fn ping<'py>(
        &self,
        py: Python<'py>,
        bridge: &Bound<'py, Bridge>,
        fut: &Bound<'py, PyAny>,
    ) -> PyResult<bool> {
        errors::guard(py, || {
            let l = self.slot.get(py, WHAT)?.as_async().clone();
            Ok(bridge
                .get()
                .queue(fut, async move { l.ping().await.map(|_| Outcome::Done) }))
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

    fn close(&self, py: Python<'_>) -> PyResult<()> {
        errors::guard(py, || {
            self.slot.close();
            Ok(())
        })
    }

    #[getter]
    fn target(&self) -> &str {
        &self.slot.target
    }
}
