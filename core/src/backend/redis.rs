//! The Redis backend: `lua/sliding_window.lua`, by FCALL of its library (`functions.rs`) or by
//! EVALSHA (`script.rs`), over the topology's connection (`topology.rs`, `connection.rs`), with
//! concurrent requests for one key sharing one call (`coalesce.rs`; composite calls per slot,
//! `composite_batch.rs`); also the heartbeat, primary
//! discovery and repair calls the resilient path makes.
//!
//! The connection is made lazily on first use: opening a limiter never blocks or fails because
//! Redis is briefly away, and a limiter outlives Redis restarts and failovers. Bounding a decision
//! in time, retrying it and falling back are the resilient path's job (`redis_path.rs`, with
//! `health.rs` and `ledger.rs`); the batches this module sends on its own (`drive`) are bounded by
//! the request timeout.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use redis::aio::ConnectionManagerConfig;
use redis::cluster_routing::{
    MultipleNodeRoutingInfo, ResponsePolicy, RoutingInfo, SingleNodeRoutingInfo,
};
use tokio::sync::oneshot;

use super::attempts::Attempts;
use super::coalesce::{Op, Queued, Queues, Turn, Waiter, MAX_WAITING};
use super::composite_batch::CompositeOp;
use super::connection::{Conn, Connector};
use super::functions::Caller;
use super::in_place::InPlace;
use super::script::{self, parse_reply, HEARTBEAT, REPAIR};
use super::topology;
use super::{Request, Verdict};
use crate::clock::Clock;
use crate::composite::Plan;
use crate::error::{Error, ErrorKind, Result};
use crate::fork::ForkLocal;
use crate::primaries::Primary;

pub(crate) struct RedisBackend {
    shared: Arc<Shared>,
}

pub(crate) struct Shared {
    pub(super) connector: Connector,
    request_timeout: Duration,
    pub(super) clock: Option<Arc<dyn Clock>>,
    pub(super) max_skew_ms: u64,
    queues: Queues,
    /// Composite calls waiting behind the one in flight for their slot (`composite_batch.rs`).
    pub(super) composite_queues: Queues<CompositeOp>,
    /// FCALL of the window library, or EVALSHA where functions are refused.
    pub(super) caller: Caller,
    /// Call ids and the requests of failed calls, so a retry is never counted twice.
    attempts: ForkLocal<Attempts>,
    /// How long (ms, decimal text) the script keeps a call's record: its retry comes within the
    /// request timeout; twice that, and at least 2 s, covers a retry sent just before it. `None`
    /// where no call is ever retried (`retry_delay` >= `request_timeout`): calls carry no id, no
    /// record is written, and no request gets a token.
    record_ms: Option<Vec<u8>>,
    /// Sockets for blocking callers' lone calls (standalone over plain TCP only).
    in_place: Option<InPlace>,
}

impl std::fmt::Debug for RedisBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisBackend")
            .field("topology", &self.shared.connector.topology.name())
            .finish_non_exhaustive()
    }
}

/// What one repair call sends (see `lua/repair.lua`).
pub(crate) struct RepairCall<'a> {
    pub instance: &'a str,
    pub window_ms: u64,
    pub ttl_ms: u64,
    pub local_token: &'a str,
    pub local: &'a [(u64, u64)],
    pub epoch: &'a str,
    pub failover: &'a [(u64, u64)],
}

/// What one lease call sends: the rule, the lease wanted (`seq` 0: none) and the one returned
/// (`old_seq` 0: none) with the permits granted from it.
pub(crate) struct LeaseCall<'a> {
    pub instance: &'a str,
    pub window_ms: u64,
    pub limit: u64,
    pub want: u64,
    pub min: u64,
    pub lease_ms: u64,
    pub seq: u64,
    pub old_seq: u64,
    pub old_used: u64,
}

/// A lease call's answer: permits leased (0: none), the script's now, the window's count with
/// the lease, and when the window is empty if nothing more is admitted.
#[derive(Debug, Clone, Copy)]
pub(crate) struct LeaseReply {
    pub granted: u64,
    pub now_ms: u64,
    pub used: u64,
    pub reset_after_ms: u64,
}

