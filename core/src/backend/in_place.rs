//! A blocking caller's lone call, sent and answered on the caller's own thread.
//!
//! The multiplexed connection (`connection.rs`) is driven by a task on the core's runtime: a
//! blocking caller (C, Java, synchronous Python) that sends on it wakes a runtime thread to write,
//! and is woken by it again when the reply is read, two thread hops per call on top of the round
//! trip. For a caller alone on its key, in a web worker or a CLI, those hops were a fifth of its
//! time (measured from Python, one thread on random keys: 41–43 µs of client CPU per decision
//! against 28–29 µs for redis-py sending the same FCALL). So such a call borrows a plain socket of
//! its own here, writes the command and reads the reply itself, as redis-py does.
//!
//! Nothing else changes: the same script call, the same reply handling, retries and records. The
//! resilient path still bounds the call: the caller blocks at most `wait` (`degrade_rtt` with the
//! local fallback on, else the request timeout); a reply not in by then is awaited on the runtime
//! like any other call (the socket goes to tokio), so a frozen Redis sends the limiter local as
//! soon as it would have without this.
//!
//! Only standalone Redis over plain TCP with RESP2 (what `redis://` URLs mean), at an IP address;
//! host names, TLS, Unix sockets, Sentinel and Cluster use the multiplexed connection. A socket
//! that cannot be made within the wait (`connect`) leaves the call to the multiplexed connection.
//!
//! At most `MAX_SOCKETS` sockets per limiter. Callers beyond that many at once queue their
//! commands (`Ticket`). Whoever has read the replies on a socket first writes every command
//! queued meanwhile in one write, then hands out the replies it read, and the first caller of
//! the new batch reads that batch's replies and does the same (group commit): one `write` and one
//! `read` for many calls, on the client and on Redis, no thread hop to the runtime, and Redis
//! gets the next batch before any woken caller competes for the client's core. A call keeps its
//! own command, reply and id: batching changes only how the bytes travel, never what the script
//! decides.
//!
//! A caller alone on the limiter (no other decision of it in flight, `InFlight`) polls for its
//! reply for up to `busy_poll_us` before it sleeps in `read`: on a VM the sleep and the wake-up
//! cost as much as a loopback round trip (Python, one thread: 37–43 µs per call polling, 72–82 µs
//! sleeping). Callers with company never poll, so polling never takes the core from them or from
//! the runtime, and none polls while recent replies took longer than that (`Rtt`).

use std::collections::VecDeque;
use std::io::{self, Read, Write};
use std::net::{IpAddr, SocketAddr, TcpStream};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::task::{Poll, Waker};
use std::time::{Duration, Instant};

use redis::{Cmd, ConnectionAddr, ProtocolVersion, RedisFuture, RedisResult, Value};

use crate::fork::ForkLocal;

/// Sockets per limiter (per fork generation). Measured from Python, 16 threads on random keys,
/// client pinned to one core, Redis to the other: with callers queued for a socket, 1 socket
/// 51–57k decisions/s (12 commands per write, Redis 8.0 µs of CPU each), 2 sockets 63k/s (5 per
/// write), 4 sockets 75–79k/s (3 per write, 9.5–9.8 µs), 8 or 16 sockets no faster (75–79k/s)
/// but dearer for Redis (11.5–14.4 µs). Before callers queued (those beyond 4 took the
/// multiplexed connection): 74–77k/s at 11.4–11.8 µs. With the next batch written before the
/// replies are handed out (4 sockets): 77–88k/s against 65–75k/s in the same runs.
const MAX_SOCKETS: usize = 4;

/// The most queued commands one write carries.
const MAX_BATCH: usize = 64;

/// Where a blocking caller's lone call can go by itself.
pub(crate) struct InPlace {
    addr: SocketAddr,
    username: Option<String>,
    password: Option<String>,
    db: i64,
    connect_timeout: Duration,
    wait: Duration,
    max: usize,
    /// How long a caller alone polls for its reply before it sleeps (`busy_poll_us`).
    busy_poll: Duration,
    pool: ForkLocal<Arc<Pool>>,
}

/// This fork generation's sockets, and the commands waiting for one.
#[derive(Default)]
struct Pool {
    state: Mutex<PoolState>,
    rtt: Rtt,
    /// Decisions of this limiter now in flight, on any connection, waiting in a coalesced batch
    /// included (`InFlight`).
    in_flight: AtomicUsize,
}

/// Recent lone calls' waits for their replies, so that a caller polls only where replies come
/// within `busy_poll_us` (a Redis across a network never costs a caller that much CPU per call).
#[derive(Default)]
struct Rtt {
    /// A moving average (1/8 per call), in nanoseconds; 0 before the first.
    avg_ns: AtomicU64,
}

