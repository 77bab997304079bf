//! The Redis path made resilient: every decision is bounded by its deadline, retried once after
//! `retry_delay` on a connection-class error, and decided locally (`ledger.rs`) when the state
//! machine (`health.rs`) says Redis is unhealthy. A background task per limiter sends heartbeats
//! (the live instance count, in Redis), probes Redis while `local`, and before returning to
//! `normal` writes the permits admitted meanwhile back into Redis (`lua/repair.lua`), together
//! with the ones a new primary lost if a failover happened.
//!
//! With `local_fallback` off none of that runs: no record, no heartbeat, no repair; the limiter
//! is a plain Redis client whose callers see `BackendUnavailable`.

use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use tokio::sync::Notify;

use crate::backend::redis::{LeaseCall, RedisBackend, RepairCall, Settings};
use crate::backend::{Request, Verdict};
use crate::clock::{Clock, SystemClock};
use crate::composite::Plan;
use crate::decision::Mode;
use crate::denials::Denials;
use crate::error::{Error, ErrorKind, Result};
use crate::fork::ForkLocal;
use crate::health::{Health, Streak, Thresholds};
use crate::lease::{Leases, Renewal, Step, Table};
use crate::lease_worker::{Job, Worker};
use crate::ledger::Ledger;
use crate::options::Options;
use crate::primaries::{epoch_in, Primaries};
use crate::stats::Stats;

/// How often an instance announces itself, and how long an announcement counts.
const HEARTBEAT_EVERY: Duration = Duration::from_secs(1);
const LIVE_MS: u64 = 3000;
/// The local budget's divisor before any heartbeat was counted: `limit / 8`, the design's own
/// figure (8 gateways share a limit). A cold-started fleet of n instances then admits at most
/// `n * floor(limit / 8)` in any window: within the limit for up to 8 instances, and for more the
/// overshoot is n/8 until the first heartbeat counts them (or `instances` is configured).
const COLD_START_INSTANCES: u64 = 8;
/// How often Redis is probed while `local`.
const PROBE_EVERY: Duration = Duration::from_millis(25);

pub(crate) struct RedisPath {
    backend: RedisBackend,
    fleet_key: Vec<u8>,
    configured_instances: Option<u64>,
    clock: Option<Arc<dyn Clock>>,
    request_timeout: Duration,
    retry_delay: Duration,
    fallback: bool,
    ttl_slack_ms: u64,
    thresholds: Thresholds,
    local_max_keys: usize,
    lease_settings: (Leases, u64, u64),
    /// Whether Redis's denials are replayed until their `retry_after_ms` (`denials.rs`).
    denial_cache: bool,
    /// Everything that makes this limiter one instance of the fleet, per fork generation (see
    /// [`Instance`]); reached through `Deref`, so `self.ledger` is this generation's ledger.
    instance: ForkLocal<Instance>,
}

/// One instance of the fleet: its id in the heartbeats, its record of what it admitted (and the
/// flush counter of its repair tokens), its state machine, and every lock they hold. A forked
/// child is a new instance: it gets a new id (so a `gunicorn --preload` fleet counts each worker,
/// and workers' repair tokens never collide) and a fresh record (what the parent admitted locally
/// and has not flushed stays the parent's to write back, never twice), and it never waits on a
/// lock that a parent thread held at the instant of `fork()`.
pub(crate) struct Instance {
    id: String,
    health: Health,
    ledger: Ledger,
    /// Redis's denials, replayed until they expire (`denial_cache`).
    denials: Denials,
    discovered: AtomicU64,
    /// Redis time minus this host's time, learnt from decisions: the local path's clock.
    offset_ms: AtomicI64,
    started: AtomicBool,
    wake: Arc<Notify>,
    /// Set while `local` once an early repair succeeded (Redis answers, not yet for
    /// `recover_after`): each local admission is then written back at once (`flush_now`), not
    /// at the next probe, so instances already back on Redis count it.
    answering: AtomicBool,
    flush_now: Arc<Notify>,
    /// Which servers are primaries, and the slots whose new primary still needs a repair.
    primaries: Mutex<Primaries>,
    /// The generation of a flush that has not completed: the next attempt resends the same
    /// permits under the same token, so a flush whose reply was lost is not applied twice.
    outstanding: Mutex<Option<u32>>,
    /// This instance's leases (`lease.rs`); a forked child starts without any.
    leases: Table,
    /// Their background work, on standalone Redis over plain TCP (`lease_worker.rs`).
    lease_worker: Arc<Worker>,
    /// Connections dropped for a possibly moved primary whose successor `settle` has checked.
    settled: AtomicU64,
    /// One `settle` at a time: the others wait for its answer.
    settling: tokio::sync::Mutex<()>,
}

impl Instance {
    fn new(t: Thresholds, local_max_keys: usize, leases: (Leases, u64, u64)) -> Self {
        Instance {
            leases: Table::new(leases.0, leases.1, leases.2),
            lease_worker: Arc::default(),
            id: instance_id(),
            health: Health::new(t),
            ledger: Ledger::new(local_max_keys),
            denials: Denials::new(local_max_keys),
            discovered: AtomicU64::new(0),
            offset_ms: AtomicI64::new(0),
            started: AtomicBool::new(false),
            wake: Arc::new(Notify::new()),
            answering: AtomicBool::new(false),
            flush_now: Arc::new(Notify::new()),
            primaries: Mutex::new(Primaries::default()),
            outstanding: Mutex::new(None),
            settled: AtomicU64::new(0),
            settling: tokio::sync::Mutex::new(()),
        }
    }
}

impl std::ops::Deref for RedisPath {
    type Target = Instance;

    fn deref(&self) -> &Instance {
        self.instance.get_or_init(|| {
            Instance::new(self.thresholds, self.local_max_keys, self.lease_settings)
        })
    }
}

