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
        lock(&self.0[index(key)])
    }

    /// The shards that hold `keys`, each once, locked in ascending order, and for each key the
    /// position of its shard among them. Every other caller holds one shard at a time (or takes
    /// them in this order, one after another), so taking several in one fixed order never
    /// deadlocks: the composite calls use it to decide keys on several shards atomically.
    pub(crate) fn get_many(&self, keys: &[&[u8]]) -> (Vec<MutexGuard<'_, S>>, Vec<usize>) {
        let of: Vec<usize> = keys.iter().map(|k| index(k)).collect();
        let mut order = of.clone();
        order.sort_unstable();
        order.dedup();
        let guards = order.iter().map(|&i| lock(&self.0[i])).collect();
        let at = of
            .iter()
            .map(|i| order.binary_search(i).expect("locked"))
            .collect();
        (guards, at)
    }

    /// Every shard, one at a time.
    pub(crate) fn iter(&self) -> impl Iterator<Item = MutexGuard<'_, S>> {
        self.0.iter().map(lock)
    }
}

fn index(key: &[u8]) -> usize {
    let mut h = DefaultHasher::new();
    key.hash(&mut h);
    h.finish() as usize % SHARDS
}

/// A panic while holding a shard cannot leave its state half-updated in a way that matters more
/// than refusing service forever, so a poisoned lock is taken over.
fn lock<S>(m: &Mutex<S>) -> MutexGuard<'_, S> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}