impl Rtt {
    fn within(&self, budget: Duration) -> bool {
        self.avg_ns.load(Ordering::Relaxed) as u128 <= budget.as_nanos()
    }

    /// Racing updates lose one sample at worst.
    fn record(&self, took: Duration) {
        let x = took.as_nanos().min(u64::MAX as u128) as i64;
        let avg = self.avg_ns.load(Ordering::Relaxed) as i64;
        let next = if avg == 0 { x } else { avg + (x - avg) / 8 };
        self.avg_ns.store(next as u64, Ordering::Relaxed);
    }
}

#[derive(Default)]
struct PoolState {
    idle: Vec<Sock>,
    /// Sockets of this generation, idle or in use (or being made).
    open: usize,
    /// Commands waiting for a socket, oldest first.
    queue: VecDeque<Arc<Ticket>>,
}

/// A connected, authenticated socket with no reply pending.
struct Sock {
    stream: TcpStream,
    buf: Vec<u8>,
    /// What each read fills, zeroed once (a zeroed buffer per read cost 4k instructions).
    scratch: Box<[u8]>,
    /// When it was last given back.
    idle_since: Instant,
}

/// A socket idle longer than this is checked before use (one non-blocking peek): Redis closes
/// idle clients (`timeout`), and a restart closes them all.
const CHECK_AFTER_IDLE: Duration = Duration::from_secs(1);

/// The least time a caller gives a socket of its own to connect (see `connect`).
const CONNECT_FLOOR: Duration = Duration::from_millis(50);

impl InPlace {
    /// `None` where the connection is not plain TCP with RESP2.
    pub(crate) fn new(
        client: &redis::Client,
        connect_timeout: Duration,
        wait: Duration,
        busy_poll: Duration,
    ) -> Option<InPlace> {
        let info = client.get_connection_info();
        let ConnectionAddr::Tcp(host, port) = info.addr() else {
            return None;
        };
        // An address, not a name: resolving a name would block the caller for as long as DNS
        // takes, and must happen anew on every connect (a primary's name moves on failover).
        let ip: IpAddr = host
            .trim_start_matches('[')
            .trim_end_matches(']')
            .parse()
            .ok()?;
        let settings = info.redis_settings();
        if settings.protocol() != ProtocolVersion::RESP2 {
            return None;
        }
        Some(InPlace {
            addr: SocketAddr::new(ip, *port),
            username: settings.username().map(str::to_owned),
            password: settings.password().map(str::to_owned),
            db: settings.db(),
            connect_timeout,
            wait: wait.max(Duration::from_millis(1)),
            max: MAX_SOCKETS,
            busy_poll,
            pool: ForkLocal::new(),
        })
    }

