//! Three Cluster masters, with or without a replica each: enough for keys to
//! live on different nodes, for slots to move under a client's feet, and for
//! a master to die and its replica to take over, which is what rl's Cluster
//! support has to survive.

use std::io;
use std::thread::sleep;
use std::time::Duration;

use crate::free_port;
use crate::poll::{expect_ok, info_field, poll};
use crate::resp::RespValue;
use crate::server::{RedisServer, ServerOptions};
use crate::tls::TlsFiles;

pub const SLOT_COUNT: u16 = 16384;

/// The split `redis-cli --cluster create` would make for three masters.
const SLOT_RANGES: [(u16, u16); 3] = [(0, 5460), (5461, 10922), (10923, 16383)];
const MASTERS: usize = SLOT_RANGES.len();
const START_TIMEOUT: Duration = Duration::from_secs(15);
/// Without replicas nothing can fail over, so a long timeout only guards
/// against a busy machine's stalls being taken for failures.
const NODE_TIMEOUT_MS: &str = "2000";
/// With replicas, a dead master is replaced after about this plus the
/// replica's election delay (0.5–1 s).
const FAILOVER_NODE_TIMEOUT_MS: &str = "1000";
/// MIGRATE's own timeout, in milliseconds, for one batch of keys.
const MIGRATE_TIMEOUT_MS: &str = "5000";
const MIGRATE_BATCH: usize = 100;

/// Stopped on drop. `nodes()[0..3]` start as the masters; with replicas,
/// `nodes()[3 + i]` starts as master `i`'s replica.
#[derive(Debug)]
pub struct Cluster {
    nodes: Vec<RedisServer>,
    /// Each node's TLS port, for a cluster started with `start_tls`.
    tls_ports: Vec<u16>,
}

impl Cluster {
    pub fn start() -> io::Result<Self> {
        Self::start_with(ServerOptions::default())
    }

    pub fn start_with(options: ServerOptions) -> io::Result<Self> {
        Self::launch(options, false, None)
    }

    /// Six nodes: the three masters each with one replica, so that killing a
    /// master is a real Cluster failover (see `wait_for_failover`).
    pub fn start_with_replicas(options: ServerOptions) -> io::Result<Self> {
        Self::launch(options, true, None)
    }

    /// Three masters that talk TLS to clients and to each other (`tls-cluster
    /// yes`), requiring client certificates from `files`' CA. The harness
    /// still uses the plain ports; `url()` names the TLS ones.
    pub fn start_tls(files: &TlsFiles) -> io::Result<Self> {
        Self::launch(ServerOptions::default(), false, Some(files))
    }

