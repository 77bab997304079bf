//! `rl serve`: the core behind a network interface, for proxies and for services in any language.
//!
//! Every front end (Envoy's gRPC rate-limit service, the HTTP check endpoint, the reverse proxy)
//! turns its request into one [`decide::CheckRequest`] and answers from one
//! [`decide::CheckResult`] made by [`engine::Engine::check`], so they cannot disagree about what
//! a policy means.

pub mod args;
pub mod config;
pub mod decide;
pub mod engine;
pub mod grpc;
pub mod http;
pub mod metrics;
pub mod reload;

use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

pub use args::ServeArgs;
pub use engine::Engine;

/// Starts logging to stderr (`RL_LOG` sets the level, default info).
pub fn init_logs(format: &str) {
    let level = match std::env::var("RL_LOG")
        .unwrap_or_default()
        .to_ascii_lowercase()
        .as_str()
    {
        "error" => tracing::Level::ERROR,
        "warn" => tracing::Level::WARN,
        "debug" => tracing::Level::DEBUG,
        "trace" => tracing::Level::TRACE,
        _ => tracing::Level::INFO,
    };
    let b = tracing_subscriber::fmt()
        .with_max_level(level)
        .with_writer(std::io::stderr);
    let _ = if format == "json" {
        b.json().try_init()
    } else {
        b.with_ansi(false).try_init()
    };
}

/// Runs `rl serve` until SIGTERM or SIGINT, then drains: `/readyz` turns 503, the listeners stop
/// accepting, in-flight requests finish, leases go back to Redis.
pub async fn run(a: ServeArgs) -> Result<(), String> {
    let metrics = Arc::new(metrics::Metrics::default());
    let policies = config::load(&a.config, &metrics).map_err(|e| e.to_string())?;
    metrics.reloaded(true);
    tracing::info!(file = %a.config.display(), limits = policies.count(), "policies loaded");
    let mut options = rl_core::Options::default();
    for o in &a.options {
        options.set_text(o).map_err(|e| e.to_string())?;
    }
    let style = rl_core::HeaderStyle::from_name(&a.headers)
        .ok_or_else(|| format!("--headers {:?}: use ietf, legacy, both or none", a.headers))?;
    let limiter = rl_core::Limiter::open(a.redis.as_deref(), options).map_err(|e| e.to_string())?;
    let engine = Arc::new(Engine::new(limiter, policies, metrics).with_header_style(style));
    let upstream = a.upstream.as_deref().map(http::Upstream::new).transpose()?;
    if upstream.is_some() && engine.policies().http().is_none() {
        return Err("--upstream needs a domain with an http: section in the policies".into());
    }
    reload::spawn(
        engine.clone(),
        a.config.clone(),
        Duration::from_millis(a.reload_ms.max(10)),
    );
    let listener =
        bind(a.listen, a.reuse_port).map_err(|e| format!("--listen {}: {e}", a.listen))?;
    tracing::info!(addr = %a.listen, proxy = a.upstream.as_deref().unwrap_or("-"), "HTTP listening");
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let state = Arc::new(http::Http {
        engine: engine.clone(),
        upstream,
        decided_at: a.decision_time_header,
        draining: AtomicBool::new(false),
    });
    let grace = Duration::from_millis(a.grace_ms);
    let mut tasks = tokio::task::JoinSet::new();
    tasks.spawn(http::serve(listener, state.clone(), stop_rx.clone(), grace));
    if let Some(addr) = a.grpc {
        let grpc = tokio::net::TcpListener::bind(addr)
            .await
            .map_err(|e| format!("--grpc {addr}: {e}"))?;
        tasks.spawn(grpc::run(grpc, engine.clone(), stop_rx.clone()));
    }
    shutdown_signal().await;
    tracing::info!("stopping: draining in-flight requests");
    http::drain(&state);
    tokio::time::sleep(Duration::from_millis(a.drain_delay_ms)).await;
    let _ = stop_tx.send(true);
    while tasks.join_next().await.is_some() {}
    if let Err(e) = engine.limiter().close().await {
        tracing::warn!(error = %e, "returning leases failed");
    }
    tracing::info!("stopped");
    Ok(())
}

fn bind(addr: std::net::SocketAddr, reuse_port: bool) -> std::io::Result<tokio::net::TcpListener> {
    let sock = if addr.is_ipv4() {
        tokio::net::TcpSocket::new_v4()?
    } else {
        tokio::net::TcpSocket::new_v6()?
    };
    sock.set_reuseaddr(true)?;
    #[cfg(unix)]
    if reuse_port {
        sock.set_reuseport(true)?;
    }
    sock.bind(addr)?;
    sock.listen(4096)
}

async fn shutdown_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        let mut term = signal(SignalKind::terminate()).expect("SIGTERM handler");
        tokio::select! {
            _ = term.recv() => {}
            _ = tokio::signal::ctrl_c() => {}
        }
    }
    #[cfg(not(unix))]
    let _ = tokio::signal::ctrl_c().await;
}