impl std::fmt::Debug for RedisPath {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.backend.fmt(f)
    }
}

enum Outcome<T = Verdict> {
    /// The call's result, and how long its task waited to run once the reply had woken it.
    Done(Result<T>, Duration),
    Slow,
    Deadline,
}

impl RedisPath {
    pub(crate) fn new(url: &str, options: &Options) -> Result<Self> {
        let backend = RedisBackend::open(
            url,
            &Settings {
                connect_timeout: options.connect_timeout,
                request_timeout: options.request_timeout,
                retry_delay: options.retry_delay,
                clock: options.clock.clone(),
                max_clock_skew_ms: options.max_clock_skew_ms,
                in_place_wait: if options.local_fallback {
                    options.degrade_rtt.min(options.request_timeout)
                } else {
                    options.request_timeout
                },
                busy_poll: options.busy_poll,
            },
        )?;
        Ok(RedisPath {
            backend,
            fleet_key: format!("{}instances", options.key_prefix).into_bytes(),
            configured_instances: options.instances,
            clock: options.clock.clone(),
            request_timeout: options.request_timeout,
            retry_delay: options.retry_delay,
            fallback: options.local_fallback,
            ttl_slack_ms: 1000
                + if options.clock.is_some() {
                    2 * options.max_clock_skew_ms
                } else {
                    0
                },
            thresholds: Thresholds {
                slow_rtt: options.degrade_rtt,
                slow_for: options.degrade_after,
                recover_rtt: options.recover_rtt,
                recover_for: options.recover_after,
            },
            local_max_keys: options.local_max_keys,
            lease_settings: (options.leases, options.lease_ms, options.lease_hot_rate),
            denial_cache: options.denial_cache,
            instance: ForkLocal::new(),
        })
    }

    /// Retries Redis answered from their first attempt's record (admitted, not counted again).
    pub(crate) fn deduplicated_retries(&self) -> u64 {
        self.backend.deduplicated()
    }

    pub(crate) fn instance_id(&self) -> &str {
        &self.id
    }

    /// The local budget's divisor: configured, or the live instances last counted in Redis, or,
    /// before any count (Redis down since the start, or a misconfiguration), the design's own
    /// fleet size, so a fleet of up to that many cold-started instances stays within the limit.
    pub(crate) fn instances(&self) -> u64 {
        self.configured_instances
            .unwrap_or_else(|| match self.discovered.load(Ordering::Relaxed) {
                0 => COLD_START_INSTANCES,
                n => n,
            })
    }

    pub(crate) fn is_local(&self) -> bool {
        self.fallback && self.health.is_local()
    }

    /// Forgets everything admitted on `redis_key`, here and in Redis.
    pub(crate) async fn reset(&self, redis_key: &[u8]) -> Result<()> {
        self.ledger.forget(redis_key);
        self.leases.forget(redis_key);
        let done = self.backend.reset(redis_key).await;
        // After the reset, so that a denial sent before it and answered since is not cached.
        self.denials.forget(redis_key);
        done
    }

    pub(crate) async fn ping(&self) -> Result<()> {
        self.backend.ping().await
    }

    /// This path's figures; `memory` is the limiter's own count of memory-backend decisions.
    /// `memory`: the memory backend's decisions and denials (a limiter has both paths' counters).
    pub(crate) fn stats(&self, memory: (u64, u64)) -> Stats {
        let c = &self.health.counters;
        let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
        let (age, reason) = self.health.state_age();
        let rtt = self.health.rtt();
        Stats {
            mode: if self.is_local() {
                Mode::Local
            } else {
                Mode::Normal
            },
            topology: self.backend.topology_name(),
            decisions_normal: get(&c.normal),
            decisions_local: get(&c.local),
            decisions_memory: memory.0,
            denied_normal: get(&c.denied_normal),
            denied_local: get(&c.denied_local),
            denied_memory: memory.1,
            transitions_to_local: get(&c.to_local),
            transitions_to_normal: get(&c.to_normal),
            state_ms: age.as_millis() as u64,
            state_reason: reason,
            redis_errors: get(&c.errors),
            retries: get(&c.retries),
            probes: get(&c.probes),
            repairs: get(&c.repairs),
            repaired_permits: get(&c.repaired_permits),
            failovers: get(&c.failovers),
            instances: self.instances(),
            local_keys: self.ledger.keys() as u64,
            rtt_samples: rtt.samples,
            rtt_last_us: rtt.last_us,
            rtt_p50_us: rtt.p50_us,
            rtt_p99_us: rtt.p99_us,
            rtt_max_us: rtt.max_us,
            shard_borrows: 0,
            decisions_lease: get(&self.leases.counters.decisions),
            leases_taken: get(&self.leases.counters.taken),
            lease_refunds: get(&self.leases.counters.refunds),
            leased_permits: get(&self.leases.counters.leased_permits),
            refunded_permits: get(&self.leases.counters.refunded_permits),
            denials_cached: get(&self.denials.hits),
        }
    }