    /// A socket for this caller: an idle one, a new one while fewer than `max` are open, or a
    /// place in the queue when `max` are in use. `None` (the caller takes the multiplexed
    /// connection) when a new one cannot be made in time (see `connect`), so its errors never
    /// reach the caller.
    pub(crate) fn lend(&self) -> Option<Lent<'_>> {
        let pool = self.pool.get();
        let sock = match pool.acquire(self.max, None) {
            Acquired::Idle(sock) => Some(sock),
            Acquired::Open => match self.connect() {
                Ok(sock) => Some(sock),
                Err(e) => {
                    // The multiplexed connection then makes the call, and reports what it meets.
                    tracing::debug!(error = %e, "rl: no socket of its own for a blocking call");
                    pool.release(None);
                    return None;
                }
            },
            Acquired::Busy => None,
        };
        Some(Lent {
            place: self,
            pool,
            sock,
            may_poll: true,
        })
    }

    /// Counts a decision while it is in flight: a caller polls only when its own is the only
    /// one, since any other needs the core (a Python thread to run, a runtime thread to read a
    /// reply; measured from Python, 16 threads on one key: 69–76k decisions/s when a lone
    /// call polled regardless of its key's waiting callers, 80–82k with no polling).
    pub(crate) fn in_flight(&self) -> InFlight<'_> {
        let pool = self.pool.get();
        pool.in_flight.fetch_add(1, Ordering::Relaxed);
        InFlight(pool)
    }

    fn connect(&self) -> RedisResult<Sock> {
        // The caller waits for this: no longer than it would wait for a reply (at least
        // CONNECT_FLOOR, a connect's worth on a busy machine), then it takes the multiplexed
        // connection, whose connect the resilient path watches.
        let budget = self.connect_timeout.min(self.wait.max(CONNECT_FLOOR));
        let deadline = Instant::now() + budget;
        let stream = TcpStream::connect_timeout(&self.addr, budget)?;
        stream.set_nodelay(true)?;
        // The handshake is the connect's: bounded by what is left of the connect timeout.
        let left = deadline
            .saturating_duration_since(Instant::now())
            .max(Duration::from_millis(1));
        stream.set_read_timeout(Some(left))?;
        stream.set_write_timeout(Some(left))?;
        let mut sock = Sock {
            stream,
            buf: Vec::with_capacity(512),
            scratch: vec![0; 4096].into_boxed_slice(),
            idle_since: Instant::now(),
        };
        if let Some(password) = &self.password {
            let auth = |user: Option<&str>| {
                let mut c = redis::cmd("AUTH");
                c.arg(user).arg(password);
                c
            };
            let reply = sock.handshake(&auth(self.username.as_deref()), deadline)?;
            // A server without ACLs (Redis < 6) takes the password alone, as redis-rs retries.
            let reply = match reply {
                Value::ServerError(e)
                    if self.username.is_some()
                        && e.details().is_some_and(|d| {
                            d.contains("wrong number of arguments for 'auth'")
                        }) =>
                {
                    sock.handshake(&auth(None), deadline)?
                }
                r => r,
            };
            if let Value::ServerError(e) = reply {
                // Worded as redis-rs words it on the shared connection.
                return Err(redis::RedisError::from((
                    redis::ErrorKind::AuthenticationFailed,
                    "Password authentication failed",
                    e.details()
                        .unwrap_or("no detail from the server")
                        .to_string(),
                )));
            }
        }
        if self.db != 0 {
            sock.handshake(redis::cmd("SELECT").arg(self.db), deadline)?
                .extract_error()?;
        }
        sock.stream.set_read_timeout(Some(self.wait))?;
        sock.stream.set_write_timeout(Some(self.wait))?;
        Ok(sock)
    }
}

/// A decision in flight, counted until dropped (see [`InPlace::in_flight`]).
pub(crate) struct InFlight<'a>(&'a Pool);

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, Ordering::Relaxed);
    }
}

/// What [`Pool::acquire`] found.
enum Acquired {
    Idle(Sock),
    /// Room for one more socket, already counted as open: the caller makes it.
    Open,
    /// Every socket in use (and the caller's ticket, if it brought one, queued).
    Busy,
}

impl Pool {
    fn lock(&self) -> MutexGuard<'_, PoolState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// An idle socket, room for a new one, or (`Busy`) `ticket` queued: decided under one lock,
    /// so a socket given back meanwhile always finds the ticket.
    fn acquire(&self, max: usize, ticket: Option<&Arc<Ticket>>) -> Acquired {
        loop {
            let mut state = self.lock();
            let Some(sock) = state.idle.pop() else {
                if state.open < max {
                    state.open += 1;
                    return Acquired::Open;
                }
                if let Some(t) = ticket {
                    state.queue.push_back(Arc::clone(t));
                }
                return Acquired::Busy;
            };
            drop(state);
            if sock.idle_since.elapsed() < CHECK_AFTER_IDLE || sock.alive() {
                return Acquired::Idle(sock);
            }
            self.lock().open -= 1;
        }
    }

    /// Up to `MAX_BATCH` queued commands, oldest first, now on their way; `true` when there were
    /// none and no other socket is in use (the caller is alone).
    fn take_queue(&self, batch: &mut Vec<Arc<Ticket>>) -> bool {
        let mut state = self.lock();
        let n = state.queue.len().min(MAX_BATCH);
        for t in state.queue.drain(..n) {
            t.lock().state = TicketState::Sent;
            batch.push(t);
        }
        n == 0 && state.open - state.idle.len() == 1
    }

    /// Gives a socket back (`None`: it failed, or could not be made): to the oldest queued
    /// command, whose caller sends the queue on it (or on a new one), else to the idle ones.
    fn release(&self, sock: Option<Sock>) {
        let wake = Pool::release_locked(&mut self.lock(), sock);
        if let Some(w) = wake {
            w.now();
        }
    }

    /// The caller wakes the one handed the socket, once it has let go of `state`.
    fn release_locked(state: &mut PoolState, sock: Option<Sock>) -> Option<Wake> {
        if sock.is_none() {
            state.open -= 1;
        }
        while let Some(next) = state.queue.pop_front() {
            let slot = next.lock();
            if matches!(slot.state, TicketState::Queued) {
                if sock.is_none() {
                    state.open += 1; // the new one it makes
                }
                return Some(next.settle(slot, TicketState::Lead(sock)));
            }
        }
        if let Some(mut sock) = sock {
            sock.idle_since = Instant::now();
            state.idle.push(sock);
        }
        None
    }

