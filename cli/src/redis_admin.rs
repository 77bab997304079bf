//! The benchmarks' side channel to Redis: clock, key cleanup, command counters, memory. It uses its
//! own connection so none of this is timed as limiter latency, and the commands it sends during a
//! run (INFO, MEMORY USAGE) are subtracted from the counts by name.

use std::collections::{BTreeMap, HashSet};
use std::time::Instant;

use redis::aio::MultiplexedConnection;
use redis::Value;
use serde::Serialize;

use crate::target::redact;
use crate::{CliResult, Failure};

/// Commands this module sends between two snapshots; never attributed to a limiter.
const OWN_COMMANDS: &[&str] = &["info", "memory|usage"];

pub struct Admin {
    conn: MultiplexedConnection,
}

impl Admin {
    pub async fn connect(url: &str) -> CliResult<Admin> {
        let unreachable = |e: redis::RedisError| {
            Failure::new(format!("cannot reach Redis at {}: {e}", redact(url)))
        };
        let client = redis::Client::open(url).map_err(unreachable)?;
        Ok(Admin {
            conn: client
                .get_multiplexed_async_connection()
                .await
                .map_err(unreachable)?,
        })
    }

    /// Redis TIME in µs, and the local instant it corresponds to (the midpoint of the round trip),
    /// so a schedule can be aligned to the server's window boundaries.
    pub async fn server_time(&self) -> CliResult<(u64, Instant)> {
        let mut c = self.conn.clone();
        let before = Instant::now();
        let (secs, micros): (u64, u64) = redis::cmd("TIME").query_async(&mut c).await?;
        let after = Instant::now();
        Ok((secs * 1_000_000 + micros, before + (after - before) / 2))
    }

    pub async fn del(&self, key: &[u8]) -> CliResult<()> {
        let mut c = self.conn.clone();
        redis::cmd("DEL").arg(key).query_async::<()>(&mut c).await?;
        Ok(())
    }

    /// Deletes every key matching a SCAN pattern (a baseline keeps one key per window index).
    pub async fn del_matching(&self, pattern: &str) -> CliResult<u64> {
        let mut c = self.conn.clone();
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
            if !keys.is_empty() {
                deleted += redis::cmd("DEL")
                    .arg(&keys)
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
        let mut c = self.conn.clone();
        Ok(redis::cmd("MEMORY")
            .arg("USAGE")
            .arg(key)
            .arg("SAMPLES")
            .arg(0)
            .query_async(&mut c)
            .await?)
    }

    pub async fn snapshot(&self) -> CliResult<Snapshot> {
        let mut c = self.conn.clone();
        let text: String = redis::cmd("INFO")
            .arg("stats")
            .arg("commandstats")
            .query_async(&mut c)
            .await?;
        Ok(Snapshot::parse(&text))
    }

    /// The commands among `names` that a script cannot call (EVALSHA, SCRIPT LOAD, HELLO ...): the
    /// only ones known to come straight from clients. Redis counts commands run inside a script in
    /// the same counters as client commands, so flags are the only way to tell them apart.
    pub async fn noscript_commands(
        &self,
        names: impl IntoIterator<Item = &str>,
    ) -> CliResult<HashSet<String>> {
        let mut c = self.conn.clone();
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
            per_command,
        })
    }
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
}

impl Snapshot {
    pub fn parse(info: &str) -> Snapshot {
        let mut s = Snapshot::default();
        for line in info.lines() {
            let line = line.trim();
            if let Some(v) = line.strip_prefix("total_commands_processed:") {
                s.total_commands = v.parse().unwrap_or(0);
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
    }
}
