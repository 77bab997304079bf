//! # rl-core — an exact, distributed sliding-window rate limiter
//!
//! At most `limit` permits in ANY span of `window_ms` milliseconds per key, shared by every
//! process that talks to the same Redis: one atomic Lua script call per decision, on Redis's own
//! clock. Or, without Redis, the same semantics in process memory.
//!
//! ```no_run
//! # async fn demo() -> rl_core::Result<()> {
//! let limiter = rl_core::Limiter::open(Some("redis://127.0.0.1:6379/"), Default::default())?;
//! let d = limiter.acquire("api:order:create", 5000, 1000, 1).await?;
//! if !d.allowed {
//!     println!("slow down: retry in {} ms", d.retry_after_ms);
//! }
//! # Ok(()) }
//! ```
//!
//! Bindings (C, Python, Node, Java) wrap [`blocking::Limiter`] or [`Limiter`] and convert types
//! and errors only; every rule lives here.

pub mod audit;
mod backend;
pub mod blocking;
mod clock;
pub mod composite;
mod decision;
mod denials;
mod duration;
mod error;
mod fork;
pub mod headers;
mod health;
mod keyed;
mod keys;
mod lag;
mod lease;
mod lease_worker;
mod ledger;
mod limiter;
pub mod metrics;
pub mod options;
pub mod policy;
mod primaries;
mod redis_path;
pub mod runtime;
mod shards;
mod stats;
pub mod unwind;
pub mod url;
mod validate;
mod window;

pub use backend::functions::{Library, LIBRARY as SLIDING_WINDOW_LIBRARY};
pub use backend::script::{sliding_window_sha, SLIDING_WINDOW_LUA};
pub use backend::BackendKind;
pub use clock::{Clock, ManualClock, SystemClock};
pub use composite::{CompositeDecision, Rule, MAX_RULES};
pub use decision::{Decision, Mode};
pub use duration::parse_duration_ms;
pub use error::{Error, ErrorKind, Result};
pub use fork::generation as fork_generation;
pub use headers::HeaderStyle;
pub use keys::{group_key, redis_key};
pub use lease::Leases;
pub use limiter::Limiter;
pub use options::{OptionSpec, Options, OPTIONS};
pub use policy::Policy;
pub use shards::sub_key as shard_key;
pub use stats::{Stats, StatsField, StatsKind, STATS_FIELDS};
pub use url::redact;
pub use validate::{MAX_KEY_BYTES, MAX_PERMITS, MAX_WINDOW_MS};