    /// After an I/O error: the idle ones most likely went the same way (a restart), so the
    /// retry connects anew.
    fn drop_idle(&self) {
        let mut state = self.lock();
        let n = state.idle.len();
        state.idle.clear();
        state.open -= n;
    }

    /// `sock` is free again, on a blocking caller's thread: what queued meanwhile is written
    /// now, before anyone is woken, so Redis has the next batch while the replies are handed
    /// out; the first of it still waiting reads its replies. Nothing queued: `release`.
    fn write_queue(self: &Arc<Pool>, mut sock: Sock) {
        let mut next = Vec::new();
        self.take_queue(&mut next);
        if next.is_empty() {
            return self.release(Some(sock));
        }
        match sock.write_batch(&next) {
            Ok(()) => self.hand_read(sock, next),
            Err(e) => {
                fail(&next, &e);
                self.release(None);
                self.drop_idle();
            }
        }
    }

    /// The batch `sent` is on the wire: the first of its callers still waiting reads its
    /// replies (and hands them out); none left, the runtime does.
    fn hand_read(self: &Arc<Pool>, sock: Sock, sent: Vec<Arc<Ticket>>) {
        for i in 0..sent.len() {
            let t = Arc::clone(&sent[i]);
            let slot = t.lock();
            if matches!(slot.state, TicketState::Sent) {
                return t.settle(slot, TicketState::Read(sock, sent)).now();
            }
        }
        self.read_elsewhere(sock, sent);
    }

    /// The replies to `sent`, read on the runtime and handed out, the socket then given back.
    fn read_elsewhere(self: &Arc<Pool>, sock: Sock, sent: Vec<Arc<Ticket>>) {
        let total = sent.iter().map(|t| t.replies).sum();
        let pool = Arc::clone(self);
        let task = async move {
            match sock.finish(total).await {
                // The socket first: a woken caller's next call finds it idle rather than make
                // another (the runtime's threads never preempt it, `runtime.rs`, so a caller
                // woken first would run before the socket was back).
                Ok((sock, values)) => {
                    pool.release(Some(sock));
                    deliver(&sent, values);
                }
                Err(e) => {
                    fail(&sent, &e);
                    pool.release(None);
                    pool.drop_idle();
                }
            }
        };
        match tokio::runtime::Handle::try_current() {
            Ok(h) => drop(h.spawn(task)),
            // Only blocking callers inside the runtime's `block_on` come here; were one not, the
            // socket closes and its callers retry.
            Err(_) => drop(task),
        }
    }
}

/// A command waiting for a socket or its reply, and what became of it.
struct Ticket {
    packed: Vec<u8>,
    replies: usize,
    slot: Mutex<Slot>,
    ready: Condvar,
}

struct Slot {
    state: TicketState,
    /// Set while its caller waits on the runtime rather than on `ready`.
    waker: Option<Waker>,
    /// Its caller sleeps on `ready`: only then is it notified (a notify is a system call
    /// whether anyone sleeps or not).
    sleeping: bool,
}

enum TicketState {
    Queued,
    /// Its turn: send the queue, on this socket or on a new one (`None`, counted as open).
    Lead(Option<Sock>),
    /// On the wire, in a batch.
    Sent,
    /// Its batch (these tickets, in order) is on the wire: read the replies and hand them out.
    Read(Sock, Vec<Arc<Ticket>>),
    /// Sent, and its caller went away.
    Abandoned,
    Done(io::Result<Vec<Value>>),
    /// Its outcome was taken.
    Taken,
}

/// What a waiting caller was given.
enum Turn {
    Done(io::Result<Vec<Value>>),
    Lead(Option<Sock>),
    Read(Sock, Vec<Arc<Ticket>>),
}

