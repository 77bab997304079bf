//! One simulated gateway's limiter, whichever algorithm it runs, behind the one call the load
//! generator needs.

use std::sync::Arc;

use rl_core::Limiter;

use super::fixed_window::FixedWindow;
use crate::throughput::raw_zset::RawZset;

#[derive(Clone)]
pub enum Contender {
    Sliding {
        limiter: Limiter,
        key: Arc<str>,
    },
    Fixed(FixedWindow),
    /// The hot-key scenario's "plain per-request" path: the raw ZSET script, one EVALSHA per
    /// decision (rl-core always coalesces, so this is the honest one-call-per-request contender).
    Plain(RawZset),
}

/// What the audit needs from a decision: whether it admitted, and the deciding clock's time.
pub struct Verdict {
    pub allowed: bool,
    pub now_ms: u64,
    pub mode: &'static str,
}

impl Contender {
    pub async fn acquire(&self, limit: u64, window_ms: u64) -> Result<Verdict, String> {
        match self {
            Contender::Sliding { limiter, key } => limiter
                .acquire(key.as_bytes(), limit, window_ms, 1)
                .await
                .map(|d| Verdict {
                    allowed: d.allowed,
                    now_ms: d.now_ms,
                    mode: d.mode.as_str(),
                })
                .map_err(|e| e.to_string()),
            Contender::Fixed(f) => f
                .acquire(limit, window_ms, 1)
                .await
                .map(|d| Verdict {
                    allowed: d.allowed,
                    now_ms: d.now_ms,
                    mode: "fixed-window",
                })
                .map_err(|e| e.to_string()),
            Contender::Plain(z) => z
                .decide(limit, window_ms)
                .await
                .map(|(allowed, now_ms)| Verdict {
                    allowed,
                    now_ms,
                    mode: "plain",
                })
                .map_err(|e| e.to_string()),
        }
    }
}
