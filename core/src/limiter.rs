//! The public limiter: validation, key layout and backend choice, once, for every binding.

use std::sync::Arc;
use std::time::Duration;

use crate::backend::memory::MemoryBackend;
use crate::backend::redis::RedisBackend;
use crate::backend::{BackendKind, Request, Verdict};
use crate::clock::{Clock, SystemClock};
use crate::decision::{Decision, Mode};
use crate::error::{Error, Result};
use crate::{keys, validate};

/// How a limiter behaves. `Options::default()` is right for a gateway on a nearby Redis.
#[derive(Clone)]
pub struct Options {
    /// Prepended to every Redis key (no braces: the hash tag comes from the user key). Default `rl:`.
    pub key_prefix: String,
    /// Longest wait to establish a connection. Default 500 ms.
    pub connect_timeout: Duration,
    /// Longest a caller waits for one decision, connecting included. Default 500 ms.
    pub request_timeout: Duration,
    /// `None`: Redis decides on its own TIME (recommended), the memory backend on the system clock.
    /// `Some`: decisions use this clock; Redis refuses it when it is further than
    /// `max_clock_skew_ms` from Redis TIME. For deterministic tests and legacy callers.
    pub clock: Option<Arc<dyn Clock>>,
    /// Allowed distance between a supplied clock and Redis TIME. Default 1000 ms.
    pub max_clock_skew_ms: u64,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            key_prefix: "rl:".into(),
            connect_timeout: Duration::from_millis(500),
            request_timeout: Duration::from_millis(500),
            clock: None,
            max_clock_skew_ms: 1000,
        }
    }
}

impl std::fmt::Debug for Options {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Options")
            .field("key_prefix", &self.key_prefix)
            .field("connect_timeout", &self.connect_timeout)
            .field("request_timeout", &self.request_timeout)
            .field("clock", &self.clock.as_ref().map(|_| "custom"))
            .field("max_clock_skew_ms", &self.max_clock_skew_ms)
            .finish()
    }
}

#[derive(Debug)]
enum Backend {
    Redis(RedisBackend),
    Memory(MemoryBackend),
}

#[derive(Debug)]
struct Inner {
    backend: Backend,
    options: Options,
}

/// An exact sliding-window limiter: at most `limit` permits in any `window_ms` span per key.
/// Cheap to clone (shared state); safe to use from many tasks and threads at once.
#[derive(Debug, Clone)]
pub struct Limiter {
    inner: Arc<Inner>,
}

/// Longest accepted timeout: a rate limiter that waits minutes is not limiting anything.
const MAX_TIMEOUT: Duration = Duration::from_secs(60);

impl Limiter {
    /// Opens a limiter on `url` (`redis://`, `rediss://` for TLS, with `user:password@` and `/db`),
    /// or on the in-process memory backend for `None` or `memory://`. Does no I/O: Redis is
    /// connected on first use, so a limiter can be made while Redis is still starting.
    pub fn open(url: Option<&str>, options: Options) -> Result<Limiter> {
        keys::check_prefix(&options.key_prefix)?;
        for (name, t) in [("connect_timeout", options.connect_timeout), ("request_timeout", options.request_timeout)] {
            if t.is_zero() || t > MAX_TIMEOUT {
                return Err(Error::invalid(name, format!("is {} ms; must be between 1 ms and 60 s", t.as_millis())));
            }
        }
        if options.max_clock_skew_ms > validate::MAX_WINDOW_MS {
            return Err(Error::invalid("max_clock_skew_ms", format!("is {}; at most {}", options.max_clock_skew_ms, validate::MAX_WINDOW_MS)));
        }
        let backend = match url {
            None | Some("memory://") => {
                let clock = options.clock.clone().unwrap_or_else(|| Arc::new(SystemClock));
                Backend::Memory(MemoryBackend::new(clock))
            }
            Some(u) if u.starts_with("redis://") || u.starts_with("rediss://") || u.starts_with("redis+unix://") || u.starts_with("unix://") => {
                Backend::Redis(RedisBackend::open(u, &options)?)
            }
            Some(u) => {
                return Err(Error::invalid(
                    "url",
                    format!("{:?} is not a redis://, rediss:// or memory:// URL", crate::backend::redis::redact(u)),
                ))
            }
        };
        Ok(Limiter { inner: Arc::new(Inner { backend, options }) })
    }