    /// Decides on Redis, or locally while Redis is unhealthy. Returns the verdict, the path that
    /// made it and the permit cap it was made against (the limit, or the local budget).
    pub(crate) async fn decide(
        self: &Arc<Self>,
        req: &Request<'_>,
        redis_key: &[u8],
    ) -> Result<(Verdict, Mode, u64)> {
        if self.fallback {
            self.ensure_task();
        }
        if self.is_local() {
            return Ok(self.decide_local(req, redis_key));
        }
        if req.consume && self.leases.mode != Leases::Off {
            // Boxed: nested in every caller's future, the lease path's states would make it too
            // deep for the compiler's layout limit (and larger for callers that never lease).
            if let Some(v) = Box::pin(self.decide_leased(req, redis_key)).await {
                return Ok(v);
            }
        }
        if self.denial_cache {
            if let Some(v) = self.denials.check(redis_key, req, self.clock.as_deref()) {
                // A replayed denial is ready at once: spend tokio's cooperative budget, so that a
                // caller looping on a denied key yields now and then and cannot starve the
                // connection tasks that share its runtime thread (a 16-task closed loop timed
                // every Redis call out without this).
                tokio::task::consume_budget().await;
                return Ok((v, Mode::Normal, req.limit));
            }
        }
        let epoch = self.denials.epoch();
        let deadline = Instant::now() + self.request_timeout;
        let mut retried = false;
        // The same on the retry: a retry of an admission its lost reply hid is not counted twice
        // (`backend/attempts.rs`).
        let token = if req.consume { self.backend.token() } else { 0 };
        loop {
            self.settle(deadline).await;
            let started = Instant::now();
            let ticket = match self.backend.join(req, redis_key, token) {
                Ok(ticket) => ticket,
                // A full queue for one key is this call's problem alone: decided locally (the
                // error without the fallback) at once, never retried, never a change of state.
                Err(e) if self.fallback => {
                    tracing::debug!(error = %e, "rl: deciding this call locally");
                    return Ok(self.decide_local(req, redis_key));
                }
                Err(e) => return Err(e),
            };
            match self
                .watch(self.backend.decide(ticket), started, deadline)
                .await
            {
                Outcome::Done(Ok(v), waited) => {
                    let rtt = started.elapsed();
                    let slow_too_long = self.health.observe(started, rtt, waited);
                    self.learn_offset(v.now_ms, rtt);
                    if self.fallback {
                        let admitted = if req.consume && v.allowed {
                            req.cost
                        } else {
                            0
                        };
                        self.ledger
                            .record(redis_key, req.window_ms, v.now_ms, admitted, v.used);
                    }
                    self.health.counters.normal.fetch_add(1, Ordering::Relaxed);
                    if !v.allowed {
                        let denied = &self.health.counters.denied_normal;
                        denied.fetch_add(1, Ordering::Relaxed);
                    }
                    if self.denial_cache {
                        let clock = self.clock.as_deref();
                        self.denials
                            .learn(redis_key, req, &v, started, epoch, clock);
                        if req.consume && v.allowed {
                            self.denials.admitted(redis_key);
                        }
                    }
                    if slow_too_long
                        && self.fallback
                        && self
                            .health
                            .to_local("Redis round trips above degrade_rtt for degrade_after")
                    {
                        self.wake.notify_one();
                    }
                    return Ok((v, Mode::Normal, req.limit));
                }
                Outcome::Done(Err(e), _) if e.kind() == ErrorKind::BackendUnavailable => {
                    self.health.counters.errors.fetch_add(1, Ordering::Relaxed);
                    if !retried && Instant::now() + self.retry_delay < deadline {
                        retried = true;
                        self.health.counters.retries.fetch_add(1, Ordering::Relaxed);
                        tokio::time::sleep(self.retry_delay).await;
                        continue;
                    }
                    return self.fall_back(req, redis_key, e, "Redis errors after the retry");
                }
                Outcome::Done(Err(e), _) => return Err(e),
                Outcome::Slow => {
                    let e = Error::BackendUnavailable(
                        "Redis round trips stayed above degrade_rtt for degrade_after".into(),
                    );
                    return self.fall_back(
                        req,
                        redis_key,
                        e,
                        "Redis round trips above degrade_rtt for degrade_after",
                    );
                }
                Outcome::Deadline => {
                    let e = Error::BackendUnavailable(format!(
                        "no answer from Redis within {} ms",
                        self.request_timeout.as_millis()
                    ));
                    return self.fall_back(req, redis_key, e, "request timeout");
                }
            }
        }
    }