/// What the backend takes from the limiter's options (the rest is the resilient path's).
pub(crate) struct Settings {
    pub connect_timeout: Duration,
    pub request_timeout: Duration,
    /// Whether a failed call is ever retried (below `request_timeout`): decides if calls ask
    /// for records (see `attempts.rs`).
    pub retry_delay: Duration,
    /// A client clock instead of Redis TIME, and its allowed distance from it.
    pub clock: Option<Arc<dyn Clock>>,
    pub max_clock_skew_ms: u64,
    /// How long a blocking caller waits for a reply on its own thread (`in_place.rs`) before the
    /// runtime takes over: what the resilient path lets a call run before it first checks on it.
    pub in_place_wait: Duration,
    /// See [`crate::options::OPTIONS`] (`busy_poll_us`); zero: never.
    pub busy_poll: Duration,
}

impl RedisBackend {
    pub(crate) fn open(url: &str, options: &Settings) -> Result<Self> {
        let topology = topology::open(url, options.connect_timeout, options.request_timeout)?;
        let in_place = match &topology {
            topology::Topology::Standalone(client) => InPlace::new(
                client,
                options.connect_timeout,
                options.in_place_wait,
                options.busy_poll,
            ),
            _ => None,
        };
        // No response timeout inside redis-rs: every decision is already bounded as a whole by
        // the limiter, and a second timer per request costs throughput for nothing.
        let config = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(options.connect_timeout))
            .set_response_timeout(None)
            // One connection attempt per call: a refused connection fails the call at once
            // instead of sleeping through backoff; the limiter retries once, after retry_delay.
            .set_number_of_retries(0);
        Ok(RedisBackend {
            shared: Arc::new(Shared {
                connector: Connector::new(topology, config),
                request_timeout: options.request_timeout,
                clock: options.clock.clone(),
                max_skew_ms: options.max_clock_skew_ms,
                queues: Queues::default(),
                composite_queues: Queues::default(),
                caller: Caller::default(),
                attempts: ForkLocal::new(),
                record_ms: (options.retry_delay < options.request_timeout).then(|| {
                    (2 * options.request_timeout.as_millis() as u64)
                        .max(2000)
                        .to_string()
                        .into_bytes()
                }),
                in_place,
            }),
        })
    }

    /// Connections dropped because the primary may have moved (see `Connector::forgotten`).
    pub(crate) fn forgotten(&self) -> u64 {
        self.shared.connector.forgotten()
    }

    pub(crate) fn topology_name(&self) -> &'static str {
        self.shared.connector.topology.name()
    }

    /// A token for a consuming request (see `attempts.rs`): its caller passes the same one to
    /// [`RedisBackend::join`] on every attempt.
    /// 0 (none) where calls are never retried.
    pub(crate) fn token(&self) -> u64 {
        if self.shared.record_ms.is_none() {
            return 0;
        }
        self.shared.attempts.get().token()
    }

    /// Retries the script answered from their first attempt's record: admitted, not counted again.
    pub(crate) fn deduplicated(&self) -> u64 {
        let a = self.shared.attempts.get();
        a.deduplicated.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Takes `req`'s place for `redis_key`: its own call, or a place behind the call in flight.
    /// `token`: the request's (0 for a peek), the same on its retry. A full queue is
    /// `BackendUnavailable` for this request alone; nothing was sent.
    pub(crate) fn join(&self, req: &Request<'_>, redis_key: &[u8], token: u64) -> Result<Ticket> {
        let op = Op {
            consume: req.consume,
            window_ms: req.window_ms,
            limit: req.limit,
            cost: req.cost,
            token,
            retry: self.shared.attempts.get().retrying(token),
        };
        self.shared.join(redis_key, op)
    }

    /// Decides one request from its ticket, alone or coalesced with concurrent ones for the same
    /// key. Not bounded in time here: the caller races it against its deadline and may drop it.
    pub(crate) async fn decide<O: Batcher>(&self, ticket: Ticket<O>) -> Result<O::Out> {
        let _counted = self.shared.in_place.as_ref().map(InPlace::in_flight);
        match ticket {
            Ticket::Lead(lead) => Ok(lead
                .await?
                .into_iter()
                .next()
                .expect("one answer per request")),
            Ticket::Follow(rx) => match rx.await {
                Ok(verdict) => verdict,
                Err(_) => Err(Error::Backend("a coalesced rl call was abandoned".into())),
            },
        }
    }

    /// Takes a composite call's place (the script's convention 'rl1C'): `plan`'s rules on
    /// `redis_keys` (in the plan's key order, all in one slot), its own call, or a place behind
    /// the composite call in flight for that slot (`composite_batch.rs`). Decided by
    /// [`RedisBackend::decide`]. A full queue is `BackendUnavailable` for this call alone.
    pub(crate) fn join_all(
        &self,
        redis_keys: &[&[u8]],
        plan: &Plan<'_>,
    ) -> Result<Ticket<CompositeOp>> {
        let op = CompositeOp::new(redis_keys, plan);
        let slot = op.queue_key();
        self.shared.join(&slot, op)
    }

    pub(crate) async fn reset(&self, redis_key: &[u8]) -> Result<()> {
        self.shared
            .bounded("reset", async {
                let (id, mut conn) = self.shared.connector.get().await?;
                let r = redis::cmd("DEL")
                    .arg(redis_key)
                    .arg(crate::keys::lease_key(redis_key))
                    .query_async::<()>(&mut conn)
                    .await;
                self.shared.check(id, r)
            })
            .await
    }

    pub(crate) async fn ping(&self) -> Result<()> {
        self.shared
            .bounded("ping", async {
                let (id, mut conn) = self.shared.connector.get().await?;
                let r = redis::cmd("PING").query_async::<()>(&mut conn).await;
                self.shared.check(id, r)
            })
            .await
    }

    /// The round trip of a PING to every Cluster master at once (so: the slowest one's), for the
    /// recovery probes: the heartbeat reaches only the master of the fleet key, and a limiter
    /// that one slow master sent local must not come back while that master is still slow, only
    /// to be sent local again by the next call to it (measured: it flapped). `None` on the other
    /// topologies, where the heartbeat's server is the only one.
    pub(crate) async fn ping_masters(&self) -> Result<Option<Duration>> {
        self.shared
            .bounded("PING to every master", async {
                let (id, mut conn) = self.shared.connector.get().await?;
                let Conn::Cluster(cluster) = &mut conn else {
                    return Ok(None);
                };
                let started = std::time::Instant::now();
                let every_master = RoutingInfo::MultiNode((
                    MultipleNodeRoutingInfo::AllMasters,
                    Some(ResponsePolicy::AllSucceeded),
                ));
                let r = cluster
                    .route_command(redis::cmd("PING"), every_master)
                    .await;
                self.shared.check(id, r)?;
                Ok(Some(started.elapsed()))
            })
            .await
    }

    /// This instance's heartbeat (also the recovery probe): the live instance count and server time.
    pub(crate) async fn heartbeat(
        &self,
        fleet_key: &[u8],
        instance: &str,
        live_ms: u64,
    ) -> Result<(u64, u64)> {
        self.shared
            .bounded("heartbeat", async {
                let (id, mut conn) = self.shared.connector.get().await?;
                let r = HEARTBEAT
                    .key(fleet_key)
                    .arg(instance)
                    .arg(live_ms)
                    .invoke_async::<(u64, u64)>(&mut conn)
                    .await;
                self.shared.check(id, r)
            })
            .await
    }

    /// Who serves which slots, by run id (see `primaries.rs`). Standalone and Sentinel: the one
    /// primary. Cluster: each range of `CLUSTER SLOTS` with its master's run id, asked of that
    /// master by address; a master that does not answer (in half the request timeout) is left out
    /// of the map. A refused `INFO` (an ACL user without it) is an error (`Backend`) on every
    /// topology: the caller cannot tell who is primary.
    pub(crate) async fn primaries(&self) -> Result<Vec<Primary>> {
        self.shared
            .bounded("INFO server", async {
                let (id, mut conn) = self.shared.connector.get().await?;
                let Conn::Cluster(cluster) = &mut conn else {
                    let r = redis::cmd("INFO")
                        .arg("server")
                        .query_async::<String>(&mut conn)
                        .await;
                    return Ok(run_id(&self.shared.check(id, r)?)
                        .map(Primary::everything)
                        .into_iter()
                        .collect());
                };
                let r = redis::cmd("CLUSTER")
                    .arg("SLOTS")
                    .query_async::<Vec<Vec<redis::Value>>>(cluster)
                    .await;
                let ranges = self.shared.check(id, r)?;
                let mut masters: Vec<((String, u16), Option<String>)> = Vec::new();
                let mut out = Vec::new();
                for range in &ranges {
                    let Some((first, last, addr)) = slot_range(range) else {
                        continue;
                    };
                    let i = match masters.iter().position(|(a, _)| *a == addr) {
                        Some(i) => i,
                        None => {
                            let route = RoutingInfo::SingleNode(SingleNodeRoutingInfo::ByAddress {
                                host: addr.0.clone(),
                                port: addr.1,
                            });
                            // A frozen master must not hold up the others' answers (nor the
                            // recovery that waits for this map): it gets half the budget.
                            let info = cluster
                                .route_command(redis::cmd("INFO").arg("server").clone(), route);
                            let info =
                                match tokio::time::timeout(self.shared.request_timeout / 2, info)
                                    .await
                                {
                                    Ok(Ok(v)) => Some(v),
                                    Ok(Err(e)) => match Error::from(e) {
                                        // Refused (no `INFO` permission): no master can be told apart.
                                        e if e.kind() != ErrorKind::BackendUnavailable => {
                                            return Err(e)
                                        }
                                        _ => None,
                                    },
                                    Err(_) => None,
                                };
                            let run = info
                                .and_then(|v| redis::from_redis_value::<String>(v).ok())
                                .and_then(|s| run_id(&s));
                            masters.push((addr, run));
                            masters.len() - 1
                        }
                    };
                    if let Some(run_id) = &masters[i].1 {
                        out.push(Primary {
                            first,
                            last,
                            run_id: run_id.clone(),
                        });
                    }
                }
                Ok(out)
            })
            .await
    }

    /// Returns a lease and/or takes a new one for `redis_key` (the script's convention 3), by FCALL
    /// like a decision (EVALSHA where functions are refused).
    pub(crate) async fn lease(&self, redis_key: &[u8], c: &LeaseCall<'_>) -> Result<LeaseReply> {
        let shared = &self.shared;
        shared
            .bounded("lease", async {
                // On the lease worker's thread (`lease_worker.rs`) the call goes on a socket of
                // its own, as a blocking caller's does, but never polls for the reply: the
                // worker's calls are background work, and polling would take a core from the
                // callers it works for.
                let lent = match &shared.in_place {
                    Some(p) if crate::runtime::blocking_caller() => {
                        crate::runtime::may_block().await;
                        p.lend().map(|l| l.without_polling())
                    }
                    _ => None,
                };
                let mut via = match lent {
                    Some(sock) => Via::Own(sock),
                    None => {
                        let (id, conn) = shared.connector.get().await?;
                        Via::Shared(id, conn)
                    }
                };
                let client_now = shared.clock.as_ref().map(|c| c.now_ms());
                let clock = script::pack(&[client_now.unwrap_or(0), shared.max_skew_ms]);
                let rule = script::pack(&[
                    c.window_ms,
                    c.limit,
                    c.want,
                    c.min,
                    c.lease_ms,
                    c.seq,
                    c.old_seq,
                    c.old_used,
                ]);
                let args: [&[u8]; 4] = [b"rl1L", &clock, &rule, c.instance.as_bytes()];
                let reply = match &mut via {
                    Via::Own(sock) => {
                        shared.check(0, shared.caller.call(sock, redis_key, &args).await)
                    }
                    Via::Shared(id, conn) => {
                        shared.check(*id, shared.caller.call(conn, redis_key, &args).await)
                    }
                }?;
                script::parse_lease_reply(reply, client_now, shared.max_skew_ms)
            })
            .await
    }

    /// Whether a blocking caller's calls go on sockets of their own (`in_place.rs`): standalone
    /// Redis over plain TCP.
    pub(crate) fn has_in_place(&self) -> bool {
        self.shared.in_place.is_some()
    }

    /// Writes admitted permits back into `redis_key`'s window (`lua/repair.lua`); returns the
    /// permits added by the local part and by the failover part, and the window's count after
    /// the repair with its Redis time (`None`: a window too long to read).
    pub(crate) async fn repair(
        &self,
        redis_key: &[u8],
        marker_key: &[u8],
        c: &RepairCall<'_>,
    ) -> Result<(u64, u64, Option<(u64, u64)>)> {
        let pairs = |v: &[(u64, u64)]| {
            script::pack(&v.iter().flat_map(|&(t, n)| [t, n]).collect::<Vec<_>>())
        };
        self.shared
            .bounded("repair", async {
                let (id, mut conn) = self.shared.connector.get().await?;
                let r = REPAIR
                    .key(redis_key)
                    .key(marker_key)
                    .arg("rl-repair-1")
                    .arg(c.instance)
                    .arg(script::pack(&[c.window_ms, c.ttl_ms]))
                    .arg(c.local_token)
                    .arg(pairs(c.local))
                    .arg(c.epoch)
                    .arg(pairs(c.failover))
                    .invoke_async::<(u64, u64, i64, u64)>(&mut conn)
                    .await
                    .map(|(local, lost, held, at)| {
                        (local, lost, u64::try_from(held).ok().map(|h| (h, at)))
                    });
                self.shared.check(id, r)
            })
            .await
    }
}

