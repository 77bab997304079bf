//! `rl serve`'s command line, shared by `rl serve` (cli/) and the `rl-serve` binary, so both
//! read the same flags and environment variables.

use std::net::SocketAddr;
use std::path::PathBuf;

/// rl as a service: Envoy's rate-limit service (gRPC), an HTTP check endpoint for nginx
/// auth_request / Traefik forwardAuth, and a reverse proxy.
#[derive(Debug, Clone, clap::Args)]
pub struct ServeArgs {
    /// The policies file (envoyproxy/ratelimit YAML), or a directory of *.yaml files.
    #[arg(long, env = "RL_SERVE_CONFIG", value_name = "FILE")]
    pub config: PathBuf,
    /// The HTTP listener: /check, /metrics, /healthz, /readyz, and the proxy with --upstream.
    #[arg(long, env = "RL_SERVE_LISTEN", default_value = "127.0.0.1:8081")]
    pub listen: SocketAddr,
    /// Let several rl serve processes listen on the same --listen address (SO_REUSEPORT: the
    /// kernel spreads connections over them).
    #[arg(long)]
    pub reuse_port: bool,
    /// Also serve Envoy's rate-limit service (envoy.service.ratelimit.v3) over gRPC here.
    #[arg(long, env = "RL_SERVE_GRPC", value_name = "ADDR")]
    pub grpc: Option<SocketAddr>,
    /// Reverse-proxy mode: forward admitted requests to this http:// URL.
    #[arg(long, env = "RL_SERVE_UPSTREAM", value_name = "URL")]
    pub upstream: Option<String>,
    /// Redis URL (redis://, rediss://, redis+sentinel://, redis+cluster://); without one,
    /// decisions are this process's own (memory://).
    #[arg(long, env = "RL_REDIS_URL", value_name = "URL")]
    pub redis: Option<String>,
    /// A limiter option, NAME=VALUE (repeatable; `rl options` lists them), e.g. leases=on.
    #[arg(long = "option", short = 'o', value_name = "NAME=VALUE")]
    pub options: Vec<String>,
    /// Pass each decision's time on: the proxy adds `RL-Decided-At: <ms>` (the deciding clock,
    /// Redis TIME, in Unix ms) to the requests it forwards (replacing one the client sent), and
    /// `/check` adds it to its answers, for nginx to forward with `auth_request_set` +
    /// `proxy_set_header`. Off by default: the upstream gets no header it did not ask for.
    #[arg(long, env = "RL_SERVE_DECISION_TIME_HEADER")]
    pub decision_time_header: bool,
    /// Which rate-limit fields answers carry: ietf, legacy, both or none.
    #[arg(long, default_value = "ietf")]
    pub headers: String,
    /// How often the policies file is checked for changes, in ms (SIGHUP reloads at once).
    #[arg(long, default_value_t = 1000)]
    pub reload_ms: u64,
    /// On SIGTERM: how long /readyz says "draining" before the listeners close, in ms (time for
    /// a balancer to notice), then how long in-flight requests get to finish.
    #[arg(long, default_value_t = 0)]
    pub drain_delay_ms: u64,
    #[arg(long, default_value_t = 10_000)]
    pub grace_ms: u64,
    /// Worker threads of this process's async runtime (default: one per core). Several rl serve
    /// processes on one port (--reuse-port) on a small machine keep their tail latency down with
    /// fewer each: N processes x one thread per core oversubscribe the cores (`make bench-serve`
    /// measures both).
    #[arg(long, env = "RL_SERVE_THREADS", value_name = "N",
          value_parser = clap::value_parser!(u16).range(1..=1024))]
    pub threads: Option<u16>,
    /// Log format: text or json (tracing; the level from RL_LOG: error, warn, info, debug).
    #[arg(long, env = "RL_LOG_FORMAT", default_value = "text")]
    pub log_format: String,
}

impl ServeArgs {
    /// The async runtime `rl serve` runs on: multi-threaded, `--threads` workers if given, named
    /// `rl-serve-worker` (as `top -H` and /proc show them; comm keeps 15 bytes).
    pub fn runtime(&self) -> std::io::Result<tokio::runtime::Runtime> {
        let mut b = tokio::runtime::Builder::new_multi_thread();
        if let Some(n) = self.threads {
            b.worker_threads(n.into());
        }
        b.thread_name("rl-serve-worker").enable_all().build()
    }
}