    /// A composite call (`composite.rs`) on `redis_keys` (the plan's keys, in its order): on
    /// Redis in one script call, coalesced with concurrent composite calls on the same slot
    /// (`backend/composite_batch.rs`; everything below is per request, as alone), with `decide`'s resilience (bounded by the request timeout,
    /// retried once on an outage, decided locally while Redis is unhealthy); admissions are
    /// recorded in the ledger under each key, so the local budget and the failover repair see
    /// them. Takes no lease. With `denial_cache`, a call a cached denial proves denied is answered
    /// from the cache, and the answer's denials are learnt (`denials.rs`, "Composite calls").
    /// Returns one verdict per rule, the path and each rule's cap (its limit, or locally this
    /// instance's share).
    pub(crate) async fn decide_all(
        self: &Arc<Self>,
        redis_keys: &[&[u8]],
        plan: &Plan<'_>,
    ) -> Result<(Vec<Verdict>, Mode, Vec<u64>)> {
        if self.fallback {
            self.ensure_task();
        }
        if self.is_local() {
            return Ok(self.decide_all_local(redis_keys, plan));
        }
        let caps = || plan.rules.iter().map(|r| r.limit).collect();
        if self.denial_cache {
            let clock = self.clock.as_deref();
            if let Some(v) = self.denials.check_all(redis_keys, &plan.rules, clock) {
                // Ready at once: yield now and then, as `decide` does for a replayed denial.
                tokio::task::consume_budget().await;
                return Ok((v, Mode::Normal, caps()));
            }
        }
        let epoch = self.denials.epoch();
        let deadline = Instant::now() + self.request_timeout;
        let mut retried = false;
        loop {
            self.settle(deadline).await;
            let started = Instant::now();
            let ticket = match self.backend.join_all(redis_keys, plan) {
                Ok(ticket) => ticket,
                // A full queue for one slot is this call's problem alone, as in `decide`.
                Err(e) if self.fallback => {
                    tracing::debug!(error = %e, "rl: deciding this composite call locally");
                    return Ok(self.decide_all_local(redis_keys, plan));
                }
                Err(e) => return Err(e),
            };
            // Its own answer may be an error while the batch's call succeeded (a key of its
            // that holds another program's value: `composite_batch.rs`).
            let call = async { self.backend.decide(ticket).await.and_then(|own| own) };
            let (e, reason) = match self.watch(call, started, deadline).await {
                Outcome::Done(Ok(verdicts), waited) => {
                    let rtt = started.elapsed();
                    let slow_too_long = self.health.observe(started, rtt, waited);
                    if let Some(v) = verdicts.first() {
                        self.learn_offset(v.now_ms, rtt);
                    }
                    if self.fallback {
                        let allowed = verdicts.iter().all(|v| v.allowed);
                        for (k, &i) in plan.longest().iter().enumerate() {
                            let (r, v) = (&plan.rules[i], &verdicts[i]);
                            let admitted = if allowed { r.cost } else { 0 };
                            self.ledger.record(
                                redis_keys[k],
                                r.window_ms,
                                v.now_ms,
                                admitted,
                                v.used,
                            );
                        }
                    }
                    self.health.counters.normal.fetch_add(1, Ordering::Relaxed);
                    if verdicts.iter().all(|v| v.allowed) {
                        if self.denial_cache {
                            redis_keys.iter().for_each(|k| self.denials.admitted(k));
                        }
                    } else {
                        let denied = &self.health.counters.denied_normal;
                        denied.fetch_add(1, Ordering::Relaxed);
                        if self.denial_cache {
                            let clock = self.clock.as_deref();
                            self.denials.learn_all(
                                redis_keys,
                                &plan.rules,
                                &verdicts,
                                started,
                                epoch,
                                clock,
                            );
                        }
                    }
                    if slow_too_long
                        && self.fallback
                        && self
                            .health
                            .to_local("Redis round trips above degrade_rtt for degrade_after")
                    {
                        self.wake.notify_one();
                    }
                    return Ok((verdicts, Mode::Normal, caps()));
                }
                Outcome::Done(Err(e), _) if e.kind() == ErrorKind::BackendUnavailable => {
                    self.health.counters.errors.fetch_add(1, Ordering::Relaxed);
                    if !retried && Instant::now() + self.retry_delay < deadline {
                        retried = true;
                        self.health.counters.retries.fetch_add(1, Ordering::Relaxed);
                        tokio::time::sleep(self.retry_delay).await;
                        continue;
                    }
                    (e, "Redis errors after the retry")
                }
                Outcome::Done(Err(e), _) => return Err(e),
                Outcome::Slow => (
                    Error::BackendUnavailable(
                        "Redis round trips stayed above degrade_rtt for degrade_after".into(),
                    ),
                    "Redis round trips above degrade_rtt for degrade_after",
                ),
                Outcome::Deadline => (
                    Error::BackendUnavailable(format!(
                        "no answer from Redis within {} ms",
                        self.request_timeout.as_millis()
                    )),
                    "request timeout",
                ),
            };
            if !self.fallback {
                return Err(e);
            }
            if self.health.to_local(reason) {
                self.wake.notify_one();
            }
            tracing::debug!(error = %e, "rl: deciding a composite call locally");
            return Ok(self.decide_all_local(redis_keys, plan));
        }
    }

    /// A composite call on the ledger: every rule within this instance's share of its limit.
    fn decide_all_local(
        &self,
        redis_keys: &[&[u8]],
        plan: &Plan<'_>,
    ) -> (Vec<Verdict>, Mode, Vec<u64>) {
        let instances = self.instances();
        let budgets: Vec<u64> = plan.rules.iter().map(|r| r.limit / instances).collect();
        self.health.counters.local.fetch_add(1, Ordering::Relaxed);
        let v = self
            .ledger
            .decide_all(redis_keys, plan, &budgets, self.local_now());
        if !v.iter().all(|v| v.allowed) {
            let denied = &self.health.counters.denied_local;
            denied.fetch_add(1, Ordering::Relaxed);
        } else if self.answering.load(Ordering::Relaxed) {
            self.flush_now.notify_one();
        }
        (v, Mode::Local, budgets)
    }

    /// A decision from this instance's lease on the key, taking or renewing the lease if due;
    /// `None`: the plain path decides (no lease, or none granted, or the lease call failed).
    async fn decide_leased(
        self: &Arc<Self>,
        req: &Request<'_>,
        redis_key: &[u8],
    ) -> Option<(Verdict, Mode, u64)> {
        for _ in 0..2 {
            let step = self.leases.take(redis_key, req, Instant::now());
            if let Step::LeaseAhead(_, r) = &step {
                self.renew_ahead(redis_key, (req.window_ms, req.limit), *r);
            }
            match step {
                Step::Lease(v) | Step::LeaseAhead(v, _) => {
                    if self.fallback {
                        // Redis counted these permits: the local budget and the failover repair
                        // must know them as admitted.
                        self.ledger
                            .record(redis_key, req.window_ms, v.now_ms, req.cost, v.used);
                    }
                    // Ready at once, like a replayed denial: yield now and then (see `decide`).
                    tokio::task::consume_budget().await;
                    return Some((v, Mode::Lease, req.limit));
                }
                Step::Plain => return None,
                Step::Renew(r) => {
                    self.lease_call(redis_key, (req.window_ms, req.limit), &r)
                        .await?;
                }
            }
        }
        None
    }

