//! What `Limiter::stats()` reports: which path decides now, how often each one did, the state
//! machine's transitions and Redis round-trip times. Plain numbers, so every binding can copy them.

use crate::decision::Mode;
use crate::options::Value;

/// What a stats field holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StatsKind {
    /// One of [`Mode::ALL`]'s names.
    Mode,
    Text,
    Count,
}

/// One field of [`Stats`], for bindings (which build their host object from [`Stats::fields`]) and
/// for the generated stubs and docs.
pub struct StatsField {
    pub name: &'static str,
    pub kind: StatsKind,
    pub doc: &'static str,
    get: fn(&Stats) -> Value,
}

impl StatsField {
    pub fn get(&self, stats: &Stats) -> Value {
        (self.get)(stats)
    }
}

macro_rules! count {
    ($name:ident, $doc:literal) => {
        StatsField {
            name: stringify!($name),
            kind: StatsKind::Count,
            doc: $doc,
            get: |s| Value::Int(s.$name as i128),
        }
    };
}

/// Every stats field, in a stable order (C's `rl_stats` and Java's record follow it).
pub static STATS_FIELDS: &[StatsField] = &[
    StatsField {
        name: "mode",
        kind: StatsKind::Mode,
        doc: "The path new decisions take now: normal (Redis), local (fallback) or memory.",
        get: |s| Value::Text(s.mode.as_str().into()),
    },
    StatsField {
        name: "topology",
        kind: StatsKind::Text,
        doc: "standalone, sentinel, cluster or memory.",
        get: |s| Value::Text(s.topology.into()),
    },
    count!(decisions_normal, "Decisions Redis made since the limiter was opened."),
    count!(decisions_local, "Decisions the local fallback made."),
    count!(decisions_memory, "Decisions the memory backend made."),
    count!(transitions_to_local, "State machine transitions normal -> local."),
    count!(transitions_to_normal, "State machine transitions local -> normal."),
    count!(state_ms, "How long the current state has lasted, in milliseconds."),
    StatsField {
        name: "state_reason",
        kind: StatsKind::Text,
        doc: "What caused the current state (\"start\" at first).",
        get: |s| Value::Text(s.state_reason.clone()),
    },
    count!(redis_errors, "Redis calls that failed with a connection-class error."),
    count!(retries, "Of those, how many were retried."),
    count!(probes, "Recovery probes sent while local."),
    count!(repairs, "Repair calls that wrote admitted permits back to Redis."),
    count!(repaired_permits, "Permits those repairs added."),
    count!(failovers, "New primaries seen."),
    count!(instances, "The divisor of the local budget (limit / instances): configured or counted from heartbeats."),
    count!(local_keys, "Keys the local record holds (bounded by local_max_keys)."),
    count!(rtt_samples, "Redis round trips sampled (the last 1024 decisions)."),
    count!(rtt_last_us, "The last Redis round trip, in microseconds."),
    count!(rtt_p50_us, "Median Redis round trip, in microseconds."),
    count!(rtt_p99_us, "99th percentile Redis round trip, in microseconds."),
    count!(rtt_max_us, "Slowest sampled Redis round trip, in microseconds."),
    count!(shard_borrows, "Calls to a sharded key's other shards after its home shard denied (key_shards)."),
    count!(decisions_lease, "Decisions this instance made from its leases (mode lease)."),
    count!(leases_taken, "Leases Redis granted this instance."),
    count!(lease_refunds, "Leases returned to Redis (at their end, when traffic stopped, on close)."),
    count!(leased_permits, "Permits those leases held."),
    count!(refunded_permits, "Leased permits returned unused."),
    count!(denials_cached, "Denials replayed from the denial cache without a Redis call (denial_cache); not in decisions_normal."),
    count!(denied_normal, "Of decisions_normal, the denials."),
    count!(denied_local, "Of decisions_local, the denials."),
    count!(denied_memory, "Of decisions_memory, the denials."),
];

impl Stats {
    /// Every field with its value, in [`STATS_FIELDS`] order.
    pub fn fields(&self) -> impl Iterator<Item = (&'static StatsField, Value)> + '_ {
        STATS_FIELDS.iter().map(move |f| (f, f.get(self)))
    }
}

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
    /// Extra sub-key calls of sharded keys (`key_shards`): asked after the home shard denied.
    pub shard_borrows: u64,
    /// Leases: decisions made from them, leases taken and returned, permits leased and returned unused.
    pub decisions_lease: u64,
    pub leases_taken: u64,
    pub lease_refunds: u64,
    pub leased_permits: u64,
    pub refunded_permits: u64,
    /// Denials replayed from the denial cache (`denial_cache`) without a Redis call; their
    /// decisions have mode `normal` but are not counted in `decisions_normal`.
    pub denials_cached: u64,
    /// Of the decisions per path, the denials (lease decisions never deny; cached denials are
    /// `denials_cached`).
    pub denied_normal: u64,
    pub denied_local: u64,
    pub denied_memory: u64,
}
