//! The Redis backend: EVALSHA of `lua/sliding_window.lua` over one multiplexed, self-reconnecting
//! connection (redis-rs `ConnectionManager`), so concurrent callers pipeline on one socket
//! instead of queueing for a pool, and concurrent requests for one key share one call
//! (`coalesce.rs`).
//!
//! The connection is made lazily on first use: opening a limiter never blocks or fails because
//! Redis is briefly away, and a limiter outlives Redis restarts. Every call is bounded by the
//! request timeout, so no caller waits on a dead Redis longer than configured.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use redis::aio::{ConnectionManager, ConnectionManagerConfig};

use super::coalesce::{Op, Queues, Turn, MAX_WAITING};
use super::{Request, Verdict};
use crate::clock::Clock;
use crate::error::{Error, Result};
use crate::fork::ForkLocal;
use crate::limiter::Options;
use crate::script::{parse_reply, SLIDING_WINDOW};

pub(crate) struct RedisBackend {
    shared: Arc<Shared>,
}

struct Shared {
    client: redis::Client,
    config: ConnectionManagerConfig,
    /// The connection of the current fork generation (see `fork.rs`): a child process must not
    /// use the parent's, whose driving task lived on a thread the child does not have (nor its
    /// lock, which a parent thread may have held at the fork).
    conn: ForkLocal<Mutex<Option<ConnectionManager>>>,
    request_timeout: Duration,
    clock: Option<Arc<dyn Clock>>,
    max_skew_ms: u64,
    queues: Queues,
}

impl std::fmt::Debug for RedisBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let info = self.shared.client.get_connection_info();
        f.debug_struct("RedisBackend").field("addr", &info.addr()).finish_non_exhaustive()
    }
}

impl RedisBackend {
    pub(crate) fn open(url: &str, options: &Options) -> Result<Self> {
        if url.starts_with("rediss://") {
            // rustls needs one process-wide crypto provider; another library may have set one.
            let _ = rustls::crypto::ring::default_provider().install_default();
        }
        let bad_url = |e: redis::RedisError| Error::invalid("url", format!("{}: {e}", redact(url)));
        // TCP_NODELAY: requests share one connection, and Nagle's algorithm would hold a small
        // request back until the previous one is acknowledged (milliseconds of tail latency).
        let info = redis::IntoConnectionInfo::into_connection_info(url)
            .map_err(bad_url)?
            .set_tcp_settings(redis::io::tcp::TcpSettings::default().set_nodelay(true));
        let client = redis::Client::open(info).map_err(bad_url)?;
        // No response timeout inside redis-rs: every call is already bounded as a whole by
        // `bounded`, and a second timer per request costs throughput for nothing.
        let config = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(options.connect_timeout))
            .set_response_timeout(None)
            // One connection attempt per call: a refused connection fails the call at once
            // instead of sleeping through backoff; the next call tries again.
            .set_number_of_retries(0);
        Ok(RedisBackend {
            shared: Arc::new(Shared {
                client,
                config,
                conn: ForkLocal::default(),
                request_timeout: options.request_timeout,
                clock: options.clock.clone(),
                max_skew_ms: options.max_clock_skew_ms,
                queues: Queues::default(),
            }),
        })
    }

    /// Decides one request, alone or coalesced with concurrent ones for the same key.
    pub(crate) async fn decide(&self, req: &Request<'_>, redis_key: &[u8]) -> Result<Verdict> {
        let op = Op { consume: req.consume, window_ms: req.window_ms, limit: req.limit, cost: req.cost };
        match self.shared.queues.join(redis_key, op) {
            Turn::Lead => {
                // Whatever queues up behind this call is handed on when it ends, even if the
                // caller gives up on it (the guard's drop).
                let _handoff = Handoff { shared: &self.shared, key: redis_key };
                let verdicts = self.shared.bounded("acquire", self.shared.call(redis_key, &[op])).await?;
                Ok(verdicts[0])
            }
            Turn::Follow(rx) => match tokio::time::timeout(self.shared.request_timeout, rx).await {
                Ok(Ok(verdict)) => verdict,
                Ok(Err(_)) => Err(Error::Backend("a coalesced rl call was abandoned".into())),
                Err(_) => Err(self.shared.timed_out("acquire")),
            },
            Turn::Full => Err(Error::BackendUnavailable(format!(
                "{MAX_WAITING} requests already wait for this key; Redis is not keeping up"
            ))),
        }
    }

    pub(crate) async fn reset(&self, redis_key: &[u8]) -> Result<()> {
        self.shared
            .bounded("reset", async {
                let mut conn = self.shared.connection()?;
                redis::cmd("DEL").arg(redis_key).query_async::<()>(&mut conn).await?;
                Ok(())
            })
            .await
    }

    pub(crate) async fn ping(&self) -> Result<()> {
        self.shared
            .bounded("ping", async {
                let mut conn = self.shared.connection()?;
                redis::cmd("PING").query_async::<()>(&mut conn).await?;
                Ok(())
            })
            .await
    }
}

