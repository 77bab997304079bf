//! The Node.js binding of rl: a thin napi-rs layer over `rl_core::Limiter`.
//!
//! Every call returns a Promise at once, started by `rl_core::runtime::run_or_spawn`: a call
//! decided at its first poll (the memory backend, an argument error) settles its promise right
//! away; one that waits (Redis) continues on the core's tokio runtime, never blocking the
//! JavaScript thread, and comes back through [`bridge`].
//!
//! A panic never crosses into Node (that aborts the process) and never leaves a promise pending
//! (that hangs its caller and keeps the process alive): every method body runs under
//! `rl_core::unwind::call` and every call's future under `rl_core::unwind::CatchUnwind`, and the
//! panic becomes a `NativePanicError` (code `ERR_RL_INTERNAL`), thrown or rejecting the promise.
//! `catch_unwind` on each `#[napi]` item also covers napi-rs's own argument conversions.
//!
//! The JavaScript wrapper (`limiter.js`) checks only the JavaScript types of `acquire`'s
//! arguments and defines the error classes. Options travel as the caller's object and are read
//! through the core's option table ([`options`]); every rule, number shapes included, is checked
//! here or in the core, and [`errors`] maps `rl_core::Error` to the wrapper's classes.

#![deny(clippy::all)]

mod bridge;
mod composite;
mod convert;
mod decider;
mod errors;
mod limiter;
mod options;
mod policies;
mod prepared;

// Reachable from the crate root, as napi-rs registers them (and `cargo test` builds no registry).
pub use policies::{parse_policies, problem_body, render_headers, NativeComposite, NativePolicy};
pub use prepared::NativePolicies;

/// One decision, as the promise of `acquire`/`peek` resolves it.
#[napi_derive::napi(object)]
pub struct NativeDecision {
    pub allowed: bool,
    pub remaining: f64,
    pub used: f64,
    pub retry_after_ms: f64,
    pub reset_after_ms: f64,
    pub mode: String,
    pub now_ms: f64,
}

/// The mode names, in [`rl_core::Mode::ALL`] order: a decision's mode travels as an index into
/// this list (`limiter.js` reads it once).
#[napi_derive::napi]
pub fn modes() -> Vec<&'static str> {
    rl_core::Mode::ALL.iter().map(|m| m.as_str()).collect()
}
