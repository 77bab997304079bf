//! Where windows are kept. Both backends implement the same algorithm (the one in
//! `lua/sliding_window.lua`); the property test `tests/model.rs` holds them to identical decisions.

pub(crate) mod attempts;
pub(crate) mod coalesce;
pub(crate) mod composite_batch;
pub(crate) mod connection;
pub(crate) mod functions;
pub(crate) mod in_place;
pub(crate) mod memory;
pub(crate) mod redis;
pub(crate) mod script;
pub(crate) mod topology;

use std::fmt;

/// What an acquire or peek asks of a backend, after validation.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Request<'a> {
    pub key: &'a [u8],
    pub limit: u64,
    pub window_ms: u64,
    pub cost: u64,
    /// `false` for peek: decide as if acquiring, write nothing.
    pub consume: bool,
}

/// A backend's raw verdict; [`crate::Limiter`] turns it into a [`crate::Decision`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Verdict {
    pub allowed: bool,
    pub used: u64,
    pub retry_after_ms: u64,
    pub reset_after_ms: u64,
    pub now_ms: u64,
}

/// Which backend a [`crate::Limiter`] talks to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BackendKind {
    Redis,
    Memory,
}

impl fmt::Display for BackendKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            BackendKind::Redis => "redis",
            BackendKind::Memory => "memory",
        })
    }
}