    /// Wired without redis-cli (which a host may lack even with redis-server):
    /// each master takes its slots, node 0 introduces the others, then each
    /// replica is introduced and told whom to replicate.
    fn launch(options: ServerOptions, replicas: bool, tls: Option<&TlsFiles>) -> io::Result<Self> {
        options.reject_password("cluster")?;
        let node_timeout = if replicas {
            FAILOVER_NODE_TIMEOUT_MS
        } else {
            NODE_TIMEOUT_MS
        };
        // nodes.conf is relative to --dir, which redis-server chdirs into, so
        // each node gets its own and it is removed with the directory.
        let node_options = options.with_leading_args([
            "--cluster-enabled",
            "yes",
            "--cluster-config-file",
            "nodes.conf",
            "--cluster-node-timeout",
            node_timeout,
        ]);
        let mut cluster = Cluster {
            nodes: Vec::new(),
            tls_ports: Vec::new(),
        };
        for _ in 0..if replicas { 2 * MASTERS } else { MASTERS } {
            let node = match tls {
                None => RedisServer::start_with(node_options.clone())?,
                Some(files) => {
                    // The TLS cluster bus listens on the TLS port + 10000.
                    let port = free_port()?;
                    let mut args = files.server_args(port);
                    args.extend(
                        ["--tls-cluster", "yes", "--tls-replication", "yes"].map(String::from),
                    );
                    cluster.tls_ports.push(port);
                    RedisServer::start_with(node_options.clone().args(args))?
                }
            };
            cluster.nodes.push(node);
        }
        for (epoch, (node, (first, last))) in cluster.nodes.iter().zip(SLOT_RANGES).enumerate() {
            let (first, last) = (first.to_string(), last.to_string());
            expect_ok(
                node,
                &[
                    b"CLUSTER",
                    b"ADDSLOTSRANGE",
                    first.as_bytes(),
                    last.as_bytes(),
                ],
            )?;
            // Distinct epochs up front, as redis-cli does; otherwise the nodes
            // first have to resolve an epoch collision among themselves.
            let epoch = (epoch + 1).to_string();
            expect_ok(node, &[b"CLUSTER", b"SET-CONFIG-EPOCH", epoch.as_bytes()])?;
        }
        for (i, node) in cluster.nodes.iter().enumerate().skip(1) {
            // The bus port is the client port + 10000, and with TLS that is the TLS port.
            let port = cluster
                .tls_ports
                .get(i)
                .copied()
                .unwrap_or(node.port())
                .to_string();
            expect_ok(
                &cluster.nodes[0],
                &[b"CLUSTER", b"MEET", b"127.0.0.1", port.as_bytes()],
            )?;
        }
        let known = cluster.nodes.len();
        poll(START_TIMEOUT, "cluster_state:ok on every node", || {
            cluster
                .nodes
                .iter()
                .try_for_each(|node| sees_whole_cluster(node, known))
        })?;
        if replicas {
            for master in 0..MASTERS {
                let id = cluster.node_id(master)?;
                // A node can only replicate a master it has heard of; MEET
                // was answered above, so every node knows every id by now.
                expect_ok(
                    &cluster.nodes[MASTERS + master],
                    &[b"CLUSTER", b"REPLICATE", id.as_bytes()],
                )?;
            }
            poll(START_TIMEOUT, "every replica in sync", || {
                cluster.nodes[MASTERS..].iter().try_for_each(|replica| {
                    match info_field(replica, "replication", "master_link_status")?.as_str() {
                        "up" => Ok(()),
                        status => Err(format!(
                            "replica {}: master_link_status:{status}",
                            replica.port()
                        )),
                    }
                })
            })?;
        }
        Ok(cluster)
    }

    /// Index into `nodes()` of master `master`'s replica, if the cluster was
    /// started with replicas.
    pub fn replica_of(&self, master: usize) -> io::Result<usize> {
        let replica = MASTERS + master;
        if master >= MASTERS || replica >= self.nodes.len() {
            return Err(invalid(format!(
                "node {master} has no replica in this {}-node cluster",
                self.nodes.len()
            )));
        }
        Ok(replica)
    }

    /// Waits until `slot` is served by a node other than `old_owner` (which a
    /// test has killed), that node says `role:master`, and every live node
    /// says `cluster_state:ok`, i.e. until clients can write to the slot
    /// again. Returns the new owner's index.
    pub fn wait_for_failover(
        &self,
        slot: u16,
        old_owner: usize,
        timeout: Duration,
    ) -> io::Result<usize> {
        poll(timeout, "Cluster failover", || {
            let owner = self.slot_owner(slot).map_err(|e| e.to_string())?;
            if owner == old_owner {
                return Err(format!("slot {slot} is still on node {old_owner}"));
            }
            match info_field(&self.nodes[owner], "replication", "role")?.as_str() {
                "master" => {}
                role => return Err(format!("node {owner} has role:{role}")),
            }
            for node in self.nodes.iter().filter(|n| n.is_running()) {
                let state = cluster_info_field(node, "cluster_state")?;
                if state != "ok" {
                    return Err(format!("node {}: cluster_state:{state}", node.port()));
                }
            }
            Ok(owner)
        })
    }

    /// Every node is a seed, as a client would be configured: on the TLS
    /// ports with `rediss+cluster://` for a TLS cluster.
    pub fn url(&self) -> String {
        if !self.tls_ports.is_empty() {
            let hosts: Vec<String> = self
                .tls_ports
                .iter()
                .map(|port| format!("127.0.0.1:{port}"))
                .collect();
            return format!("rediss+cluster://{}", hosts.join(","));
        }
        let hosts: Vec<String> = self
            .nodes
            .iter()
            .map(|node| format!("127.0.0.1:{}", node.port()))
            .collect();
        format!("redis+cluster://{}", hosts.join(","))
    }