impl Ticket {
    fn new(packed: Vec<u8>, replies: usize, state: TicketState) -> Ticket {
        Ticket {
            packed,
            replies,
            slot: Mutex::new(Slot {
                state,
                waker: None,
                sleeping: false,
            }),
            ready: Condvar::new(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Slot> {
        self.slot.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Gives the ticket its new state, and lets go of its lock: the caller then wakes its
    /// caller with the returned [`Wake`], once it holds no lock a woken caller needs.
    fn settle(self: &Arc<Self>, mut slot: MutexGuard<'_, Slot>, state: TicketState) -> Wake {
        slot.state = state;
        let wake = Wake {
            ticket: slot.sleeping.then(|| Arc::clone(self)),
            waker: slot.waker.take(),
        };
        drop(slot);
        wake
    }
}

/// A settled ticket's wake-up, made after every lock is let go. A caller sharing a core with
/// the one that wakes it runs at once (the scheduler favours a thread that slept), so one woken
/// while the lock it must take is still held sleeps again at once, and is woken again by the
/// unlock: two more system calls and two more thread switches. Measured from Python, 16 threads
/// on random keys, the client on one core (`perf stat`): 2.5 futex calls and 1.68 thread
/// switches per decision when the wake came under the lock, 2.13 and 1.43 after it.
#[must_use]
struct Wake {
    /// Its caller sleeps on `ready`: only then is it notified (a notify is a system call
    /// whether anyone sleeps or not).
    ticket: Option<Arc<Ticket>>,
    /// Its caller waits on the runtime.
    waker: Option<Waker>,
}

impl Wake {
    fn now(self) {
        if let Some(t) = self.ticket {
            t.ready.notify_one();
        }
        if let Some(w) = self.waker {
            w.wake();
        }
    }
}

impl Slot {
    fn take_turn(&mut self) -> Option<Turn> {
        match std::mem::replace(&mut self.state, TicketState::Taken) {
            TicketState::Done(r) => Some(Turn::Done(r)),
            TicketState::Lead(s) => Some(Turn::Lead(s)),
            TicketState::Read(s, sent) => Some(Turn::Read(s, sent)),
            other => {
                self.state = other;
                None
            }
        }
    }
}

/// Each ticket's share of `values`, in order.
fn deliver(tickets: &[Arc<Ticket>], values: Vec<Value>) {
    let mut values = values.into_iter();
    for t in tickets {
        let mine: Vec<Value> = values.by_ref().take(t.replies).collect();
        t.settle(t.lock(), TicketState::Done(Ok(mine))).now();
    }
}

/// The error that ended a batch, to every ticket in it (their callers retry as after any lost
/// reply: each call has its own id).
fn fail(tickets: &[Arc<Ticket>], e: &io::Error) {
    for t in tickets {
        let copy = io::Error::new(e.kind(), e.to_string());
        t.settle(t.lock(), TicketState::Done(Err(copy))).now();
    }
}

/// A caller's wait for its turn or its reply. Dropped early (the caller gave up), it leaves the
/// queue, or passes on what it was handed.
struct Waiting<'a> {
    pool: &'a Arc<Pool>,
    ticket: Arc<Ticket>,
}

impl Waiting<'_> {
    /// On this thread until `until`, then on the runtime.
    async fn turn(&self, until: Instant) -> Turn {
        {
            let mut slot = self.ticket.lock();
            loop {
                if let Some(turn) = slot.take_turn() {
                    return turn;
                }
                let now = Instant::now();
                if now >= until {
                    break;
                }
                slot.sleeping = true;
                slot = self
                    .ticket
                    .ready
                    .wait_timeout(slot, until - now)
                    .unwrap_or_else(|p| p.into_inner())
                    .0;
                slot.sleeping = false;
            }
        }
        std::future::poll_fn(|cx| {
            let mut slot = self.ticket.lock();
            match slot.take_turn() {
                Some(turn) => Poll::Ready(turn),
                None => {
                    slot.waker = Some(cx.waker().clone());
                    Poll::Pending
                }
            }
        })
        .await
    }
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        if matches!(self.ticket.lock().state, TicketState::Taken) {
            return; // the usual end: nothing left to hand on
        }
        let mut state = self.pool.lock();
        let mut slot = self.ticket.lock();
        match std::mem::replace(&mut slot.state, TicketState::Taken) {
            TicketState::Queued => state.queue.retain(|t| !Arc::ptr_eq(t, &self.ticket)),
            TicketState::Lead(sock) => {
                drop(slot);
                let wake = Pool::release_locked(&mut state, sock);
                drop(state);
                if let Some(w) = wake {
                    w.now();
                }
            }
            TicketState::Read(sock, sent) => {
                drop((slot, state));
                self.pool.read_elsewhere(sock, sent);
            }
            TicketState::Sent => slot.state = TicketState::Abandoned,
            other => slot.state = other,
        }
    }
}

/// A blocking caller's way to Redis: a socket of its own until its first command (then given
/// back after each one), or a place in the queue.
pub(crate) struct Lent<'a> {
    place: &'a InPlace,
    pool: &'a Arc<Pool>,
    sock: Option<Sock>,
    /// Whether a lone call may poll for its reply (`busy_poll_us`).
    may_poll: bool,
}

impl Drop for Lent<'_> {
    fn drop(&mut self) {
        if let Some(sock) = self.sock.take() {
            self.pool.release(Some(sock));
        }
    }
}

