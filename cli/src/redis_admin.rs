//! The benchmarks' side channel to Redis: clock, key cleanup, command counters, memory. It uses its
//! own connections so none of this is timed as limiter latency, and the commands it sends during a
//! run (INFO, MEMORY USAGE) are subtracted from the counts by name.
//!
//! It reads the URL with rl-core's URL module, so it reaches every deployment the limiter does:
//! one server, the primary the Sentinels name, or every master of a Cluster. On a Cluster the
//! figures (commands, server time) are summed over the masters, and a key's commands go to the
//! master that owns its slot.

use std::collections::{BTreeMap, HashSet};
use std::time::Instant;

use redis::aio::MultiplexedConnection;
use redis::{ConnectionInfo, TlsCertificates, Value};
use rl_core::url::{Deployment, Node, RedisUrl};
use serde::Serialize;

use crate::{CliResult, Failure};

/// Commands this module sends between two snapshots; never attributed to a limiter.
const OWN_COMMANDS: &[&str] = &["info", "memory|usage"];

pub struct Admin {
    /// The one server (standalone, or the Sentinels' primary), or every master of a Cluster.
    masters: Vec<Master>,
    /// Cluster only: `CLUSTER SLOTS` ranges, first and last slot and the index in `masters`.
    slots: Vec<(u16, u16, usize)>,
    certs: Option<TlsCertificates>,
}

struct Master {
    info: ConnectionInfo,
    conn: MultiplexedConnection,
}

impl Admin {
    pub async fn connect(url: &str) -> CliResult<Admin> {
        let parsed = rl_core::url::parse(url)?;
        let unreachable = |e: String| {
            Failure::new(format!(
                "cannot reach Redis at {}: {e}",
                rl_core::redact(url)
            ))
        };
        let mut admin = Admin {
            masters: Vec::new(),
            slots: Vec::new(),
            certs: parsed.certificates()?,
        };
        match &parsed.deployment {
            Deployment::Standalone { info, .. } | Deployment::Unix { info, .. } => {
                admin.add(info.clone()).await.map_err(unreachable)?;
            }
            Deployment::Sentinel {
                sentinels, master, ..
            } => {
                let primary = admin
                    .ask_sentinels(&parsed, sentinels, master)
                    .await
                    .map_err(unreachable)?;
                admin
                    .add(parsed.node_info(&primary))
                    .await
                    .map_err(unreachable)?;
            }
            Deployment::Cluster { seeds } => admin
                .add_masters(&parsed, seeds)
                .await
                .map_err(unreachable)?,
        }
        Ok(admin)
    }

    fn client(&self, info: ConnectionInfo) -> redis::RedisResult<redis::Client> {
        // Same TCP settings as rl-core (TCP_NODELAY), so the baselines that connect through here
        // price the scripts and the client code, not Nagle's algorithm.
        let info = info.set_tcp_settings(redis::io::tcp::TcpSettings::default().set_nodelay(true));
        match &self.certs {
            Some(c) => redis::Client::build_with_tls(info, c.clone()),
            None => redis::Client::open(info),
        }
    }

    async fn add(&mut self, info: ConnectionInfo) -> Result<usize, String> {
        let conn = self
            .client(info.clone())
            .map_err(|e| e.to_string())?
            .get_multiplexed_async_connection()
            .await
            .map_err(|e| format!("{}: {e}", info.addr()))?;
        self.masters.push(Master { info, conn });
        Ok(self.masters.len() - 1)
    }

    /// The primary's address, from the first Sentinel that knows it.
    async fn ask_sentinels(
        &self,
        url: &RedisUrl,
        sentinels: &[Node],
        master: &str,
    ) -> Result<Node, String> {
        let mut errors = Vec::new();
        for s in sentinels {
            let asked = async {
                let mut c = self
                    .client(url.sentinel_info(s))?
                    .get_multiplexed_async_connection()
                    .await?;
                redis::cmd("SENTINEL")
                    .arg("GET-MASTER-ADDR-BY-NAME")
                    .arg(master)
                    .query_async::<Option<(String, u16)>>(&mut c)
                    .await
            };
            match asked.await {
                Ok(Some((host, port))) => return Ok(Node { host, port }),
                Ok(None) => {
                    errors.push(format!("{}:{} knows no master {master:?}", s.host, s.port))
                }
                Err(e) => errors.push(format!("Sentinel {}:{}: {e}", s.host, s.port)),
            }
        }
        Err(errors.join("; "))
    }

