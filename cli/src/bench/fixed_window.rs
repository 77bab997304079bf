//! The INCR fixed-window limiter `--compare fixed-window` runs beside rl, to show on the same load
//! the boundary spike (up to 2x the limit inside one window-length span) rl is built to avoid.

use std::sync::Arc;
use std::time::Duration;

use redis::aio::MultiplexedConnection;
use redis::{AsyncConnectionConfig, Script};

use crate::CliResult;

pub const FIXED_WINDOW_LUA: &str = include_str!("../../../lua/baseline_fixed_window.lua");

#[derive(Clone)]
pub struct FixedWindow {
    conn: MultiplexedConnection,
    script: Arc<Script>,
    base_key: Arc<str>,
}

pub struct FixedDecision {
    pub allowed: bool,
    pub now_ms: u64,
}

impl FixedWindow {
    /// One connection per instance, like rl's limiters in the same run, with the same timeouts so
    /// neither side gets more patience from its client.
    /// `client` reaches the server that holds the base key (see `Admin::client_for`).
    pub async fn connect(
        client: redis::Client,
        base_key: &str,
        connect: Duration,
        request: Duration,
    ) -> CliResult<FixedWindow> {
        let config = AsyncConnectionConfig::new()
            .set_connection_timeout(Some(connect))
            .set_response_timeout(Some(request));
        let conn = client
            .get_multiplexed_async_connection_with_config(&config)
            .await?;
        Ok(FixedWindow {
            conn,
            script: Arc::new(Script::new(FIXED_WINDOW_LUA)),
            base_key: base_key.into(),
        })
    }

    /// Loads the script so the run's first calls do not pay for a NOSCRIPT round trip.
    pub async fn warm_up(&self) -> CliResult<()> {
        let mut c = self.conn.clone();
        self.script.prepare_invoke().load_async(&mut c).await?;
        Ok(())
    }

    pub async fn acquire(
        &self,
        limit: u64,
        window_ms: u64,
        cost: u64,
    ) -> redis::RedisResult<FixedDecision> {
        let mut c = self.conn.clone();
        let (allowed, _count, now_ms): (i64, i64, u64) = self
            .script
            .key(&*self.base_key)
            .arg(limit)
            .arg(window_ms)
            .arg(cost)
            .invoke_async(&mut c)
            .await?;
        Ok(FixedDecision {
            allowed: allowed == 1,
            now_ms,
        })
    }
}

/// `<prefix>fw:{<key>}`: rl-core's own key layout under a `fw:` prefix, so the per-window counters
/// (`<base>:<index>`) share the Cluster slot rl would use and never collide with rl's keys.
pub fn base_key(prefix: &str, key: &str) -> String {
    String::from_utf8(rl_core::redis_key(&format!("{prefix}fw:"), key.as_bytes()))
        .expect("escaping a UTF-8 key keeps it UTF-8")
}

/// The counter key the script uses for the window holding `now_ms`.
pub fn window_key(base: &str, now_ms: u64, window_ms: u64) -> String {
    format!("{base}:{}", now_ms / window_ms)
}
