//! Coalescing: while one script call for a key is in flight, further requests for that key from
//! this process wait, and go together in the next call — one EVALSHA decides them all, in order.
//! A lone request goes out at once (no added latency); under concurrency on a hot key, Redis does
//! one call per round trip instead of one per request, which is what lets one key take far more
//! decisions per second than one-script-call-per-request can. Between two batches the sender
//! yields once (see `drive` in `redis.rs`), so that callers the last reply answered and who ask
//! again at once ride the next batch rather than a lone call of their own a round trip later:
//! closed-loop callers then share one call per round trip (`tests/batching.rs`).
//!
//! The queue per key is bounded, and every waiter is bounded by the request timeout. The next call
//! for a key goes out only once the one in flight answered or ran out of time, even when its
//! caller gave up on it (see `redis.rs`), and a waiter whose caller gave up (timed out, or was
//! decided locally) is dropped before a batch goes out: after a freeze, Redis does not decide
//! requests whose callers were already told something else, beyond the call that was on the wire.
//!
//! The queues are generic over the request kind ([`Queued`]): plain requests queue per window
//! key, composite calls per slot (`composite_batch.rs`), with the same bounds and hand-on.

use std::collections::HashMap;
use std::sync::Mutex;

use tokio::sync::oneshot;

use super::attempts::Sent;
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
    /// The caller's token, the same on its retry (0: none, a peek); see `attempts.rs`.
    pub token: u64,
    /// On a retry: the failed call the request was in, and its place there.
    pub retry: Option<Sent>,
}

/// What a queued request is, to the queue: how much of a script call it takes. Plain requests
/// and composite ones (`composite_batch.rs`) queue the same way; only their bounds differ.
pub(crate) trait Queued: Send + Sync + 'static {
    /// What one request gets back.
    type Out: Send + 'static;
    /// Most requests one script call decides.
    const MAX_BATCH: usize;
    /// Most work (see [`Queued::weight`]) one script call does: a script call blocks Redis for
    /// as long as it runs, so a batch is bounded by what it reads, not only by its requests.
    const MAX_WEIGHT: usize;
    /// This request's share of [`Queued::MAX_WEIGHT`].
    fn weight(&self) -> usize {
        1
    }
}

impl Queued for Op {
    type Out = Verdict;
    const MAX_BATCH: usize = MAX_BATCH;
    const MAX_WEIGHT: usize = MAX_BATCH;
}

pub(crate) struct Waiter<O: Queued = Op> {
    pub op: O,
    pub tx: oneshot::Sender<Result<O::Out>>,
}

/// Most requests one script call decides.
pub(crate) const MAX_BATCH: usize = 128;
/// Most requests that may wait behind an in-flight call for one key.
pub(crate) const MAX_WAITING: usize = 10_000;

pub(crate) enum Turn<O: Queued = Op> {
    /// Nothing in flight for this key: the caller sends its own request now.
    Lead(O),
    /// A call is in flight: the caller's request goes in a later batch.
    Follow(oneshot::Receiver<Result<O::Out>>),
}

/// Keys with a call in flight, each with the requests waiting behind it. Per fork generation: a
/// child must neither wait behind its parent's in-flight calls nor on a lock a parent thread held.
pub(crate) struct Queues<O: Queued = Op> {
    inner: ForkLocal<Mutex<HashMap<Vec<u8>, Waiting<O>>>>,
}

impl<O: Queued> Default for Queues<O> {
    fn default() -> Self {
        Queues {
            inner: ForkLocal::default(),
        }
    }
}

/// The requests behind one key's call in flight.
struct Waiting<O: Queued> {
    list: Vec<Waiter<O>>,
    /// Whether a full queue was already swept of callers that gave up since the last batch: a
    /// flood past the bound costs one sweep per round trip, not one per overflowing call.
    swept: bool,
}

impl<O: Queued> Default for Waiting<O> {
    fn default() -> Self {
        Waiting {
            list: Vec::new(),
            swept: false,
        }
    }
}

impl<O: Queued> Queues<O> {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<Vec<u8>, Waiting<O>>> {
        self.inner.get().lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The caller's turn for `key`; `None` if `MAX_WAITING` live requests already wait for it.
    pub(crate) fn join(&self, key: &[u8], op: O) -> Option<Turn<O>> {
        let mut g = self.lock();
        let Some(waiting) = g.get_mut(key) else {
            g.insert(key.to_vec(), Waiting::default());
            return Some(Turn::Lead(op));
        };
        if waiting.list.len() >= MAX_WAITING && !waiting.swept {
            // Callers that gave up still hold their places until the next batch: count the live ones.
            waiting.list.retain(|w| !w.tx.is_closed());
            waiting.swept = true;
        }
        if waiting.list.len() >= MAX_WAITING {
            return None;
        }
        let (tx, rx) = oneshot::channel();
        waiting.list.push(Waiter { op, tx });
        Some(Turn::Follow(rx))
    }