    /// Every master of the Cluster, from the first seed that answers `CLUSTER SLOTS`.
    async fn add_masters(&mut self, url: &RedisUrl, seeds: &[Node]) -> Result<(), String> {
        let mut errors = Vec::new();
        for seed in seeds {
            let asked = async {
                let mut c = self
                    .client(url.node_info(seed))?
                    .get_multiplexed_async_connection()
                    .await?;
                redis::cmd("CLUSTER")
                    .arg("SLOTS")
                    .query_async::<Vec<Vec<Value>>>(&mut c)
                    .await
            };
            let ranges = match asked.await {
                Ok(r) => r,
                Err(e) => {
                    errors.push(format!("{}:{}: {e}", seed.host, seed.port));
                    continue;
                }
            };
            let mut known: Vec<Node> = Vec::new();
            for (first, last, (host, port)) in ranges.iter().filter_map(|r| slot_range(r)) {
                let node = Node { host, port };
                let i = match known.iter().position(|n| *n == node) {
                    Some(i) => i,
                    None => {
                        let i = self.add(url.node_info(&node)).await?;
                        known.push(node);
                        i
                    }
                };
                self.slots.push((first, last, i));
            }
            if self.masters.is_empty() {
                return Err(format!(
                    "{}:{}: the Cluster serves no slot",
                    seed.host, seed.port
                ));
            }
            return Ok(());
        }
        Err(errors.join("; "))
    }

    /// The master that holds `key` (the only one off a Cluster). The slot is computed here: a
    /// `CLUSTER KEYSLOT` during a run would be counted as the limiter's.
    fn master_for(&self, key: &[u8]) -> CliResult<&Master> {
        if self.slots.is_empty() {
            return Ok(&self.masters[0]);
        }
        let slot = rl_harness::key_slot(key);
        self.slots
            .iter()
            .find(|(first, last, _)| (*first..=*last).contains(&slot))
            .map(|&(_, _, i)| &self.masters[i])
            .ok_or_else(|| Failure::new(format!("no Cluster master serves slot {slot}")))
    }

    /// How many masters the figures are summed over (more than one: a Cluster).
    pub fn masters(&self) -> usize {
        self.masters.len()
    }

    /// A new client of the master that holds `key`, for a baseline script that works on it.
    pub async fn client_for(&self, key: &[u8]) -> CliResult<redis::Client> {
        let info = self.master_for(key)?.info.clone();
        Ok(self.client(info)?)
    }

    /// Redis TIME in µs, and the local instant it corresponds to (the midpoint of the round trip),
    /// so a schedule can be aligned to the server's window boundaries.
    pub async fn server_time(&self) -> CliResult<(u64, Instant)> {
        let mut c = self.masters[0].conn.clone();
        let before = Instant::now();
        let (secs, micros): (u64, u64) = redis::cmd("TIME").query_async(&mut c).await?;
        let after = Instant::now();
        Ok((secs * 1_000_000 + micros, before + (after - before) / 2))
    }

    pub async fn del(&self, key: &[u8]) -> CliResult<()> {
        let mut c = self.master_for(key)?.conn.clone();
        redis::cmd("DEL").arg(key).query_async::<()>(&mut c).await?;
        Ok(())
    }

    /// Deletes every key matching a SCAN pattern (a baseline keeps one key per window index), on
    /// every master.
    pub async fn del_matching(&self, pattern: &str) -> CliResult<u64> {
        let mut deleted = 0;
        for m in &self.masters {
            deleted += self.del_matching_on(m.conn.clone(), pattern).await?;
        }
        Ok(deleted)
    }

    async fn del_matching_on(&self, mut c: MultiplexedConnection, pattern: &str) -> CliResult<u64> {
        let mut cursor: u64 = 0;
        let mut deleted = 0;
        loop {
            let (next, keys): (u64, Vec<Vec<u8>>) = redis::cmd("SCAN")
                .arg(cursor)
                .arg("MATCH")
                .arg(pattern)
                .arg("COUNT")
                .arg(1000)
                .query_async(&mut c)
                .await?;
            // One key per DEL on a Cluster: a multi-key DEL must stay within one slot.
            let batches: Vec<&[Vec<u8>]> = match self.slots.is_empty() {
                true if !keys.is_empty() => vec![&keys[..]],
                true => Vec::new(),
                false => keys.chunks(1).collect(),
            };
            for batch in batches {
                deleted += redis::cmd("DEL")
                    .arg(batch)
                    .query_async::<u64>(&mut c)
                    .await?;
            }
            if next == 0 {
                return Ok(deleted);
            }
            cursor = next;
        }
    }

