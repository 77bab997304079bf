//! `rl throughput`: how many decisions per second one process gets from rl-core against one
//! Redis, next to the cheapest script a gateway could call by hand, in the same run so both see the
//! same machine. Closed loop: each task sends its next request when the previous one returns.

pub mod raw_zset;
mod report;

use std::sync::Arc;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use indicatif::ProgressBar;
use rl_core::{Limiter, Options};

use crate::args::ThroughputArgs;
use crate::latency;
use crate::redis_admin::Admin;
use crate::target::Target;
use crate::{progress, runtime, until_interrupted, CliResult, EXIT_ALLOWED};
use raw_zset::RawZset;
use report::{ImpStats, Level, ThroughputReport};

#[derive(Clone)]
enum Imp {
    /// One Limiter shared by every task: it multiplexes one connection, as in a gateway.
    Core {
        limiter: Limiter,
        key: Arc<str>,
    },
    Raw(RawZset),
}

impl Imp {
    fn name(&self) -> &'static str {
        match self {
            Imp::Core { .. } => "core",
            Imp::Raw(_) => "raw",
        }
    }

    async fn acquire(&self, limit: u64, window_ms: u64) -> Result<bool, String> {
        match self {
            Imp::Core { limiter, key } => limiter
                .acquire(key.as_bytes(), limit, window_ms, 1)
                .await
                .map(|d| d.allowed)
                .map_err(|e| e.to_string()),
            Imp::Raw(r) => r.acquire(limit, window_ms).await.map_err(|e| e.to_string()),
        }
    }

    /// Each measurement starts from an empty window, so both face the same admit/deny mix.
    async fn reset(&self, admin: Option<&Admin>) -> CliResult<()> {
        match self {
            Imp::Core { limiter, key } => Ok(limiter.reset(key.as_bytes()).await?),
            Imp::Raw(r) => match admin {
                Some(a) => a.del(r.key().as_bytes()).await,
                None => Ok(()),
            },
        }
    }
}

