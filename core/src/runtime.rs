//! The tokio runtime the core owns for callers without one (the blocking facade, and through it
//! C, Java and synchronous Python; Node and Python asyncio drive futures on it too). One per
//! process, made on first use, shared by every limiter: opening and closing thousands of limiters
//! must not start thousands of thread pools. After `fork()` the child gets a fresh one (see
//! `fork.rs`).

use std::cell::RefCell;
use std::future::Future;
use std::pin::Pin;
use std::sync::Mutex;
use std::task::{Context, Poll, Waker};

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
    /// Set while this thread (not one of the runtime's) waits in [`block_on`]: a Redis call it
    /// makes may do its I/O right here (`backend/in_place.rs`).
    static BLOCKING: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
    /// Set during [`run_here_or_block`]'s first poll: the thread must not block yet.
    static TRYING: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Awaited by a blocking caller's call right before it would block its thread on I/O
/// (`backend/in_place.rs`): inside [`run_here_or_block`]'s first poll it is pending once, with no
/// waker registered, and that caller polls again (once it may block) right away; otherwise
/// ready. So the first poll decides whatever needs no I/O (a lease, the denial cache) and stops
/// short of the socket.
pub(crate) fn may_block() -> impl Future<Output = ()> {
    std::future::poll_fn(|_| {
        if TRYING.with(|t| t.get()) {
            Poll::Pending
        } else {
            Poll::Ready(())
        }
    })
}

/// Whether the current thread is a blocking caller inside [`block_on`], free to block on I/O.
pub(crate) fn blocking_caller() -> bool {
    BLOCKING.with(|b| b.get())
}

/// Marks the current thread as a blocking caller until dropped.
struct Blocking(bool);

impl Blocking {
    fn enter() -> Blocking {
        Blocking(BLOCKING.with(|b| b.replace(true)))
    }
}

impl Drop for Blocking {
    fn drop(&mut self) {
        BLOCKING.with(|b| b.set(self.0));
    }
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
                    .worker_threads(worker_threads())
                    .thread_name("rl-runtime")
                    .on_thread_start(never_preempt_on_wakeup)
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

/// The runtime's threads work for callers on other threads: a request's lease renewal ahead and
/// refunds, health probes, and the replies that Node, Java, asyncio and the callers of Cluster,
/// Sentinel and TLS limiters wait for. Woken by such a caller, a normal thread is often placed
/// on the caller's cpu (the scheduler's wake-affine choice) and preempts it there: a lease
/// renewal started by a Flask request then ran in the middle of that request (measured in the
/// app under gunicorn, 50 req/s: the calls that renewed took 130-280 µs of wall time for 55-90
/// µs of their own cpu, the limiter call's P99 170-205 µs; with this, 89-120 µs). A SCHED_BATCH
/// thread never preempts on wake-up: it still runs at once on an idle cpu, and otherwise when
/// the running thread sleeps or its time slice ends (tokio's threads never wait on a thread that
/// needs the cpu they would take). Linux only; where the call is refused (a seccomp profile)
/// the threads keep the normal policy, which is only slower.
pub(crate) fn never_preempt_on_wakeup() {
    #[cfg(target_os = "linux")]
    // SAFETY: sets the calling thread's own policy; `param` outlives the call.
    unsafe {
        let param = libc::sched_param { sched_priority: 0 };
        libc::sched_setscheduler(0, libc::SCHED_BATCH, &param);
    }
}

/// Two workers, or one when this process may run on one cpu only (`taskset`, a cgroup cpuset:
/// `available_parallelism` reads the affinity mask): on one core a second worker only adds
/// wake-ups and work stealing between threads that take turns on the same cpu, which costs the
/// caller's thread its cpu time on every call (measured from Node: bindings-node/bench).
fn worker_threads() -> usize {
    std::thread::available_parallelism().map_or(2, |n| n.get().min(2))
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
        let _blocking = Blocking::enter();
        return Ok(handle.block_on(fut));
    }
    std::thread::scope(|s| s.spawn(|| handle.block_on(fut)).join())
        .map_err(|_| Error::Backend("a blocking rl call panicked".into()))
}

/// What [`run_or_spawn`] did with a future.
#[derive(Debug)]
pub enum Started<T> {
    /// Done at its first poll, on the calling thread; the completion was not made.
    Ready(T),
    /// Continues as a task on the core's runtime; the completion gets its output there.
    Spawned,
}

/// Decides now if it can, else hands the call to the runtime: the one way an async call starts
/// from a foreign caller (Node, Java and Python asyncio bindings). `fut` is polled once on the
/// calling thread, inside the runtime's context (Redis calls arm timers and spawn), with a waker
/// that does nothing: a memory-backend decision or an argument error is ready at once and comes
/// back as [`Started::Ready`], with no task, no thread hop and no completion made. Otherwise the
/// same future (already started: nothing is sent twice) is spawned, and `completion()` is made
/// and called with its output on a runtime thread; the spawned task's first poll registers its
/// own waker, so no wake-up is lost.
///
/// `completion` is made only when needed because making one can cost (a JNI global reference,
/// a promise's thread-safe callback). A binding that must settle its caller even after a panic
/// passes a future wrapped in [`crate::unwind::CatchUnwind`].
pub fn run_or_spawn<F, M, C>(fut: F, completion: M) -> Result<Started<F::Output>>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
    M: FnOnce() -> C,
    C: FnOnce(F::Output) + Send + 'static,
{
    let handle = handle()?;
    let mut fut = Box::pin(fut);
    let first = {
        let _in_runtime = handle.enter();
        poll_once(fut.as_mut())
    };
    if let Poll::Ready(out) = first {
        return Ok(Started::Ready(out));
    }
    let complete = completion();
    handle.spawn(async move { complete(fut.await) });
    Ok(Started::Spawned)
}