    /// Bytes Redis attributes to `key`, counting every element (SAMPLES 0); `None` if it is absent.
    pub async fn memory_usage(&self, key: &[u8]) -> CliResult<Option<u64>> {
        let mut c = self.master_for(key)?.conn.clone();
        Ok(redis::cmd("MEMORY")
            .arg("USAGE")
            .arg(key)
            .arg("SAMPLES")
            .arg(0)
            .query_async(&mut c)
            .await?)
    }

    /// The command counters, summed over the masters.
    pub async fn snapshot(&self) -> CliResult<Snapshot> {
        let mut sum = Snapshot::default();
        for m in &self.masters {
            let mut c = m.conn.clone();
            let text: String = redis::cmd("INFO")
                .arg("stats")
                .arg("commandstats")
                .arg("cpu")
                .query_async(&mut c)
                .await?;
            sum.add(&Snapshot::parse(&text));
        }
        Ok(sum)
    }

    /// The commands among `names` that a script cannot call (EVALSHA, SCRIPT LOAD, HELLO ...): the
    /// only ones known to come straight from clients. Redis counts commands run inside a script in
    /// the same counters as client commands, so flags are the only way to tell them apart.
    pub async fn noscript_commands(
        &self,
        names: impl IntoIterator<Item = &str>,
    ) -> CliResult<HashSet<String>> {
        let mut c = self.masters[0].conn.clone();
        let names: Vec<&str> = names.into_iter().collect();
        if names.is_empty() {
            return Ok(HashSet::new());
        }
        let reply: Value = redis::cmd("COMMAND")
            .arg("INFO")
            .arg(&names)
            .query_async(&mut c)
            .await?;
        let mut out = HashSet::new();
        if let Value::Array(entries) = reply {
            for (name, entry) in names.iter().zip(entries) {
                if let Value::Array(fields) = entry {
                    if fields
                        .get(2)
                        .is_some_and(|flags| has_flag(flags, "noscript"))
                    {
                        out.insert(name.to_string());
                    }
                }
            }
        }
        Ok(out)
    }

    /// What a run cost Redis, between two snapshots, without this module's own commands.
    pub async fn commands_between(
        &self,
        before: &Snapshot,
        after: &Snapshot,
    ) -> CliResult<CommandCounts> {
        let mut per_command = BTreeMap::new();
        let mut own = 0;
        for (name, &calls) in &after.calls {
            let d = calls.saturating_sub(before.calls.get(name).copied().unwrap_or(0));
            if d == 0 {
                continue;
            }
            if OWN_COMMANDS.contains(&name.as_str()) {
                own += d;
            } else {
                per_command.insert(name.clone(), d);
            }
        }
        let noscript = self
            .noscript_commands(per_command.keys().map(String::as_str))
            .await?;
        let client_calls = per_command
            .iter()
            .filter(|(n, _)| noscript.contains(*n))
            .map(|(_, d)| d)
            .sum();
        let total = after
            .total_commands
            .saturating_sub(before.total_commands)
            .saturating_sub(own);
        // Time inside client-sent commands covers the scripts' inner calls exactly once.
        let client_usec = noscript
            .iter()
            .map(|n| {
                after
                    .usec
                    .get(n)
                    .copied()
                    .unwrap_or(0)
                    .saturating_sub(before.usec.get(n).copied().unwrap_or(0))
            })
            .sum();
        Ok(CommandCounts {
            client_calls,
            total,
            client_usec,
            cpu_us: after.cpu_us.saturating_sub(before.cpu_us),
            per_command,
        })
    }
}

