//! The limiter a binding object holds, shared by the sync and async classes, and how it is let
//! go of (closed, or inherited across `fork()`).

use std::sync::Mutex;

use pyo3::prelude::*;

use crate::errors;
use crate::lifecycle;
use crate::open::Opened;
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
    pub fn new(opened: Opened) -> Slot {
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

    /// `"redis"` or `"memory"`; `"closed"` after close(), as in the Node binding.
    pub fn backend(&self) -> &'static str {
        match (self.is_closed(), self.memory) {
            (true, _) => "closed",
            (false, true) => "memory",
            (false, false) => "redis",
        }
    }

    pub fn is_closed(&self) -> bool {
        self.inner
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .is_none()
    }

    /// Lets go of the limiter (calls in flight finish with their own reference), after the core's
    /// `close` returned its unused leases to Redis (GIL released). Best effort, like a crash: a
    /// refund Redis does not take leaves those leases to age out, so closing never raises for it.
    pub fn close(&self, py: Python<'_>) {
        if let Some(l) = self.take_for_close() {
            let _ = lifecycle::detached(py, || l.close());
        }
    }

    /// Takes the limiter out (later calls raise LimiterClosed); returns it if its leases are this
    /// process's to return (not the memory backend, not inherited across `fork()`), for the
    /// caller to call the core's `close` on, else lets go of it here.
    pub fn take_for_close(&self) -> Option<rl_core::blocking::Limiter> {
        let taken = self.inner.lock().unwrap_or_else(|p| p.into_inner()).take();
        match taken {
            Some(l) if !self.memory && lifecycle::generation() == self.generation => Some(l),
            other => {
                self.release(other);
                None
            }
        }
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