    /// The in-process memory backend: exact within one process, nothing shared across processes.
    pub fn memory(options: Options) -> Result<Limiter> {
        Limiter::open(None, options)
    }

    pub fn backend(&self) -> BackendKind {
        match self.inner.backend {
            Backend::Redis(_) => BackendKind::Redis,
            Backend::Memory(_) => BackendKind::Memory,
        }
    }

    pub fn options(&self) -> &Options {
        &self.inner.options
    }

    /// The Redis key that holds `key`'s window (see `keys.rs` for the layout).
    pub fn redis_key(&self, key: impl AsRef<[u8]>) -> Vec<u8> {
        keys::redis_key(&self.inner.options.key_prefix, key.as_ref())
    }

    /// Takes `cost` permits from `key`'s window if they fit: at most `limit` permits in any
    /// `window_ms` span. A denied request takes nothing.
    pub async fn acquire(&self, key: impl AsRef<[u8]>, limit: u64, window_ms: u64, cost: u64) -> Result<Decision> {
        let key = key.as_ref();
        validate::acquire(key, limit, window_ms, cost)?;
        self.decide(Request { key, limit, window_ms, cost, consume: true }).await
    }

    /// The window's state without taking anything; `allowed` tells whether one permit would be granted.
    pub async fn peek(&self, key: impl AsRef<[u8]>, limit: u64, window_ms: u64) -> Result<Decision> {
        let key = key.as_ref();
        validate::acquire(key, limit, window_ms, 1)?;
        self.decide(Request { key, limit, window_ms, cost: 1, consume: false }).await
    }

    /// Forgets everything admitted on `key`.
    pub async fn reset(&self, key: impl AsRef<[u8]>) -> Result<()> {
        let key = key.as_ref();
        validate::key(key)?;
        match &self.inner.backend {
            Backend::Redis(r) => r.reset(&self.redis_key(key)).await,
            Backend::Memory(m) => {
                m.reset(key);
                Ok(())
            }
        }
    }

    /// Checks that the backend answers (connecting if needed), for readiness probes and fail-fast startup.
    pub async fn ping(&self) -> Result<()> {
        match &self.inner.backend {
            Backend::Redis(r) => r.ping().await,
            Backend::Memory(_) => Ok(()),
        }
    }

    /// Decides right here when the backend never waits (memory), so synchronous callers skip the
    /// async machinery; `None` for backends that do I/O.
    pub(crate) fn decide_in_place(&self, key: &[u8], limit: u64, window_ms: u64, cost: u64, consume: bool) -> Option<Result<Decision>> {
        let Backend::Memory(m) = &self.inner.backend else { return None };
        Some(validate::acquire(key, limit, window_ms, cost).map(|()| {
            to_decision(m.decide(&Request { key, limit, window_ms, cost, consume }), limit, Mode::Memory)
        }))
    }

    async fn decide(&self, req: Request<'_>) -> Result<Decision> {
        let (v, mode) = match &self.inner.backend {
            Backend::Redis(r) => (r.decide(&req, &self.redis_key(req.key)).await?, Mode::Normal),
            Backend::Memory(m) => (m.decide(&req), Mode::Memory),
        };
        Ok(to_decision(v, req.limit, mode))
    }
}

fn to_decision(v: Verdict, limit: u64, mode: Mode) -> Decision {
    Decision {
        allowed: v.allowed,
        remaining: limit.saturating_sub(v.used),
        used: v.used,
        retry_after_ms: v.retry_after_ms,
        reset_after_ms: v.reset_after_ms,
        mode,
        now_ms: v.now_ms,
    }
}
