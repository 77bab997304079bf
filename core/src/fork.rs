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
/// Public so that a binding keys its own fork-sensitive objects by the same counter (one
/// `pthread_atfork` handler, not one per layer).
pub fn generation() -> u64 {
    REGISTER.call_once(|| {
        // SAFETY: registering a handler that only touches an atomic is async-signal-safe, as
        // fork's child handlers must be.
        unsafe {
            libc::pthread_atfork(None, None, Some(in_child));
        }
    });
    GENERATION.load(Ordering::Relaxed)
}

/// A value that a forked child must not inherit: each fork generation gets its own, made on first
/// use. The parent's is leaked in the child, never touched again: a lock in it may have been held
/// by a parent thread at the instant of `fork()`, and such a lock would never be released here.
pub(crate) struct ForkLocal<T> {
    current: std::sync::atomic::AtomicPtr<(u64, T)>,
}

// SAFETY: the value is shared by reference between threads (like an `Arc<T>`), so it needs
// `Send + Sync`; the pointer itself is only swapped atomically.
unsafe impl<T: Send + Sync> Sync for ForkLocal<T> {}
unsafe impl<T: Send + Sync> Send for ForkLocal<T> {}

impl<T: Default> Default for ForkLocal<T> {
    fn default() -> Self {
        ForkLocal::new()
    }
}

impl<T> ForkLocal<T> {
    pub(crate) const fn new() -> Self {
        ForkLocal {
            current: std::sync::atomic::AtomicPtr::new(std::ptr::null_mut()),
        }
    }

    /// This generation's value, made by `init` on first use in this generation.
    pub(crate) fn get_or_init(&self, init: impl Fn() -> T) -> &T {
        let generation = generation();
        loop {
            let p = self.current.load(Ordering::Acquire);
            // SAFETY: a published pointer stays valid while `self` lives: replaced ones are
            // leaked, the current one is freed only by `drop(&mut self)`.
            if let Some((g, value)) = unsafe { p.as_ref() } {
                if *g == generation {
                    return value;
                }
            }
            let fresh = Box::into_raw(Box::new((generation, init())));
            match self
                .current
                .compare_exchange(p, fresh, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(_) => {} // the old one (if any) is leaked on purpose
                // SAFETY: `fresh` was never published.
                Err(_) => drop(unsafe { Box::from_raw(fresh) }),
            }
        }
    }
}

impl<T: Default> ForkLocal<T> {
    pub(crate) fn get(&self) -> &T {
        self.get_or_init(T::default)
    }
}

impl<T> Drop for ForkLocal<T> {
    fn drop(&mut self) {
        let p = *self.current.get_mut();
        if p.is_null() {
            return;
        }
        // SAFETY: we own the current pointer; nobody else can reach `self` any more.
        let boxed = unsafe { Box::from_raw(p) };
        if boxed.0 != generation() {
            std::mem::forget(boxed); // inherited from the parent: leave it untouched
        }
    }
}
