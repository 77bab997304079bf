//! What `Limiter::stats()` reports: which path decides now, how often each one did, the state
//! machine's transitions and Redis round-trip times. Plain numbers, so every binding can copy them.

use crate::decision::Mode;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stats {
    /// The path new decisions take now: `Normal` (Redis), `Local` (fallback) or `Memory`.
    pub mode: Mode,
    /// `standalone`, `sentinel`, `cluster` or `memory`.
    pub topology: &'static str,
    /// Decisions made per path since the limiter was opened.
    pub decisions_normal: u64,
    pub decisions_local: u64,
    pub decisions_memory: u64,
    /// State machine transitions.
    pub transitions_to_local: u64,
    pub transitions_to_normal: u64,
    /// How long the current state has lasted, and what caused it ("start" at first).
    pub state_ms: u64,
    pub state_reason: String,
    /// Redis calls that failed with a connection-class error, and how many were retried.
    pub redis_errors: u64,
    pub retries: u64,
    /// Recovery probes sent while `local`.
    pub probes: u64,
    /// Repair calls that wrote admitted permits back, the permits they added, and new primaries seen.
    pub repairs: u64,
    pub repaired_permits: u64,
    pub failovers: u64,
    /// The divisor of the local budget (`limit / instances`): configured, or live instances seen
    /// in Redis (the last count while Redis is away; 8 before any was seen).
    pub instances: u64,
    /// Keys the local record holds (bounded by `local_max_keys`).
    pub local_keys: u64,
    /// Round trips of the last 1024 Redis decisions, in microseconds.
    pub rtt_samples: u64,
    pub rtt_last_us: u64,
    pub rtt_p50_us: u64,
    pub rtt_p99_us: u64,
    pub rtt_max_us: u64,
}
