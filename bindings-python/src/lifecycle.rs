//! Process lifecycle the binding must survive: `fork()` and interpreter exit.
//!
//! Fork: the core gives a child its own runtime and Redis connection, keyed by its fork
//! generation (`rl_core::fork_generation`). The binding keys the objects it owns (asyncio
//! bridges) by the same counter, and a child never *drops* a limiter it inherited: dropping the
//! parent's Redis connection would wake a task on the parent's runtime, whose threads do not
//! exist in the child and whose locks may have been held at the fork. Such a limiter is
//! forgotten instead.
//!
//! Exit: at interpreter shutdown CPython (before 3.14) ends a daemon thread that takes the GIL
//! back after finalization started by unwinding it with `pthread_exit`; that forced unwind meets
//! PyO3's `catch_unwind` and the whole process aborts ("FATAL: exception not rethrown"). So a
//! daemon thread must never be *waiting* for the GIL when finalization starts. A gate does it:
//! a daemon thread coming back from Redis registers before it asks for the GIL, and our `atexit`
//! handler (which runs before finalization) closes the gate and lets every registered thread
//! through first. A daemon thread that returns after the gate closed parks until the process
//! ends, which is what CPython 3.14 does with such threads itself. Non-daemon threads are never
//! parked (they were joined before `atexit` runs anyway, unless an `atexit` handler started them).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use pyo3::prelude::*;

/// The gate is closed: set by `_at_exit`.
static EXITING: AtomicBool = AtomicBool::new(false);
/// Daemon threads between "back from Redis" and "holding the GIL again", with the fork
/// generation they were counted in: the fork generation in the high 32 bits, the count in the
/// low 32. Only the forking thread exists in a child, so a count from an earlier generation is
/// nobody (read as 0, restarted on the next entry).
static ENTERING: AtomicU64 = AtomicU64::new(0);

std::thread_local! {
    /// Whether this thread is a daemon thread (`threading.current_thread().daemon`), looked up
    /// once per thread. Threads not made by `threading` count as daemons, as CPython treats them.
    static DAEMON: std::cell::Cell<Option<bool>> = const { std::cell::Cell::new(None) };
}

/// The fork generation: 0 in the process that imported `rl`, +1 per fork below it (the core's).
pub(crate) fn generation() -> u64 {
    rl_core::fork_generation()
}

fn tag() -> u64 {
    generation() << 32
}

/// How many daemon threads of this generation are on their way back into Python.
fn entering() -> u64 {
    let v = ENTERING.load(Ordering::SeqCst);
    if v & !0xffff_ffff == tag() {
        v & 0xffff_ffff
    } else {
        0
    }
}

/// Adds `delta` (+1 or -1) to this generation's count.
fn count_entering(delta: i64) {
    let tag = tag();
    let _ = ENTERING.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |v| {
        let n = if v & !0xffff_ffff == tag {
            v & 0xffff_ffff
        } else {
            0
        };
        Some(tag | n.saturating_add_signed(delta) & 0xffff_ffff)
    });
}

pub(crate) fn install(m: &Bound<'_, PyModule>) -> PyResult<()> {
    // Registers the core's fork handler now, before the application can fork.
    generation();
    let at_exit = m.getattr("_at_exit")?;
    m.py()
        .import("atexit")?
        .call_method1("register", (at_exit,))?;
    Ok(())
}

/// Registered with `atexit`; not part of the API. Closes the gate, then lets the daemon threads
/// already on their way back into Python finish that step (bounded, so exit cannot hang on it).
#[pyfunction]
pub(crate) fn _at_exit(py: Python<'_>) {
    EXITING.store(true, Ordering::SeqCst);
    let deadline = Instant::now() + Duration::from_secs(2);
    while entering() > 0 && Instant::now() < deadline {
        py.detach(|| std::thread::sleep(Duration::from_micros(200)));
    }
}

fn is_daemon(py: Python<'_>) -> bool {
    DAEMON.with(|d| match d.get() {
        Some(v) => v,
        None => {
            let v = py
                .import("threading")
                .and_then(|t| t.call_method0("current_thread"))
                .and_then(|t| t.getattr("daemon"))
                .and_then(|d| d.is_truthy())
                .unwrap_or(true);
            d.set(Some(v));
            v
        }
    })
}

/// Runs `f` with the GIL released (see the module docs for the exit gate).
pub(crate) fn detached<T, F>(py: Python<'_>, f: F) -> T
where
    F: FnOnce() -> T + Send,
    T: Send,
{
    if !is_daemon(py) {
        return py.detach(f);
    }
    let out = py.detach(|| {
        let out = f();
        count_entering(1);
        if EXITING.load(Ordering::SeqCst) {
            count_entering(-1);
            loop {
                std::thread::park();
            }
        }
        out
    });
    count_entering(-1);
    out
}