    /// Node `index`'s TLS port, for a cluster started with `start_tls`.
    pub fn tls_port(&self, index: usize) -> Option<u16> {
        self.tls_ports.get(index).copied()
    }

    pub fn nodes(&self) -> &[RedisServer] {
        &self.nodes
    }

    pub fn nodes_mut(&mut self) -> &mut [RedisServer] {
        &mut self.nodes
    }

    /// The node's Cluster id (CLUSTER MYID), which SETSLOT takes.
    pub fn node_id(&self, index: usize) -> io::Result<String> {
        let node = self.node(index)?;
        match node.command(&[b"CLUSTER", b"MYID"])? {
            reply @ (RespValue::Bulk(_) | RespValue::Simple(_)) => match reply.as_str() {
                Some(id) if !id.is_empty() => Ok(id.to_string()),
                _ => Err(io::Error::other(format!(
                    "CLUSTER MYID on port {} answered an empty or non-UTF-8 id: {reply:?}",
                    node.port()
                ))),
            },
            other => Err(io::Error::other(format!(
                "CLUSTER MYID on port {} answered {other:?}",
                node.port()
            ))),
        }
    }

    /// Index into `nodes()` of the slot's owner, as the first live node sees it.
    pub fn slot_owner(&self, slot: u16) -> io::Result<usize> {
        let asked = self
            .nodes
            .iter()
            .find(|node| node.is_running())
            .ok_or_else(|| io::Error::other("no cluster node is running"))?;
        let reply = asked.command(&[b"CLUSTER", b"SLOTS"])?;
        let RespValue::Array(ranges) = &reply else {
            return Err(io::Error::other(format!(
                "CLUSTER SLOTS answered {reply:?}"
            )));
        };
        let slot = i64::from(slot);
        let port = ranges.iter().find_map(|range| match range {
            // [first, last, [ip, port, id, ...], replicas...]
            RespValue::Array(r) if r.len() >= 3 => {
                let (first, last) = (r[0].as_int()?, r[1].as_int()?);
                let RespValue::Array(master) = &r[2] else {
                    return None;
                };
                (first..=last)
                    .contains(&slot)
                    .then(|| master.get(1)?.as_int())?
            }
            _ => None,
        });
        let port = port.ok_or_else(|| {
            io::Error::new(io::ErrorKind::NotFound, format!("no node owns slot {slot}"))
        })?;
        self.nodes
            .iter()
            .position(|node| i64::from(node.port()) == port)
            .ok_or_else(|| io::Error::other(format!("slot {slot} is owned by unknown port {port}")))
    }

    /// Index of the node that owns `key`'s slot.
    pub fn key_owner(&self, key: &[u8]) -> io::Result<usize> {
        self.slot_owner(key_slot(key))
    }

    /// Moves `slot` and its keys to node `to` with the documented
    /// live-resharding steps, so clients see the same ASK/MOVED replies as
    /// during a real `redis-cli --cluster reshard`.
    pub fn migrate_slot(&self, slot: u16, to: usize) -> io::Result<()> {
        self.migrate_slot_slowly(slot, to, Duration::ZERO, MIGRATE_BATCH)
    }

