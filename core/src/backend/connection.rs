//! The connection of the current fork generation, for whichever topology (`topology.rs`).
//!
//! Standalone and Sentinel use one multiplexed, self-reconnecting connection (redis-rs
//! `ConnectionManager`), so concurrent callers pipeline on one socket instead of queueing for a
//! pool; Cluster uses redis-rs's cluster connection (one multiplexed connection per node, slot
//! routing, `MOVED`/`ASK`). A Sentinel connection is dropped after an error that means the primary
//! is gone or demoted, so the next attempt asks the Sentinels again.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use redis::aio::{ConnectionLike, ConnectionManager, ConnectionManagerConfig};
use redis::cluster_async::ClusterConnection;
use redis::sentinel::SentinelClient;

use super::topology::Topology;
use crate::error::{Error, Result};
use crate::fork::ForkLocal;

#[derive(Clone)]
pub(crate) enum Conn {
    Single(ConnectionManager),
    Cluster(ClusterConnection),
}

impl ConnectionLike for Conn {
    fn req_packed_command<'a>(
        &'a mut self,
        cmd: &'a redis::Cmd,
    ) -> redis::RedisFuture<'a, redis::Value> {
        match self {
            Conn::Single(c) => c.req_packed_command(cmd),
            Conn::Cluster(c) => c.req_packed_command(cmd),
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a redis::Pipeline,
        offset: usize,
        count: usize,
    ) -> redis::RedisFuture<'a, Vec<redis::Value>> {
        match self {
            Conn::Single(c) => c.req_packed_commands(pipeline, offset, count),
            Conn::Cluster(c) => c.req_packed_commands(pipeline, offset, count),
        }
    }

    fn get_db(&self) -> i64 {
        match self {
            Conn::Single(c) => c.get_db(),
            Conn::Cluster(c) => c.get_db(),
        }
    }
}

/// One fork generation's connection, numbered so an error can drop exactly the connection it
/// came from (not a newer one another caller already made).
#[derive(Default)]
struct Slot {
    conn: Mutex<Option<(u64, Conn)>>,
    /// Serialises connecting; holds the Sentinel client (its Sentinel connections are reused).
    connecting: tokio::sync::Mutex<Option<SentinelClient>>,
    made: AtomicU64,
    /// Connections dropped by `forget` (Sentinel: after an error, since the primary may have
    /// moved); see [`Connector::forgotten`].
    forgotten: AtomicU64,
}

pub(crate) struct Connector {
    pub(crate) topology: Topology,
    config: ConnectionManagerConfig,
    slot: ForkLocal<Slot>,
}

impl Connector {
    pub(crate) fn new(topology: Topology, config: ConnectionManagerConfig) -> Self {
        Connector {
            topology,
            config,
            slot: ForkLocal::default(),
        }
    }

    /// The current connection, made on first use. Standalone connects lazily in the background;
    /// Sentinel first asks the Sentinels for the primary; Cluster reads the slot map.
    pub(crate) async fn get(&self) -> Result<(u64, Conn)> {
        let slot = self.slot.get();
        if let Some(c) = &*slot.conn.lock().unwrap_or_else(|p| p.into_inner()) {
            return Ok(c.clone());
        }
        let mut sentinel = slot.connecting.lock().await;
        if let Some(c) = &*slot.conn.lock().unwrap_or_else(|p| p.into_inner()) {
            return Ok(c.clone());
        }
        let conn = match &self.topology {
            Topology::Standalone(client) => Conn::Single(ConnectionManager::new_lazy_with_config(
                client.clone(),
                self.config.clone(),
            )?),
            Topology::Sentinel(spec) => {
                if sentinel.is_none() {
                    *sentinel = Some(spec.client()?);
                }
                let client = sentinel
                    .as_mut()
                    .expect("just set")
                    .async_get_client()
                    .await
                    .map_err(|e| {
                        // No Sentinel names a master it can vouch for: mid-failover (the old one
                        // down, the new one not yet promoted) once this name has had a primary,
                        // an outage; before it ever had one, a wrong name (the caller's error).
                        let unknown = e.kind() == redis::ErrorKind::MasterNameNotFoundBySentinel;
                        if unknown && slot.made.load(Ordering::Relaxed) > 0 {
                            Error::BackendUnavailable(e.to_string())
                        } else {
                            Error::from(e)
                        }
                    })?;
                tracing::debug!(primary = ?client.get_connection_info().addr(), "rl: Sentinel named the primary");
                Conn::Single(ConnectionManager::new_lazy_with_config(
                    client,
                    self.config.clone(),
                )?)
            }
            Topology::Cluster(cluster) => Conn::Cluster(cluster.get_async_connection().await?),
        };
        let id = slot.made.fetch_add(1, Ordering::Relaxed) + 1;
        *slot.conn.lock().unwrap_or_else(|p| p.into_inner()) = Some((id, conn.clone()));
        Ok((id, conn))
    }

    /// Called after a connection-class error on connection `id`. Sentinel: the primary may have
    /// moved, so the next call asks the Sentinels. The others reconnect by themselves.
    pub(crate) fn forget(&self, id: u64) {
        if !matches!(self.topology, Topology::Sentinel(_)) {
            return;
        }
        let mut conn = self
            .slot
            .get()
            .conn
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        if conn.as_ref().map(|c| c.0) == Some(id) {
            *conn = None;
            self.slot.get().forgotten.fetch_add(1, Ordering::AcqRel);
        }
    }

    /// How many connections `forget` dropped in this fork generation: the next one may reach
    /// another primary. Counted before the next connection can be made, so a caller that reads
    /// it before connecting knows whether its connection may be to a new primary.
    pub(crate) fn forgotten(&self) -> u64 {
        self.slot.get().forgotten.load(Ordering::Acquire)
    }
}
