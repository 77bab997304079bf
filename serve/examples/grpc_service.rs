//! The gRPC rate-limit service embedded in a program of your own: a policies file, a limiter, an
//! engine and `rl_serve::grpc::serve`. `rl serve --grpc` does the same with reloading, metrics
//! and the HTTP front ends; the gRPC benchmark runs this when the `rl` it finds has no `serve`.
//!
//!     cargo run --release -p rl-serve --example grpc_service -- \
//!         --config policies.yaml --redis redis://127.0.0.1:6379/ --grpc 127.0.0.1:8081

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use rl_serve::metrics::Metrics;
use rl_serve::{config, grpc, Engine};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut config_path: Option<PathBuf> = None;
    let mut redis: Option<String> = None;
    let mut addr: SocketAddr = "127.0.0.1:8081".parse()?;
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        let value = args.next().ok_or(format!("{flag} needs a value"))?;
        match flag.as_str() {
            "--config" => config_path = Some(value.into()),
            "--redis" => redis = Some(value),
            "--grpc" => addr = value.parse()?,
            _ => return Err(format!("unknown flag {flag}").into()),
        }
    }
    let config_path = config_path.ok_or("--config is required")?;
    let metrics = Arc::new(Metrics::default());
    let policies = config::load(&config_path, &metrics)?;
    let limiter = rl_core::Limiter::open(redis.as_deref(), rl_core::Options::default())?;
    let engine = Arc::new(Engine::new(limiter, policies, metrics));
    tokio::runtime::Runtime::new()?.block_on(grpc::serve(addr, engine, std::future::pending()))?;
    Ok(())
}
