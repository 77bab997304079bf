//! The answer to one acquire or peek, identical in shape for every backend and binding.

use std::fmt;

/// Which path made a decision. Bindings expose the name from [`Mode::as_str`] and list the modes
/// from [`Mode::ALL`], so a new variant reaches them all.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Mode {
    /// Redis decided, exactly, with one script call.
    Normal,
    /// The in-process memory backend decided (single-process use), exactly.
    Memory,
    /// The local fallback limiter decided while Redis was unhealthy.
    Local,
    /// This instance decided from a lease of permits Redis counted for it (exact, see `lease.rs`).
    Lease,
}

impl Mode {
    /// Every mode, in the order of their stable numbers (C's `rl_mode`, Java's ordinal).
    pub const ALL: &'static [Mode] = &[Mode::Normal, Mode::Memory, Mode::Local, Mode::Lease];

    /// One line for docs and generated stubs.
    pub fn doc(self) -> &'static str {
        match self {
            Mode::Normal => "Redis decided, exactly, with one script call.",
            Mode::Memory => "The in-process memory backend decided (single-process use), exactly.",
            Mode::Local => "The local fallback decided while Redis was unhealthy.",
            Mode::Lease => {
                "This instance decided from a lease of permits Redis counted for it, exactly."
            }
        }
    }

    /// The mode named `name` (as [`Mode::as_str`] spells it).
    pub fn from_name(name: &str) -> Option<Mode> {
        Mode::ALL.iter().copied().find(|m| m.as_str() == name)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Normal => "normal",
            Mode::Memory => "memory",
            Mode::Local => "local",
            Mode::Lease => "lease",
        }
    }
}

impl fmt::Display for Mode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One decision. All times are milliseconds on the deciding clock (Redis TIME for Redis).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Decision {
    /// Whether the permits were granted (for `peek`: whether one permit would be).
    pub allowed: bool,
    /// Permits left in the window after this call: `limit - used`.
    pub remaining: u64,
    /// Permits counted in the window after this call (denied requests are not counted).
    pub used: u64,
    /// 0 if allowed; otherwise the wait after which the same request fits, if nothing else is admitted meanwhile.
    pub retry_after_ms: u64,
    /// When the window is empty again if nothing else is admitted; 0 if it is empty now.
    pub reset_after_ms: u64,
    /// Which path decided.
    pub mode: Mode,
    /// The time of the decision: Redis server time for Redis (or the checked client time).
    pub now_ms: u64,
}
