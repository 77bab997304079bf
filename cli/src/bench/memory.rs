//! How much Redis memory one limiter's key takes during a run.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use super::clock::ServerClock;
use super::fixed_window;
use crate::redis_admin::Admin;

pub enum MemoryKey {
    Sliding(Vec<u8>),
    /// Base key; the live counters are the current and the previous window's.
    Fixed(String),
}

/// Peak MEMORY USAGE during the run. Sampled rather than read once at the end because a
/// boundary-pattern run can end with an empty window.
pub async fn sample_memory(
    admin: Option<&Admin>,
    key: &MemoryKey,
    clock: ServerClock,
    window_ms: u64,
    done: &AtomicBool,
) -> Option<u64> {
    let admin = admin?;
    let period = Duration::from_millis((window_ms / 4).clamp(100, 1000));
    let mut peak = None;
    while !done.load(Ordering::Acquire) {
        tokio::time::sleep(period).await;
        peak = peak.max(memory_now(admin, key, clock, window_ms).await);
    }
    peak
}

pub async fn memory_now(
    admin: &Admin,
    key: &MemoryKey,
    clock: ServerClock,
    window_ms: u64,
) -> Option<u64> {
    match key {
        MemoryKey::Sliding(k) => admin.memory_usage(k).await.ok().flatten(),
        MemoryKey::Fixed(base) => {
            let now = clock.now_ms();
            let mut best = None;
            for t in [now, now.saturating_sub(window_ms)] {
                let k = fixed_window::window_key(base, t, window_ms);
                best = best.max(admin.memory_usage(k.as_bytes()).await.ok().flatten());
            }
            best
        }
    }
}
