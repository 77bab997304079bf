//! Completing asyncio calls: the pipe between the core's runtime and an event loop.
//!
//! Completion never takes the GIL on a runtime thread (that would stall the runtime behind the
//! event loop, and deadlock at interpreter exit). Instead each event loop gets a `Bridge`: a
//! queue of finished results plus a non-blocking pipe the loop watches (`loop.add_reader`). A
//! runtime task pushes its result and writes one byte only when the queue was empty, so a burst
//! of completions costs one wake-up; the loop thread then takes the batch and resolves the
//! futures.
//!
//! A call starts with `rl_core::runtime::run_or_spawn`: one decided at its first poll (an
//! argument error, a local decision) is returned at once, with no task, no future to resolve
//! and no wake-up; only one that waits goes through the pipe.
//!
//! A panic inside a call's future settles its asyncio future with `NativePanicError` (the future
//! runs under `rl_core::unwind::CatchUnwind`), so an awaiting coroutine never waits forever; a
//! panic in a method itself is raised the same way (`errors::guard`).
//!
//! Everything that talks to the event loop (get_running_loop, create_future, set_result,
//! add_reader) is done by the Python half (`rl/__init__.py`), never under a Rust
//! frame: at interpreter exit CPython may end a daemon thread that runs Python code, and that
//! must not happen with PyO3's frames on its stack (see lifecycle.rs). The native methods here
//! only move data.

use std::collections::HashMap;
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use pyo3::exceptions::PyOSError;
use pyo3::prelude::*;
use pyo3::types::{PyList, PyTuple};

use rl_core::runtime::{run_or_spawn, Started};
use rl_core::unwind::CatchUnwind;

use crate::composite::CompositeDecision;
use crate::decision::Decision;
use crate::errors;
use crate::lifecycle;

/// What a finished call hands back.
pub(crate) enum Outcome {
    Decision(rl_core::Decision),
    Composite(rl_core::CompositeDecision),
    /// `acquire_policies`: the decision and the response the core rendered for it.
    Responded(rl_core::CompositeDecision, rl_core::headers::Response),
    Done,
}

impl Outcome {
    /// The Python value a call resolves to.
    pub(crate) fn into_py(self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        Ok(match self {
            Outcome::Decision(d) => Py::new(py, Decision::from(d))?.into_any(),
            Outcome::Composite(c) => Py::new(py, CompositeDecision::from(c))?.into_any(),
            Outcome::Responded(c, r) => crate::prepared::responded(py, c, r)?.into_any().unbind(),
            Outcome::Done => py.None(),
        })
    }
}

/// A call's result, or the message of the panic that ended it.
type Finished = Result<rl_core::Result<Outcome>, String>;
type Completion = (u64, Finished);

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

    /// Forgets every pending call: for a bridge whose loop is closed, whose futures can never be
    /// resolved (and would keep the loop alive).
    fn abandon(&self) {
        self.pending
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
                Ok(Ok(outcome)) => PyTuple::new(
                    py,
                    [
                        fut.into_any(),
                        true.into_pyobject(py)?.to_owned().into_any().unbind(),
                        outcome.into_py(py)?,
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
    /// Starts `work`: its result (a `Decision` or `None`) if it is decided at once, else `fut`,
    /// which `take` hands back with the result once the runtime has it.
    pub(crate) fn start<'py, F>(
        &self,
        py: Python<'py>,
        fut: &Bound<'py, PyAny>,
        work: F,
    ) -> PyResult<Bound<'py, PyAny>>
    where
        F: std::future::Future<Output = rl_core::Result<Outcome>> + Send + 'static,
    {
        let started = run_or_spawn(CatchUnwind::new(work), || {
            let id = self.next_id.fetch_add(1, Ordering::Relaxed);
            self.pending
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .insert(id, fut.clone().unbind());
            let shared = self.shared.clone();
            move |r| shared.complete((id, r))
        });
        match started.map_err(|e| errors::to_py(py, e))? {
            Started::Spawned => Ok(fut.clone()),
            Started::Ready(Ok(Ok(outcome))) => Ok(outcome.into_py(py)?.into_bound(py)),
            Started::Ready(Ok(Err(e))) => Err(errors::to_py(py, e)),
            Started::Ready(Err(panic)) => Err(errors::panicked(py, panic)),
        }
    }
}
