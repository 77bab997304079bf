//! The mixed load: several tasks per limiter, each offering its share of the rate with random
//! costs, a few hot keys (always over their limit) among thousands of cold ones.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::Sender;
use std::sync::Arc;
use std::time::Duration;

use rl_core::Limiter;

use super::exact::Admit;

/// What every task of one run offers.
#[derive(Debug, Clone, Copy)]
pub struct Mix {
    pub keys: u32,
    pub hot_keys: u32,
    /// Of every 100 calls, how many go to a hot key.
    pub hot_percent: u64,
    pub max_cost: u64,
    pub limit: u64,
    pub window_ms: u64,
}

/// xorshift64*: no dependency, and each task's sequence is its own.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    pub fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        (self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 11) % n.max(1)
    }
}

/// Calls that failed (`acquire` returned an error), per group.
pub type Errors = Arc<Vec<AtomicU64>>;

/// One task: `period` between calls (skipped, not bunched, when a call was slow).
#[allow(clippy::too_many_arguments)]
pub async fn task(
    limiter: Limiter,
    group: usize,
    seed: u64,
    period: Duration,
    mix: Mix,
    admitted: Sender<Admit>,
    errors: Errors,
    stop: Arc<AtomicBool>,
) {
    let mut rng = Rng::new(seed);
    let mut tick = tokio::time::interval(period);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    while !stop.load(Ordering::Relaxed) {
        tick.tick().await;
        let key = if rng.below(100) < mix.hot_percent {
            rng.below(u64::from(mix.hot_keys)) as u32
        } else {
            (u64::from(mix.hot_keys) + rng.below(u64::from(mix.keys - mix.hot_keys))) as u32
        };
        let cost = 1 + rng.below(mix.max_cost);
        let name = format!("soak:{key}");
        match limiter.acquire(&name, mix.limit, mix.window_ms, cost).await {
            Ok(d) if d.allowed => {
                let _ = admitted.send(Admit {
                    group,
                    key,
                    at_ms: d.now_ms,
                    cost,
                });
            }
            Ok(_) => {}
            Err(_) => {
                errors[group].fetch_add(1, Ordering::Relaxed);
            }
        }
    }
}