/// Runs `fut` to completion from synchronous code, the blocking facade's twin of
/// [`run_or_spawn`]: when `waits` is false (a backend that never waits: memory) it is polled once
/// right here, outside any runtime, so such calls never start the runtime's threads; otherwise,
/// or should it not be ready after all, it goes to [`block_on`].
pub fn run_or_block<F>(fut: F, waits: bool) -> Result<F::Output>
where
    F: Future + Send,
    F::Output: Send,
{
    let mut fut = std::pin::pin!(fut);
    if !waits {
        if let Poll::Ready(out) = poll_once(fut.as_mut()) {
            return Ok(out);
        }
    }
    block_on(fut)
}

/// Runs `fut` to completion from synchronous code, like [`block_on`], for a caller that must do
/// something before it blocks (Python releases its GIL, which costs little alone but, with
/// other threads wanting it, can cost the caller a switch interval to take back). `fut` is
/// polled once right here, inside the runtime's context, as a blocking caller but stopping short
/// of blocking I/O ([`may_block`]): a call decided in place (a lease, the denial cache) returns
/// without `wait` being called. Otherwise `wait` gets the rest (the same future, already
/// started) to run as it must: it calls it, e.g. with the GIL released.
pub fn run_here_or_block<F, W>(fut: F, wait: W) -> Result<F::Output>
where
    F: Future + Send,
    F::Output: Send,
    W: FnOnce(Box<dyn FnOnce() -> Result<F::Output> + Send + '_>) -> Result<F::Output>,
{
    let mut fut = std::pin::pin!(fut);
    if Handle::try_current().is_err() {
        let handle = handle()?;
        let first = {
            let _in_runtime = handle.enter();
            let _blocking = Blocking::enter();
            let _trying = Trying::enter();
            poll_once(fut.as_mut())
        };
        if let Poll::Ready(out) = first {
            return Ok(out);
        }
    }
    wait(Box::new(move || block_on(fut)))
}

/// Marks [`run_here_or_block`]'s first poll until dropped.
struct Trying;

impl Trying {
    fn enter() -> Trying {
        TRYING.with(|t| t.set(true));
        Trying
    }
}

impl Drop for Trying {
    fn drop(&mut self) {
        TRYING.with(|t| t.set(false));
    }
}

/// One poll with a waker that does nothing (whoever polls next registers a real one).
fn poll_once<F: Future + ?Sized>(fut: Pin<&mut F>) -> Poll<F::Output> {
    fut.poll(&mut Context::from_waker(Waker::noop()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_ready_future_is_decided_in_place() {
        let r = run_or_spawn(async { 7 }, || -> fn(u32) { |_| panic!("no completion") });
        assert!(matches!(r, Ok(Started::Ready(7))));
        assert_eq!(run_or_block(async { 8 }, false).unwrap(), 8);
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn the_runtimes_threads_do_not_preempt_on_wakeup() {
        let policy = block_on(async {
            handle()
                .unwrap()
                .spawn(async { unsafe { libc::sched_getscheduler(0) } })
                .await
                .unwrap()
        })
        .unwrap();
        assert_eq!(policy, libc::SCHED_BATCH, "a runtime thread's policy");
        assert_eq!(
            unsafe { libc::sched_getscheduler(0) },
            libc::SCHED_OTHER,
            "the caller's thread keeps its own"
        );
    }

    #[test]
    fn run_here_or_block_calls_wait_only_for_a_call_that_would_block() {
        let mut waited = false;
        let r = run_here_or_block(async { 3 }, |rest| {
            waited = true;
            rest()
        });
        assert_eq!(r.unwrap(), 3);
        assert!(!waited, "a ready call needs no wait");
        let r = run_here_or_block(
            async {
                may_block().await;
                4
            },
            |rest| {
                waited = true;
                assert!(!TRYING.with(|t| t.get()), "the wait may block");
                rest()
            },
        );
        assert_eq!(r.unwrap(), 4);
        assert!(waited, "a call about to block goes through wait");
        assert!(!TRYING.with(|t| t.get()) && !blocking_caller());
    }

    #[test]
    fn a_waiting_future_completes_on_the_runtime() {
        let (tx, rx) = std::sync::mpsc::channel();
        let fut = async {
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
            9
        };
        let r = run_or_spawn(fut, move || move |v| tx.send(v).unwrap()).unwrap();
        assert!(matches!(r, Started::Spawned));
        assert_eq!(
            rx.recv_timeout(std::time::Duration::from_secs(5)).unwrap(),
            9
        );
        let fut = async {
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
            10
        };
        assert_eq!(run_or_block(fut, true).unwrap(), 10);
    }
}
