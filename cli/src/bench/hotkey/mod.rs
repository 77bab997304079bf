//! `rl bench --scenario hot-key`: the design's scenario C. One key, N instances. First the plain
//! per-request path is driven closed-loop to learn what it can decide per second; then several
//! times that is offered open-loop to each contender in turn (plain, coalescing, leases, leases +
//! denial cache, and sharded keys on a Cluster), so their costs and exactness sit side by side.

mod contenders;
mod report;
pub mod worker;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rl_core::Limiter;

use super::clock::align;
use super::load::{self, Tally};
use super::schedule::{self, Plan};
use crate::args::{BenchArgs, Pattern};
use crate::redis_admin::Admin;
use crate::target::Target;
use crate::{progress, runtime, until_interrupted, CliResult, Failure, EXIT_ALLOWED};
pub use contenders::{Kind, LeaseStats, Setup};
use report::{HotKeyReport, Probe, Row};

/// Callers per instance in the closed-loop probe: enough to keep a connection's pipeline full.
const PROBE_CONCURRENCY: usize = 16;
/// Every offer is planned up front; past this the plan alone would exhaust memory.
const MAX_OFFERED: f64 = 50_000_000.0;

pub fn run(mut a: BenchArgs) -> CliResult<u8> {
    if a.duration == 0 {
        return Err(Failure::new("--duration must be longer than 0 ms"));
    }
    let mut target = Target::resolve(a.redis.clone())?;
    let rt = runtime()?;
    let outcome = rt.block_on(until_interrupted(hot_key(&mut a, &target)));
    rt.shutdown_timeout(Duration::from_secs(2));
    let stopped = target.stop();
    let report = outcome?;
    stopped?;
    if a.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print!("{}", report::table(&report));
    }
    Ok(EXIT_ALLOWED)
}

async fn hot_key(a: &mut BenchArgs, target: &Target) -> CliResult<HotKeyReport> {
    let url = target.url.clone().ok_or_else(|| {
        Failure::new(
            "--scenario hot-key needs Redis: pass --redis URL or install redis-server \
             (`apt-get install redis-server`)",
        )
    })?;
    let admin = Admin::connect(&url).await?;
    let cluster = admin.masters() > 1;
    let kinds = Kind::chosen(&a.contenders, cluster)?;
    let instances = if a.processes > 0 {
        a.processes as usize
    } else {
        a.instances as usize
    };
    // The probe needs a limit only to make the plain script deny nothing it would not anyway.
    let mut setup = Setup::new(a, &url, instances, cluster.then(|| admin.masters() as u64));
    let probe = probe(&setup, &admin, a.probe).await?;
    a.limit = a
        .limit_arg
        .unwrap_or(((probe.decisions_per_s * a.window as f64 / 1000.0) / 2.0).max(1.0) as u64);
    setup.limit = a.limit;
    let offered_per_s = probe.decisions_per_s * a.load_factor;
    setup.rate = offered_per_s / instances as f64;
    if offered_per_s * a.duration as f64 / 1000.0 > MAX_OFFERED {
        return Err(Failure::new(format!(
            "{offered_per_s:.0}/s for {} ms is more than {MAX_OFFERED} offers per contender: \
             shorten --duration or lower --load-factor",
            a.duration
        )));
    }
    let mut rows = Vec::new();
    for kind in kinds {
        let run = if a.processes > 0 {
            worker::run_processes(kind, &setup, &admin).await?
        } else {
            run_in_process(kind, &setup, &admin, a.quiet).await?
        };
        rows.push(Row::new(kind, &setup, run));
    }
    Ok(HotKeyReport::new(
        a,
        target,
        &setup,
        probe,
        offered_per_s,
        rows,
    ))
}

/// Closed loop over the plain path: every instance keeps PROBE_CONCURRENCY calls in flight for
/// `ms`, so the figure is what one-script-call-per-request can decide, not what was offered.
async fn probe(setup: &Setup, admin: &Admin, ms: u64) -> CliResult<Probe> {
    let ms = ms.max(100);
    Kind::Plain.reset(setup, admin).await?;
    let mut clients = Vec::new();
    for i in 0..setup.instances {
        clients.push(Kind::Plain.instance(setup, admin, i as u64).await?.0);
    }
    let count = Arc::new(AtomicU64::new(0));
    let errors = Arc::new(AtomicU64::new(0));
    let started = Instant::now();
    let until = started + Duration::from_millis(ms);
    let mut tasks = Vec::new();
    for c in &clients {
        for _ in 0..PROBE_CONCURRENCY {
            let (c, count, errors) = (c.clone(), count.clone(), errors.clone());
            let (limit, window) = (setup.probe_limit(), setup.window_ms);
            tasks.push(tokio::spawn(async move {
                while Instant::now() < until {
                    match c.acquire(limit, window).await {
                        Ok(_) => count.fetch_add(1, Ordering::Relaxed),
                        Err(_) => errors.fetch_add(1, Ordering::Relaxed),
                    };
                }
            }));
        }
    }
    for t in tasks {
        let _ = t.await;
    }
    let elapsed = started.elapsed().as_secs_f64();
    Kind::Plain.reset(setup, admin).await?;
    let decisions = count.load(Ordering::Relaxed);
    if decisions == 0 {
        return Err(Failure::new(
            "the plain path decided nothing in the probe: is Redis answering?",
        ));
    }
    Ok(Probe {
        duration_ms: ms,
        callers: setup.instances * PROBE_CONCURRENCY,
        decisions,
        errors: errors.load(Ordering::Relaxed),
        decisions_per_s: decisions as f64 / elapsed,
    })
}

/// What one contender's run produced, from this process or gathered from workers.
pub struct Run {
    pub tally: Tally,
    pub stats: LeaseStats,
    pub plan: Plan,
    /// The deciding clock at offset 0 of the plan, µs.
    pub server_start_us: u64,
    pub commands: crate::redis_admin::CommandCounts,
}

pub fn plan(setup: &Setup) -> Plan {
    schedule::plan(&schedule::Load {
        pattern: Pattern::Steady,
        instances: setup.instances,
        rate: setup.rate,
        duration_ms: setup.duration_ms,
        window_ms: setup.window_ms,
        burst_fraction: 0.5,
    })
}

async fn run_in_process(kind: Kind, setup: &Setup, admin: &Admin, quiet: bool) -> CliResult<Run> {
    kind.reset(setup, admin).await?;
    let mut contenders = Vec::new();
    let mut limiters: Vec<Limiter> = Vec::new();
    for i in 0..setup.instances {
        let (c, l) = kind.instance(setup, admin, i as u64).await?;
        contenders.push(c);
        limiters.extend(l);
    }
    let plan = plan(setup);
    let pb = progress::bar(
        plan.total(),
        quiet,
        "{prefix:>14} [{elapsed_precise}] [{bar:36}] {pos}/{len} {msg}",
    );
    pb.set_prefix(kind.name());
    let (start, server_start_us) = align(Some(admin)).await?;
    let before = admin.snapshot().await?;
    let tally = load::drive(contenders, plan.clone(), start, setup.drive(), pb).await;
    // Closing returns unused lease permits: part of what the contender costs Redis.
    let mut stats = LeaseStats::default();
    for l in &limiters {
        let _ = l.close().await;
        stats.add(&l.stats());
    }
    let commands = admin
        .commands_between(&before, &admin.snapshot().await?)
        .await?;
    Ok(Run {
        tally,
        stats,
        plan,
        server_start_us,
        commands,
    })
}
