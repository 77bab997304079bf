//! The public limiter: validation, key layout and backend choice, once, for every binding.

use std::sync::Arc;
use std::time::Duration;

use std::sync::atomic::{AtomicU64, Ordering};

use crate::backend::memory::MemoryBackend;
use crate::backend::{BackendKind, Request, Verdict};
use crate::clock::{Clock, SystemClock};
use crate::decision::{Decision, Mode};
use crate::error::{Error, Result};
use crate::redis_path::RedisPath;
use crate::stats::Stats;
use crate::{keys, url, validate};

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
    /// Wait before the one retry of a call that failed with a connection-class error (connection
    /// refused or dropped, READONLY, LOADING, TRYAGAIN, CLUSTERDOWN, MASTERDOWN, BUSY, OOM). The
    /// retry happens only if it fits in the request timeout (so a longer delay means no retry).
    /// At most 60 s. Default 50 ms.
    pub retry_delay: Duration,
    /// Decide locally while Redis is unhealthy (`true`, default) or return
    /// `BackendUnavailable` errors (`false`: no state machine, no local decisions).
    pub local_fallback: bool,
    /// normal → local when Redis round trips of real calls stay above `degrade_rtt` for
    /// `degrade_after` (or calls fail after their retry). Defaults 5 ms and 100 ms.
    pub degrade_rtt: Duration,
    pub degrade_after: Duration,
    /// local → normal when probes (off the request path) see round trips below `recover_rtt` for
    /// `recover_after`. Defaults 2 ms and 500 ms. `recover_rtt` must not exceed `degrade_rtt`.
    pub recover_rtt: Duration,
    pub recover_after: Duration,
    /// How many instances share each limit; the local budget is `limit / instances`. `None`
    /// (default): counted from live instances' heartbeats in Redis.
    pub instances: Option<u64>,
    /// Most keys the local record keeps (least recently used ones are forgotten). Default 10000.
    pub local_max_keys: usize,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            key_prefix: "rl:".into(),
            connect_timeout: Duration::from_millis(500),
            request_timeout: Duration::from_millis(500),
            clock: None,
            max_clock_skew_ms: 1000,
            retry_delay: Duration::from_millis(50),
            local_fallback: true,
            degrade_rtt: Duration::from_millis(5),
            degrade_after: Duration::from_millis(100),
            recover_rtt: Duration::from_millis(2),
            recover_after: Duration::from_millis(500),
            instances: None,
            local_max_keys: 10_000,
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
            .field("retry_delay", &self.retry_delay)
            .field("local_fallback", &self.local_fallback)
            .field("degrade_rtt", &self.degrade_rtt)
            .field("degrade_after", &self.degrade_after)
            .field("recover_rtt", &self.recover_rtt)
            .field("recover_after", &self.recover_after)
            .field("instances", &self.instances)
            .field("local_max_keys", &self.local_max_keys)
            .finish()
    }
}

enum Backend {
    Redis(Arc<RedisPath>),
    Memory(MemoryBackend),
}

struct Inner {
    backend: Backend,
    options: Options,
    memory_decisions: AtomicU64,
}

impl std::fmt::Debug for Inner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let backend = match &self.backend {
            Backend::Redis(r) => format!("{r:?}"),
            Backend::Memory(_) => "memory".into(),
        };
        f.debug_struct("Limiter")
            .field("backend", &backend)
            .field("options", &self.options)
            .finish()
    }
}

/// An exact sliding-window limiter: at most `limit` permits in any `window_ms` span per key.
/// Cheap to clone (shared state); safe to use from many tasks and threads at once.
#[derive(Debug, Clone)]
pub struct Limiter {
    inner: Arc<Inner>,
}

/// Longest accepted timeout: a rate limiter that waits minutes is not limiting anything.
const MAX_TIMEOUT: Duration = Duration::from_secs(60);
const MAX_INSTANCES: u64 = 1_000_000;
const MAX_LOCAL_KEYS: usize = 10_000_000;

