//! The Redis backend: one EVALSHA of `lua/sliding_window.lua` per decision over one multiplexed,
//! self-reconnecting connection (redis-rs `ConnectionManager`), so concurrent callers pipeline on
//! one socket instead of queueing for a pool.
//!
//! The connection is made lazily on first use: opening a limiter never blocks or fails because
//! Redis is briefly away, and a limiter outlives Redis restarts. Every call is bounded by the
//! request timeout, so no caller waits on a dead Redis longer than configured.

use std::time::Duration;

use std::sync::Mutex;

use redis::aio::{ConnectionManager, ConnectionManagerConfig};

use super::{Request, Verdict};
use crate::error::{Error, Result};
use crate::script::{parse_reply, SLIDING_WINDOW};

pub(crate) struct RedisBackend {
    client: redis::Client,
    config: ConnectionManagerConfig,
    /// The connection of the current fork generation (see `fork.rs`): a child process must not
    /// use the parent's, whose driving task lived on a thread the child does not have.
    conn: Mutex<Option<(u64, ConnectionManager)>>,
    request_timeout: Duration,
}

impl std::fmt::Debug for RedisBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let info = self.client.get_connection_info();
        f.debug_struct("RedisBackend").field("addr", &info.addr()).finish_non_exhaustive()
    }
}

impl RedisBackend {
    pub(crate) fn open(url: &str, connect_timeout: Duration, request_timeout: Duration) -> Result<Self> {
        if url.starts_with("rediss://") {
            // rustls needs one process-wide crypto provider; another library may have set one.
            let _ = rustls::crypto::ring::default_provider().install_default();
        }
        let client = redis::Client::open(url).map_err(|e| Error::invalid("url", format!("{}: {e}", redact(url))))?;
        let config = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(connect_timeout))
            .set_response_timeout(Some(request_timeout))
            .set_number_of_retries(1)
            .set_max_delay(Duration::from_millis(100));
        Ok(RedisBackend { client, config, conn: Mutex::new(None), request_timeout })
    }

    /// The multiplexed connection, made on first use (it connects lazily, in the background).
    fn connection(&self) -> Result<ConnectionManager> {
        let generation = crate::fork::generation();
        let mut slot = self.conn.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((g, conn)) = &*slot {
            if *g == generation {
                return Ok(conn.clone());
            }
            // The parent's connection: its driver is gone here, and dropping it could touch the
            // parent's runtime, so it is forgotten rather than dropped.
            if let Some((_, old)) = slot.take() {
                std::mem::forget(old);
            }
        }
        let conn = ConnectionManager::new_lazy_with_config(self.client.clone(), self.config.clone())?;
        *slot = Some((generation, conn.clone()));
        Ok(conn)
    }

    /// Bounds a whole call (connect + command) by the request timeout.
    async fn bounded<T>(&self, what: &str, fut: impl std::future::Future<Output = Result<T>>) -> Result<T> {
        match tokio::time::timeout(self.request_timeout, fut).await {
            Ok(r) => r,
            Err(_) => Err(Error::BackendUnavailable(format!(
                "{what} got no answer from Redis within {} ms",
                self.request_timeout.as_millis()
            ))),
        }
    }

    pub(crate) async fn decide(&self, req: &Request<'_>, redis_key: &[u8], client_now: Option<u64>, max_skew_ms: u64) -> Result<Verdict> {
        self.bounded("acquire", async {
            let mut conn = self.connection()?;
            let mut inv = SLIDING_WINDOW.key(redis_key);
            inv.arg("rl1")
                .arg(if req.consume { "acquire" } else { "peek" })
                .arg(req.window_ms)
                .arg(req.limit)
                .arg(req.cost);
            match client_now {
                Some(t) => inv.arg(t),
                None => inv.arg(""),
            };
            inv.arg(max_skew_ms);
            let reply: redis::Value = inv.invoke_async(&mut conn).await?;
            parse_reply(reply, client_now, max_skew_ms)
        })
        .await
    }

    pub(crate) async fn reset(&self, redis_key: &[u8]) -> Result<()> {
        self.bounded("reset", async {
            let mut conn = self.connection()?;
            redis::cmd("DEL").arg(redis_key).query_async::<()>(&mut conn).await?;
            Ok(())
        })
        .await
    }

    pub(crate) async fn ping(&self) -> Result<()> {
        self.bounded("ping", async {
            let mut conn = self.connection()?;
            redis::cmd("PING").query_async::<()>(&mut conn).await?;
            Ok(())
        })
        .await
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
