//! A primary, one replica and three Sentinels: the smallest deployment where
//! Sentinel can fail over (quorum 2 of 3), so tests can check that clients
//! follow a promotion.

use std::collections::HashMap;
use std::io;
use std::ops::Range;
use std::time::Duration;

use crate::free_port;
use crate::poll::{info_field, poll};
use crate::resp::RespValue;
use crate::server::{RedisServer, ServerOptions};
use crate::tls::TlsFiles;

/// The name the Sentinels monitor the primary under, as in the URL's path.
pub const MASTER_NAME: &str = "rlmaster";

/// Generous for 2-core CI: Sentinels find each other via 2 s hello messages.
const START_TIMEOUT: Duration = Duration::from_secs(15);
const PRIMARY: usize = 0;
const REPLICA: usize = 1;
const SENTINELS: Range<usize> = 2..5;

/// Stopped on drop, Sentinels first so none of them reacts to the data nodes
/// going away by starting a failover.
#[derive(Debug)]
pub struct SentinelTrio {
    /// Primary, replica, then the Sentinels, in one Vec so a `Deployment` can
    /// lend them all out as a slice.
    servers: Vec<RedisServer>,
    /// Each server's TLS port (same order), for a trio started with `start_tls`.
    tls_ports: Vec<u16>,
}

impl SentinelTrio {
    pub fn start() -> io::Result<Self> {
        Self::start_with(ServerOptions::default())
    }

    /// `options` apply to the primary and replica; Sentinels only get its
    /// process settings (`die_with_parent`, `new_session`).
    pub fn start_with(options: ServerOptions) -> io::Result<Self> {
        Self::launch(options, None)
    }

    /// Everything over TLS with `files`' certificates: clients, replication,
    /// Sentinels to data nodes and to each other, so the Sentinels name TLS
    /// ports. The harness still uses the plain ports; `url()` names the
    /// Sentinels' TLS ones.
    pub fn start_tls(files: &TlsFiles) -> io::Result<Self> {
        Self::launch(ServerOptions::default(), Some(files))
    }

    fn launch(options: ServerOptions, tls: Option<&TlsFiles>) -> io::Result<Self> {
        options.reject_password("sentinel")?;
        let mut tls_ports = Vec::new();
        // A TLS port and the flags for it, or nothing.
        let tls_args = |ports: &mut Vec<u16>| -> io::Result<Vec<String>> {
            let Some(files) = tls else {
                return Ok(Vec::new());
            };
            let port = free_port()?;
            ports.push(port);
            let mut args = files.server_args(port);
            args.extend(["--tls-replication", "yes"].map(String::from));
            Ok(args)
        };
        // Redis waits 5 s by default for more replicas before a full sync;
        // the replica gets it too because a failover makes it a primary.
        let data = options.with_leading_args(["--repl-diskless-sync-delay", "0"]);
        let primary = data.clone().args(tls_args(&mut tls_ports)?);
        let mut trio = SentinelTrio {
            servers: vec![RedisServer::start_with(primary)?],
            tls_ports: Vec::new(),
        };
        let primary_port = tls_ports.first().copied().unwrap_or(trio.primary().port());
        let primary_port_arg = primary_port.to_string();
        let replica = data
            .with_leading_args(["--replicaof", "127.0.0.1", &primary_port_arg])
            .args(tls_args(&mut tls_ports)?);
        trio.servers.push(RedisServer::start_with(replica)?);
        // Before any Sentinel starts: a Sentinel learns about replicas from the
        // primary's INFO, which it asks for on connect and then only every 10 s.
        poll(START_TIMEOUT, "replica sync", || trio.replica_link_up())?;
        for _ in SENTINELS {
            // The Sentinel's own TLS listener and TLS connections, in its config file.
            let mut config = sentinel_config(primary_port);
            for pair in tls_args(&mut tls_ports)?.chunks(2) {
                config.push_str(&format!(
                    "{} {}\n",
                    pair[0].trim_start_matches("--"),
                    pair[1]
                ));
            }
            let sentinel = RedisServer::start_sentinel(options.process_only(), config)?;
            trio.servers.push(sentinel);
        }
        trio.tls_ports = tls_ports;
        poll(START_TIMEOUT, "Sentinel discovery", || {
            trio.sentinels().iter().try_for_each(watches_whole_trio)
        })?;
        Ok(trio)
    }

    /// What clients are given: every Sentinel, so they survive any one of
    /// them; their TLS ports with `rediss+sentinel://` for a TLS trio.
    pub fn url(&self) -> String {
        let ports = match self.tls_ports.get(SENTINELS) {
            Some(tls) => tls.to_vec(),
            None => self.sentinel_ports(),
        };
        let hosts: Vec<String> = ports
            .iter()
            .map(|port| format!("127.0.0.1:{port}"))
            .collect();
        let scheme = if self.tls_ports.is_empty() {
            "redis"
        } else {
            "rediss"
        };
        format!("{scheme}+sentinel://{}/{MASTER_NAME}", hosts.join(","))
    }

    /// The TLS port of server `index` (primary 0, replica 1, Sentinels 2–4),
    /// for a trio started with `start_tls`.
    pub fn tls_port(&self, index: usize) -> Option<u16> {
        self.tls_ports.get(index).copied()
    }

    /// The server started as primary; after a failover it is the old one
    /// (see `current_primary_port`).
    pub fn primary(&self) -> &RedisServer {
        &self.servers[PRIMARY]
    }

    pub fn primary_mut(&mut self) -> &mut RedisServer {
        &mut self.servers[PRIMARY]
    }