    /// `migrate_slot`, but moving `batch` keys at a time with `pause` between
    /// batches, so a test can run traffic while the slot is half-migrated
    /// (the source answers `-ASK` for keys already moved).
    pub fn migrate_slot_slowly(
        &self,
        slot: u16,
        to: usize,
        pause: Duration,
        batch: usize,
    ) -> io::Result<()> {
        if slot >= SLOT_COUNT {
            return Err(invalid(format!("slot {slot} is not below {SLOT_COUNT}")));
        }
        let target = self.node(to)?;
        let from = self.slot_owner(slot)?;
        if from == to {
            return Err(invalid(format!("slot {slot} is already on node {to}")));
        }
        let source = &self.nodes[from];
        let (source_id, target_id) = (self.node_id(from)?, self.node_id(to)?);
        let slot_arg = slot.to_string();
        let setslot = |node: &RedisServer, state: &[u8], id: &str| {
            expect_ok(
                node,
                &[
                    b"CLUSTER",
                    b"SETSLOT",
                    slot_arg.as_bytes(),
                    state,
                    id.as_bytes(),
                ],
            )
        };
        // Importing first: the source starts sending -ASK to the target as
        // soon as it is migrating, and the target must accept those clients.
        setslot(target, b"IMPORTING", &source_id)?;
        setslot(source, b"MIGRATING", &target_id)?;
        let (target_port, count) = (target.port().to_string(), batch.max(1).to_string());
        for round in 0.. {
            let keys = match source.command(&[
                b"CLUSTER",
                b"GETKEYSINSLOT",
                slot_arg.as_bytes(),
                count.as_bytes(),
            ])? {
                RespValue::Array(keys) => keys,
                other => {
                    return Err(io::Error::other(format!(
                        "GETKEYSINSLOT answered {other:?}"
                    )))
                }
            };
            if keys.is_empty() {
                break;
            }
            if round > 0 {
                sleep(pause);
            }
            let mut args: Vec<&[u8]> = vec![
                b"MIGRATE",
                b"127.0.0.1",
                target_port.as_bytes(),
                b"",
                b"0",
                MIGRATE_TIMEOUT_MS.as_bytes(),
                b"KEYS",
            ];
            args.extend(keys.iter().filter_map(RespValue::as_bytes));
            match source.command(&args)? {
                RespValue::Simple(s) if s == "OK" || s == "NOKEY" => {}
                other => return Err(io::Error::other(format!("MIGRATE answered {other:?}"))),
            }
        }
        // Target first so it owns the slot before the source starts sending
        // -MOVED there; the third node is told too instead of waiting for gossip.
        setslot(target, b"NODE", &target_id)?;
        setslot(source, b"NODE", &target_id)?;
        for (i, node) in self.nodes.iter().enumerate() {
            if i != from && i != to {
                setslot(node, b"NODE", &target_id)?;
            }
        }
        Ok(())
    }

    /// Makes node `i` announce `ports[i]` to clients (`cluster-announce-port`) instead of its own,
    /// e.g. a fault proxy's port in front of it, so that a client following `CLUSTER SLOTS` and
    /// `-MOVED` reaches every node through its proxy. The cluster bus keeps the real ports (the
    /// announced bus port is still derived from the node's own port), so faults on the client
    /// path never disturb gossip or failure detection. Waits until every node's `CLUSTER SLOTS`
    /// names only the announced ports. `slot_owner` and the helpers built on it then no longer
    /// map ports to nodes.
    pub fn announce_ports(&self, ports: &[u16]) -> io::Result<()> {
        if ports.len() != self.nodes.len() {
            return Err(invalid(format!(
                "{} ports for {} nodes",
                ports.len(),
                self.nodes.len()
            )));
        }
        for (node, port) in self.nodes.iter().zip(ports) {
            let port = port.to_string();
            expect_ok(
                node,
                &[b"CONFIG", b"SET", b"cluster-announce-port", port.as_bytes()],
            )?;
        }
        poll(START_TIMEOUT, "every node announcing its new port", || {
            self.nodes.iter().try_for_each(|node| {
                let reply = node
                    .command(&[b"CLUSTER", b"SLOTS"])
                    .map_err(|e| format!("CLUSTER SLOTS on port {}: {e}", node.port()))?;
                let RespValue::Array(ranges) = &reply else {
                    return Err(format!("CLUSTER SLOTS answered {reply:?}"));
                };
                for range in ranges {
                    let RespValue::Array(r) = range else {
                        return Err(format!("CLUSTER SLOTS answered {reply:?}"));
                    };
                    for holder in &r[2..] {
                        let port = match holder {
                            RespValue::Array(h) => h.get(1).and_then(RespValue::as_int),
                            _ => None,
                        };
                        if !port.is_some_and(|p| ports.iter().any(|&a| i64::from(a) == p)) {
                            return Err(format!("node {} still names port {port:?}", node.port()));
                        }
                    }
                }
                Ok(())
            })
        })
    }

