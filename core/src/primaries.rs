//! Which server is primary for which hash slots, and when a slot's primary is a server that never
//! held slots before: a failover promoted a replica, or a primary restarted and lost its data. Such
//! a primary may lack permits this instance saw admitted, which the failover repair writes back
//! (`redis_path.rs`, `lua/repair.lua`).
//!
//! A server is known by its run id (`INFO server`), which is new with every process. Standalone
//! and Sentinel have one primary for every slot; on Cluster each slot range has its own (from
//! `CLUSTER SLOTS`), so a failover of one shard repairs only the keys in its slots.
//!
//! "New" means: not holding any slot at the last look. So a replica promoted over its master is
//! new, and so is a former primary that comes back after a failover (it was a replica meanwhile,
//! and the promotion may again have lost writes), while a slot that migrates to another current
//! primary is no change (`MIGRATE` moves keys whole). A master missing from one look (it did not
//! answer) keeps its slots until a look shows someone else holding them.

use std::collections::HashSet;

/// Redis Cluster's hash slots; a single server holds all of them.
pub(crate) const SLOTS: u16 = 16384;

/// Slots `first..=last` are served by the server with `run_id`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Primary {
    pub first: u16,
    pub last: u16,
    pub run_id: String,
}

impl Primary {
    pub(crate) fn everything(run_id: String) -> Self {
        Primary {
            first: 0,
            last: SLOTS - 1,
            run_id,
        }
    }

    fn holds(&self, slot: u16) -> bool {
        (self.first..=self.last).contains(&slot)
    }
}

/// Who held which slots at the last look, and the slot ranges whose new primary still needs a
/// repair.
#[derive(Default)]
pub(crate) struct Primaries {
    holders: Vec<Primary>,
    pending: Vec<Primary>,
    /// A look was refused (no `INFO` permission) and said so in the log.
    refused: bool,
}

impl Primaries {
    /// Takes the current map; returns how many servers are new primaries (0 on the first look,
    /// which has nothing to compare with). A map may be partial (a node that did not answer is
    /// left out); what it shows is still compared.
    pub(crate) fn observe(&mut self, now: &[Primary]) -> usize {
        let first_look = self.holders.is_empty();
        let holding: HashSet<&str> = self.holders.iter().map(|p| p.run_id.as_str()).collect();
        let mut new: Vec<&str> = Vec::new();
        for p in now {
            if !holding.contains(p.run_id.as_str()) {
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
        // The slots this look did not show stay with their last known holder.
        let mut holders = now.to_vec();
        for old in &self.holders {
            holders.extend(uncovered(old, now));
        }
        self.holders = holders;
        count
    }

    /// A look was refused: no new primary is assumed. True the first time, to log it once.
    pub(crate) fn cannot_tell(&mut self) -> bool {
        !std::mem::replace(&mut self.refused, true)
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

/// The parts of `range` that no range in `cover` overlaps.
fn uncovered(range: &Primary, cover: &[Primary]) -> Vec<Primary> {
    let mut pieces = vec![(range.first, range.last)];
    for c in cover {
        pieces = pieces
            .into_iter()
            .flat_map(|(first, last)| {
                if c.last < first || c.first > last {
                    return vec![(first, last)];
                }
                let mut left = Vec::new();
                if c.first > first {
                    left.push((first, c.first - 1));
                }
                if c.last < last {
                    left.push((c.last + 1, last));
                }
                left
            })
            .collect();
    }
    pieces
        .into_iter()
        .map(|(first, last)| Primary {
            first,
            last,
            run_id: range.run_id.clone(),
        })
        .collect()
}

/// The epoch (the new primary's run id) to repair `slot` under, if its primary changed, in a
/// snapshot of `Primaries::pending`.
pub(crate) fn epoch_in(pending: &[Primary], slot: u16) -> Option<&str> {
    pending
        .iter()
        .find(|p| p.holds(slot))
        .map(|p| p.run_id.as_str())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(first: u16, last: u16, id: &str) -> Primary {
        Primary {
            first,
            last,
            run_id: id.into(),
        }
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
        assert_eq!(
            m.observe(&[Primary::everything("b".into())]),
            0,
            "the same primary again"
        );
        // A failback: "a" was a replica meanwhile, and its promotion may have lost writes too.
        assert_eq!(m.observe(&[Primary::everything("a".into())]), 1);
        assert_eq!(m.epoch(0), Some("a"));
    }

    #[test]
    fn a_cluster_failover_repairs_only_that_shards_slots() {
        let mut m = Primaries::default();
        m.observe(&[p(0, 5460, "a"), p(5461, 10922, "b"), p(10923, 16383, "c")]);
        // "b" is down: its range is missing from the map for a while. Nothing new.
        assert_eq!(m.observe(&[p(0, 5460, "a"), p(10923, 16383, "c")]), 0);
        // Its replica "r" took over.
        assert_eq!(
            m.observe(&[p(0, 5460, "a"), p(5461, 10922, "r"), p(10923, 16383, "c")]),
            1
        );
        assert_eq!(
            (m.epoch(0), m.epoch(5461), m.epoch(10922), m.epoch(10923)),
            (None, Some("r"), Some("r"), None)
        );
    }

    #[test]
    fn a_master_missing_from_a_look_keeps_its_slots() {
        let mut m = Primaries::default();
        m.observe(&[p(0, 8191, "a"), p(8192, 16383, "b")]);
        assert_eq!(m.observe(&[p(0, 8191, "a")]), 0, "b did not answer");
        assert_eq!(m.observe(&[p(0, 8191, "a")]), 0);
        assert_eq!(
            m.observe(&[p(0, 8191, "a"), p(8192, 16383, "b")]),
            0,
            "b answers again: no change"
        );
        assert_eq!(m.epoch(9000), None);
        // "b"'s slots go to its replica, and later back to "b" (which was a replica meanwhile).
        assert_eq!(m.observe(&[p(0, 8191, "a"), p(8192, 16383, "r")]), 1);
        assert_eq!(m.observe(&[p(0, 8191, "a"), p(8192, 16383, "b")]), 1);
        assert_eq!(m.epoch(9000), Some("b"));
    }

    #[test]
    fn uncovered_parts_are_exact() {
        let r = p(10, 20, "x");
        let ranges = |v: Vec<Primary>| v.into_iter().map(|p| (p.first, p.last)).collect::<Vec<_>>();
        assert_eq!(ranges(uncovered(&r, &[])), vec![(10, 20)]);
        assert_eq!(
            ranges(uncovered(&r, &[p(0, 9, "y"), p(21, 30, "y")])),
            vec![(10, 20)]
        );
        assert_eq!(
            ranges(uncovered(&r, &[p(12, 14, "y")])),
            vec![(10, 11), (15, 20)]
        );
        assert_eq!(
            ranges(uncovered(&r, &[p(0, 10, "y"), p(20, 40, "y")])),
            vec![(11, 19)]
        );
        assert_eq!(ranges(uncovered(&r, &[p(5, 25, "y")])), vec![]);
    }

    #[test]
    fn a_slot_migration_between_primaries_is_no_change() {
        let mut m = Primaries::default();
        m.observe(&[p(0, 5460, "a"), p(5461, 16383, "b")]);
        assert_eq!(
            m.observe(&[p(0, 5459, "a"), p(5460, 5460, "b"), p(5461, 16383, "b")]),
            0
        );
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
