//! The tokio runtime the core owns for callers without one (the blocking facade, and through it
//! C, Java and synchronous Python). One per process, made on first use, shared by every limiter:
//! opening and closing thousands of limiters must not start thousands of thread pools.

use std::future::Future;
use std::sync::OnceLock;

use tokio::runtime::{Builder, Handle, Runtime};

use crate::error::{Error, Result};

static RUNTIME: OnceLock<Runtime> = OnceLock::new();

/// The shared runtime's handle, for bindings that drive async calls from it (Node, Python asyncio).
pub fn handle() -> Result<Handle> {
    if let Some(rt) = RUNTIME.get() {
        return Ok(rt.handle().clone());
    }
    let rt = Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("rl-runtime")
        .enable_all()
        .build()
        .map_err(|e| Error::Backend(format!("cannot start the rl runtime: {e}")))?;
    Ok(RUNTIME.get_or_init(|| rt).handle().clone())
}

/// Runs `fut` to completion from synchronous code. On a plain thread the future runs right here
/// (no hand-off, so a memory-backend call costs no context switch); called from inside some async
/// runtime, where blocking in place would panic, it runs on the shared runtime and this thread waits.
pub fn block_on<F>(fut: F) -> Result<F::Output>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    let handle = handle()?;
    if Handle::try_current().is_err() {
        return Ok(handle.block_on(fut));
    }
    let (tx, rx) = std::sync::mpsc::sync_channel(1);
    handle.spawn(async move {
        let _ = tx.send(fut.await);
    });
    rx.recv().map_err(|_| Error::Backend("the rl runtime dropped a call".into()))
}