    /// Sends one lease call under `rule` (`(window_ms, limit)`: a refund and/or a new lease);
    /// the new lease's seq if one was granted.
    async fn lease_call(
        self: &Arc<Self>,
        redis_key: &[u8],
        rule: (u64, u64),
        r: &Renewal,
    ) -> Option<u64> {
        let sent = Instant::now();
        let reply = self.send_lease(redis_key, Some(rule), r).await;
        // A lease is counted as used in Redis: verdicts kept for the key are stale.
        self.denials.admitted(redis_key);
        let (seq, displaced) = self.leases.renewed(redis_key, Some(rule), r, &reply, sent);
        let seq = seq?;
        self.refund_later(redis_key, seq);
        if let Some(old) = displaced {
            self.refund_now(redis_key, old);
        }
        Some(seq)
    }

    /// Takes the next lease of a hot key in the background (`Step::LeaseAhead`), while the
    /// current one keeps granting; the current one is returned once the new one is in.
    fn renew_ahead(self: &Arc<Self>, redis_key: &[u8], rule: (u64, u64), renewal: Renewal) {
        let job = Job::Ahead {
            key: redis_key.to_vec(),
            rule,
            renewal,
        };
        self.start_lease_job(job);
    }

    /// Returns a lease that no longer grants (a renewal ahead displaced it), in the background.
    fn refund_now(self: &Arc<Self>, redis_key: &[u8], renewal: Renewal) {
        let job = Job::Refund {
            key: redis_key.to_vec(),
            renewal,
        };
        self.start_lease_job(job);
    }

    /// Background lease work: on the lease thread where calls can go on a socket of its own
    /// (`lease_worker.rs`), else as a runtime task.
    fn start_lease_job(self: &Arc<Self>, job: Job) {
        let job = match self.backend.has_in_place() {
            true => match self.lease_worker.push(self, job) {
                Ok(()) => return,
                Err(job) => job,
            },
            false => job,
        };
        self.spawn_lease_job(job);
    }

    /// Runs `job` as a runtime task.
    pub(crate) fn spawn_lease_job(self: &Arc<Self>, job: Job) {
        let Ok(rt) = tokio::runtime::Handle::try_current().or_else(|_| crate::runtime::handle())
        else {
            if let Job::Ahead { key, .. } = &job {
                self.leases.abandon(key);
            }
            return;
        };
        let p = self.clone();
        // Boxed: the task's type would otherwise nest inside the lease call's own future.
        let task: std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>> =
            Box::pin(async move { p.lease_job(job).await });
        rt.spawn(task);
    }

    /// Runs `job` on this thread, a plain one (the lease thread): its calls go on a socket of
    /// its own and block this thread, not the runtime's.
    pub(crate) fn run_lease_job_here(self: &Arc<Self>, job: Job) {
        let abandoned = match &job {
            Job::Ahead { key, .. } => Some(key.clone()),
            Job::Refund { .. } => None,
        };
        if crate::runtime::block_on(self.lease_job(job)).is_err() {
            if let Some(key) = abandoned {
                self.leases.abandon(&key);
            }
        }
    }

    async fn lease_job(self: &Arc<Self>, job: Job) {
        match job {
            Job::Ahead { key, rule, renewal } => {
                self.lease_call(&key, rule, &renewal).await;
            }
            Job::Refund { key, renewal } => {
                if self.send_lease(&key, None, &renewal).await.is_ok() {
                    self.leases.returned(&renewal);
                }
            }
        }
    }

    /// Whether lease `seq` of `redis_key` is still held here (its refund is still due).
    pub(crate) fn holds_lease(&self, redis_key: &[u8], seq: u64) -> bool {
        self.leases.holds(redis_key, seq)
    }

    /// Returns lease `seq` of `redis_key` if no request renewed it (its refund timer fired), on
    /// this thread, a plain one (the lease thread).
    pub(crate) fn refund_due(self: &Arc<Self>, redis_key: &[u8], seq: u64) {
        let _ = crate::runtime::block_on(self.expire_lease(redis_key, seq));
    }

    async fn expire_lease(&self, redis_key: &[u8], seq: u64) {
        if let Some(r) = self.leases.expire(redis_key, seq) {
            let reply = self.send_lease(redis_key, None, &r).await;
            self.leases
                .renewed(redis_key, None, &r, &reply, Instant::now());
        }
    }

    /// The lease call itself: under `rule`, or for a refund alone under the lease's own, as the
    /// instance's HASH field for the call's slot.
    async fn send_lease(
        &self,
        redis_key: &[u8],
        rule: Option<(u64, u64)>,
        r: &Renewal,
    ) -> Result<crate::backend::redis::LeaseReply> {
        let (window_ms, limit) = rule.unwrap_or((r.old_window_ms, r.old_limit));
        self.settle(Instant::now() + self.request_timeout).await;
        let slot_id;
        let instance = match r.slot {
            0 => self.id.as_str(),
            n => {
                slot_id = format!("{}/{n}", self.id);
                slot_id.as_str()
            }
        };
        let reply = self
            .backend
            .lease(
                redis_key,
                &LeaseCall {
                    instance,
                    window_ms,
                    limit,
                    want: r.want.min(limit),
                    min: r.min,
                    lease_ms: self.leases.lease_ms,
                    seq: r.seq,
                    old_seq: r.old_seq,
                    old_used: r.old_used,
                },
            )
            .await;
        if let Err(e) = &reply {
            tracing::debug!(error = %e, "rl: lease call failed; the lease ages out in Redis");
        }
        reply
    }

    /// Returns the lease `seq` on `redis_key` once its time is up, unless a request renewed it:
    /// a key whose traffic stopped gives its unused permits back.
    fn refund_later(self: &Arc<Self>, redis_key: &[u8], seq: u64) {
        let delay = crate::lease::refund_after(self.leases.lease_ms);
        if self.backend.has_in_place()
            && self
                .lease_worker
                .arm(self, redis_key, seq, Instant::now() + delay)
        {
            return;
        }
        let Ok(rt) = tokio::runtime::Handle::try_current().or_else(|_| crate::runtime::handle())
        else {
            return;
        };
        let (weak, key) = (Arc::downgrade(self), redis_key.to_vec());
        // Boxed: the task's type would otherwise nest inside the lease call's own future.
        let task: std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>> =
            Box::pin(async move {
                tokio::time::sleep(delay).await;
                let Some(p) = weak.upgrade() else { return };
                p.expire_lease(&key, seq).await;
            });
        rt.spawn(task);
    }

