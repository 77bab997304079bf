//! The public limiter: validation, key layout and backend choice, once, for every binding.

use std::sync::Arc;

use std::sync::atomic::{AtomicU64, Ordering};

use crate::backend::memory::MemoryBackend;
use crate::backend::{BackendKind, Request, Verdict};
use crate::clock::SystemClock;
use crate::composite::{self, CompositeDecision, Rule};
use crate::decision::{Decision, Mode};
use crate::error::{Error, Result};
use crate::options::Options;
use crate::redis_path::RedisPath;
use crate::stats::Stats;
use crate::{keys, shards, url, validate};

enum Backend {
    Redis(Arc<RedisPath>),
    Memory(MemoryBackend),
}

struct Inner {
    backend: Backend,
    options: Options,
    memory_decisions: AtomicU64,
    memory_denials: AtomicU64,
    shard_borrows: AtomicU64,
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

impl Limiter {
    /// Opens a limiter on `url` (`redis://`, `rediss://` for TLS, with `user:password@` and `/db`),
    /// or on the in-process memory backend for `None` or `memory://`. Does no I/O: Redis is
    /// connected on first use, so a limiter can be made while Redis is still starting.
    pub fn open(url: Option<&str>, options: Options) -> Result<Limiter> {
        options.validate()?;
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
                memory_denials: AtomicU64::new(0),
                shard_borrows: AtomicU64::new(0),
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

    /// The Redis keys that hold `key`'s windows: one, or with `key_shards` > 1 one per shard, in
    /// shard order (see `shards.rs` for the layout and their slots).
    pub fn shard_keys(&self, key: impl AsRef<[u8]>) -> Vec<Vec<u8>> {
        let n = self.inner.options.key_shards;
        if n <= 1 {
            return vec![self.redis_key(key)];
        }
        let prefix = &self.inner.options.key_prefix;
        (0..n)
            .map(|i| shards::sub_key(prefix, key.as_ref(), i, n))
            .collect()
    }

    /// The shard this instance asks first for a sharded key (a hash of its instance id); 0 when
    /// nothing is sharded (`key_shards` 1, or the memory backend).
    pub fn home_shard(&self) -> u64 {
        match &self.inner.backend {
            Backend::Redis(r) if self.sharded() => shards::home(r.instance_id(), self.shards()),
            _ => 0,
        }
    }

    fn shards(&self) -> u64 {
        self.inner.options.key_shards
    }

    /// Whether keys are split over several Redis keys: `key_shards` > 1 on Redis (the memory
    /// backend is one process that holds every limit whole).
    fn sharded(&self) -> bool {
        self.shards() > 1 && matches!(self.inner.backend, Backend::Redis(_))
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
        shards::check_cost(cost, limit, self.shards())?;
        self.decide(Request {
            key,
            limit,
            window_ms,
            cost,
            consume: true,
        })
        .await
    }

    /// Takes each rule's `cost` from its key's window only if every rule fits: all or nothing, in
    /// one atomic decision (one script call on Redis). Typical uses: per-IP + per-user +
    /// per-tenant limits on one request, or a burst and a daily limit on one key (rules built from
    /// `Policy::parse_many("100/s; 5000/h")` with [`Rule::from_policy`]).
    ///
    /// - Rules on the same key are one window checked against each rule's limit and window, so
    ///   they must ask the same cost. At most [`crate::MAX_RULES`] rules.
    /// - The result holds one decision per rule, in order, and the overall one: its
    ///   `retry_after_ms` is the wait until every rule fits.
    /// - On a Redis Cluster a script call runs on one slot, so all keys of a call must share one.
    ///   `group` (e.g. a tenant or an API name) becomes the keys' hash tag: every key of the
    ///   call is stored as `<prefix>{<group>}{<key>}`, a window apart from the same key without
    ///   a group (or in another group), and one group is one slot, served by one master.
    ///   Without a group, keys on different slots are refused with `InvalidArgument` naming
    ///   them, on every topology and backend (a standalone Redis too), so code that works on one
    ///   Redis works on a Cluster. One key alone, or one key with several limits, needs no group.
    /// - Refused with `key_shards` > 1 (a sharded key spans several slots).
    /// - Takes no lease; exact beside leases all the same (Redis counts every live lease,
    ///   this instance's unused leased permits as used). With the local fallback on, admissions
    ///   are recorded like any other, and while Redis is unhealthy the call is decided locally,
    ///   honouring every rule (each within this instance's share of its limit), all or nothing.
    /// - With `denial_cache`, a call with a rule a cached denial covers is denied with no Redis
    ///   call (Redis would deny that rule, so the call), and the answer's denials are cached
    ///   (`denials.rs`, "Composite calls").
    /// - One rule without a group is [`Limiter::acquire`] itself (the same key, the same
    ///   decision), so it has what that path has: the denial cache, coalescing with concurrent
    ///   calls on the key, and leases when they are on. A middleware with one policy pays no
    ///   Redis call for a denial the cache can answer.
    pub async fn acquire_all(
        &self,
        rules: &[Rule],
        group: Option<&[u8]>,
    ) -> Result<CompositeDecision> {
        let plan = composite::plan(rules, group, self.shards())?;
        if let ([r], None) = (rules, group) {
            let d = self.acquire(&r.key, r.limit, r.window_ms, r.cost).await?;
            return Ok(CompositeDecision {
                allowed: d.allowed,
                retry_after_ms: d.retry_after_ms,
                mode: d.mode,
                now_ms: d.now_ms,
                decisions: vec![d],
            });
        }
        let (verdicts, mode, caps) = match &self.inner.backend {
            Backend::Redis(r) => {
                let names: Vec<Vec<u8>> =
                    plan.keys.iter().map(|k| self.rule_key(k, group)).collect();
                let names: Vec<&[u8]> = names.iter().map(Vec::as_slice).collect();
                r.decide_all(&names, &plan).await?
            }
            Backend::Memory(m) => {
                self.inner.memory_decisions.fetch_add(1, Ordering::Relaxed);
                let v = match group {
                    None => m.decide_all(false, &plan.keys, &plan),
                    Some(g) => {
                        let names: Vec<Vec<u8>> = plan
                            .keys
                            .iter()
                            .map(|k| keys::group_key("", g, k))
                            .collect();
                        let names: Vec<&[u8]> = names.iter().map(Vec::as_slice).collect();
                        m.decide_all(true, &names, &plan)
                    }
                };
                if !v.iter().all(|v| v.allowed) {
                    self.inner.memory_denials.fetch_add(1, Ordering::Relaxed);
                }
                let caps = plan.rules.iter().map(|r| r.limit).collect();
                (v, Mode::Memory, caps)
            }
        };
        Ok(composite::decision(&verdicts, &caps, mode))
    }

    /// The Redis key that holds `key`'s window in a composite call with `group` (without one,
    /// [`Limiter::redis_key`]).
    pub fn rule_key(&self, key: impl AsRef<[u8]>, group: Option<&[u8]>) -> Vec<u8> {
        match group {
            Some(g) => keys::group_key(&self.inner.options.key_prefix, g, key.as_ref()),
            None => self.redis_key(key),
        }
    }

    /// Forgets everything admitted on `key` inside `group` (see [`Limiter::acquire_all`]);
    /// without a group, [`Limiter::reset`].
    pub async fn reset_in_group(&self, key: impl AsRef<[u8]>, group: Option<&[u8]>) -> Result<()> {
        let key = key.as_ref();
        let Some(g) = group else {
            return self.reset(key).await;
        };
        validate::key(key)?;
        composite::plan(&[Rule::new(key, 1, 1, 1)], group, 1)?;
        match &self.inner.backend {
            Backend::Redis(r) => r.reset(&self.rule_key(key, group)).await,
            Backend::Memory(m) => {
                m.reset_grouped(&keys::group_key("", g, key));
                Ok(())
            }
        }
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
            Backend::Redis(r) if self.sharded() => {
                shards::reset(r, &self.inner.options.key_prefix, key, self.shards()).await
            }
            Backend::Redis(r) => r.reset(&self.redis_key(key)).await,
            Backend::Memory(m) => {
                m.reset(key);
                Ok(())
            }
        }
    }

