//! The hot-key scenario's contenders: what each one is (options, or the raw script), how one of
//! its instances is built, and how its state is cleared between runs.

use std::sync::Arc;

use rl_core::{Limiter, Options, Stats};
use serde::{Deserialize, Serialize};

use super::super::contender::Contender;
use super::super::load::Drive;
use crate::args::BenchArgs;
use crate::redis_admin::Admin;
use crate::throughput::raw_zset::RawZset;
use crate::{CliResult, Failure};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Kind {
    /// The raw ZSET script, one EVALSHA per decision (rl-core cannot switch coalescing off).
    Plain,
    /// rl-core with leases and the denial cache off: coalescing only.
    Coalesce,
    Leases,
    LeasesDenial,
    /// key_shards over the Cluster's masters, leases and denial cache off: L3 alone.
    Sharded,
}

impl Kind {
    const ALL: [Kind; 5] = [
        Kind::Plain,
        Kind::Coalesce,
        Kind::Leases,
        Kind::LeasesDenial,
        Kind::Sharded,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Kind::Plain => "plain",
            Kind::Coalesce => "coalesce",
            Kind::Leases => "leases",
            Kind::LeasesDenial => "leases+denial",
            Kind::Sharded => "sharded",
        }
    }

    /// The list asked for, or every contender that fits the deployment.
    pub fn chosen(names: &[String], cluster: bool) -> CliResult<Vec<Kind>> {
        if names.is_empty() {
            return Ok(Kind::ALL
                .into_iter()
                .filter(|k| cluster || *k != Kind::Sharded)
                .collect());
        }
        names
            .iter()
            .map(|n| {
                let k = Kind::ALL
                    .into_iter()
                    .find(|k| k.name() == n.trim())
                    .ok_or_else(|| {
                        Failure::new(format!(
                            "unknown contender {n:?}; the contenders are {}",
                            Kind::ALL.map(Kind::name).join(", ")
                        ))
                    })?;
                if k == Kind::Sharded && !cluster {
                    return Err(Failure::new(
                        "the sharded contender needs a Cluster URL (redis+cluster://...)",
                    ));
                }
                Ok(k)
            })
            .collect()
    }

    /// The options this contender adds to the user's `-o` pairs (which come after, so they can
    /// tune e.g. lease_ms, but not turn a contender into another).
    fn pairs(self, shards: Option<u64>) -> Vec<String> {
        let v: &[&str] = match self {
            Kind::Plain => &[],
            Kind::Coalesce => &["leases=off", "denial_cache=false"],
            Kind::Leases => &["leases=on", "denial_cache=false"],
            Kind::LeasesDenial => &["leases=on", "denial_cache=true"],
            Kind::Sharded => &["leases=off", "denial_cache=false"],
        };
        let mut out: Vec<String> = v.iter().map(|s| s.to_string()).collect();
        if self == Kind::Sharded {
            out.push(format!("key_shards={}", shards.unwrap_or(1)));
        }
        out
    }

    pub fn describe(self, setup: &Setup) -> String {
        match self {
            Kind::Plain => "raw ZSET script, 1 EVALSHA per request".into(),
            _ => self.pairs(setup.shards).join(" "),
        }
    }

    pub fn options(self, setup: &Setup) -> CliResult<Options> {
        let mut pairs = self.pairs(setup.shards);
        pairs.extend(setup.user_options.iter().cloned());
        crate::options::build(Options::default(), setup.prefix.as_deref(), &pairs)
    }

    /// One instance: its own connection (and limiter, returned so it can be closed).
    pub async fn instance(
        self,
        setup: &Setup,
        admin: &Admin,
        index: u64,
    ) -> CliResult<(Contender, Option<Limiter>)> {
        let o = self.options(setup)?;
        if self == Kind::Plain {
            let key = setup.plain_key(&o);
            let client = admin.client_for(key.as_bytes()).await?;
            let z = RawZset::connect(client, &key, o.connect_timeout, o.request_timeout)
                .await?
                .with_member_base(index << 40);
            z.load().await?;
            return Ok((Contender::Plain(z), None));
        }
        let l = Limiter::open(Some(&setup.url), o)?;
        // Connects and loads the script before the clock starts.
        l.peek(&setup.key, setup.probe_limit(), setup.window_ms)
            .await?;
        let c = Contender::Sliding {
            limiter: l.clone(),
            key: Arc::from(setup.key.as_str()),
        };
        Ok((c, Some(l)))
    }

    pub async fn reset(self, setup: &Setup, admin: &Admin) -> CliResult<()> {
        let o = self.options(setup)?;
        if self == Kind::Plain {
            return admin.del(setup.plain_key(&o).as_bytes()).await;
        }
        let l = Limiter::open(Some(&setup.url), o)?;
        l.reset(&setup.key).await?;
        let _ = l.close().await;
        Ok(())
    }
}

/// Everything a run (in this process or a worker) needs to know.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Setup {
    pub url: String,
    pub prefix: Option<String>,
    pub user_options: Vec<String>,
    pub key: String,
    pub limit: u64,
    pub window_ms: u64,
    pub duration_ms: u64,
    /// Instances (or processes) sharing the load.
    pub instances: usize,
    /// Per instance, per second.
    pub rate: f64,
    pub max_in_flight: usize,
    /// Cluster only: the sharded contender's key_shards.
    pub shards: Option<u64>,
}

impl Setup {
    pub fn new(a: &BenchArgs, url: &str, instances: usize, shards: Option<u64>) -> Setup {
        Setup {
            url: url.to_string(),
            prefix: a.prefix.clone(),
            user_options: a.options.clone(),
            key: a.key.clone(),
            limit: a.limit_arg.unwrap_or(u64::MAX),
            window_ms: a.window,
            duration_ms: a.duration,
            instances,
            rate: 1.0,
            max_in_flight: a.max_in_flight as usize,
            shards,
        }
    }

    /// The probe must measure deciding, not denying: a limit no run can reach.
    pub fn probe_limit(&self) -> u64 {
        1 << 40
    }

    pub fn plain_key(&self, o: &Options) -> String {
        format!("{}zset:{{{}}}", o.key_prefix, self.key)
    }

    pub fn drive(&self) -> Drive {
        Drive {
            limit: self.limit,
            window_ms: self.window_ms,
            max_in_flight: self.max_in_flight,
        }
    }
}

/// The limiters' own counters that explain a contender's Redis cost.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize)]
pub struct LeaseStats {
    pub decisions_lease: u64,
    pub leases_taken: u64,
    pub lease_refunds: u64,
    pub leased_permits: u64,
    pub refunded_permits: u64,
    pub denials_cached: u64,
    pub shard_borrows: u64,
}

impl LeaseStats {
    pub fn add(&mut self, s: &Stats) {
        self.decisions_lease += s.decisions_lease;
        self.leases_taken += s.leases_taken;
        self.lease_refunds += s.lease_refunds;
        self.leased_permits += s.leased_permits;
        self.refunded_permits += s.refunded_permits;
        self.denials_cached += s.denials_cached;
        self.shard_borrows += s.shard_borrows;
    }

    pub fn merge(&mut self, o: &LeaseStats) {
        self.decisions_lease += o.decisions_lease;
        self.leases_taken += o.leases_taken;
        self.lease_refunds += o.lease_refunds;
        self.leased_permits += o.leased_permits;
        self.refunded_permits += o.refunded_permits;
        self.denials_cached += o.denials_cached;
        self.shard_borrows += o.shard_borrows;
    }
}
