//! `rl soak`: hours of mixed load on thousands of keys against real servers, with a fault every
//! `--fault-every` (latency, blackhole and resets through Toxiproxy, a redis-server restart, a
//! Sentinel failover), sampled every second. It fails (exit 2) unless resources stay flat and
//! every window is exact outside fault periods and within the documented bound inside them; it
//! prints a summary table and writes a PNG of decisions by mode, RTT and transitions over time.
//! `make soak` runs it for hours; the test command runs a short one.

mod exact;
mod faults;
mod load;
mod plot;
mod report;
mod sample;

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU16, AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use clap::Args;
use rl_core::{Limiter, Options};
use rl_harness::{RedisServer, SentinelTrio, Toxiproxy};

use crate::{CliResult, Failure, EXIT_ALLOWED};
use exact::Checker;
use load::Mix;

#[derive(Debug, Args)]
pub struct SoakArgs {
    /// How long to run, e.g. 2h, 10m, 75s
    #[arg(long, default_value = "2h", value_parser = duration_ms)]
    pub duration: u64,
    /// Time between the end of one fault and the start of the next
    #[arg(long, default_value = "60s", value_parser = duration_ms)]
    pub fault_every: u64,
    /// Decisions/s offered in all (split across every task of every limiter)
    #[arg(long, default_value_t = 600)]
    pub rate: u64,
    /// Distinct keys per group (the first 8 are hot: always over their limit)
    #[arg(long, default_value_t = 5000)]
    pub keys: u32,
    /// Permits per window per key
    #[arg(long, default_value_t = 20)]
    pub limit: u64,
    #[arg(long, default_value = "1s", value_parser = duration_ms)]
    pub window: u64,
    /// The local record's bound (`local_max_keys`), small enough for faults to reach it
    #[arg(long, default_value_t = 512)]
    pub local_max_keys: usize,
    /// `degrade_rtt_ms` of every limiter [default: the library's, 5 ms]; the latency fault adds
    /// 4x this. A busy machine's own round trips can exceed 5 ms and send limiters local outside
    /// the faults (counted apart as local spells); raise it to keep those rare.
    #[arg(long, value_parser = duration_ms)]
    pub degrade_rtt: Option<u64>,
    /// Where the PNG goes
    #[arg(long, default_value = "soak.png")]
    pub plot: PathBuf,
}

/// Limiters per group: the standalone group (through the fault proxy) and the Sentinel group.
pub const GROUP_INSTANCES: [u64; 2] = [3, 2];
const TASKS_PER_LIMITER: u64 = 4;

fn duration_ms(s: &str) -> Result<u64, String> {
    rl_core::parse_duration_ms(s).map_err(|e| e.to_string())
}

pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