/// A request's place for its key (see `coalesce.rs`).
pub(crate) enum Ticket<O: Batcher = Op> {
    /// Nothing was in flight for the key: this request's own call.
    Lead(Lead<O>),
    /// Behind the call in flight: decided in a later batch.
    Follow(oneshot::Receiver<Result<O::Out>>),
}

/// A script call under way, owned by whoever waits for it.
pub(super) type Pending<T> = Pin<Box<dyn Future<Output = Result<Vec<T>>> + Send>>;

/// A kind of request that queues per key and goes out in batches: plain requests (`rl1`, per
/// window key) and composite calls (`rl1C`, per slot, `composite_batch.rs`). The queueing, the
/// hand-on between batches and the timeouts below are the same for both.
pub(crate) trait Batcher: Queued + Sized + Unpin {
    /// What a timed-out batch of these was, for the error.
    const WHAT: &'static str;
    fn queues(shared: &Shared) -> &Queues<Self>;
    /// One script call deciding `ops`, in order: one answer per request.
    fn call<'a>(
        shared: &'a Shared,
        key: &'a [u8],
        ops: &'a [Self],
    ) -> impl Future<Output = Result<Vec<Self::Out>>> + Send + 'a;
}

impl Batcher for Op {
    const WHAT: &'static str = "acquire";
    fn queues(shared: &Shared) -> &Queues<Op> {
        &shared.queues
    }
    fn call<'a>(
        shared: &'a Shared,
        key: &'a [u8],
        ops: &'a [Op],
    ) -> impl Future<Output = Result<Vec<Verdict>>> + Send + 'a {
        shared.call(key, ops)
    }
}