    /// Stops every node, reporting the first failure but still trying the rest.
    pub fn stop(&mut self) -> io::Result<()> {
        let mut result = Ok(());
        for node in &mut self.nodes {
            let stopped = node.stop();
            if result.is_ok() {
                result = stopped;
            }
        }
        result
    }

    fn node(&self, index: usize) -> io::Result<&RedisServer> {
        self.nodes.get(index).ok_or_else(|| {
            invalid(format!(
                "no node {index}; the cluster has {}",
                self.nodes.len()
            ))
        })
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let _ = self.stop();
    }
}

/// The hash slot Redis Cluster puts `key` in: CRC16 (XMODEM) of the key, or
/// of the first non-empty `{...}` in it, modulo 16384. Tests use it to put
/// keys on chosen nodes, and to co-locate keys with a hash tag.
pub fn key_slot(key: &[u8]) -> u16 {
    let tagged = key.iter().position(|&b| b == b'{').and_then(|open| {
        let rest = &key[open + 1..];
        let len = rest.iter().position(|&b| b == b'}')?;
        (len > 0).then(|| &rest[..len])
    });
    crc16_xmodem(tagged.unwrap_or(key)) % SLOT_COUNT
}

/// Polynomial 0x1021, initial value 0, no reflection: the CRC Redis uses.
fn crc16_xmodem(data: &[u8]) -> u16 {
    data.iter().fold(0, |crc, &byte| {
        (0..8).fold(crc ^ (u16::from(byte) << 8), |crc, _| {
            if crc & 0x8000 != 0 {
                (crc << 1) ^ 0x1021
            } else {
                crc << 1
            }
        })
    })
}

/// One `field:value` line of `CLUSTER INFO`, as a `poll` reason on failure.
fn cluster_info_field(node: &RedisServer, name: &str) -> Result<String, String> {
    let info = node
        .command(&[b"CLUSTER", b"INFO"])
        .map_err(|e| format!("CLUSTER INFO on port {}: {e}", node.port()))?;
    let info = info
        .as_str()
        .ok_or_else(|| format!("CLUSTER INFO on port {} answered {info:?}", node.port()))?;
    Ok(info
        .lines()
        .find_map(|l| l.trim().strip_prefix(name)?.strip_prefix(':'))
        .unwrap_or("?")
        .to_string())
}

/// The node serves all slots, spread over the three masters, and knows all
/// `known` nodes.
fn sees_whole_cluster(node: &RedisServer, known: usize) -> Result<(), String> {
    let field = |name: &str| cluster_info_field(node, name);
    let (state, known_nodes, size) = (
        field("cluster_state")?,
        field("cluster_known_nodes")?,
        field("cluster_size")?,
    );
    if state == "ok" && known_nodes == known.to_string() && size == MASTERS.to_string() {
        Ok(())
    } else {
        Err(format!(
            "node {}: cluster_state:{state} cluster_known_nodes:{known_nodes} cluster_size:{size}",
            node.port()
        ))
    }
}

fn invalid(msg: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, msg)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_slot_matches_redis() {
        // Values from the Cluster spec and CLUSTER KEYSLOT.
        assert_eq!(crc16_xmodem(b"123456789"), 0x31C3);
        assert_eq!(key_slot(b"123456789"), 12739);
        assert_eq!(key_slot(b"foo"), 12182);
        assert_eq!(key_slot(b""), 0);
    }

    #[test]
    fn hash_tags_follow_the_spec() {
        assert_eq!(
            key_slot(b"{user1000}.following"),
            key_slot(b"{user1000}.followers")
        );
        assert_eq!(key_slot(b"{user1000}.following"), key_slot(b"user1000"));
        // Only the first '{' counts, up to the first '}' after it.
        assert_eq!(key_slot(b"foo{{bar}}zap"), key_slot(b"{bar"));
        assert_eq!(key_slot(b"foo{bar}{zap}"), key_slot(b"bar"));
        // An empty tag or an unclosed brace hashes the whole key.
        assert_eq!(
            key_slot(b"foo{}{bar}"),
            crc16_xmodem(b"foo{}{bar}") % SLOT_COUNT
        );
        assert_eq!(key_slot(b"foo{bar"), crc16_xmodem(b"foo{bar") % SLOT_COUNT);
    }
}
