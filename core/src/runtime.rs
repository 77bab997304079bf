//! The tokio runtime the core owns for callers without one (the blocking facade, and through it
//! C, Java and synchronous Python; Node and Python asyncio drive futures on it too). One per
//! process, made on first use, shared by every limiter: opening and closing thousands of limiters
//! must not start thousands of thread pools. After `fork()` the child gets a fresh one (see
//! `fork.rs`).

use std::cell::RefCell;
use std::future::Future;
use std::sync::Mutex;

use tokio::runtime::{Builder, Handle, Runtime};

use crate::error::{Error, Result};
use crate::fork::{self, ForkLocal};

/// The runtime of the current fork generation. Runtimes are leaked on purpose: a parent's runtime
/// cannot be shut down from a child (its threads do not exist there), and the one of the current
/// generation lives as long as the process. The lock that guards its creation is per generation
/// too: a parent thread may hold it at the instant of `fork()`, and a child must not wait on it.
static CURRENT: ForkLocal<Mutex<Option<&'static Runtime>>> = ForkLocal::new();

thread_local! {
    static CACHED: RefCell<Option<(u64, Handle)>> = const { RefCell::new(None) };
}

/// The shared runtime's handle.
pub fn handle() -> Result<Handle> {
    let generation = fork::generation();
    let cached = CACHED.with(|c| match &*c.borrow() {
        Some((g, h)) if *g == generation => Some(h.clone()),
        _ => None,
    });
    if let Some(h) = cached {
        return Ok(h);
    }
    let mut current = CURRENT.get().lock().unwrap_or_else(|p| p.into_inner());
    let handle = match &*current {
        Some(rt) => rt.handle().clone(),
        None => {
            let rt: &'static Runtime = Box::leak(Box::new(
                Builder::new_multi_thread()
                    .worker_threads(2)
                    .thread_name("rl-runtime")
                    .enable_all()
                    .build()
                    .map_err(|e| Error::Backend(format!("cannot start the rl runtime: {e}")))?,
            ));
            *current = Some(rt);
            rt.handle().clone()
        }
    };
    CACHED.with(|c| *c.borrow_mut() = Some((generation, handle.clone())));
    Ok(handle)
}

/// Runs `fut` to completion from synchronous code. On a plain thread the future runs right here
/// (no hand-off, no allocation); called from inside some async runtime, where blocking in place
/// would panic, it runs on a scoped helper thread and this thread waits.
pub fn block_on<F>(fut: F) -> Result<F::Output>
where
    F: Future + Send,
    F::Output: Send,
{
    let handle = handle()?;
    if Handle::try_current().is_err() {
        return Ok(handle.block_on(fut));
    }
    std::thread::scope(|s| s.spawn(|| handle.block_on(fut)).join())
        .map_err(|_| Error::Backend("a blocking rl call panicked".into()))
}