enum Call<T> {
    NotSent,
    InFlight(Pending<T>, tokio::time::Instant),
    Done,
}

/// A leader's call, polled right in its caller's future (no hand-off on the way out), and the
/// key's turn: whatever queues behind it is handed on to a driver task when it ends. If the
/// caller gives up first, the call is already on the wire: a task waits it out (within its
/// request timeout) before the next batch goes out, so no second call joins it on a silent
/// connection and the waiters whose callers gave up meanwhile are dropped, not sent. A call that
/// gets no answer fails those behind it. A leader dropped before it was polled sends nothing.
pub(crate) struct Lead<O: Batcher = Op> {
    shared: Arc<Shared>,
    key: Arc<[u8]>,
    /// The request, until it is sent.
    op: Option<O>,
    call: Call<O::Out>,
}

impl<O: Batcher> Future for Lead<O> {
    type Output = Result<Vec<O::Out>>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        if let Call::NotSent = self.call {
            if let Some(op) = self.op.take() {
                let (shared, key) = (self.shared.clone(), self.key.clone());
                let deadline = tokio::time::Instant::now() + shared.request_timeout;
                self.call = Call::InFlight(
                    Box::pin(
                        async move { O::call(&shared, &key, std::slice::from_ref(&op)).await },
                    ),
                    deadline,
                );
            }
        }
        let Call::InFlight(call, _) = &mut self.call else {
            return Poll::Pending;
        };
        let r = std::task::ready!(call.as_mut().poll(cx));
        self.call = Call::Done;
        Poll::Ready(r)
    }
}

