//! `--processes N`: the same run from N OS processes, one limiter each, sharing one Redis. The
//! parent re-executes this binary as `rl bench-worker --spec JSON`; each worker connects, says
//! `ready`, waits for the start time (Redis time, µs) on stdin, runs its share of the schedule and
//! prints one JSON line with everything it observed. Synchronising on Redis time keeps the
//! processes' schedules interleaved as the in-process instances' are.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

use super::super::load::{self, Tally};
use super::{plan, Kind, LeaseStats, Run, Setup};
use crate::args::WorkerArgs;
use crate::latency;
use crate::redis_admin::Admin;
use crate::{progress, runtime, CliResult, Failure, EXIT_ALLOWED};

/// How long after all workers are ready their first send is due.
const START_LEAD_US: u64 = 200_000;

#[derive(Serialize, Deserialize)]
struct Spec {
    kind: Kind,
    setup: Setup,
    index: usize,
}

/// A Tally in a form that crosses a pipe.
#[derive(Serialize, Deserialize)]
struct Result_ {
    allowed: u64,
    denied: u64,
    errors: u64,
    shed: u64,
    first_error: Option<String>,
    modes: BTreeMap<String, u64>,
    latency: Vec<(u64, u64)>,
    send_lag: Vec<(u64, u64)>,
    latency_by_mode: BTreeMap<String, Vec<(u64, u64)>>,
    admitted: Vec<(u64, u64)>,
    admitted_redis: Vec<(u64, u64)>,
    stats: LeaseStats,
}

fn pairs(h: &Histogram<u64>) -> Vec<(u64, u64)> {
    h.iter_recorded()
        .map(|v| (v.value_iterated_to(), v.count_at_value()))
        .collect()
}

fn add_pairs(h: &mut Histogram<u64>, p: &[(u64, u64)]) {
    for &(v, n) in p {
        let _ = h.record_n(v.max(1), n);
    }
}

/// Mode names are `&'static str` in a Tally; the known ones map to themselves.
fn mode_name(s: &str) -> &'static str {
    const KNOWN: &[&str] = &["normal", "memory", "local", "lease", "plain"];
    KNOWN
        .iter()
        .find(|k| **k == s)
        .copied()
        .unwrap_or_else(|| Box::leak(s.to_string().into_boxed_str()))
}

/// The worker side.
pub fn run(a: WorkerArgs) -> CliResult<u8> {
    let spec: Spec = serde_json::from_str(&a.spec)?;
    let rt = runtime()?;
    let line = rt.block_on(work(spec))?;
    rt.shutdown_timeout(Duration::from_secs(2));
    println!("{line}");
    Ok(EXIT_ALLOWED)
}

async fn work(spec: Spec) -> CliResult<String> {
    let s = &spec.setup;
    let admin = Admin::connect(&s.url).await?;
    let (contender, limiter) = spec.kind.instance(s, &admin, spec.index as u64).await?;
    let (server_us, at) = admin.server_time().await?;
    println!("ready");
    std::io::stdout().flush()?;
    let mut start_line = String::new();
    std::io::stdin().read_line(&mut start_line)?;
    let start_server_us: u64 = start_line
        .trim()
        .parse()
        .map_err(|_| Failure::new(format!("bad start time {start_line:?}")))?;
    let start = at + Duration::from_micros(start_server_us.saturating_sub(server_us));
    let mut p = plan(s);
    p.offsets_us = vec![std::mem::take(&mut p.offsets_us[spec.index])];
    let t = load::drive(
        vec![contender],
        p,
        start,
        s.drive(),
        progress::bar(0, true, ""),
    )
    .await;
    let mut stats = LeaseStats::default();
    if let Some(l) = limiter {
        let _ = l.close().await;
        stats.add(&l.stats());
    }
    let r = Result_ {
        allowed: t.allowed,
        denied: t.denied,
        errors: t.errors,
        shed: t.shed,
        first_error: t.first_error,
        modes: t.modes.iter().map(|(k, v)| (k.to_string(), *v)).collect(),
        latency: pairs(&t.latency),
        send_lag: pairs(&t.send_lag),
        latency_by_mode: t
            .latency_by_mode
            .iter()
            .map(|(k, h)| (k.to_string(), pairs(h)))
            .collect(),
        admitted: t.admitted,
        admitted_redis: t.admitted_redis,
        stats,
    };
    Ok(serde_json::to_string(&r)?)
}