impl Lent<'_> {
    /// The same socket, for a call that never polls for its reply: it sleeps in `read`.
    pub(crate) fn without_polling(mut self) -> Self {
        self.may_poll = false;
        self
    }

    /// Sends `packed` and reads its `replies` replies: on this thread for up to `wait`, then on
    /// the runtime.
    async fn request(&mut self, packed: Vec<u8>, replies: usize) -> RedisResult<Vec<Value>> {
        let r = self.exchange(packed, replies).await;
        if r.is_err() {
            self.pool.drop_idle();
        }
        r
    }

    async fn exchange(&mut self, packed: Vec<u8>, replies: usize) -> RedisResult<Vec<Value>> {
        let until = Instant::now() + self.place.wait;
        let ticket = Arc::new(Ticket::new(packed, replies, TicketState::Queued));
        let waiting = Waiting {
            pool: self.pool,
            ticket: Arc::clone(&ticket),
        };
        let sock = match self.sock.take() {
            Some(sock) => Some(sock),
            None => match self.pool.acquire(self.place.max, Some(&ticket)) {
                Acquired::Idle(sock) => Some(sock),
                Acquired::Open => None,
                Acquired::Busy => match waiting.turn(until).await {
                    Turn::Done(r) => return Ok(r?),
                    Turn::Lead(sock) => sock,
                    Turn::Read(sock, sent) => {
                        self.serve(sock, sent, until, None);
                        return self.own(waiting).await;
                    }
                },
            },
        };
        let mut sock = match sock {
            Some(sock) => sock,
            None => match self.place.connect() {
                Ok(sock) => sock,
                Err(e) => {
                    ticket.lock().state = TicketState::Taken;
                    self.pool.release(None);
                    return Err(e);
                }
            },
        };
        // Its own command first, then what queued.
        ticket.lock().state = TicketState::Sent;
        let mut sent = vec![Arc::clone(&ticket)];
        let alone = self.pool.take_queue(&mut sent);
        // Polling while others wait would take the core from them.
        let budget = self.place.busy_poll;
        let poll = alone
            && self.may_poll
            && !budget.is_zero()
            && self.pool.in_flight.load(Ordering::Relaxed) <= 1
            && self.pool.rtt.within(budget);
        match sock.write_batch(&sent) {
            Ok(()) => self.serve(sock, sent, until, alone.then(|| (Instant::now(), poll))),
            Err(e) => {
                fail(&sent, &e);
                self.pool.release(None);
            }
        }
        self.own(waiting).await
    }

    /// Reads the replies to `sent` (on this thread until `until`, else on the runtime), writes
    /// what queued meanwhile, and hands each caller its own. `lone`: a call alone on the limiter,
    /// when it was written and whether to poll for its reply.
    fn serve(
        &self,
        mut sock: Sock,
        sent: Vec<Arc<Ticket>>,
        until: Instant,
        lone: Option<(Instant, bool)>,
    ) {
        let total = sent.iter().map(|t| t.replies).sum();
        if let Some((_, true)) = lone {
            sock.poll(until.min(Instant::now() + self.place.busy_poll));
        }
        match sock.read_until(total, until) {
            Ok(Some(values)) => {
                if let Some((written, _)) = lone {
                    self.pool.rtt.record(written.elapsed());
                }
                self.pool.write_queue(sock);
                deliver(&sent, values);
            }
            // Not all in within the wait: the rest is read on the runtime, so none is lost if
            // this caller gives up.
            Ok(None) => self.pool.read_elsewhere(sock, sent),
            Err(e) => {
                fail(&sent, &e);
                self.pool.release(None);
            }
        }
    }

    /// This caller's own reply, once handed out (at once, unless it is read on the runtime).
    async fn own(&self, waiting: Waiting<'_>) -> RedisResult<Vec<Value>> {
        match waiting.turn(Instant::now()).await {
            Turn::Done(r) => Ok(r?),
            // A sent ticket is never handed a socket: only queued ones are, and the first of a
            // sent batch is handed its reading, which this caller already did.
            Turn::Lead(sock) => {
                self.pool.release(sock);
                Err(io::Error::other("rl: a sent command was handed a socket").into())
            }
            Turn::Read(sock, sent) => {
                self.pool.read_elsewhere(sock, sent);
                Err(io::Error::other("rl: a served command was handed its batch again").into())
            }
        }
    }
}

impl Sock {
    /// A batch's commands, in order, in one write.
    fn write_batch(&mut self, sent: &[Arc<Ticket>]) -> io::Result<()> {
        if let [one] = sent {
            return self.stream.write_all(&one.packed);
        }
        let mut out = Vec::with_capacity(sent.iter().map(|t| t.packed.len()).sum());
        for t in sent {
            out.extend_from_slice(&t.packed);
        }
        self.stream.write_all(&out)
    }