impl<O: Batcher> Drop for Lead<O> {
    fn drop(&mut self) {
        let (shared, key) = (self.shared.clone(), self.key.clone());
        let job: Pin<Box<dyn Future<Output = ()> + Send>> =
            match std::mem::replace(&mut self.call, Call::Done) {
                Call::InFlight(call, deadline) => {
                    Box::pin(finish::<O>(shared.clone(), key.clone(), deadline, call))
                }
                Call::NotSent | Call::Done => match O::queues(&shared).next_batch(&key) {
                    Some(batch) => Box::pin(drive(shared.clone(), key.clone(), batch)),
                    None => return,
                },
            };
        // On the caller's runtime when there is one: the batches it sends wake its callers, and
        // waking another pool's threads costs every batch a cross-pool hop each way (measured
        // with 16 callers on their own runtime: a round trip per batch of ~280 µs against ~70).
        let rt = tokio::runtime::Handle::try_current().or_else(|_| crate::runtime::handle());
        match rt {
            Ok(rt) => {
                rt.spawn(job);
            }
            Err(e) => {
                drop(job);
                for w in O::queues(&shared).clear(&key) {
                    let _ = w.tx.send(Err(e.clone()));
                }
            }
        }
    }
}

/// Waits out a call whose caller gave up (it may still be decided), then hands on what queued
/// behind it.
async fn finish<O: Batcher>(
    shared: Arc<Shared>,
    key: Arc<[u8]>,
    deadline: tokio::time::Instant,
    call: Pending<O::Out>,
) {
    if tokio::time::timeout_at(deadline, call).await.is_err() {
        return shared.unanswered(O::queues(&shared), &key);
    }
    if let Some(batch) = O::queues(&shared).next_batch(&key) {
        drive(shared, key, batch).await;
    }
}

