//! Coalescing: while one script call for a key is in flight, further requests for that key from
//! this process wait, and go together in the next call — one EVALSHA decides them all, in order.
//! A lone request goes out at once (no added latency); under concurrency on a hot key, Redis does
//! one call per round trip instead of one per request, which is what lets one key take far more
//! decisions per second than one-script-call-per-request can.
//!
//! The queue per key is bounded, and every waiter is bounded by the request timeout. The next call
//! for a key goes out only once the one in flight answered or ran out of time, even when its
//! caller gave up on it (see `redis.rs`), and a waiter whose caller gave up (timed out, or was
//! decided locally) is dropped before a batch goes out: after a freeze, Redis does not decide
//! requests whose callers were already told something else, beyond the call that was on the wire.

use std::collections::HashMap;
use std::sync::Mutex;

use tokio::sync::oneshot;

use super::Verdict;
use crate::error::Result;
use crate::fork::ForkLocal;

/// One request's arguments, owned so it can wait in a queue.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Op {
    pub consume: bool,
    pub window_ms: u64,
    pub limit: u64,
    pub cost: u64,
}

pub(crate) struct Waiter {
    pub op: Op,
    pub tx: oneshot::Sender<Result<Verdict>>,
}

/// Most requests one script call decides.
pub(crate) const MAX_BATCH: usize = 128;
/// Most requests that may wait behind an in-flight call for one key.
pub(crate) const MAX_WAITING: usize = 10_000;

pub(crate) enum Turn {
    /// Nothing in flight for this key: the caller sends its own request now.
    Lead(Op),
    /// A call is in flight: the caller's request goes in a later batch.
    Follow(oneshot::Receiver<Result<Verdict>>),
}

/// Keys with a call in flight, each with the requests waiting behind it. Per fork generation: a
/// child must neither wait behind its parent's in-flight calls nor on a lock a parent thread held.
#[derive(Default)]
pub(crate) struct Queues {
    inner: ForkLocal<Mutex<HashMap<Vec<u8>, Vec<Waiter>>>>,
}

impl Queues {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<Vec<u8>, Vec<Waiter>>> {
        self.inner.get().lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The caller's turn for `key`; `None` if `MAX_WAITING` live requests already wait for it.
    pub(crate) fn join(&self, key: &[u8], op: Op) -> Option<Turn> {
        let mut g = self.lock();
        let Some(waiting) = g.get_mut(key) else {
            g.insert(key.to_vec(), Vec::new());
            return Some(Turn::Lead(op));
        };
        if waiting.len() >= MAX_WAITING {
            // Callers that gave up still hold their places until the next batch: count the live ones.
            waiting.retain(|w| !w.tx.is_closed());
            if waiting.len() >= MAX_WAITING {
                return None;
            }
        }
        let (tx, rx) = oneshot::channel();
        waiting.push(Waiter { op, tx });
        Some(Turn::Follow(rx))
    }

    /// The next batch for `key`, without the waiters whose callers gave up, or `None` after
    /// marking the key idle because nothing (live) waits.
    pub(crate) fn next_batch(&self, key: &[u8]) -> Option<Vec<Waiter>> {
        let mut g = self.lock();
        let waiting = g.get_mut(key)?;
        waiting.retain(|w| !w.tx.is_closed());
        if waiting.is_empty() {
            g.remove(key);
            return None;
        }
        let n = waiting.len().min(MAX_BATCH);
        Some(waiting.drain(..n).collect())
    }

    /// Everything waiting for `key`, which becomes idle: the call in front of them got no answer.
    pub(crate) fn clear(&self, key: &[u8]) -> Vec<Waiter> {
        self.lock().remove(key).unwrap_or_default()
    }
}