    /// Returns every lease's unused permits (the limiter closes).
    pub(crate) async fn refund_all(self: &Arc<Self>) -> Result<()> {
        let mut first_error = None;
        for (key, r) in self.leases.drain() {
            let reply = self.send_lease(&key, None, &r).await;
            self.leases.renewed(&key, None, &r, &reply, Instant::now());
            if let Err(e) = reply {
                first_error.get_or_insert(e);
            }
        }
        first_error.map_or(Ok(()), Err)
    }

    /// Runs a Redis call until it completes, its deadline passes, or (with the fallback on) it has
    /// been slower than `degrade_rtt` for `degrade_after`: a frozen Redis sends the limiter local
    /// within that period, not after the request timeout. One timer at a time, on the hot path.
    async fn watch<T>(
        &self,
        fut: impl std::future::Future<Output = Result<T>>,
        started: Instant,
        deadline: Instant,
    ) -> Outcome<T> {
        let fut = self.health.lag.timed(fut);
        tokio::pin!(fut);
        let t = self.health.t;
        let mut check_at = if self.fallback {
            (started + t.slow_rtt).min(deadline)
        } else {
            deadline
        };
        loop {
            tokio::select! {
                biased;
                (r, waited) = &mut fut => return Outcome::Done(r, waited),
                _ = tokio::time::sleep_until(tokio::time::Instant::from_std(check_at)) => {}
            }
            let now = Instant::now();
            if now >= deadline {
                return Outcome::Deadline;
            }
            // Slow so far by Redis's part only: the client's own lag meanwhile is excused.
            self.health.lag.arm();
            let excused = self.health.excused(started, now, Duration::ZERO);
            let redis = now.saturating_duration_since(started) - excused;
            if redis <= t.slow_rtt {
                check_at = (now + (t.slow_rtt - redis).max(Duration::from_millis(1))).min(deadline);
                continue;
            }
            let since = self.health.mark_slow(started + t.slow_rtt + excused);
            if now >= since + t.slow_for {
                return Outcome::Slow;
            }
            check_at = (since + t.slow_for).min(deadline);
        }
    }

    fn fall_back(
        &self,
        req: &Request<'_>,
        redis_key: &[u8],
        e: Error,
        reason: &str,
    ) -> Result<(Verdict, Mode, u64)> {
        if !self.fallback {
            return Err(e);
        }
        if self.health.to_local(reason) {
            self.wake.notify_one();
        }
        tracing::debug!(error = %e, "rl: deciding locally");
        Ok(self.decide_local(req, redis_key))
    }

    fn decide_local(&self, req: &Request<'_>, redis_key: &[u8]) -> (Verdict, Mode, u64) {
        let budget = req.limit / self.instances();
        self.health.counters.local.fetch_add(1, Ordering::Relaxed);
        let v = self.ledger.decide(
            redis_key,
            req.window_ms,
            req.limit,
            budget,
            req.cost,
            req.consume,
            self.local_now(),
        );
        if !v.allowed {
            let denied = &self.health.counters.denied_local;
            denied.fetch_add(1, Ordering::Relaxed);
        } else if req.consume && self.answering.load(Ordering::Relaxed) {
            self.flush_now.notify_one();
        }
        (v, Mode::Local, budget)
    }

    /// The local path's clock: the configured client clock, or this host's clock shifted to
    /// Redis time, so local decisions and their repair line up with Redis's buckets.
    fn local_now(&self) -> u64 {
        match &self.clock {
            Some(c) => c.now_ms(),
            None => (SystemClock.now_ms() as i64)
                .saturating_add(self.offset_ms.load(Ordering::Relaxed))
                .max(0) as u64,
        }
    }

    /// Learns Redis time minus this host's time from a call that took `rtt`: Redis read its clock
    /// somewhere inside the round trip, so only fast calls say something precise (a call that
    /// waited out a frozen Redis would shift the local clock by half the freeze).
    fn learn_offset(&self, server_ms: u64, rtt: Duration) {
        if self.clock.is_none() && rtt <= self.health.t.slow_rtt {
            let midpoint = SystemClock.now_ms() as i64 - (rtt.as_millis() / 2) as i64;
            self.offset_ms
                .store(server_ms as i64 - midpoint, Ordering::Relaxed);
        }
    }

    /// Starts the background task on the caller's runtime (the core's own for blocking and
    /// binding callers): the connection is driven by the runtime that first uses it, and a task
    /// on another runtime could be the first, moving every request's wake-ups across thread pools
    /// (measured: half the decisions/s at concurrency 1). If that runtime shuts down, the task's
    /// guard clears the flag and the next call starts it again.
    fn ensure_task(self: &Arc<Self>) {
        let started = &self.started;
        if started.load(Ordering::Acquire) || started.swap(true, Ordering::AcqRel) {
            return;
        }
        let handle = match tokio::runtime::Handle::try_current() {
            Ok(h) => h,
            Err(_) => match crate::runtime::handle() {
                Ok(h) => h,
                Err(e) => {
                    tracing::warn!(error = %e, "rl: no runtime for heartbeats and probes");
                    return;
                }
            },
        };
        let (weak, wake) = (
            Arc::downgrade(self),
            (self.wake.clone(), self.flush_now.clone()),
        );
        let lag = self.health.lag.clone();
        handle.spawn(async move {
            let _restart = Restart(weak.clone());
            // The lag probe measures this runtime, the one the connection and callers run on.
            tokio::select! {
                _ = background(weak, wake) => {}
                _ = lag.run() => {}
            }
        });
    }