/// Sends batches for `key` until nothing (live) waits.
async fn drive<O: Batcher>(shared: Arc<Shared>, key: Arc<[u8]>, mut batch: Vec<Waiter<O>>) {
    loop {
        let (ops, txs): (Vec<O>, Vec<_>) = batch.into_iter().map(|w| (w.op, w.tx)).unzip();
        let Ok(r) =
            tokio::time::timeout(shared.request_timeout, O::call(&shared, &key, &ops)).await
        else {
            let e = shared.timed_out(O::WHAT);
            for tx in txs {
                let _ = tx.send(Err(e.clone()));
            }
            return shared.unanswered(O::queues(&shared), &key);
        };
        match r {
            Ok(answers) => {
                for (tx, v) in txs.into_iter().zip(answers) {
                    let _ = tx.send(Ok(v));
                }
            }
            Err(e) => {
                for tx in txs {
                    let _ = tx.send(Err(e.clone()));
                }
            }
        }
        // The callers just answered are woken, not yet running: one turn of the scheduler lets
        // those that ask again at once (a closed loop, a worker's next request) queue before the
        // next batch goes, instead of missing it and waiting a whole round trip behind a batch
        // of whoever queued meanwhile. Only ever between two batches for a key, never before a
        // lone caller's call.
        tokio::task::yield_now().await;
        match O::queues(&shared).next_batch(&key) {
            Some(next) => batch = next,
            None => return,
        }
    }
}

