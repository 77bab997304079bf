//! Retried admissions counted once. A call whose connection failed mid-reply may have run in
//! Redis: its retry must not consume again. Every native call (`rl1`) is sent with an id, unique
//! per limiter and call, under which the script keeps a short-lived record of which of its
//! requests it admitted (a lone call's in the window's header, a batch's in `<key>:r:<id>`: see
//! the script's `Retries`). When a call fails with a
//! connection-class error, each consuming request in it is remembered here under its caller's
//! token (the same on the caller's retry); the retry, coalesced into whatever batch it joins,
//! names that call id and its place in it, and the script answers it from the record (admitted,
//! not counted again) or, if the first attempt never ran or did not admit it, decides it afresh.
//!
//! Per fork generation: a forked child must not reuse its parent's call ids, or a retry of the
//! child's could be answered from a record of the parent's.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// A call's id: this limiter's random tag, then the call's number (big-endian).
pub(crate) type CallId = [u8; 16];

/// Where a request was sent last: the call's id and its place in the batch (1-based).
pub(crate) type Sent = (CallId, u64);

/// Most failed requests remembered at once: entries whose caller does not retry (its deadline
/// passed) are forgotten wholesale past this.
const MAX_LOST: usize = 10_000;

pub(crate) struct Attempts {
    tag: [u8; 8],
    calls: AtomicU64,
    tokens: AtomicU64,
    lost: Mutex<HashMap<u64, Sent>>,
    /// Whether `lost` may hold anything: the hot path takes no lock while no call failed.
    any_lost: AtomicBool,
    /// When a call last failed, in ms after `born` plus 1 (0: never).
    lost_at: AtomicU64,
    born: Instant,
    /// Retries the script answered from their first attempt's record.
    pub deduplicated: AtomicU64,
}

impl Default for Attempts {
    fn default() -> Self {
        Attempts {
            tag: crate::redis_path::random_u64().to_be_bytes(),
            calls: AtomicU64::new(0),
            tokens: AtomicU64::new(0),
            lost: Mutex::new(HashMap::new()),
            any_lost: AtomicBool::new(false),
            lost_at: AtomicU64::new(0),
            born: Instant::now(),
            deduplicated: AtomicU64::new(0),
        }
    }
}

impl Attempts {
    /// A consuming request's token, kept by its caller across its retry (never 0).
    pub(crate) fn token(&self) -> u64 {
        self.tokens.fetch_add(1, Ordering::Relaxed) + 1
    }

    /// A new call's id.
    pub(crate) fn call_id(&self) -> CallId {
        let n = self.calls.fetch_add(1, Ordering::Relaxed) + 1;
        let mut id = [0; 16];
        id[..8].copy_from_slice(&self.tag);
        id[8..].copy_from_slice(&n.to_be_bytes());
        id
    }

    fn lost(&self) -> std::sync::MutexGuard<'_, HashMap<u64, Sent>> {
        self.lost.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Whether a call failed less than `within` ago, so its requests' retries may still come (a
    /// caller retries within its request timeout, or never: `lost` may keep requests no one
    /// retries, which must not make every later call keep records).
    pub(crate) fn lost_within(&self, within: Duration) -> bool {
        let at = self.lost_at.load(Ordering::Acquire);
        at != 0 && self.born.elapsed().as_millis() as u64 + 1 < at + within.as_millis() as u64
    }

    /// The request with `token` was in call `id` at `place`, which got no answer.
    pub(crate) fn failed(&self, token: u64, sent: Sent) {
        let mut lost = self.lost();
        if lost.len() >= MAX_LOST {
            lost.clear();
        }
        lost.insert(token, sent);
        self.any_lost.store(true, Ordering::Release);
        self.lost_at.store(
            self.born.elapsed().as_millis() as u64 + 1,
            Ordering::Release,
        );
    }

    /// Where the request with `token` was sent before, if that call failed (taken: one retry).
    pub(crate) fn retrying(&self, token: u64) -> Option<Sent> {
        if token == 0 || !self.any_lost.load(Ordering::Acquire) {
            return None;
        }
        let mut lost = self.lost();
        let sent = lost.remove(&token);
        if lost.is_empty() {
            self.any_lost.store(false, Ordering::Release);
        }
        sent
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The '!' on a call's id (the script keeps this instance's header record when the call
    /// replaces it) is sent only shortly after a call failed: never before, and not forever
    /// after because a failed request's caller never retried (its entry stays in `lost`).
    #[test]
    fn records_are_kept_only_shortly_after_a_call_failed() {
        let a = Attempts::default();
        assert!(
            !a.lost_within(Duration::from_secs(3600)),
            "nothing failed yet"
        );
        let token = a.token();
        a.failed(token, (a.call_id(), 1));
        assert!(a.lost_within(Duration::from_secs(3600)));
        std::thread::sleep(Duration::from_millis(30));
        assert!(
            !a.lost_within(Duration::from_millis(10)),
            "failed 30 ms ago"
        );
        assert!(
            a.retrying(token).is_some(),
            "the failed request is still retried"
        );
    }
}