    /// The next batch for `key` (in arrival order, at most `O::MAX_BATCH` requests and
    /// `O::MAX_WEIGHT` work, and never empty), without the waiters whose callers gave up, or
    /// `None` after marking the key idle because nothing (live) waits.
    pub(crate) fn next_batch(&self, key: &[u8]) -> Option<Vec<Waiter<O>>> {
        let mut g = self.lock();
        let waiting = g.get_mut(key)?;
        waiting.list.retain(|w| !w.tx.is_closed());
        waiting.swept = false;
        if waiting.list.is_empty() {
            g.remove(key);
            return None;
        }
        let (mut n, mut weight) = (0, 0);
        for w in waiting.list.iter().take(O::MAX_BATCH) {
            weight += w.op.weight();
            if n > 0 && weight > O::MAX_WEIGHT {
                break;
            }
            n += 1;
        }
        Some(waiting.list.drain(..n).collect())
    }

    /// Everything waiting for `key`, which becomes idle: the call in front of them got no answer.
    pub(crate) fn clear(&self, key: &[u8]) -> Vec<Waiter<O>> {
        self.lock().remove(key).map(|w| w.list).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const OP: Op = Op {
        consume: true,
        window_ms: 1000,
        limit: 10,
        cost: 1,
        token: 0,
        retry: None,
    };

    fn follow(q: &Queues) -> oneshot::Receiver<Result<Verdict>> {
        match q.join(b"k", OP) {
            Some(Turn::Follow(rx)) => rx,
            _ => panic!("expected a place behind the call in flight"),
        }
    }

    #[test]
    fn a_waiter_whose_caller_gave_up_is_not_sent() {
        let q = Queues::default();
        assert!(matches!(q.join(b"k", OP), Some(Turn::Lead(_))));
        let (gone, kept) = (follow(&q), follow(&q));
        drop(gone);
        assert_eq!(q.next_batch(b"k").map(|b| b.len()), Some(1));
        drop(kept);
        assert!(
            q.next_batch(b"k").is_none(),
            "nothing live waits: the key is idle"
        );
        assert!(matches!(q.join(b"k", OP), Some(Turn::Lead(_))));
    }

    /// A request of some weight, bounded at 3 per batch and 10 weight.
    struct Heavy(usize);

    impl Queued for Heavy {
        type Out = ();
        const MAX_BATCH: usize = 3;
        const MAX_WEIGHT: usize = 10;
        fn weight(&self) -> usize {
            self.0
        }
    }

    #[test]
    fn a_batch_is_bounded_by_requests_and_by_weight_in_arrival_order() {
        let q = Queues::<Heavy>::default();
        assert!(matches!(q.join(b"s", Heavy(1)), Some(Turn::Lead(_))));
        let _rx: Vec<_> = [4, 5, 2, 12, 1, 1, 1, 1]
            .map(|w| match q.join(b"s", Heavy(w)) {
                Some(Turn::Follow(rx)) => rx,
                _ => panic!("expected a place"),
            })
            .into();
        let weights = |b: Vec<Waiter<Heavy>>| b.iter().map(|w| w.op.0).collect::<Vec<_>>();
        assert_eq!(q.next_batch(b"s").map(weights), Some(vec![4, 5]));
        // Stops before the request that would pass the weight; never reorders.
        assert_eq!(q.next_batch(b"s").map(weights), Some(vec![2]));
        // One request heavier than the bound still goes, alone.
        assert_eq!(q.next_batch(b"s").map(weights), Some(vec![12]));
        assert_eq!(q.next_batch(b"s").map(weights), Some(vec![1, 1, 1]));
        assert_eq!(q.next_batch(b"s").map(weights), Some(vec![1]));
    }

    #[test]
    fn a_full_queue_counts_live_waiters_only() {
        let q = Queues::default();
        assert!(matches!(q.join(b"k", OP), Some(Turn::Lead(_))));
        let mut live: Vec<_> = (0..MAX_WAITING).map(|_| follow(&q)).collect();
        live.pop();
        let _last = follow(&q);
        assert!(q.join(b"k", OP).is_none(), "full of live waiters");
        assert_eq!(q.next_batch(b"k").map(|b| b.len()), Some(MAX_BATCH));
        let _next = follow(&q);
    }
}
