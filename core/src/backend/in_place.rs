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
//! that cannot be made within the wait (`connect`) leaves the call to the multiplexed connection. At most `MAX_SOCKETS` sockets per
//! limiter: callers beyond that many at once take the multiplexed connection, which pipelines.

use std::io::{self, Read, Write};
use std::net::{IpAddr, SocketAddr, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use redis::{Cmd, ConnectionAddr, ProtocolVersion, RedisFuture, RedisResult, Value};

use crate::fork::ForkLocal;

/// Sockets per limiter (per fork generation) for callers at once. Measured from Python, 16
/// threads on random keys, client pinned to one core: none 48k decisions/s (Redis 9.5 µs of CPU
/// each: the multiplexed connection pipelines), 4 sockets 73k/s (11.4 µs), 16 sockets 71–72k/s
/// (13.8 µs: more sockets, fewer commands per read for Redis).
const MAX_SOCKETS: usize = 4;

/// Where a blocking caller's lone call can go by itself.
pub(crate) struct InPlace {
    addr: SocketAddr,
    username: Option<String>,
    password: Option<String>,
    db: i64,
    connect_timeout: Duration,
    wait: Duration,
    max: usize,
    pool: ForkLocal<Pool>,
}

#[derive(Default)]
struct Pool {
    idle: Mutex<Vec<Sock>>,
    /// Sockets of this generation, idle or lent.
    open: AtomicUsize,
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
            pool: ForkLocal::new(),
        })
    }

    /// A socket for this caller: an idle one, a new one while fewer than `max` are open, or
    /// `None` (the caller takes the multiplexed connection): also when the new one cannot be
    /// made in time (see `connect`), so its errors never reach the caller.
    pub(crate) fn lend(&self) -> Option<Lent<'_>> {
        let pool = self.pool.get();
        loop {
            let Some(sock) = pool.idle.lock().unwrap_or_else(|p| p.into_inner()).pop() else {
                break;
            };
            if sock.idle_since.elapsed() < CHECK_AFTER_IDLE || sock.alive() {
                return Some(self.lent(pool, sock));
            }
            pool.open.fetch_sub(1, Ordering::AcqRel);
        }
        if pool.open.fetch_add(1, Ordering::AcqRel) >= self.max {
            pool.open.fetch_sub(1, Ordering::AcqRel);
            return None;
        }
        match self.connect() {
            Ok(sock) => Some(self.lent(pool, sock)),
            Err(e) => {
                // The multiplexed connection then makes the call, and reports what it meets.
                tracing::debug!(error = %e, "rl: no socket of its own for a blocking call");
                pool.open.fetch_sub(1, Ordering::AcqRel);
                None
            }
        }
    }

    fn lent<'a>(&'a self, pool: &'a Pool, sock: Sock) -> Lent<'a> {
        Lent {
            pool,
            sock: Some(sock),
            wait: self.wait,
            db: self.db,
        }
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

/// A socket lent to one call; back to the pool when the call ends with its reply read, closed
/// when it does not (an error, or a caller that gave up: a reply may still come on it).
pub(crate) struct Lent<'a> {
    pool: &'a Pool,
    sock: Option<Sock>,
    wait: Duration,
    db: i64,
}

impl Drop for Lent<'_> {
    fn drop(&mut self) {
        match self.sock.take() {
            Some(mut sock) if sock.buf.is_empty() => {
                sock.idle_since = Instant::now();
                self.pool
                    .idle
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .push(sock)
            }
            _ => {
                self.pool.open.fetch_sub(1, Ordering::AcqRel);
            }
        }
    }
}

impl Lent<'_> {
    /// Sends `packed` and reads `replies` replies: on this thread for up to `wait`, then on the
    /// runtime.
    async fn request(&mut self, packed: Vec<u8>, replies: usize) -> RedisResult<Vec<Value>> {
        let r = self.exchange(packed, replies).await;
        if r.is_err() {
            // The idle ones most likely went the same way (a restart): the retry connects anew.
            let dropped =
                std::mem::take(&mut *self.pool.idle.lock().unwrap_or_else(|p| p.into_inner()));
            self.pool.open.fetch_sub(dropped.len(), Ordering::AcqRel);
        }
        r
    }

    async fn exchange(&mut self, packed: Vec<u8>, replies: usize) -> RedisResult<Vec<Value>> {
        let mut sock = self.sock.take().expect("one request at a time");
        let until = Instant::now() + self.wait;
        sock.stream.write_all(&packed)?;
        if let Some(v) = sock.read_until(replies, until)? {
            self.sock = Some(sock);
            return Ok(v);
        }
        let (sock, v) = sock.finish(replies).await?;
        self.sock = Some(sock);
        Ok(v)
    }
}

impl Sock {
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
    async fn finish(self, replies: usize) -> RedisResult<(Sock, Vec<Value>)> {
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
                Err(e) => return Err(e.into()),
            };
            if n == 0 {
                return Err(io::Error::from(io::ErrorKind::UnexpectedEof).into());
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
        self.db
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
