//! The command line. Durations go through `rl_core::parse_duration_ms` so the CLI accepts exactly
//! what every binding accepts, and clap reports a bad one naming the value (exit 2).

use clap::{Args, Parser, Subcommand, ValueEnum};

#[derive(Debug, Parser)]
#[command(
    name = "rl",
    version,
    about = "Exact distributed sliding-window rate limiter (state in Redis, one Lua script per decision)",
    after_help = "Exit codes: 0 allowed / done, 1 denied (acquire), 2 error, 130 interrupted."
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Take COST permits from KEY's window if they fit (exit 0 allowed, 1 denied)
    Acquire(KeyCmd),
    /// Show KEY's window without taking anything: would one permit fit now?
    Peek(PeekCmd),
    /// Forget KEY's window
    Reset(ResetCmd),
    /// N gateway instances offering an open-loop load to ONE key: latency, admitted rate, exactness,
    /// Redis cost
    Bench(BenchArgs),
    /// Closed-loop decisions/s of rl-core (denial cache and local fallback off unless -o sets them) beside a
    /// raw EVALSHA of a minimal ZSET script
    Throughput(ThroughputArgs),
    /// Every limiter option (for --option NAME=VALUE): default, accepted values, what it does
    Options,
    /// rl as a service: Envoy's rate-limit service (gRPC), an HTTP check endpoint for nginx
    /// auth_request / Traefik forwardAuth, a reverse proxy; policies in envoyproxy/ratelimit's YAML
    Serve(rl_serve::ServeArgs),
    /// Hours of mixed load on thousands of keys with Redis restarts, Sentinel failovers and
    /// network faults against private servers: flat resources and exact windows, or exit 2
    Soak(crate::soak::SoakArgs),
    /// One process of `rl bench --scenario hot-key --processes N` (internal)
    #[command(hide = true)]
    BenchWorker(WorkerArgs),
}

/// Where the key lives. The env fallback exists for one-off commands only; the benchmarks insist on
/// an explicit `--redis` so an ambient production URL is never load-tested by accident.
#[derive(Debug, Args)]
pub struct Backend {
    /// Redis URL (redis:// or rediss://) [env: RL_REDIS_URL]; without it the in-process memory
    /// backend is used, whose state dies with the process
    #[arg(long, value_name = "URL")]
    pub redis: Option<String>,
    /// Prefix of every Redis key rl writes [default: rl:]
    #[arg(long, value_name = "PREFIX")]
    pub prefix: Option<String>,
    /// A limiter option, NAME=VALUE (repeatable; `rl options` lists them), e.g.
    /// `-o retry_delay_ms=20 -o local_fallback=false`
    #[arg(long = "option", short = 'o', value_name = "NAME=VALUE")]
    pub options: Vec<String>,
    /// Print one JSON object instead of the human form
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct Rule {
    /// Permits allowed in any window
    #[arg(long, value_name = "N")]
    pub limit: u64,
    /// Window length: 1500 (ms), 250ms, 1s, 5m, 1h, 1d
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub window: u64,
}

#[derive(Debug, Args)]
pub struct KeyCmd {
    /// The rate-limited key, e.g. api:order:create
    pub key: String,
    #[command(flatten)]
    pub rule: Rule,
    /// Permits this request takes
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub cost: u64,
    #[command(flatten)]
    pub backend: Backend,
}

#[derive(Debug, Args)]
pub struct PeekCmd {
    /// The rate-limited key
    pub key: String,
    #[command(flatten)]
    pub rule: Rule,
    #[command(flatten)]
    pub backend: Backend,
}

#[derive(Debug, Args)]
pub struct ResetCmd {
    /// The rate-limited key
    pub key: String,
    #[command(flatten)]
    pub backend: Backend,
}

/// Which limiter gets the same offered load beside rl's sliding window.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Baseline {
    /// INCRBY on a key per window index (lua/baseline_fixed_window.lua)
    FixedWindow,
}

/// The shape of the offered load in time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Pattern {
    /// Evenly paced: every instance offers RATE/s all the time
    Steady,
    /// The same volume, bunched around every other window boundary (the last 10% of one window
    /// and the first 10% of the next; see --burst-fraction), where a fixed window admits up to
    /// twice its limit
    Boundary,
}

impl Pattern {
    pub fn as_str(self) -> &'static str {
        match self {
            Pattern::Steady => "steady",
            Pattern::Boundary => "boundary",
        }
    }
}

