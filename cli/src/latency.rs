//! Latency bookkeeping shared by the benchmarks: microseconds in, milliseconds out, because the
//! decisions are sub-millisecond on loopback and a millisecond histogram would read all zeros.

use std::time::Duration;

use hdrhistogram::Histogram;
use serde::Serialize;

/// 1 µs .. 60 s at 3 significant digits: wide enough that a stalled request is still recorded
/// (saturated, not dropped).
pub fn histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 60_000_000, 3).expect("static histogram bounds are valid")
}

pub fn record(h: &mut Histogram<u64>, d: Duration) {
    h.saturating_record(d.as_micros().clamp(1, u64::MAX as u128) as u64);
}

#[derive(Debug, Clone, Copy, Serialize)]
pub struct Summary {
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
}

impl Summary {
    /// `None` for an empty histogram: "no sample" must not read as "0 ms".
    pub fn of(h: &Histogram<u64>) -> Option<Summary> {
        (!h.is_empty()).then(|| Summary {
            p50_ms: h.value_at_quantile(0.50) as f64 / 1000.0,
            p99_ms: h.value_at_quantile(0.99) as f64 / 1000.0,
            max_ms: h.max() as f64 / 1000.0,
        })
    }
}
