//! `rl bench`: the design's benchmark. N gateway instances, each with its own limiter and
//! connection, offer an open-loop load to ONE key; the report says what it cost (latency, Redis
//! commands, memory) and whether the limit held, audited from the decisions' own server times.

mod clock;
mod contender;
mod fixed_window;
pub mod hotkey;
mod load;
mod memory;
mod report;
mod schedule;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use rl_core::{Limiter, Options};

use crate::args::{BenchArgs, Pattern};
use crate::redis_admin::Admin;
use crate::target::Target;
use crate::{progress, runtime, until_interrupted, CliResult, Failure, EXIT_ALLOWED};
use clock::{align, ServerClock};
use contender::Contender;
use fixed_window::FixedWindow;
use memory::{memory_now, sample_memory, MemoryKey};
use report::{BenchReport, RunReport};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Sliding,
    Fixed,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Sliding => "sliding-window",
            Kind::Fixed => "fixed-window",
        }
    }
}

/// Every offer is planned up front (16 bytes each, with its result); past this a typo in --rate
/// would exhaust memory before the first request.
const MAX_OFFERED: f64 = 50_000_000.0;

pub fn run(mut a: BenchArgs) -> CliResult<u8> {
    if a.scenario.is_some() {
        return hotkey::run(a);
    }
    a.limit = a.limit_arg.unwrap_or(5000);
    if a.duration == 0 {
        return Err(Failure::new("--duration must be longer than 0 ms"));
    }
    let offered = a.rate * a.instances as f64 * a.duration as f64 / 1000.0;
    if offered > MAX_OFFERED {
        return Err(Failure::new(format!(
            "--instances {} x --rate {} for {} ms offers {offered:.0} requests; at most {MAX_OFFERED} per run",
            a.instances, a.rate, a.duration
        )));
    }
    // A steady load at the limit never crosses it, even with a fixed window: the comparison is only
    // telling with the load bunched at boundaries.
    let pattern = a.pattern.unwrap_or(if a.compare.is_some() {
        Pattern::Boundary
    } else {
        Pattern::Steady
    });
    let mut target = Target::resolve(a.redis.clone())?;
    let rt = runtime()?;
    let outcome = rt.block_on(until_interrupted(bench(&a, pattern, &target)));
    // Connections go before the server they point at.
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

async fn bench(a: &BenchArgs, pattern: Pattern, target: &Target) -> CliResult<BenchReport> {
    // rl-core's own argument checks, on a memory limiter (no I/O), so a bad --limit is reported as
    // such even when Redis is unreachable.
    Limiter::memory(options(a)?)?
        .peek(&a.key, a.limit, a.window)
        .await?;
    let admin = match &target.url {
        Some(url) => Some(Admin::connect(url).await?),
        None => None,
    };
    if a.compare.is_some() && admin.is_none() {
        return Err(Failure::new(
            "--compare fixed-window needs Redis (the baseline is a Redis script): pass --redis URL \
             or install redis-server (`apt-get install redis-server`)",
        ));
    }
    let sliding = run_one(Kind::Sliding, a, pattern, target, admin.as_ref()).await?;
    let fixed = match a.compare {
        Some(_) => Some(run_one(Kind::Fixed, a, pattern, target, admin.as_ref()).await?),
        None => None,
    };
    Ok(BenchReport::new(a, pattern, target, sliding, fixed))
}

fn options(a: &BenchArgs) -> CliResult<Options> {
    crate::options::build(Options::default(), a.prefix.as_deref(), &a.options)
}

/// One limiter under the whole schedule. Both kinds get the same schedule shape, each aligned to
/// Redis time at its own start, and run one after the other so neither's Redis commands, memory
/// or CPU are mixed into the other's figures.
async fn run_one(
    kind: Kind,
    a: &BenchArgs,
    pattern: Pattern,
    target: &Target,
    admin: Option<&Admin>,
) -> CliResult<RunReport> {
    let n = a.instances as usize;
    let url = target.url.as_deref();
    let (contenders, memory_key) = match kind {
        Kind::Sliding => {
            let limiters: Vec<Limiter> = if url.is_some() {
                (0..n)
                    .map(|_| options(a).and_then(|o| Ok(Limiter::open(url, o)?)))
                    .collect::<Result<_, _>>()?
            } else {
                // Memory state lives in one Limiter: separate ones would be separate limits.
                vec![Limiter::open(None, options(a)?)?; n]
            };
            limiters[0].reset(&a.key).await?;
            // Connects each instance, loads the script, and rejects bad arguments before any load.
            for l in &limiters {
                l.peek(&a.key, a.limit, a.window).await?;
            }
            let key: Arc<str> = a.key.as_str().into();
            let memory_key = MemoryKey::Sliding(limiters[0].redis_key(&a.key));
            (
                limiters
                    .into_iter()
                    .map(|limiter| Contender::Sliding {
                        limiter,
                        key: key.clone(),
                    })
                    .collect::<Vec<_>>(),
                memory_key,
            )
        }
        Kind::Fixed => {
            let admin = admin.expect("checked: Redis");
            let o = options(a)?;
            let base = fixed_window::base_key(&o.key_prefix, &a.key);
            admin
                .del_matching(&format!("{}:*", glob_escape(&base)))
                .await?;
            let mut fixed = Vec::with_capacity(n);
            for _ in 0..n {
                let client = admin.client_for(base.as_bytes()).await?;
                fixed.push(
                    FixedWindow::connect(client, &base, o.connect_timeout, o.request_timeout)
                        .await?,
                );
            }
            fixed[0].warm_up().await?;
            (
                fixed.into_iter().map(Contender::Fixed).collect(),
                MemoryKey::Fixed(base),
            )
        }
    };

    let plan = schedule::plan(&schedule::Load {
        pattern,
        instances: n,
        rate: a.rate,
        duration_ms: a.duration,
        window_ms: a.window,
        burst_fraction: a.burst_fraction,
    });
    // TIME first, so the snapshot pair brackets only the limiters' commands (and INFO/MEMORY,
    // which are subtracted by name).
    let (start, server_start_us) = align(admin).await?;
    let anchor = start + Duration::from_micros(plan.anchor_us(server_start_us, 20_000));
    let before = match admin {
        Some(ad) => Some(ad.snapshot().await?),
        None => None,
    };
    let offered = plan.total();
    let span_us = plan.span_us;
    let pb = progress::bar(
        offered,
        a.quiet,
        "{prefix:>14} [{elapsed_precise}] [{bar:36}] {pos}/{len} {msg}",
    );
    pb.set_prefix(kind.name());

    let done = AtomicBool::new(false);
    let drive = async {
        let cfg = load::Drive {
            limit: a.limit,
            window_ms: a.window,
            max_in_flight: a.max_in_flight as usize,
        };
        let tally = load::drive(contenders, plan, anchor, cfg, pb).await;
        done.store(true, Ordering::Release);
        tally
    };
    let clock = ServerClock {
        start,
        server_start_us,
    };
    let sample = sample_memory(admin, &memory_key, clock, a.window, &done);
    let (tally, peak_memory) = tokio::join!(drive, sample);
    let final_memory = match admin {
        Some(ad) => memory_now(ad, &memory_key, clock, a.window).await,
        None => None,
    };
    let commands = match (admin, before) {
        (Some(ad), Some(before)) => {
            Some(ad.commands_between(&before, &ad.snapshot().await?).await?)
        }
        _ => None,
    };
    let memory = peak_memory.max(final_memory);
    Ok(RunReport::new(
        kind.name(),
        a,
        offered,
        span_us,
        tally,
        commands,
        memory,
    ))
}

/// SCAN MATCH treats `*?[]\` as glob syntax; a user key may contain any of them.
fn glob_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if matches!(c, '*' | '?' | '[' | ']' | '\\') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}