pub fn run(a: SoakArgs) -> CliResult<u8> {
    let start_ms = now_ms();
    let started = Instant::now();
    let standalone = RedisServer::start()?;
    let toxiproxy = Toxiproxy::start()?;
    let proxy = toxiproxy.proxy("redis", standalone.addr())?;
    let trio = SentinelTrio::start()?;
    let rt = crate::runtime()?;
    let urls = [proxy.url(), trio.url()];
    let mut groups: Vec<Vec<Limiter>> = Vec::new();
    for (g, &n) in GROUP_INSTANCES.iter().enumerate() {
        let mut options = Options {
            instances: Some(n),
            local_max_keys: a.local_max_keys,
            ..Options::default()
        };
        if let Some(ms) = a.degrade_rtt {
            options.degrade_rtt = Duration::from_millis(ms);
        }
        options.validate()?;
        let ls = (0..n)
            .map(|_| Limiter::open(Some(&urls[g]), options.clone()))
            .collect::<Result<Vec<_>, _>>()?;
        groups.push(ls);
    }
    let mix = Mix {
        keys: a.keys.max(16),
        hot_keys: 8,
        hot_percent: 30,
        max_cost: 3,
        limit: a.limit,
        window_ms: a.window,
    };
    let tasks: u64 = GROUP_INSTANCES.iter().sum::<u64>() * TASKS_PER_LIMITER;
    let period = Duration::from_secs_f64(tasks as f64 / a.rate.max(1) as f64);
    let stop = Arc::new(AtomicBool::new(false));
    let errors: load::Errors = Arc::new(
        (0..GROUP_INSTANCES.len())
            .map(|_| AtomicU64::new(0))
            .collect(),
    );
    let (tx, rx) = mpsc::channel();
    let mut handles = Vec::new();
    for (g, ls) in groups.iter().enumerate() {
        for (i, l) in ls.iter().enumerate() {
            for t in 0..TASKS_PER_LIMITER {
                let seed = (g as u64) << 32 | (i as u64) << 16 | t;
                handles.push(rt.spawn(load::task(
                    l.clone(),
                    g,
                    seed,
                    period,
                    mix,
                    tx.clone(),
                    errors.clone(),
                    stop.clone(),
                )));
            }
        }
    }
    drop(tx);
    let primary_port = Arc::new(AtomicU16::new(trio.primary().port()));
    let redis_ports = [standalone.port(), 0];
    let log: faults::Log = Arc::new(Mutex::new(Vec::new()));
    let fault_thread = {
        let targets = faults::Targets {
            proxy: proxy.clone(),
            standalone,
            trio,
            groups: groups.clone(),
            primary_port: primary_port.clone(),
        };
        let (log, stop) = (log.clone(), stop.clone());
        let every = Duration::from_millis(a.fault_every);
        let latency_ms = 4 * a.degrade_rtt.unwrap_or(5);
        std::thread::spawn(move || faults::run(targets, every, latency_ms, log, stop))
    };

    let mut checker = Checker::new(GROUP_INSTANCES.len(), a.limit, a.window);
    let mut samples: Vec<sample::Sample> = Vec::new();
    let duration = Duration::from_millis(a.duration);
    let print_every = if a.duration > 600_000 { 60 } else { 10 };
    let mut next = Instant::now();
    // A short run on a slow machine goes on (by up to 30 s) until every kind of fault has run.
    let all_ran = || {
        let log = log.lock().unwrap();
        faults::KINDS
            .iter()
            .all(|k| log.iter().any(|f| f.kind == *k))
    };
    while started.elapsed() < duration
        || (started.elapsed() < duration + Duration::from_secs(30) && !all_ran())
    {
        next += Duration::from_secs(1);
        std::thread::sleep(next.saturating_duration_since(Instant::now()));
        for admit in rx.try_iter() {
            checker.push(admit);
        }
        checker.finalize(now_ms().saturating_sub(5_000));
        let (rss_kb, fds) = sample::process();
        let s = sample::Sample {
            secs: started.elapsed().as_secs_f64(),
            rss_kb,
            fds,
            groups: groups
                .iter()
                .enumerate()
                .map(|(g, ls)| {
                    let port = match g {
                        0 => redis_ports[0],
                        _ => primary_port.load(Ordering::Relaxed),
                    };
                    sample::group(ls, errors[g].load(Ordering::Relaxed), port)
                })
                .collect(),
        };
        if samples.len().is_multiple_of(print_every) {
            report::progress(&s, log.lock().unwrap().len());
        }
        samples.push(s);
    }
    stop.store(true, Ordering::Relaxed);
    rt.block_on(async {
        for h in handles {
            let _ = tokio::time::timeout(Duration::from_secs(5), h).await;
        }
    });
    let mut targets = fault_thread
        .join()
        .map_err(|_| Failure::new("the fault thread panicked"))?;
    for admit in rx.try_iter() {
        checker.push(admit);
    }
    checker.finalize(u64::MAX);
    rt.block_on(async {
        for l in groups.iter().flatten() {
            let _ = l.close().await;
        }
    });
    let _ = targets.trio.stop();
    let _ = targets.standalone.stop();
    drop(toxiproxy);

    let faults = log.lock().unwrap().clone();
    let outcome = report::evaluate(&a, &samples, &faults, &checker, start_ms);
    let png = plot::draw(
        &samples,
        &faults,
        start_ms,
        &format!(
            "rl soak: {} s, {} keys × 2 groups, {}/s offered, limit {} per {} ms",
            started.elapsed().as_secs(),
            a.keys,
            a.rate,
            a.limit,
            a.window
        ),
    )
    .map_err(|e| Failure::new(format!("soak plot: {e}")))?;
    if let Some(dir) = a.plot.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)?;
    }
    std::fs::write(&a.plot, png)?;
    println!("plot: {}", a.plot.display());
    match outcome {
        Ok(()) => Ok(EXIT_ALLOWED),
        Err(why) => Err(Failure::new(format!("soak failed: {why}"))),
    }
}
