//! When each simulated instance offers a request. Computed up front so the load is open-loop: a
//! slow answer never delays the next offer, as with real clients that do not wait for each other.

use crate::args::Pattern;

#[derive(Debug, Clone)]
pub struct Plan {
    /// Per instance, ascending offsets in µs from the plan's anchor (see [`Plan::anchor_us`]).
    pub offsets_us: Vec<Vec<u64>>,
    /// The length the rates are computed over.
    pub span_us: u64,
    pattern: Pattern,
    window_ms: u64,
    burst_fraction: f64,
}

impl Plan {
    pub fn total(&self) -> u64 {
        self.offsets_us.iter().map(|v| v.len() as u64).sum()
    }

    /// Where offset 0 falls, in µs after the run start: the run start itself for a steady load; for
    /// the boundary pattern, the start of the first burst, placed so that its middle is a window
    /// boundary of the deciding clock and it starts at least `lead_us` after the run start.
    /// Separate from planning so a large plan is built before the clock is read.
    pub fn anchor_us(&self, server_start_us: u64, lead_us: u64) -> u64 {
        match self.pattern {
            Pattern::Steady => 0,
            Pattern::Boundary => {
                let w_us = self.window_ms * 1000;
                let half = burst_half_us(self.window_ms, self.burst_fraction);
                let b = (server_start_us + lead_us + half).div_ceil(w_us) * w_us;
                b - server_start_us - half
            }
        }
    }
}

pub struct Load {
    pub pattern: Pattern,
    pub instances: usize,
    /// Per instance, per second.
    pub rate: f64,
    pub duration_ms: u64,
    pub window_ms: u64,
    /// Boundary pattern: the share of a window each half-burst fills, in (0, 0.5]. The offered
    /// rate inside a burst is the steady rate divided by it.
    pub burst_fraction: f64,
}

pub fn plan(load: &Load) -> Plan {
    let (offsets_us, span_us) = match load.pattern {
        Pattern::Steady => steady(load),
        Pattern::Boundary => boundary(load),
    };
    Plan {
        offsets_us,
        span_us,
        pattern: load.pattern,
        window_ms: load.window_ms,
        burst_fraction: load.burst_fraction,
    }
}

fn burst_half_us(window_ms: u64, fraction: f64) -> u64 {
    (window_ms as f64 * 1000.0 * fraction) as u64
}

/// Instance `i` is phase-shifted by i/N of a period, so together they offer an even stream rather
/// than N requests at once every period.
fn steady(l: &Load) -> (Vec<Vec<u64>>, u64) {
    let d_us = l.duration_ms as f64 * 1000.0;
    let period = 1e6 / l.rate;
    let offsets = (0..l.instances)
        .map(|i| {
            let phase = period * i as f64 / l.instances as f64;
            (0..)
                .map(|k| phase + k as f64 * period)
                .take_while(|&t| t < d_us)
                .map(|t| t as u64)
                .collect()
        })
        .collect();
    (offsets, l.duration_ms * 1000)
}

/// One burst per pair of windows, around the boundary between them: one window's worth of the
/// steady volume in [b - f*W, b) and another in [b, b + f*W). The other boundary of the pair gets
/// nothing, so the volume per pair of windows is the steady pattern's, while a window-length span
/// across b is offered twice a window's volume. Neither half straddles b, which is what lets a
/// fixed window count them in two different keys. Bursts: the duration in window pairs, rounded,
/// at least one; the rates are over that many pairs.
fn boundary(l: &Load) -> (Vec<Vec<u64>>, u64) {
    let w_us = l.window_ms as f64 * 1000.0;
    let half = burst_half_us(l.window_ms, l.burst_fraction) as f64;
    let per_half = (l.rate * l.window_ms as f64 / 1000.0).round().max(1.0) as usize;
    let spacing = half / per_half as f64;
    let bursts = ((l.duration_ms as f64 / (2.0 * l.window_ms as f64)).round() as usize).max(1);
    let mut offsets = vec![Vec::new(); l.instances];
    for j in 0..bursts {
        let burst_start = j as f64 * 2.0 * w_us;
        for (i, out) in offsets.iter_mut().enumerate() {
            let phase = spacing * i as f64 / l.instances as f64;
            out.extend(
                (0..2 * per_half).map(|k| (burst_start + phase + k as f64 * spacing) as u64),
            );
        }
    }
    (offsets, bursts as u64 * 2 * l.window_ms * 1000)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load(pattern: Pattern, duration_ms: u64) -> Load {
        Load {
            pattern,
            instances: 8,
            rate: 625.0,
            duration_ms,
            window_ms: 1000,
            burst_fraction: 0.1,
        }
    }

    #[test]
    fn steady_offers_the_rate() {
        let p = plan(&load(Pattern::Steady, 10_000));
        assert_eq!(p.total(), 8 * 625 * 10);
        assert!(p.offsets_us.iter().flatten().all(|&t| t < 10_000_000));
        assert_eq!(p.anchor_us(12_345_678, 20_000), 0);
    }

    #[test]
    fn boundary_offers_the_same_volume_in_bursts_astride_boundaries() {
        let p = plan(&load(Pattern::Boundary, 10_000));
        // Five window pairs: five bursts, each two windows' volume.
        assert_eq!(p.total(), 5 * 2 * 8 * 625);
        assert_eq!(p.span_us, 10_000_000);
        // Anchored so the first boundary is at 13 s server time, 1 s after a run that starts at 12 s.
        let anchor = p.anchor_us(12_000_000, 20_000);
        assert_eq!(anchor, 900_000);
        for &t in p.offsets_us.iter().flatten() {
            let from_boundary = (anchor as i64 + t as i64 - 1_000_000).rem_euclid(2_000_000);
            assert!(
                !(100_000..1_900_000).contains(&from_boundary),
                "{t} is outside a burst"
            );
        }
        let at = |r: std::ops::Range<u64>| {
            p.offsets_us
                .iter()
                .flatten()
                .filter(|&&t| r.contains(&(anchor + t)))
                .count()
        };
        assert_eq!(
            (at(900_000..1_000_000), at(1_000_000..1_100_000)),
            (5000, 5000)
        );
    }

    #[test]
    fn short_boundary_runs_still_offer_one_burst() {
        let p = plan(&load(Pattern::Boundary, 500));
        assert_eq!(p.total(), 2 * 8 * 625);
        assert_eq!(p.span_us, 2_000_000);
    }

    #[test]
    fn half_window_bursts_offer_twice_the_steady_rate() {
        let p = plan(&Load {
            burst_fraction: 0.5,
            ..load(Pattern::Boundary, 2000)
        });
        assert_eq!(p.total(), 2 * 8 * 625);
        let all: Vec<u64> = p.offsets_us.iter().flatten().copied().collect();
        assert!(
            all.iter().all(|&t| t < 1_000_000),
            "the burst fills exactly one window length"
        );
        assert_eq!(all.iter().filter(|&&t| t < 500_000).count(), 5000);
        // Anchored on the boundary at 13 s: the burst starts half a window before it.
        assert_eq!(p.anchor_us(12_000_000, 20_000), 500_000);
    }

    #[test]
    fn anchor_leaves_room_for_the_first_half_burst() {
        let p = plan(&load(Pattern::Boundary, 2000));
        // Server at 12.95 s, 20 ms lead: a burst around 13 s would start at 12.9 s, too early; the
        // one around 14 s starts at 13.9 s, 0.95 s after the run start.
        assert_eq!(p.anchor_us(12_950_000, 20_000), 950_000);
    }
}
