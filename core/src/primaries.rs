//! Which server is primary for which hash slots, and when a slot's primary is a server that never
//! held slots before: a failover promoted a replica, or a primary restarted and lost its data. Such
//! a primary may lack permits this instance saw admitted, which the failover repair writes back
//! (`fallback.rs`, `lua/repair.lua`).
//!
//! A server is known by its run id (`INFO server`), which is new with every process. Standalone
//! and Sentinel have one primary for every slot; on Cluster each slot range has its own (from
//! `CLUSTER SLOTS`), so a failover of one shard repairs only the keys in its slots. A slot that
//! migrates to another existing primary is no change: `MIGRATE` moves keys whole.

use std::collections::HashSet;

/// Redis Cluster's hash slots; a single server holds all of them.
pub(crate) const SLOTS: u16 = 16384;

/// Seen run ids kept at most; beyond it the set restarts from the current primaries.
const MAX_SEEN: usize = 4096;

/// Slots `first..=last` are served by the server with `run_id`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Primary {
    pub first: u16,
    pub last: u16,
    pub run_id: String,
}

impl Primary {
    pub(crate) fn everything(run_id: String) -> Self {
        Primary { first: 0, last: SLOTS - 1, run_id }
    }

    fn holds(&self, slot: u16) -> bool {
        (self.first..=self.last).contains(&slot)
    }
}

/// Run ids ever seen as primary, and the slot ranges whose new primary still needs a repair.
#[derive(Default)]
pub(crate) struct Primaries {
    seen: HashSet<String>,
    pending: Vec<Primary>,
}

impl Primaries {
    /// Takes the current map; returns how many servers are new primaries (0 on the first look,
    /// which has nothing to compare with). A map may be partial (a node that did not answer is
    /// left out); what it shows is still compared.
    pub(crate) fn observe(&mut self, now: &[Primary]) -> usize {
        let first_look = self.seen.is_empty();
        let mut new: Vec<&str> = Vec::new();
        for p in now {
            if !self.seen.contains(&p.run_id) {
                if !first_look {
                    // Newest first, so a slot that changed twice repairs under its latest primary.
                    self.pending.insert(0, p.clone());
                }
                if !new.contains(&p.run_id.as_str()) {
                    new.push(&p.run_id);
                }
            }
        }
        let count = if first_look { 0 } else { new.len() };
        if self.seen.len() + new.len() > MAX_SEEN {
            self.seen.clear();
        }
        self.seen.extend(now.iter().map(|p| p.run_id.clone()));
        count
    }

    #[cfg(test)]
    fn epoch(&self, slot: u16) -> Option<&str> {
        epoch_in(&self.pending, slot)
    }

    pub(crate) fn pending(&self) -> Vec<Primary> {
        self.pending.clone()
    }

    /// Forgets the repairs in `done` (a snapshot taken before they ran), keeping any newer one.
    pub(crate) fn repaired(&mut self, done: &[Primary]) {
        self.pending.retain(|p| !done.contains(p));
    }
}

/// The epoch (the new primary's run id) to repair `slot` under, if its primary changed, in a
/// snapshot of `Primaries::pending`.
pub(crate) fn epoch_in(pending: &[Primary], slot: u16) -> Option<&str> {
    pending.iter().find(|p| p.holds(slot)).map(|p| p.run_id.as_str())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(first: u16, last: u16, id: &str) -> Primary {
        Primary { first, last, run_id: id.into() }
    }

    #[test]
    fn the_first_look_only_learns() {
        let mut m = Primaries::default();
        assert_eq!(m.observe(&[Primary::everything("a".into())]), 0);
        assert_eq!(m.epoch(0), None);
        assert_eq!(m.observe(&[Primary::everything("a".into())]), 0);
    }

    #[test]
    fn a_new_single_primary_repairs_every_slot() {
        let mut m = Primaries::default();
        m.observe(&[Primary::everything("a".into())]);
        assert_eq!(m.observe(&[Primary::everything("b".into())]), 1);
        assert_eq!((m.epoch(0), m.epoch(SLOTS - 1)), (Some("b"), Some("b")));
        let done = m.pending();
        m.repaired(&done);
        assert_eq!(m.epoch(0), None);
        // Going back to an old run id is not a new primary (run ids are per process anyway).
        assert_eq!(m.observe(&[Primary::everything("a".into())]), 0);
    }

    #[test]
    fn a_cluster_failover_repairs_only_that_shards_slots() {
        let mut m = Primaries::default();
        m.observe(&[p(0, 5460, "a"), p(5461, 10922, "b"), p(10923, 16383, "c")]);
        // "b" is down: its range is missing from the map for a while. Nothing new.
        assert_eq!(m.observe(&[p(0, 5460, "a"), p(10923, 16383, "c")]), 0);
        // Its replica "r" took over.
        assert_eq!(m.observe(&[p(0, 5460, "a"), p(5461, 10922, "r"), p(10923, 16383, "c")]), 1);
        assert_eq!((m.epoch(0), m.epoch(5461), m.epoch(10922), m.epoch(10923)), (None, Some("r"), Some("r"), None));
    }

    #[test]
    fn a_slot_migration_between_primaries_is_no_change() {
        let mut m = Primaries::default();
        m.observe(&[p(0, 5460, "a"), p(5461, 16383, "b")]);
        assert_eq!(m.observe(&[p(0, 5459, "a"), p(5460, 5460, "b"), p(5461, 16383, "b")]), 0);
        assert_eq!(m.epoch(5460), None);
    }

    #[test]
    fn a_repair_started_before_a_newer_failover_keeps_the_newer_one() {
        let mut m = Primaries::default();
        m.observe(&[Primary::everything("a".into())]);
        m.observe(&[Primary::everything("b".into())]);
        let snapshot = m.pending();
        m.observe(&[Primary::everything("c".into())]);
        assert_eq!(m.epoch(7), Some("c"));
        m.repaired(&snapshot);
        assert_eq!(m.epoch(7), Some("c"));
        assert_eq!(epoch_in(&m.pending(), 7), Some("c"));
    }
}
