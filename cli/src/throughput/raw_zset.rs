//! The baseline `rl throughput` prices rl-core against: the minimal ZSET script, called the way a
//! gateway would call it by hand (redis-rs `Script`, EVALSHA over one shared ConnectionManager).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::Script;

use crate::CliResult;

pub const ZSET_LUA: &str = include_str!("../../../lua/baseline_zset.lua");

#[derive(Clone)]
pub struct RawZset {
    conn: ConnectionManager,
    script: Arc<Script>,
    key: Arc<str>,
    /// Members must be unique per request; an equal member would overwrite an admitted one.
    seq: Arc<AtomicU64>,
}

impl RawZset {
    /// Same connect and response timeouts as rl-core's defaults, so neither side is given more
    /// patience than the other.
    /// `client` reaches the server that holds `key` (see `Admin::client_for`), with rl-core's TCP
    /// settings.
    pub async fn connect(
        client: redis::Client,
        key: &str,
        connect: Duration,
        request: Duration,
    ) -> CliResult<RawZset> {
        let config = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(connect))
            .set_response_timeout(Some(request));
        let conn = ConnectionManager::new_with_config(client, config).await?;
        Ok(RawZset {
            conn,
            script: Arc::new(Script::new(ZSET_LUA)),
            key: key.into(),
            seq: Arc::new(AtomicU64::new(0)),
        })
    }

    /// SCRIPT LOAD once, so every measured call is a plain EVALSHA.
    pub async fn load(&self) -> CliResult<()> {
        let mut c = self.conn.clone();
        self.script.prepare_invoke().load_async(&mut c).await?;
        Ok(())
    }

    pub fn key(&self) -> &str {
        &self.key
    }

    /// Members from `base` on: several callers of one key (the hot-key bench's instances and
    /// processes) each take their own range so no member is ever reused.
    pub fn with_member_base(mut self, base: u64) -> RawZset {
        self.seq = Arc::new(AtomicU64::new(base));
        self
    }

    pub async fn acquire(&self, limit: u64, window_ms: u64) -> redis::RedisResult<bool> {
        Ok(self.decide(limit, window_ms).await?.0)
    }

    /// Whether it admitted, and Redis's time of the decision in ms.
    pub async fn decide(&self, limit: u64, window_ms: u64) -> redis::RedisResult<(bool, u64)> {
        let mut c = self.conn.clone();
        let member = self.seq.fetch_add(1, Ordering::Relaxed);
        let (allowed, _count, now): (i64, i64, u64) = self
            .script
            .key(&*self.key)
            .arg(limit)
            .arg(window_ms)
            .arg(member)
            .invoke_async(&mut c)
            .await?;
        Ok((allowed == 1, now))
    }
}