/// The parent side: N workers, one Redis snapshot pair around all of them.
pub async fn run_processes(kind: Kind, setup: &Setup, admin: &Admin) -> CliResult<Run> {
    kind.reset(setup, admin).await?;
    let exe = std::env::current_exe()?;
    let mut children: Vec<Child> = Vec::new();
    let spawned = (|| -> CliResult<()> {
        for index in 0..setup.instances {
            let spec = serde_json::to_string(&Spec {
                kind,
                setup: setup.clone(),
                index,
            })?;
            let child = Command::new(&exe)
                .args(["bench-worker", "--spec", &spec])
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::inherit())
                .spawn()?;
            children.push(child);
        }
        Ok(())
    })();
    let result = gather(setup, admin, &mut children, spawned).await;
    // Whatever happened, no worker outlives the run.
    for c in &mut children {
        let _ = c.kill();
        let _ = c.wait();
    }
    result
}

async fn gather(
    setup: &Setup,
    admin: &Admin,
    children: &mut [Child],
    spawned: CliResult<()>,
) -> CliResult<Run> {
    spawned?;
    let mut readers = Vec::new();
    for c in children.iter_mut() {
        let mut r = BufReader::new(c.stdout.take().expect("piped"));
        let mut line = String::new();
        r.read_line(&mut line)?;
        if line.trim() != "ready" {
            return Err(Failure::new(format!(
                "a bench worker failed to start (said {line:?})"
            )));
        }
        readers.push(r);
    }
    let before = admin.snapshot().await?;
    let (server_us, _) = admin.server_time().await?;
    let server_start_us = server_us + START_LEAD_US;
    for c in children.iter_mut() {
        let mut stdin = c.stdin.take().expect("piped");
        writeln!(stdin, "{server_start_us}")?;
    }
    let lines = tokio::task::spawn_blocking(move || {
        readers
            .into_iter()
            .map(|mut r| {
                let mut line = String::new();
                r.read_line(&mut line).map(|_| line)
            })
            .collect::<Result<Vec<String>, _>>()
    })
    .await
    .map_err(|e| Failure::new(e.to_string()))??;
    let commands = admin
        .commands_between(&before, &admin.snapshot().await?)
        .await?;
    let mut t = Tally {
        latency: latency::histogram(),
        send_lag: latency::histogram(),
        admitted: Vec::new(),
        admitted_redis: Vec::new(),
        allowed: 0,
        denied: 0,
        errors: 0,
        shed: 0,
        first_error: None,
        modes: BTreeMap::new(),
        latency_by_mode: BTreeMap::new(),
    };
    let mut stats = LeaseStats::default();
    for line in lines {
        let r: Result_ = serde_json::from_str(line.trim())
            .map_err(|e| Failure::new(format!("a bench worker's report is unreadable: {e}")))?;
        t.allowed += r.allowed;
        t.denied += r.denied;
        t.errors += r.errors;
        t.shed += r.shed;
        if t.first_error.is_none() {
            t.first_error = r.first_error;
        }
        for (m, n) in r.modes {
            *t.modes.entry(mode_name(&m)).or_default() += n;
        }
        add_pairs(&mut t.latency, &r.latency);
        add_pairs(&mut t.send_lag, &r.send_lag);
        for (m, p) in r.latency_by_mode {
            add_pairs(
                t.latency_by_mode
                    .entry(mode_name(&m))
                    .or_insert_with(latency::histogram),
                &p,
            );
        }
        t.admitted.extend(r.admitted);
        t.admitted_redis.extend(r.admitted_redis);
        stats.merge(&r.stats);
    }
    Ok(Run {
        tally: t,
        stats,
        plan: plan(setup),
        server_start_us,
        commands,
    })
}