pub fn run(a: ThroughputArgs) -> CliResult<u8> {
    if a.duration == 0 {
        return Err(crate::Failure::new("--duration must be longer than 0 ms"));
    }
    let mut target = Target::resolve(a.redis.clone())?;
    let rt = runtime()?;
    let outcome = rt.block_on(until_interrupted(throughput(&a, &target)));
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

async fn throughput(a: &ThroughputArgs, target: &Target) -> CliResult<ThroughputReport> {
    // Like for like with the raw script, which has neither a cache nor a fallback: every
    // decision of a saturated key must reach Redis, or the ratio measures the denial cache (or,
    // on a loaded client whose round trips pass degrade_rtt, the local fallback) instead of the
    // script (`-o denial_cache=true`, `-o local_fallback=true` put them back).
    let base = Options {
        denial_cache: false,
        local_fallback: false,
        ..Options::default()
    };
    let options = crate::options::build(base, a.prefix.as_deref(), &a.options)?;
    // rl-core's own argument checks first, without I/O (see bench).
    Limiter::memory(options.clone())?
        .peek(&a.key, a.limit, a.window)
        .await?;
    let limiter = Limiter::open(target.url.as_deref(), options.clone())?;
    // Connects, loads the script and rejects bad arguments before anything is timed.
    limiter.peek(&a.key, a.limit, a.window).await?;
    let core = Imp::Core {
        limiter,
        key: a.key.as_str().into(),
    };
    let (raw, admin) = match &target.url {
        Some(url) => {
            let raw_key = String::from_utf8(rl_core::redis_key(
                &format!("{}zset:", options.key_prefix),
                a.key.as_bytes(),
            ))
            .expect("escaping a UTF-8 key keeps it UTF-8");
            let admin = Admin::connect(url).await?;
            let r = RawZset::connect(
                admin.client_for(raw_key.as_bytes()).await?,
                &raw_key,
                options.connect_timeout,
                options.request_timeout,
            )
            .await?;
            r.load().await?;
            (Some(Imp::Raw(r)), Some(admin))
        }
        None => (None, None),
    };

    let per_level = if raw.is_some() { 2 } else { 1 };
    let total_ms = a.duration * (a.concurrency.len() * per_level) as u64;
    let pb = progress::bar(total_ms, a.quiet, "[{elapsed_precise}] [{bar:36}] {msg}");
    let mut levels = Vec::new();
    for (i, &c) in a.concurrency.iter().enumerate() {
        // Alternate who goes first, so drift over the run (thermal, page cache, Redis memory)
        // does not always favour the same side.
        let mut order = vec![&core];
        if let Some(r) = &raw {
            if i % 2 == 0 {
                order.push(r);
            } else {
                order.insert(0, r);
            }
        }
        let (mut core_stats, mut raw_stats) = (None, None);
        for imp in order {
            imp.reset(admin.as_ref()).await?;
            pb.set_message(format!("concurrency {c}: {}", imp.name()));
            let before = match &admin {
                Some(ad) => Some(ad.snapshot().await?),
                None => None,
            };
            let mut s = measure(imp, c as usize, a, &pb).await;
            if let (Some(ad), Some(before)) = (&admin, before) {
                s.add_redis_cost(&ad.commands_between(&before, &ad.snapshot().await?).await?);
            }
            match imp {
                Imp::Core { .. } => core_stats = Some(s),
                Imp::Raw(_) => raw_stats = Some(s),
            }
        }
        let first = if i % 2 == 0 || raw.is_none() {
            "core"
        } else {
            "raw"
        };
        levels.push(Level::new(
            c,
            first,
            core_stats.expect("core always runs"),
            raw_stats,
        ));
    }
    pb.finish_and_clear();
    Ok(ThroughputReport::new(a, target, levels))
}

/// `concurrency` tasks, each calling back-to-back until the deadline. A task stops at its first
/// error: spinning on a dead backend would report a throughput of failures.
async fn measure(imp: &Imp, concurrency: usize, a: &ThroughputArgs, pb: &ProgressBar) -> ImpStats {
    let duration = Duration::from_millis(a.duration);
    let start = Instant::now();
    let deadline = start + duration;
    let base = pb.position();
    let mut tasks = Vec::with_capacity(concurrency);
    for _ in 0..concurrency {
        let (imp, limit, window) = (imp.clone(), a.limit, a.window);
        tasks.push(tokio::spawn(async move {
            let mut h = latency::histogram();
            let (mut allowed, mut denied, mut error) = (0u64, 0u64, None);
            while Instant::now() < deadline {
                let t = Instant::now();
                match imp.acquire(limit, window).await {
                    Ok(ok) => {
                        latency::record(&mut h, t.elapsed());
                        if ok {
                            allowed += 1;
                        } else {
                            denied += 1;
                        }
                    }
                    Err(e) => {
                        error = Some(e);
                        break;
                    }
                }
            }
            (h, allowed, denied, error)
        }));
    }
    let ticker = async {
        while Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(100)).await;
            pb.set_position(base + start.elapsed().as_millis().min(a.duration as u128) as u64);
        }
    };
    let (results, ()) = tokio::join!(futures_join(tasks), ticker);
    let elapsed = start.elapsed();
    pb.set_position(base + a.duration);

    let mut hist: Histogram<u64> = latency::histogram();
    let (mut allowed, mut denied, mut errors, mut first_error) = (0, 0, 0, None);
    for r in results {
        match r {
            Ok((h, a_, d, e)) => {
                let _ = hist.add(&h);
                allowed += a_;
                denied += d;
                if let Some(e) = e {
                    errors += 1;
                    first_error.get_or_insert(e);
                }
            }
            Err(join) => {
                errors += 1;
                first_error.get_or_insert(join.to_string());
            }
        }
    }
    ImpStats::new(allowed, denied, errors, first_error, &hist, elapsed)
}

async fn futures_join<T>(
    handles: Vec<tokio::task::JoinHandle<T>>,
) -> Vec<Result<T, tokio::task::JoinError>> {
    let mut out = Vec::with_capacity(handles.len());
    for h in handles {
        out.push(h.await);
    }
    out
}