impl Shared {
    /// Takes `op`'s place for `key` in its kind's queues: its own call, or a place behind the
    /// call in flight. A full queue is `BackendUnavailable` for this request alone.
    fn join<O: Batcher>(self: &Arc<Self>, key: &[u8], op: O) -> Result<Ticket<O>> {
        match O::queues(self).join(key, op) {
            Some(Turn::Lead(op)) => Ok(Ticket::Lead(Lead {
                shared: self.clone(),
                key: key.into(),
                op: Some(op),
                call: Call::NotSent,
            })),
            Some(Turn::Follow(rx)) => Ok(Ticket::Follow(rx)),
            None => Err(Error::BackendUnavailable(format!(
                "{MAX_WAITING} requests already wait for this key; Redis is not keeping up with it (nothing was sent)"
            ))),
        }
    }

    /// The call in flight for `key` got no answer within the request timeout and may still be
    /// decided: the requests queued behind it fail now instead of piling up behind it on a silent
    /// connection (their callers would time out too), and the key is idle again.
    fn unanswered<O: Queued>(&self, queues: &Queues<O>, key: &[u8]) {
        let e = Error::BackendUnavailable(format!(
            "the call ahead of this one for its key got no answer from Redis within {} ms",
            self.request_timeout.as_millis()
        ));
        for w in queues.clear(key) {
            let _ = w.tx.send(Err(e.clone()));
        }
    }

    fn timed_out(&self, what: &str) -> Error {
        Error::BackendUnavailable(format!(
            "{what} got no answer from Redis within {} ms",
            self.request_timeout.as_millis()
        ))
    }

    /// Bounds a whole call (connect + command) by the request timeout.
    async fn bounded<T>(
        &self,
        what: &str,
        fut: impl std::future::Future<Output = Result<T>>,
    ) -> Result<T> {
        match tokio::time::timeout(self.request_timeout, fut).await {
            Ok(r) => r,
            Err(_) => Err(self.timed_out(what)),
        }
    }

    /// Converts a reply, dropping the connection it came on after a connection-class error.
    pub(super) fn check<T>(&self, id: u64, r: redis::RedisResult<T>) -> Result<T> {
        r.map_err(|e| {
            let e = Error::from(e);
            if e.kind() == ErrorKind::BackendUnavailable {
                self.connector.forget(id);
            }
            e
        })
    }

    /// One script call deciding `ops` on `redis_key`, in order, under a new call id (see
    /// `attempts.rs`). After a connection-class error its consuming requests are remembered, so
    /// their retries name this call.
    async fn call(&self, redis_key: &[u8], ops: &[Op]) -> Result<Vec<Verdict>> {
        let attempts = self.attempts.get();
        let call_id = attempts.call_id();
        // Shortly after a call of this limiter's lost its reply, an id ending in '!' tells the
        // script to keep the record a lone call leaves in the window's header when this call
        // replaces it: that call's retry may still come (the script's `Retries`).
        let mut wire = [b'!'; 17];
        wire[..16].copy_from_slice(&call_id);
        let wire = if attempts.lost_within(2 * self.request_timeout) {
            &wire[..]
        } else {
            &wire[..16]
        };
        let r = self.send(redis_key, ops, wire).await;
        match &r {
            Err(e) if e.kind() == ErrorKind::BackendUnavailable => {
                for (i, op) in ops.iter().enumerate() {
                    if op.token != 0 {
                        attempts.failed(op.token, (call_id, i as u64 + 1));
                    }
                }
            }
            Ok((_, 0)) | Err(_) => {}
            Ok((_, n)) => {
                let n = *n;
                attempts
                    .deduplicated
                    .fetch_add(n, std::sync::atomic::Ordering::Relaxed);
            }
        }
        r.map(|(v, _)| v)
            .map_err(|e| crate::error::naming_keys(e, &[redis_key]))
    }

