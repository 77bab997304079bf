//! Argument checks, done once here before any backend is touched, so every binding and backend
//! rejects the same inputs with the same messages. The Lua script repeats them as a last line of
//! defence for callers that bypass the core.

use crate::error::{Error, Result};

/// Longest window: 30 days. Anything longer is almost surely a unit mistake (seconds vs ms ...).
pub const MAX_WINDOW_MS: u64 = 2_592_000_000;
/// Largest limit (and cost): 1e15 keeps every sum an exact integer in Lua's doubles and in
/// JavaScript numbers.
pub const MAX_PERMITS: u64 = 1_000_000_000_000_000;
/// Longest user key. Redis takes up to 512 MiB, but a rate-limit key that long is a bug, and each
/// call ships it to Redis.
pub const MAX_KEY_BYTES: usize = 64 * 1024;

pub(crate) fn key(key: &[u8]) -> Result<()> {
    if key.is_empty() {
        return Err(Error::invalid("key", "must not be empty"));
    }
    if key.len() > MAX_KEY_BYTES {
        return Err(Error::invalid(
            "key",
            format!(
                "is {} bytes; at most {MAX_KEY_BYTES} are allowed",
                key.len()
            ),
        ));
    }
    Ok(())
}

pub(crate) fn limit(limit: u64) -> Result<()> {
    if limit == 0 || limit > MAX_PERMITS {
        return Err(Error::invalid(
            "limit",
            format!("is {limit}; must be between 1 and {MAX_PERMITS}"),
        ));
    }
    Ok(())
}

pub(crate) fn window(window_ms: u64) -> Result<()> {
    if window_ms == 0 || window_ms > MAX_WINDOW_MS {
        return Err(Error::invalid(
            "window_ms",
            format!("is {window_ms}; must be between 1 and {MAX_WINDOW_MS} (30 days)"),
        ));
    }
    Ok(())
}

pub(crate) fn cost(cost: u64, limit: u64) -> Result<()> {
    if cost == 0 {
        return Err(Error::invalid("cost", "is 0; must be at least 1"));
    }
    if cost > limit {
        return Err(Error::invalid(
            "cost",
            format!("is {cost}, above the limit {limit}: it could never be granted"),
        ));
    }
    Ok(())
}

/// Checks one acquire's arguments in the order a reader scans them.
pub(crate) fn acquire(k: &[u8], l: u64, w: u64, c: u64) -> Result<()> {
    key(k)?;
    limit(l)?;
    window(w)?;
    cost(c, l)
}