/// One `CLUSTER SLOTS` entry: `[first, last, [host, port, id, ...], replicas...]`.
fn slot_range(range: &[Value]) -> Option<(u16, u16, (String, u16))> {
    let int = |v: &Value| redis::from_redis_value_ref::<u16>(v).ok();
    let Value::Array(master) = range.get(2)? else {
        return None;
    };
    let host = redis::from_redis_value_ref::<String>(master.first()?)
        .ok()
        .filter(|h| !h.is_empty() && h != "?")?;
    Some((
        int(range.first()?)?,
        int(range.get(1)?)?,
        (host, int(master.get(1)?)?),
    ))
}

fn has_flag(flags: &Value, flag: &str) -> bool {
    let items = match flags {
        Value::Array(v) | Value::Set(v) => v,
        _ => return false,
    };
    items.iter().any(|f| match f {
        Value::SimpleString(s) => s == flag,
        Value::BulkString(b) => b == flag.as_bytes(),
        _ => false,
    })
}

#[derive(Debug, Clone, Default)]
pub struct Snapshot {
    /// `total_commands_processed`: in Redis 7 it includes commands run inside scripts.
    pub total_commands: u64,
    /// `cmdstat_<name>` calls, names as Redis prints them (`memory|usage` for subcommands).
    pub calls: BTreeMap<String, u64>,
    /// `cmdstat_<name>` usec: server time spent in the command (a script's includes its calls).
    pub usec: BTreeMap<String, u64>,
    /// `used_cpu_sys + used_cpu_user`, µs: the whole server process's CPU, including the I/O and
    /// protocol work `usec` leaves out.
    pub cpu_us: u64,
}

impl Snapshot {
    fn add(&mut self, other: &Snapshot) {
        self.total_commands += other.total_commands;
        self.cpu_us += other.cpu_us;
        for (name, calls) in &other.calls {
            *self.calls.entry(name.clone()).or_default() += calls;
        }
        for (name, usec) in &other.usec {
            *self.usec.entry(name.clone()).or_default() += usec;
        }
    }

    pub fn parse(info: &str) -> Snapshot {
        let mut s = Snapshot::default();
        for line in info.lines() {
            let line = line.trim();
            if let Some(v) = line.strip_prefix("total_commands_processed:") {
                s.total_commands = v.parse().unwrap_or(0);
            } else if let Some(v) = line
                .strip_prefix("used_cpu_sys:")
                .or_else(|| line.strip_prefix("used_cpu_user:"))
            {
                s.cpu_us += (v.parse::<f64>().unwrap_or(0.0) * 1e6) as u64;
            } else if let Some(rest) = line.strip_prefix("cmdstat_") {
                let Some((name, fields)) = rest.split_once(':') else {
                    continue;
                };
                let field = |key: &str| -> u64 {
                    fields
                        .split(',')
                        .find_map(|f| f.strip_prefix(key))
                        .and_then(|v| v.parse().ok())
                        .unwrap_or(0)
                };
                s.calls.insert(name.to_string(), field("calls="));
                s.usec.insert(name.to_string(), field("usec="));
            }
        }
        s
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct CommandCounts {
    /// Commands that only a client can send (script calls and connection commands).
    pub client_calls: u64,
    /// Everything Redis executed for the run, including the commands inside scripts.
    pub total: u64,
    /// Redis's own time executing the client-sent commands, µs: what the run cost Redis's one
    /// thread, whatever the client's overheads.
    pub client_usec: u64,
    /// The Redis processes' CPU time over the run (summed over masters), µs.
    pub cpu_us: u64,
    pub per_command: BTreeMap<String, u64>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_totals_and_subcommands() {
        let info = "# Stats\r\ntotal_commands_processed:42\r\n# Commandstats\r\n\
                    cmdstat_evalsha:calls=7,usec=70,usec_per_call=10.00,rejected_calls=0,failed_calls=0\r\n\
                    cmdstat_memory|usage:calls=2,usec=4,usec_per_call=2.00,rejected_calls=0,failed_calls=0\r\n";
        let s = Snapshot::parse(info);
        assert_eq!(s.total_commands, 42);
        assert_eq!(s.calls["evalsha"], 7);
        assert_eq!(s.calls["memory|usage"], 2);
        assert_eq!(s.usec["evalsha"], 70);
        let mut sum = s.clone();
        sum.add(&s);
        assert_eq!(
            (
                sum.total_commands,
                sum.calls["evalsha"],
                sum.usec["evalsha"]
            ),
            (84, 14, 140)
        );
    }
}