    /// Before a call on a connection made anew after an error that may mean the primary moved
    /// (Sentinel), checks who is primary and, if it is a new one, writes back what it lacks
    /// (`flush`): a live primary demoted after `SENTINEL FAILOVER` drops what it admitted since
    /// the promotion, and the new one must not decide without those permits (measured: 146 in
    /// one window at limit 100 without this; `core/tests/topologies.rs`). One caller checks, the
    /// others wait for it; by `deadline`, after which the call goes on (and its own deadline
    /// decides). Costs an atomic load while no connection was dropped.
    async fn settle(&self, deadline: Instant) {
        let dropped = self.backend.forgotten();
        if !self.fallback || dropped <= self.settled.load(Ordering::Acquire) {
            return;
        }
        // Boxed: nested in every call's future, the check's states would make it too deep for
        // the compiler's layout limit (and larger for the calls that never need it).
        let check: std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send + '_>> =
            Box::pin(async move {
                let _one = self.settling.lock().await;
                if dropped <= self.settled.load(Ordering::Acquire) {
                    return;
                }
                let repaired = async {
                    self.check_primary().await?;
                    self.flush().await
                }
                .await;
                match repaired {
                    Ok(()) => {
                        self.settled.fetch_max(dropped, Ordering::AcqRel);
                    }
                    Err(e) => {
                        tracing::debug!(error = %e, "rl: could not check the primary before a call")
                    }
                }
            });
        let _ = tokio::time::timeout_at(deadline.into(), check).await;
    }

    /// Reads who is primary for which slots; a server that was never primary before (a failover,
    /// or a restart that lost the data) may lack permits this instance saw admitted in its slots.
    /// Only an outage fails it: when the answer is refused (an ACL user without `INFO`), the
    /// limiter cannot tell a new primary and assumes none, rather than stay local for good.
    async fn check_primary(&self) -> Result<()> {
        let now = match self.backend.primaries().await {
            Ok(now) => now,
            Err(e) if e.kind() != ErrorKind::BackendUnavailable => {
                if self
                    .primaries
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .cannot_tell()
                {
                    tracing::warn!(error = %e, "rl: cannot tell who is primary (grant +info to rl's Redis user); failover repair is off");
                }
                return Ok(());
            }
            Err(e) => return Err(e),
        };
        let new = self
            .primaries
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .observe(&now);
        if new > 0 {
            self.health
                .counters
                .failovers
                .fetch_add(new as u64, Ordering::Relaxed);
            tracing::warn!(
                new_primaries = new,
                ?now,
                "rl: new Redis primary; repairing the windows it lacks"
            );
        }
        Ok(())
    }

    /// Writes back what Redis lacks: permits admitted locally, and after a failover the permits
    /// admitted by the old primary that did not reach the new one. Idempotent (see `lua/repair.lua`).
    async fn flush(&self) -> Result<()> {
        let epochs = self
            .primaries
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .pending();
        if epochs.is_empty() && !self.ledger.has_work() {
            return Ok(());
        }
        let upto = *self
            .outstanding
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get_or_insert_with(|| self.ledger.begin_flush());
        let token = format!("{}:{}", self.id, upto);
        let since = self.local_now();
        for p in self.ledger.pending(upto, since, !epochs.is_empty()) {
            let epoch = epoch_in(&epochs, crate::keys::slot(&p.key));
            let failover: &[(u64, u64)] = if epoch.is_some() { &p.admitted } else { &[] };
            // A key decided locally since the last flush is read even with nothing to write:
            // its local decisions count what Redis holds (`window.rs`, `Seen`).
            if p.local.is_empty() && failover.is_empty() && !(p.refresh && self.is_local()) {
                continue;
            }
            let mut marker = p.key.clone();
            marker.extend_from_slice(b":repair");
            let call = RepairCall {
                instance: &self.id,
                window_ms: p.window_ms,
                ttl_ms: p.window_ms + self.ttl_slack_ms,
                local_token: if p.local.is_empty() { "" } else { &token },
                local: &p.local,
                epoch: epoch.unwrap_or(""),
                failover,
            };
            let (local, lost, held) = match self.backend.repair(&p.key, &marker, &call).await {
                Ok(added) => added,
                Err(e) if e.kind() == ErrorKind::BackendUnavailable => return Err(e),
                // The key holds something else (another program's value), or the script was
                // refused: no retry can fix that. The permits are dropped, and the other keys and
                // the return to `normal` go on.
                Err(e) => {
                    let permits: u64 = p.local.iter().chain(failover).map(|&(_, n)| n).sum();
                    tracing::warn!(key = %String::from_utf8_lossy(&p.key), permits, error = %e, "rl: cannot repair this key; its permits are dropped");
                    self.ledger.flushed(&p.key, upto);
                    continue;
                }
            };
            self.ledger.flushed(&p.key, upto);
            if let Some((held, at)) = held {
                self.ledger.seen(&p.key, since, at, held);
            }
            if p.local.is_empty() && failover.is_empty() {
                continue; // a read only
            }
            self.health.counters.repairs.fetch_add(1, Ordering::Relaxed);
            self.health
                .counters
                .repaired_permits
                .fetch_add(local + lost, Ordering::Relaxed);
            if lost > 0 {
                tracing::info!(key = %String::from_utf8_lossy(&p.key), permits = lost, "rl: restored permits the new primary lost");
            }
        }
        *self.outstanding.lock().unwrap_or_else(|p| p.into_inner()) = None;
        self.primaries
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .repaired(&epochs);
        Ok(())
    }