    /// The server started as replica, which a failover promotes.
    pub fn replica(&self) -> &RedisServer {
        &self.servers[REPLICA]
    }

    pub fn replica_mut(&mut self) -> &mut RedisServer {
        &mut self.servers[REPLICA]
    }

    pub fn sentinels(&self) -> &[RedisServer] {
        &self.servers[SENTINELS]
    }

    pub fn sentinels_mut(&mut self) -> &mut [RedisServer] {
        &mut self.servers[SENTINELS]
    }

    pub fn sentinel_ports(&self) -> Vec<u16> {
        self.sentinels().iter().map(RedisServer::port).collect()
    }

    /// Primary, replica, then the three Sentinels.
    pub fn servers(&self) -> &[RedisServer] {
        &self.servers
    }

    pub(crate) fn servers_mut(&mut self) -> &mut [RedisServer] {
        &mut self.servers
    }

    /// A crash (SIGKILL), which the Sentinels notice after 500 ms.
    pub fn kill_primary(&mut self) -> io::Result<()> {
        self.primary_mut().kill()
    }

    /// Waits until every Sentinel names the replica as primary and the
    /// replica itself says `role:master`, i.e. until a client asking any
    /// Sentinel gets a server that accepts writes. Returns its port.
    pub fn wait_for_failover(&self, timeout: Duration) -> io::Result<u16> {
        let replica = self.replica().port();
        poll(timeout, "failover to the replica", || {
            for sentinel in self.sentinels() {
                let named = primary_addr(sentinel)?;
                if named != replica {
                    return Err(format!(
                        "Sentinel {} names port {named}, not the replica's {replica}",
                        sentinel.port()
                    ));
                }
            }
            match info_field(self.replica(), "replication", "role")?.as_str() {
                "master" => Ok(replica),
                role => Err(format!("replica {replica} still has role:{role}")),
            }
        })
    }

    /// The primary's port according to the first Sentinel that answers.
    pub fn current_primary_port(&self) -> io::Result<u16> {
        let mut reasons = Vec::new();
        for sentinel in self.sentinels() {
            match primary_addr(sentinel) {
                Ok(port) => return Ok(port),
                Err(reason) => reasons.push(reason),
            }
        }
        Err(io::Error::other(format!(
            "no Sentinel named the primary: {}",
            reasons.join("; ")
        )))
    }

    /// Stops every process (Sentinels, replica, primary), reporting the first
    /// failure but still trying the rest.
    pub fn stop(&mut self) -> io::Result<()> {
        let mut result = Ok(());
        for server in self.servers.iter_mut().rev() {
            let stopped = server.stop();
            if result.is_ok() {
                result = stopped;
            }
        }
        result
    }

    fn replica_link_up(&self) -> Result<(), String> {
        match info_field(self.replica(), "replication", "master_link_status")?.as_str() {
            "up" => Ok(()),
            status => Err(format!("replica master_link_status:{status}")),
        }
    }
}

impl Drop for SentinelTrio {
    fn drop(&mut self) {
        let _ = self.stop();
    }
}

/// Fast failure detection keeps failover tests short; `resolve-hostnames no`
/// keeps Sentinel from ever looking up anything but 127.0.0.1.
fn sentinel_config(primary_port: u16) -> String {
    format!(
        "sentinel resolve-hostnames no\n\
         sentinel monitor {MASTER_NAME} 127.0.0.1 {primary_port} 2\n\
         sentinel down-after-milliseconds {MASTER_NAME} 500\n\
         sentinel failover-timeout {MASTER_NAME} 3000\n\
         sentinel parallel-syncs {MASTER_NAME} 1\n"
    )
}

/// The Sentinel sees a healthy primary with our replica and both other Sentinels.
fn watches_whole_trio(sentinel: &RedisServer) -> Result<(), String> {
    let reply = sentinel
        .command(&[b"SENTINEL", b"MASTER", MASTER_NAME.as_bytes()])
        .map_err(|e| format!("SENTINEL MASTER on port {}: {e}", sentinel.port()))?;
    let fields = field_map(&reply);
    let field = |name: &str| fields.get(name).map_or("?", String::as_str);
    let (flags, slaves, others) = (
        field("flags"),
        field("num-slaves"),
        field("num-other-sentinels"),
    );
    if flags == "master" && slaves == "1" && others == "2" {
        Ok(())
    } else {
        Err(format!(
            "Sentinel {}: flags={flags} num-slaves={slaves} num-other-sentinels={others}",
            sentinel.port()
        ))
    }
}

/// `SENTINEL MASTER` answers a flat array of alternating names and values.
fn field_map(reply: &RespValue) -> HashMap<String, String> {
    let RespValue::Array(items) = reply else {
        return HashMap::new();
    };
    items
        .chunks_exact(2)
        .filter_map(|pair| Some((pair[0].as_str()?.to_string(), pair[1].as_str()?.to_string())))
        .collect()
}

fn primary_addr(sentinel: &RedisServer) -> Result<u16, String> {
    let reply = sentinel
        .command(&[
            b"SENTINEL",
            b"GET-MASTER-ADDR-BY-NAME",
            MASTER_NAME.as_bytes(),
        ])
        .map_err(|e| format!("Sentinel {}: {e}", sentinel.port()))?;
    match &reply {
        RespValue::Array(addr) if addr.len() == 2 => addr[1]
            .as_str()
            .and_then(|port| port.parse().ok())
            .ok_or_else(|| format!("Sentinel {} answered {reply:?}", sentinel.port())),
        _ => Err(format!("Sentinel {} answered {reply:?}", sentinel.port())),
    }
}
