//! Per-key state spread over a fixed set of locks by the key's hash, so threads deciding on
//! different keys rarely contend: the memory backend's windows and the local ledger's records.

use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};
use std::sync::{Mutex, MutexGuard};

pub(crate) const SHARDS: usize = 16;

pub(crate) struct Shards<S>([Mutex<S>; SHARDS]);

impl<S: Default> Default for Shards<S> {
    fn default() -> Self {
        Shards::new(S::default)
    }
}

impl<S> Shards<S> {
    pub(crate) fn new(mut make: impl FnMut() -> S) -> Self {
        Shards(std::array::from_fn(|_| Mutex::new(make())))
    }

    /// The shard that holds `key`.
    pub(crate) fn get(&self, key: &[u8]) -> MutexGuard<'_, S> {
        let mut h = DefaultHasher::new();
        key.hash(&mut h);
        lock(&self.0[h.finish() as usize % SHARDS])
    }

    /// Every shard, one at a time.
    pub(crate) fn iter(&self) -> impl Iterator<Item = MutexGuard<'_, S>> {
        self.0.iter().map(lock)
    }
}

/// A panic while holding a shard cannot leave its state half-updated in a way that matters more
/// than refusing service forever, so a poisoned lock is taken over.
fn lock<S>(m: &Mutex<S>) -> MutexGuard<'_, S> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}
