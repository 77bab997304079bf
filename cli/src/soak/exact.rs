//! Exactness, checked as the soak runs: every admitted decision's own time (Redis TIME, or the
//! local clock in `local` mode) per key, and the sum admitted in the window ending at each one.
//! Decisions arrive out of order from many tasks, so each key's are held back a few seconds
//! (`finalize`'s horizon) and checked in time order; memory stays at about one window per key.
//! Only windows over the limit are kept: whether each is inside a fault period is decided at the
//! end, when every fault's period is known.

use std::collections::{HashMap, VecDeque};

/// One admitted decision: which limiter group, which key, when (ms), how many permits.
#[derive(Debug, Clone, Copy)]
pub struct Admit {
    pub group: usize,
    pub key: u32,
    pub at_ms: u64,
    pub cost: u64,
}

/// A window `(at_ms - window, at_ms]` of one key that held more than the limit.
#[derive(Debug, Clone, Copy)]
pub struct Over {
    pub group: usize,
    pub key: u32,
    pub at_ms: u64,
    pub sum: u64,
}

#[derive(Default)]
struct Key {
    pending: Vec<(u64, u64)>,
    recent: VecDeque<(u64, u64)>,
    sum: u64,
    last_ms: u64,
}

pub struct Checker {
    limit: u64,
    window_ms: u64,
    keys: HashMap<(usize, u32), Key>,
    pub windows: u64,
    /// Decisions older than a window already checked for their key (kept, reported).
    pub late: u64,
    pub over: Vec<Over>,
    /// The most admitted in any window, per group.
    pub most: Vec<u64>,
}

impl Checker {
    pub fn new(groups: usize, limit: u64, window_ms: u64) -> Self {
        Checker {
            limit,
            window_ms,
            keys: HashMap::new(),
            windows: 0,
            late: 0,
            over: Vec::new(),
            most: vec![0; groups],
        }
    }

    pub fn push(&mut self, a: Admit) {
        let k = self.keys.entry((a.group, a.key)).or_default();
        k.pending.push((a.at_ms, a.cost));
    }

    /// Checks every held decision at or before `horizon_ms`, in time order per key.
    pub fn finalize(&mut self, horizon_ms: u64) {
        let (limit, window) = (self.limit, self.window_ms);
        for (&(group, key), k) in self.keys.iter_mut() {
            if k.pending.is_empty() {
                continue;
            }
            k.pending.sort_unstable();
            let n = k.pending.partition_point(|p| p.0 <= horizon_ms);
            for (t, cost) in k.pending.drain(..n) {
                if t < k.last_ms {
                    self.late += 1;
                }
                while let Some(&(t0, c0)) = k.recent.front() {
                    if t0 + window > t {
                        break;
                    }
                    k.sum -= c0;
                    k.recent.pop_front();
                }
                k.sum += cost;
                k.recent.push_back((t, cost));
                k.last_ms = k.last_ms.max(t);
                self.windows += 1;
                self.most[group] = self.most[group].max(k.sum);
                if k.sum > limit {
                    self.over.push(Over {
                        group,
                        key,
                        at_ms: t,
                        sum: k.sum,
                    });
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn out_of_order_decisions_are_checked_in_time_order() {
        let mut c = Checker::new(1, 3, 1000);
        for (t, cost) in [(1500, 1), (1000, 2), (1999, 1), (2000, 1)] {
            c.push(Admit {
                group: 0,
                key: 7,
                at_ms: t,
                cost,
            });
        }
        c.finalize(1999);
        assert_eq!((c.windows, c.most[0]), (3, 4));
        assert_eq!(c.over.len(), 1);
        assert_eq!((c.over[0].at_ms, c.over[0].sum), (1999, 4));
        c.finalize(u64::MAX);
        // (1000, 2000] holds 1500, 1999 and 2000: 3, within the limit.
        assert_eq!((c.windows, c.over.len(), c.late), (4, 1, 0));
    }
}