#[derive(Debug, Args)]
pub struct BenchArgs {
    /// Simulated gateway instances, each with its own limiter and connection
    #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u32).range(1..=4096))]
    pub instances: u32,
    /// Requests per second offered by EACH instance
    #[arg(long, value_name = "PER_SECOND", default_value_t = 625.0, value_parser = positive_f64)]
    pub rate: f64,
    /// Window length
    #[arg(long, value_name = "DURATION", default_value = "1s", value_parser = parse_duration)]
    pub window: u64,
    /// Permits allowed in any window [default: 5000; --scenario hot-key: half of what the plain
    /// path decides in a window]
    #[arg(long = "limit", value_name = "N")]
    pub limit_arg: Option<u64>,
    /// The limit in effect: --limit, or the default the mode chose (set by `bench::run`).
    #[arg(skip = 5000u64)]
    pub limit: u64,
    /// How long load is offered (per contender with --scenario hot-key)
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = parse_duration)]
    pub duration: u64,
    /// The one key every instance hits (reset before the run)
    #[arg(long, default_value = "bench:api")]
    pub key: String,
    /// Offered-load shape [default: steady, or boundary with --compare]
    #[arg(long, value_enum)]
    pub pattern: Option<Pattern>,
    /// Boundary pattern: the share of a window each half-burst fills, in (0, 0.5]. The offered
    /// rate inside a burst is RATE x INSTANCES / F: 0.5 offers twice the steady rate (the default:
    /// a small machine keeps up, and the fixed window's spike is the full 2x), 0.1 ten times it
    #[arg(long, value_name = "F", default_value_t = 0.5, value_parser = burst_fraction)]
    pub burst_fraction: f64,
    /// Run a baseline limiter on the same offered load and show both side by side
    #[arg(long, value_enum, value_name = "LIMITER")]
    pub compare: Option<Baseline>,
    /// Requests in flight per instance before new ones are shed (counted, never delayed)
    #[arg(long, value_name = "N", default_value_t = 256, value_parser = clap::value_parser!(u32).range(1..))]
    pub max_in_flight: u32,
    /// Redis URL; without it a private redis-server is started on a free loopback port (and
    /// stopped after), or the memory backend is used if none is installed
    #[arg(long, value_name = "URL")]
    pub redis: Option<String>,
    /// Prefix of every Redis key the run writes [default: rl:]
    #[arg(long, value_name = "PREFIX")]
    pub prefix: Option<String>,
    /// A limiter option, NAME=VALUE (repeatable; `rl options` lists them), e.g.
    /// `-o retry_delay_ms=20 -o local_fallback=false`
    #[arg(long = "option", short = 'o', value_name = "NAME=VALUE")]
    pub options: Vec<String>,
    /// Print one JSON object instead of the table
    #[arg(long)]
    pub json: bool,
    /// No progress bar
    #[arg(long, short)]
    pub quiet: bool,
    /// hot-key: the design's scenario C. Measures what the plain per-request path decides per
    /// second (closed loop), then offers --load-factor times that to each contender in turn
    #[arg(long, value_enum)]
    pub scenario: Option<Scenario>,
    /// hot-key: which contenders, comma-separated [default: plain,coalesce,leases,leases+denial,
    /// and sharded on a Cluster]
    #[arg(long, value_delimiter = ',', value_name = "LIST")]
    pub contenders: Vec<String>,
    /// hot-key: the offered load as a multiple of the plain path's measured decisions/s
    #[arg(long, value_name = "F", default_value_t = 4.0, value_parser = positive_f64)]
    pub load_factor: f64,
    /// hot-key: how long the closed-loop measurement of the plain path runs
    #[arg(long, value_name = "DURATION", default_value = "1s", value_parser = parse_duration)]
    pub probe: u64,
    /// hot-key: run the load from N OS processes with one limiter each (instead of --instances
    /// limiters in this process), all sharing one Redis
    #[arg(long, value_name = "N", default_value_t = 0, value_parser = clap::value_parser!(u32).range(0..=256))]
    pub processes: u32,
}

/// A named benchmark scenario.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Scenario {
    /// One hot key, several contenders side by side (plain, coalescing, leases, leases + denial
    /// cache, sharded on a Cluster)
    HotKey,
}

/// `rl bench --processes`: one worker process's orders, as JSON (internal).
#[derive(Debug, Args)]
pub struct WorkerArgs {
    #[arg(long)]
    pub spec: String,
}

#[derive(Debug, Args)]
pub struct ThroughputArgs {
    /// Concurrent closed-loop tasks, one measurement per value
    #[arg(long, value_name = "N,N,..", value_delimiter = ',', default_value = "1,16,64",
          value_parser = clap::value_parser!(u32).range(1..=10_000))]
    pub concurrency: Vec<u32>,
    /// Measured time per implementation per concurrency
    #[arg(long, value_name = "DURATION", default_value = "5s", value_parser = parse_duration)]
    pub duration: u64,
    /// Permits allowed in any window
    #[arg(long, value_name = "N", default_value_t = 5000)]
    pub limit: u64,
    /// Window length
    #[arg(long, value_name = "DURATION", default_value = "1000ms", value_parser = parse_duration)]
    pub window: u64,
    /// The one key both implementations hit (each under its own Redis key, reset before each run)
    #[arg(long, default_value = "throughput:api")]
    pub key: String,
    /// Redis URL; without it a private redis-server is started (and stopped after)
    #[arg(long, value_name = "URL")]
    pub redis: Option<String>,
    /// Prefix of every Redis key the run writes [default: rl:]
    #[arg(long, value_name = "PREFIX")]
    pub prefix: Option<String>,
    /// A limiter option, NAME=VALUE (repeatable; `rl options` lists them), e.g.
    /// `-o retry_delay_ms=20 -o local_fallback=false`
    #[arg(long = "option", short = 'o', value_name = "NAME=VALUE")]
    pub options: Vec<String>,
    /// Print one JSON object instead of the table
    #[arg(long)]
    pub json: bool,
    /// No progress bar
    #[arg(long, short)]
    pub quiet: bool,
}

fn parse_duration(s: &str) -> Result<u64, String> {
    rl_core::parse_duration_ms(s).map_err(|e| e.to_string())
}

fn burst_fraction(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if v > 0.0 && v <= 0.5 => Ok(v),
        _ => Err(format!("{s:?} is not a fraction in (0, 0.5]")),
    }
}

fn positive_f64(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if v.is_finite() && v > 0.0 => Ok(v),
        _ => Err(format!("{s:?} is not a positive number")),
    }
}