    /// Returns the permits this instance's leases did not use to Redis (and stops leasing until
    /// the next decision). Call before dropping a limiter that took leases; a limiter dropped
    /// without it (or a crashed process) leaves its leases to age out, after `lease_ms` plus
    /// the window.
    pub async fn close(&self) -> Result<()> {
        match &self.inner.backend {
            Backend::Redis(r) => r.refund_all().await,
            Backend::Memory(_) => Ok(()),
        }
    }

    /// Checks that the backend answers (connecting if needed), for readiness probes and fail-fast startup.
    pub async fn ping(&self) -> Result<()> {
        match &self.inner.backend {
            Backend::Redis(r) => r.ping().await,
            Backend::Memory(_) => Ok(()),
        }
    }

    /// Retries of admissions that Redis recognised as already admitted by their first attempt
    /// (its reply was lost) and did not count again. For tests; not part of the stats schema.
    #[doc(hidden)]
    pub fn deduplicated_retries(&self) -> u64 {
        match &self.inner.backend {
            Backend::Redis(r) => r.deduplicated_retries(),
            _ => 0,
        }
    }

    /// Which path decides now, per-path counters, state transitions and Redis round trips.
    pub fn stats(&self) -> Stats {
        let memory = (
            self.inner.memory_decisions.load(Ordering::Relaxed),
            self.inner.memory_denials.load(Ordering::Relaxed),
        );
        let Backend::Redis(r) = &self.inner.backend else {
            return Stats {
                mode: Mode::Memory,
                topology: "memory",
                decisions_normal: 0,
                decisions_local: 0,
                decisions_memory: memory.0,
                denied_normal: 0,
                denied_local: 0,
                denied_memory: memory.1,
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
                shard_borrows: 0,
                decisions_lease: 0,
                leases_taken: 0,
                lease_refunds: 0,
                leased_permits: 0,
                refunded_permits: 0,
                denials_cached: 0,
            };
        };
        Stats {
            shard_borrows: self.inner.shard_borrows.load(Ordering::Relaxed),
            ..r.stats(memory)
        }
    }

    /// This limiter's id in the fleet's heartbeats (`None` for the memory backend).
    pub fn instance_id(&self) -> Option<&str> {
        match &self.inner.backend {
            Backend::Redis(r) => Some(r.instance_id()),
            Backend::Memory(_) => None,
        }
    }

    async fn decide(&self, req: Request<'_>) -> Result<Decision> {
        if let Backend::Redis(r) = &self.inner.backend {
            if self.sharded() {
                let (prefix, n) = (&self.inner.options.key_prefix, self.shards());
                return if req.consume {
                    shards::acquire(r, prefix, &req, n, &self.inner.shard_borrows).await
                } else {
                    shards::peek(r, prefix, &req, n).await
                };
            }
        }
        let (v, mode, cap) = match &self.inner.backend {
            Backend::Redis(r) => r.decide(&req, &self.redis_key(req.key)).await?,
            Backend::Memory(m) => {
                self.inner.memory_decisions.fetch_add(1, Ordering::Relaxed);
                let v = m.decide(&req);
                if !v.allowed {
                    self.inner.memory_denials.fetch_add(1, Ordering::Relaxed);
                }
                (v, Mode::Memory, req.limit)
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
