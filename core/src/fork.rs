//! Surviving `fork()` (gunicorn, Celery prefork, multiprocessing): a forked child has copies of the
//! parent's memory but none of its threads, so the parent's tokio runtime and the tasks driving
//! its Redis connections are gone. Everything thread-backed is keyed by a fork generation that a
//! `pthread_atfork` child handler bumps; a child sees a new generation and builds its own runtime
//! and connections on first use instead of waiting on threads that do not exist.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Once;

static GENERATION: AtomicU64 = AtomicU64::new(0);
static REGISTER: Once = Once::new();

extern "C" fn in_child() {
    GENERATION.fetch_add(1, Ordering::SeqCst);
}

/// The current fork generation: 0 in the original process, +1 in each descendant generation.
pub(crate) fn generation() -> u64 {
    REGISTER.call_once(|| {
        // SAFETY: registering a handler that only touches an atomic is async-signal-safe, as
        // fork's child handlers must be.
        unsafe {
            libc::pthread_atfork(None, None, Some(in_child));
        }
    });
    GENERATION.load(Ordering::Relaxed)
}