impl Limiter {
    /// Opens a limiter on `url` (`redis://`, `rediss://` for TLS, with `user:password@` and `/db`),
    /// or on the in-process memory backend for `None` or `memory://`. Does no I/O: Redis is
    /// connected on first use, so a limiter can be made while Redis is still starting.
    pub fn open(url: Option<&str>, options: Options) -> Result<Limiter> {
        keys::check_prefix(&options.key_prefix)?;
        for (name, t) in [
            ("connect_timeout", options.connect_timeout),
            ("request_timeout", options.request_timeout),
        ] {
            if t.is_zero() || t > MAX_TIMEOUT {
                return Err(Error::invalid(
                    name,
                    format!("is {} ms; must be between 1 ms and 60 s", t.as_millis()),
                ));
            }
        }
        if options.max_clock_skew_ms > validate::MAX_WINDOW_MS {
            return Err(Error::invalid(
                "max_clock_skew_ms",
                format!(
                    "is {}; at most {}",
                    options.max_clock_skew_ms,
                    validate::MAX_WINDOW_MS
                ),
            ));
        }
        // A retry happens only if it still fits in request_timeout, so a delay longer than the
        // timeout is not an error (it means "no retry"): a short request_timeout alone must open.
        if options.retry_delay > MAX_TIMEOUT {
            return Err(Error::invalid(
                "retry_delay",
                format!("is {} ms; at most 60 s", options.retry_delay.as_millis()),
            ));
        }
        for (name, t) in [
            ("degrade_rtt", options.degrade_rtt),
            ("degrade_after", options.degrade_after),
            ("recover_rtt", options.recover_rtt),
            ("recover_after", options.recover_after),
        ] {
            if t.is_zero() || t > MAX_TIMEOUT {
                return Err(Error::invalid(
                    name,
                    format!("is {} ms; must be between 1 ms and 60 s", t.as_millis()),
                ));
            }
        }
        if options.recover_rtt > options.degrade_rtt {
            return Err(Error::invalid(
                "recover_rtt",
                format!(
                    "is {} ms, above degrade_rtt ({} ms): recovery must demand a faster Redis than degradation tolerates",
                    options.recover_rtt.as_millis(),
                    options.degrade_rtt.as_millis()
                ),
            ));
        }
        if let Some(n) = options.instances {
            if n == 0 || n > MAX_INSTANCES {
                return Err(Error::invalid(
                    "instances",
                    format!("is {n}; must be between 1 and {MAX_INSTANCES}"),
                ));
            }
        }
        if options.local_max_keys == 0 || options.local_max_keys > MAX_LOCAL_KEYS {
            return Err(Error::invalid(
                "local_max_keys",
                format!(
                    "is {}; must be between 1 and {MAX_LOCAL_KEYS}",
                    options.local_max_keys
                ),
            ));
        }
        let backend = match url {
            None | Some("memory://") => {
                let clock = options.clock.clone().unwrap_or_else(|| Arc::new(SystemClock));
                Backend::Memory(MemoryBackend::new(clock))
            }
            Some(u) if url::is_redis_url(u) => Backend::Redis(Arc::new(RedisPath::new(u, &options)?)),
            Some(u) => {
                return Err(Error::invalid(
                    "url",
                    format!(
                        "{:?} is not a redis://, rediss://, redis+sentinel://, redis+cluster:// or memory:// URL",
                        url::redact(u)
                    ),
                ))
            }
        };
        Ok(Limiter {
            inner: Arc::new(Inner {
                backend,
                options,
                memory_decisions: AtomicU64::new(0),
            }),
        })
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
    pub async fn acquire(
        &self,
        key: impl AsRef<[u8]>,
        limit: u64,
        window_ms: u64,
        cost: u64,
    ) -> Result<Decision> {
        let key = key.as_ref();
        validate::acquire(key, limit, window_ms, cost)?;
        self.decide(Request {
            key,
            limit,
            window_ms,
            cost,
            consume: true,
        })
        .await
    }

    /// The window's state without taking anything; `allowed` tells whether one permit would be granted.
    pub async fn peek(
        &self,
        key: impl AsRef<[u8]>,
        limit: u64,
        window_ms: u64,
    ) -> Result<Decision> {
        let key = key.as_ref();
        validate::acquire(key, limit, window_ms, 1)?;
        self.decide(Request {
            key,
            limit,
            window_ms,
            cost: 1,
            consume: false,
        })
        .await
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

    /// Which path decides now, per-path counters, state transitions and Redis round trips.
    pub fn stats(&self) -> Stats {
        let memory = self.inner.memory_decisions.load(Ordering::Relaxed);
        let Backend::Redis(r) = &self.inner.backend else {
            return Stats {
                mode: Mode::Memory,
                topology: "memory",
                decisions_normal: 0,
                decisions_local: 0,
                decisions_memory: memory,
                transitions_to_local: 0,
                transitions_to_normal: 0,
                state_ms: 0,
                state_reason: "memory backend".into(),
                redis_errors: 0,
                retries: 0,
                probes: 0,
                repairs: 0,
                repaired_permits: 0,
                failovers: 0,
                instances: 1,
                local_keys: 0,
                rtt_samples: 0,
                rtt_last_us: 0,
                rtt_p50_us: 0,
                rtt_p99_us: 0,
                rtt_max_us: 0,
            };
        };
        r.stats(memory)
    }

    /// This limiter's id in the fleet's heartbeats (`None` for the memory backend).
    pub fn instance_id(&self) -> Option<&str> {
        match &self.inner.backend {
            Backend::Redis(r) => Some(r.instance_id()),
            Backend::Memory(_) => None,
        }
    }

    async fn decide(&self, req: Request<'_>) -> Result<Decision> {
        let (v, mode, cap) = match &self.inner.backend {
            Backend::Redis(r) => r.decide(&req, &self.redis_key(req.key)).await?,
            Backend::Memory(m) => {
                self.inner.memory_decisions.fetch_add(1, Ordering::Relaxed);
                (m.decide(&req), Mode::Memory, req.limit)
            }
        };
        Ok(to_decision(v, cap, mode))
    }
}

/// `cap` is what `remaining` counts down from: the limit, or in `local` mode this instance's budget.
fn to_decision(v: Verdict, cap: u64, mode: Mode) -> Decision {
    Decision {
        allowed: v.allowed,
        remaining: cap.saturating_sub(v.used),
        used: v.used,
        retry_after_ms: v.retry_after_ms,
        reset_after_ms: v.reset_after_ms,
        mode,
        now_ms: v.now_ms,
    }
}