    /// A probe's round trip: the heartbeat's `beat`, or on Cluster the slowest master's if that
    /// is slower; `None` (a failed probe) when a master does not answer.
    async fn slowest_master(&self, beat: Duration) -> Option<Duration> {
        match self.backend.ping_masters().await {
            Ok(masters) => Some(masters.map_or(beat, |m| m.max(beat))),
            Err(e) => {
                tracing::trace!(error = %e, "rl: a master did not answer the probe");
                None
            }
        }
    }

    /// The heartbeat's round trip as measured, and Redis's part of it (while `local`, less the
    /// client's own scheduling lag).
    async fn heartbeat(&self) -> Result<(Duration, Duration)> {
        let started = Instant::now();
        let (live, server_ms) = self
            .backend
            .heartbeat(&self.fleet_key, &self.id, LIVE_MS)
            .await?;
        let measured = started.elapsed();
        self.discovered.store(live, Ordering::Relaxed);
        // Recovery is judged on Redis's part too: while `local` the probe is kept armed.
        let rtt = if self.is_local() {
            self.health.lag.arm();
            measured
                - self
                    .health
                    .excused(started, started + measured, Duration::ZERO)
        } else {
            measured
        };
        self.learn_offset(server_ms, rtt);
        Ok((measured, rtt))
    }
}

/// Clears the "started" flag when the background task ends or is dropped with its runtime.
struct Restart(Weak<RedisPath>);

/// A dropped limiter's background task ends now, not after its next sleep (up to a second): it
/// holds the limiter's lag probe meanwhile, and a process that opens and closes limiters at a high
/// rate (per request, Java's `LeakTest`) would keep a second's worth of them.
impl Drop for RedisPath {
    fn drop(&mut self) {
        self.wake.notify_one();
        self.lease_worker.close();
    }
}

impl Drop for Restart {
    fn drop(&mut self) {
        if let Some(p) = self.0.upgrade() {
            p.started.store(false, Ordering::Release);
        }
    }
}

/// Heartbeats every second; while `local`, a probe every 25 ms, and the way back to `normal`.
/// Ends when the limiter is dropped.
async fn background(path: Weak<RedisPath>, (wake, flush_now): (Arc<Notify>, Arc<Notify>)) {
    let mut last_beat: Option<Instant> = None;
    let mut streak = Streak::default();
    loop {
        let Some(p) = path.upgrade() else { return };
        let local = p.is_local();
        if local {
            p.health.counters.probes.fetch_add(1, Ordering::Relaxed);
            let beat = p.heartbeat().await;
            if beat.is_ok() {
                // Redis answers, if not yet fast enough: write the local permits back now, so
                // instances that return to `normal` sooner than this one see them.
                let early = async {
                    p.check_primary().await?;
                    p.flush().await
                }
                .await;
                p.answering.store(early.is_ok(), Ordering::Relaxed);
                if let Err(e) = early {
                    tracing::trace!(error = %e, "rl: early repair failed");
                }
            } else {
                p.answering.store(false, Ordering::Relaxed);
            }
            let rtts = match beat {
                Ok((measured, rtt)) => p.slowest_master(rtt).await.map(|worst| (measured, worst)),
                Err(_) => None,
            };
            if streak.probe_all(Instant::now(), rtts, &p.health.t) {
                last_beat = Some(Instant::now());
                streak.reset();
                match async {
                    p.check_primary().await?;
                    p.flush().await
                }
                .await
                {
                    Ok(()) => {
                        p.answering.store(false, Ordering::Relaxed);
                        p.health
                            .to_normal("probes below recover_rtt for recover_after");
                        // Permits admitted locally while the repair ran.
                        if let Err(e) = p.flush().await {
                            tracing::debug!(error = %e, "rl: flush after recovery failed; will retry");
                        }
                    }
                    Err(e) => {
                        tracing::debug!(error = %e, "rl: repair before recovery failed; staying local")
                    }
                }
            } else if let Err(e) = &beat {
                tracing::trace!(error = %e, "rl: probe failed");
            }
        } else if last_beat.is_none_or(|t| t.elapsed() >= HEARTBEAT_EVERY) {
            last_beat = Some(Instant::now());
            streak.reset();
            if p.heartbeat().await.is_ok() {
                let repaired = async {
                    p.check_primary().await?;
                    p.flush().await
                }
                .await;
                if let Err(e) = repaired {
                    tracing::debug!(error = %e, "rl: repair failed; will retry");
                }
            }
        }
        let wait = if p.is_local() {
            PROBE_EVERY
        } else {
            HEARTBEAT_EVERY.saturating_sub(last_beat.map_or(Duration::ZERO, |t| t.elapsed()))
        };
        drop(p);
        let until = tokio::time::Instant::now() + wait;
        loop {
            tokio::select! {
                _ = tokio::time::sleep_until(until) => break,
                _ = wake.notified() => break,
                _ = flush_now.notified() => {
                    let Some(p) = path.upgrade() else { return };
                    if p.is_local() && p.answering.load(Ordering::Relaxed) {
                        if let Err(e) = p.flush().await {
                            p.answering.store(false, Ordering::Relaxed);
                            tracing::trace!(error = %e, "rl: write-back of a local admission failed");
                        }
                    }
                }
            }
        }
    }
}

/// A random 64-bit value, different per call and process (std's per-map random keys, the time
/// and the pid; a clock before 1970 only drops the time's part): instance ids, call-id tags.
pub(crate) fn random_u64() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default()
            .as_nanos(),
    );
    h.write_u32(std::process::id());
    h.finish()
}

/// Unique per limiter: host, process and a random part, so restarts never reuse a live id.
fn instance_id() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "host".into());
    format!("{host}:{}:{:016x}", std::process::id(), random_u64())
}