    /// Reads what has come by `until` without sleeping (`busy_poll_us`): on a VM a sleeping
    /// caller's wake-up costs as much as a loopback round trip. The first bytes end it, and
    /// `read_until` reads the rest.
    fn poll(&mut self, until: Instant) {
        use std::os::fd::AsRawFd;
        let fd = self.stream.as_raw_fd();
        loop {
            // SAFETY: `scratch` is a live, writable buffer of the length given.
            let n = unsafe {
                libc::recv(
                    fd,
                    self.scratch.as_mut_ptr().cast(),
                    self.scratch.len(),
                    libc::MSG_DONTWAIT,
                )
            };
            if n > 0 {
                self.buf.extend_from_slice(&self.scratch[..n as usize]);
                return;
            }
            // The end of the stream or an error: `read_until` meets it again and reports it.
            if n == 0 || io::Error::last_os_error().kind() != io::ErrorKind::WouldBlock {
                return;
            }
            if Instant::now() >= until {
                return;
            }
            std::hint::spin_loop();
        }
    }

    /// Still connected, with nothing unasked for to read.
    fn alive(&self) -> bool {
        let peek = |s: &TcpStream| -> io::Result<bool> {
            s.set_nonblocking(true)?;
            let r = s.peek(&mut [0u8; 1]);
            s.set_nonblocking(false)?;
            match r {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(true),
                _ => Ok(false),
            }
        };
        peek(&self.stream).unwrap_or(false)
    }

    /// One command of the connection handshake and its reply, by `deadline`.
    fn handshake(&mut self, cmd: &Cmd, deadline: Instant) -> RedisResult<Value> {
        self.stream.write_all(&cmd.get_packed_command())?;
        match self.read_until(1, deadline)? {
            Some(mut v) => Ok(v.pop().expect("one reply")),
            None => Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "no answer to the connection handshake within the connect timeout",
            )
            .into()),
        }
    }

    /// Reads until `replies` whole replies are in (`Some`), or `until` passed (`None`, nothing
    /// lost: what came is kept in `buf`). Each read waits at most the socket's read timeout.
    fn read_until(&mut self, replies: usize, until: Instant) -> io::Result<Option<Vec<Value>>> {
        loop {
            if let Some(v) = self.take(replies)? {
                return Ok(Some(v));
            }
            if Instant::now() >= until {
                return Ok(None);
            }
            match self.stream.read(&mut self.scratch) {
                Ok(0) => return Err(io::ErrorKind::UnexpectedEof.into()),
                Ok(n) => self.buf.extend_from_slice(&self.scratch[..n]),
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                    ) =>
                {
                    return Ok(None)
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
    }

    /// The rest of a reply that did not come within `wait`, awaited on the runtime.
    async fn finish(self, replies: usize) -> io::Result<(Sock, Vec<Value>)> {
        let Sock {
            stream,
            mut buf,
            mut scratch,
            idle_since,
        } = self;
        stream.set_nonblocking(true)?;
        let stream = tokio::net::TcpStream::from_std(stream)?;
        let v = loop {
            stream.readable().await?;
            let n = match stream.try_read(&mut scratch) {
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
                Err(e) => return Err(e),
            };
            if n == 0 {
                return Err(io::ErrorKind::UnexpectedEof.into());
            }
            buf.extend_from_slice(&scratch[..n]);
            if let Some(v) = take(&mut buf, replies)? {
                break v;
            }
        };
        let stream = stream.into_std()?;
        stream.set_nonblocking(false)?;
        Ok((
            Sock {
                stream,
                buf,
                scratch,
                idle_since,
            },
            v,
        ))
    }

    fn take(&mut self, n: usize) -> io::Result<Option<Vec<Value>>> {
        take(&mut self.buf, n)
    }
}

/// `n` whole replies off the front of `buf`, if they are all in.
fn take(buf: &mut Vec<u8>, n: usize) -> io::Result<Option<Vec<Value>>> {
    let mut out = Vec::with_capacity(n);
    let mut at = 0;
    for _ in 0..n {
        let Some((v, end)) = value(buf, at)? else {
            return Ok(None);
        };
        out.push(v);
        at = end;
    }
    buf.drain(..at);
    Ok(Some(out))
}

/// The RESP2 value at `at` in `buf` and where it ends, if it is all there. Parsed here, not by
/// `redis::parse_redis_value`, which builds a parser per call: 15.6k instructions per reply
/// (callgrind), a third of a lone call's client side. Error replies, rare, are still its to
/// parse (into the `ServerError` that `extract_error` turns into the caller's error).
fn value(buf: &[u8], at: usize) -> io::Result<Option<(Value, usize)>> {
    // Lines end in CRLF; a CR is never inside a line of a type, length or integer.
    let Some(rel) = buf
        .get(at..)
        .and_then(|b| b.iter().position(|&c| c == b'\r'))
    else {
        return Ok(None);
    };
    let line_end = at + rel + 2;
    if buf.len() < line_end {
        return Ok(None);
    }
    let line = &buf[at + 1..line_end - 2];
    let number = || -> io::Result<i64> {
        std::str::from_utf8(line)
            .ok()
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| bad(format!("not a RESP length or integer: {line:?}")))
    };
    let parsed = match buf[at] {
        b'+' if line == b"OK" => (Value::Okay, line_end),
        b'+' => (
            Value::SimpleString(String::from_utf8_lossy(line).into_owned()),
            line_end,
        ),
        b':' => (Value::Int(number()?), line_end),
        b'$' => match usize::try_from(number()?) {
            Err(_) => (Value::Nil, line_end),
            Ok(len) => {
                let end = line_end + len + 2;
                if buf.len() < end {
                    return Ok(None);
                }
                (Value::BulkString(buf[line_end..end - 2].to_vec()), end)
            }
        },
        b'*' => match usize::try_from(number()?) {
            Err(_) => (Value::Nil, line_end),
            Ok(len) => {
                let mut items = Vec::with_capacity(len.min(1024));
                let mut end = line_end;
                for _ in 0..len {
                    let Some((v, e)) = value(buf, end)? else {
                        return Ok(None);
                    };
                    items.push(v);
                    end = e;
                }
                (Value::Array(items), end)
            }
        },
        b'-' => (
            redis::parse_redis_value(&buf[at..line_end]).map_err(|e| bad(e.to_string()))?,
            line_end,
        ),
        other => return Err(bad(format!("not a RESP2 reply (type byte {other:#04x})"))),
    };
    Ok(Some(parsed))
}

