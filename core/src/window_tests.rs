//! The shared window against an independent oracle: a plain list of the admitted `(ms, permits,
//! tag)` and brute-force counts over (now - window, now]. Its retry time is found by trying every
//! later millisecond, not computed.

use proptest::prelude::*;

use super::*;

/// What the window must hold: every admission, as it was made.
#[derive(Debug, Default)]
struct Oracle {
    events: Vec<(u64, u64, u32)>,
}

impl Oracle {
    fn now(&self, now: u64) -> u64 {
        self.events.iter().map(|e| e.0).fold(now, u64::max)
    }

    fn used(&self, at: u64, window: u64) -> u64 {
        self.events
            .iter()
            .filter(|e| e.0 + window > at)
            .map(|e| e.1)
            .sum()
    }

    fn tagged(&self) -> u64 {
        self.events.iter().filter(|e| e.2 != 0).map(|e| e.1).sum()
    }

    fn prune(&mut self, now: u64, window: u64) {
        self.events.retain(|e| e.0 + window > now);
    }

    /// Whether `rule` fits at `at`, with the others' permits counted while in the window.
    fn fits(&self, at: u64, rule: &Rule, share: Share) -> bool {
        let own = self.used(at, rule.window_ms);
        let others = share
            .others
            .filter(|o| o.0 + rule.window_ms > at)
            .map_or(0, |o| o.1);
        own + rule.cost <= share.budget && own + others + rule.cost <= rule.limit
    }

    fn decide(&self, now: u64, rule: &Rule, share: Share) -> Verdict {
        let w = rule.window_ms;
        let allowed = self.fits(now, rule, share);
        let own = self.used(now, w)
            + if allowed && rule.consume {
                rule.cost
            } else {
                0
            };
        let others = share.others.filter(|o| o.0 + w > now).map_or(0, |o| o.1);
        let newest_live = self
            .events
            .iter()
            .map(|e| e.0)
            .filter(|t| t + w > now)
            .max();
        let retry_after_ms = if allowed {
            0
        } else if rule.cost > share.budget || rule.cost > rule.limit {
            w
        } else {
            (1..)
                .find(|d| self.fits(now + d, rule, share))
                .expect("everything leaves")
        };
        Verdict {
            allowed,
            used: own + others.saturating_sub(rule.limit - share.budget),
            retry_after_ms,
            reset_after_ms: if allowed && rule.consume {
                w
            } else {
                newest_live.map_or(0, |t| t + w - now)
            },
            now_ms: now,
        }
    }
}

#[derive(Debug, Clone)]
enum Op {
    /// The clock moves (backwards too: the ledger sees out-of-order reply times).
    Clock(i64),
    Decide {
        rule: Rule,
        budget: u64,
        /// The others' permits, as (how long ago, how many).
        others: Option<(u64, u64)>,
        tag: u32,
    },
    Prune(u64),
    /// Settles the tags up to this one.
    Settle(u32),
}

fn op(max_window: u64) -> impl Strategy<Value = Op> {
    let decide = (
        1..=max_window,
        1u64..20,
        any::<prop::sample::Index>(),
        1u64..20,
    )
        .prop_flat_map(move |(window_ms, limit, budget, cost)| {
            let budget = budget.index(limit as usize + 1) as u64;
            (
                Just((window_ms, limit, budget, 1 + (cost - 1) % limit)),
                any::<bool>(),
                proptest::option::of((0..=2 * window_ms, 0..=limit + 2)),
                0u32..3,
            )
        })
        .prop_map(
            |((window_ms, limit, budget, cost), consume, others, tag)| Op::Decide {
                rule: Rule {
                    window_ms,
                    limit,
                    cost,
                    consume,
                },
                budget,
                others,
                tag,
            },
        );
    prop_oneof![
        4 => decide,
        3 => prop_oneof![Just(0i64), -3i64..0, 0i64..=max_window as i64].prop_map(Op::Clock),
        1 => (1..=max_window).prop_map(Op::Prune),
        1 => (0u32..3).prop_map(Op::Settle),
    ]
}

/// Runs `ops` on a window bounded to `max_buckets` and on the oracle; `check` compares them after
/// every step and `decided` every decision.
fn run(
    ops: &[Op],
    max_buckets: usize,
    mut decided: impl FnMut(&Verdict, &Verdict) -> Result<(), TestCaseError>,
    mut check: impl FnMut(&Window<u32>, &Oracle, u64) -> Result<(), TestCaseError>,
) -> Result<(), TestCaseError> {
    let (mut w, mut o) = (Window::<u32>::default(), Oracle::default());
    let mut clock = 1000u64;
    for op in ops {
        let now = w.now(clock);
        prop_assert_eq!(now, o.now(clock), "time never runs backwards for a window");
        match *op {
            Op::Clock(d) => clock = clock.saturating_add_signed(d),
            Op::Decide {
                rule,
                budget,
                others,
                tag,
            } => {
                let share = Share {
                    budget,
                    others: others.map(|(ago, n)| (now.saturating_sub(ago), n)),
                    seen: None,
                };
                let got = w.decide(now, &rule, share);
                decided(&got, &o.decide(now, &rule, share))?;
                if got.allowed && rule.consume {
                    w.admit(now, rule.cost, tag, max_buckets);
                    o.events.push((now, rule.cost, tag));
                }
            }
            Op::Prune(window) => {
                w.prune(now, window);
                o.prune(now, window);
            }
            Op::Settle(upto) => {
                w.settle(|t| t <= upto);
                for e in o.events.iter_mut().filter(|e| e.2 <= upto) {
                    e.2 = 0;
                }
            }
        }
        prop_assert!(w.consistent(), "kept counts match the buckets: {:?}", w);
        check(&w, &o, w.now(clock))?;
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1024))]

    /// Unbounded (as the memory backend is): every verdict is the brute-force one, and the window
    /// holds exactly the admitted permits, tagged as admitted (or settled).
    #[test]
    fn window_decisions_match_a_brute_force_count(
        ops in proptest::collection::vec(op(40), 1..80),
    ) {
        run(
            &ops,
            usize::MAX,
            |got, want| {
                prop_assert_eq!(got, want);
                Ok(())
            },
            |w, o, now| {
                for window in [1, 7, 40, 200] {
                    prop_assert_eq!(w.used(now, window), o.used(now, window));
                }
                let total: u64 = o.events.iter().map(|e| e.1).sum();
                prop_assert_eq!((w.stored(), w.tagged_permits()), (total, o.tagged()));
                Ok(())
            },
        )?;
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// Bounded (as the ledger is, at 4096): never more buckets than the bound, and merging only
    /// ever counts a permit longer, never shorter, so every admission is one the brute-force count
    /// admits too, and a flush never misses a tagged (local) permit.
    #[test]
    fn bounded_windows_only_count_permits_longer(
        ops in proptest::collection::vec(op(40), 1..120),
        max_buckets in 1usize..6,
    ) {
        run(
            &ops,
            max_buckets,
            |got, want| {
                prop_assert!(!got.allowed || want.allowed, "{:?} admitted, oracle {:?}", got, want);
                if got.allowed == want.allowed {
                    prop_assert!(got.used >= want.used, "{:?} counts less than {:?}", got, want);
                }
                Ok(())
            },
            |w, o, now| {
                prop_assert!(w.buckets().count() <= max_buckets);
                for window in [1, 7, 40, 200] {
                    prop_assert!(w.used(now, window) >= o.used(now, window));
                }
                prop_assert!(w.tagged_permits() >= o.tagged());
                Ok(())
            },
        )?;
    }
}