    /// [`Shared::call`]'s script call: the verdicts, and how many were retries answered from
    /// their first attempt's record.
    async fn send(
        &self,
        redis_key: &[u8],
        ops: &[Op],
        call_id: &[u8],
    ) -> Result<(Vec<Verdict>, u64)> {
        // A blocking caller's lone call goes on a socket of its own, on its own thread.
        let lent = match &self.in_place {
            Some(p) if ops.len() == 1 && crate::runtime::blocking_caller() => {
                crate::runtime::may_block().await;
                p.lend()
            }
            _ => None,
        };
        let mut via = match lent {
            Some(sock) => Via::Own(sock),
            None => {
                let (id, conn) = self.connector.get().await?;
                Via::Shared(id, conn)
            }
        };
        let client_now = self.clock.as_ref().map(|c| c.now_ms());
        // Only a call with a request that may be retried (a token) asks for a record: its id, and
        // after the clock this limiter's 8 bytes (the id's first 8) and the records' TTL (the
        // same in every call, parsed once by the script).
        let record = self
            .record_ms
            .as_deref()
            .filter(|_| ops.iter().any(|op| op.token != 0));
        let mut clock = Vec::with_capacity(24 + record.map_or(0, <[u8]>::len));
        script::pack_into(&mut clock, &[client_now.unwrap_or(0), self.max_skew_ms]);
        if let Some(ttl) = record {
            clock.extend_from_slice(&call_id[..8]);
            clock.extend_from_slice(ttl);
        }
        let mut requests = Vec::with_capacity(ops.len() * 32);
        for op in ops {
            script::pack_into(
                &mut requests,
                &[op.consume as u64, op.window_ms, op.limit, op.cost],
            );
        }
        // Per request: the failed call it was in (zeros: none) and its place there (0: none).
        let mut retries = Vec::new();
        if ops.iter().any(|op| op.retry.is_some()) {
            for op in ops {
                let (was, place) = op.retry.unwrap_or(([0; 16], 0));
                retries.extend_from_slice(&was);
                script::pack_into(&mut retries, &[place]);
            }
        }
        let mut args: Vec<&[u8]> = Vec::with_capacity(5);
        args.extend_from_slice(&[b"rl1P", &clock, &requests]);
        if record.is_some() {
            args.push(call_id);
        }
        if !retries.is_empty() {
            args.push(&retries);
        }
        let reply = match &mut via {
            Via::Own(sock) => self.check(0, self.caller.call(sock, redis_key, &args).await),
            Via::Shared(id, conn) => {
                self.check(*id, self.caller.call(conn, redis_key, &args).await)
            }
        }?;
        let again = script::answered_again(&reply);
        Ok((
            parse_reply(reply, ops.len(), client_now, self.max_skew_ms)?,
            again,
        ))
    }
}

/// The connection a script call goes on.
enum Via<'a> {
    /// A blocking caller's own socket (`in_place.rs`).
    Own(super::in_place::Lent<'a>),
    /// The shared multiplexed (or cluster) connection, and its number.
    Shared(u64, Conn),
}

fn run_id(info: &str) -> Option<String> {
    info.lines()
        .find_map(|l| l.strip_prefix("run_id:"))
        .map(|v| v.trim().to_string())
        .filter(|v| !v.is_empty())
}

/// One `CLUSTER SLOTS` entry: `[first, last, [host, port, id, ...], replicas...]`.
fn slot_range(range: &[redis::Value]) -> Option<(u16, u16, (String, u16))> {
    let int = |v: &redis::Value| redis::from_redis_value_ref::<i64>(v).ok();
    let (first, last) = (int(range.first()?)?, int(range.get(1)?)?);
    let redis::Value::Array(master) = range.get(2)? else {
        return None;
    };
    let host = redis::from_redis_value_ref::<String>(master.first()?)
        .ok()
        .filter(|h| !h.is_empty() && h != "?")?;
    let port = u16::try_from(int(master.get(1)?)?).ok()?;
    Some((
        u16::try_from(first).ok()?,
        u16::try_from(last).ok()?,
        (host, port),
    ))
}