fn bad(what: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, what)
}

impl redis::aio::ConnectionLike for Lent<'_> {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        Box::pin(async move {
            let mut v = self.request(cmd.get_packed_command(), 1).await?;
            Ok(v.pop().expect("one reply"))
        })
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a redis::Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        Box::pin(async move {
            let mut v = self
                .request(pipeline.get_packed_pipeline(), offset + count)
                .await?;
            Ok(v.split_off(offset))
        })
    }

    fn get_db(&self) -> i64 {
        self.place.db
    }
}

#[cfg(test)]
mod tests {
    use super::{take, value};
    use redis::Value;

    #[test]
    fn a_reply_is_taken_only_when_all_of_it_is_in() {
        let whole = b"*3\r\n:1\r\n$3\r\nabc\r\n*2\r\n+OK\r\n$-1\r\n";
        for cut in 0..whole.len() {
            assert!(value(&whole[..cut], 0).unwrap().is_none(), "cut at {cut}");
        }
        let (v, end) = value(whole, 0).unwrap().unwrap();
        assert_eq!(end, whole.len());
        assert_eq!(
            v,
            Value::Array(vec![
                Value::Int(1),
                Value::BulkString(b"abc".to_vec()),
                Value::Array(vec![Value::Okay, Value::Nil]),
            ])
        );
    }

    #[test]
    fn replies_parse_as_redis_rs_parses_them() {
        let replies: [&[u8]; 7] = [
            b"+PONG\r\n",
            b":-42\r\n",
            b"$0\r\n\r\n",
            b"*-1\r\n",
            b"*0\r\n",
            b"-ERR Function not found\r\n",
            b"*2\r\n$4\r\na\r\nb\r\n:7\r\n",
        ];
        for r in replies {
            let (v, end) = value(r, 0).unwrap().unwrap();
            assert_eq!(end, r.len());
            assert_eq!(v, redis::parse_redis_value(r).unwrap(), "{r:?}");
        }
    }

    #[test]
    fn replies_come_off_the_front_and_the_rest_stays() {
        let mut buf = b"+OK\r\n:5\r\n:6".to_vec();
        assert_eq!(
            take(&mut buf, 2).unwrap(),
            Some(vec![Value::Okay, Value::Int(5)])
        );
        assert_eq!(buf, b":6");
        assert_eq!(take(&mut buf, 1).unwrap(), None);
        assert!(value(b"?x\r\n", 0).is_err());
        assert!(value(b":x\r\n", 0).is_err());
    }
}