/// Hands the requests that queued behind a leader's call to a driver task.
struct Handoff<'a> {
    shared: &'a Arc<Shared>,
    key: &'a [u8],
}

impl Drop for Handoff<'_> {
    fn drop(&mut self) {
        let Some(batch) = self.shared.queues.next_batch(self.key) else { return };
        let (shared, key) = (self.shared.clone(), self.key.to_vec());
        match crate::runtime::handle() {
            Ok(rt) => {
                rt.spawn(drive(shared, key, batch));
            }
            Err(e) => {
                for w in batch {
                    let _ = w.tx.send(Err(e.clone()));
                }
            }
        }
    }
}

/// Sends batches for `key` until nothing waits.
async fn drive(shared: Arc<Shared>, key: Vec<u8>, mut batch: Vec<super::coalesce::Waiter>) {
    loop {
        let ops: Vec<Op> = batch.iter().map(|w| w.op).collect();
        match shared.bounded("acquire", shared.call(&key, &ops)).await {
            Ok(verdicts) => {
                for (w, v) in batch.into_iter().zip(verdicts) {
                    let _ = w.tx.send(Ok(v));
                }
            }
            Err(e) => {
                for w in batch {
                    let _ = w.tx.send(Err(e.clone()));
                }
            }
        }
        match shared.queues.next_batch(&key) {
            Some(next) => batch = next,
            None => return,
        }
    }
}

impl Shared {
    /// The multiplexed connection, made on first use (it connects lazily, in the background).
    fn connection(&self) -> Result<ConnectionManager> {
        let mut slot = self.conn.get().lock().unwrap_or_else(|p| p.into_inner());
        if let Some(conn) = &*slot {
            return Ok(conn.clone());
        }
        let conn = ConnectionManager::new_lazy_with_config(self.client.clone(), self.config.clone())?;
        *slot = Some(conn.clone());
        Ok(conn)
    }

    fn timed_out(&self, what: &str) -> Error {
        Error::BackendUnavailable(format!("{what} got no answer from Redis within {} ms", self.request_timeout.as_millis()))
    }

    /// Bounds a whole call (connect + command) by the request timeout.
    async fn bounded<T>(&self, what: &str, fut: impl std::future::Future<Output = Result<T>>) -> Result<T> {
        match tokio::time::timeout(self.request_timeout, fut).await {
            Ok(r) => r,
            Err(_) => Err(self.timed_out(what)),
        }
    }

    /// One script call deciding `ops` on `redis_key`, in order.
    async fn call(&self, redis_key: &[u8], ops: &[Op]) -> Result<Vec<Verdict>> {
        let mut conn = self.connection()?;
        let client_now = self.clock.as_ref().map(|c| c.now_ms());
        let mut inv = SLIDING_WINDOW.key(redis_key);
        inv.arg("rl1").arg(crate::script::pack(&[client_now.unwrap_or(0), self.max_skew_ms]));
        let mut requests = Vec::with_capacity(ops.len() * 4);
        for op in ops {
            requests.extend_from_slice(&[op.consume as u64, op.window_ms, op.limit, op.cost]);
        }
        inv.arg(crate::script::pack(&requests));
        let reply: redis::Value = inv.invoke_async(&mut conn).await?;
        parse_reply(reply, ops.len(), client_now, self.max_skew_ms)
    }
}

/// The URL without its password, for error messages.
pub(crate) fn redact(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(s), Some(at)) if at > s => {
            let creds = &url[s + 3..at];
            match creds.find(':') {
                Some(c) => format!("{}{}:***{}", &url[..s + 3], &creds[..c], &url[at..]),
                None => url.to_string(),
            }
        }
        _ => url.to_string(),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn redact_hides_password_only() {
        assert_eq!(super::redact("redis://app:s3cret@127.0.0.1:6379/2"), "redis://app:***@127.0.0.1:6379/2");
        assert_eq!(super::redact("redis://127.0.0.1:6379"), "redis://127.0.0.1:6379");
    }
}
