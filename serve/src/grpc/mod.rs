//! Envoy's rate-limit service, `envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit`,
//! over gRPC (tonic), so Envoy, Istio and anything else that speaks RLS v3 can ask rl.
//!
//! The messages come generated from Envoy's own protos by the `envoy-types` crate (Apache-2.0);
//! [`convert`] maps them to and from [`crate::decide`] and the [`crate::engine::Engine`] decides,
//! so this front end and the HTTP ones cannot disagree about a policy.

pub mod convert;
mod service;

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;

use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_service_server::RateLimitServiceServer;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tonic::transport::server::TcpIncoming;
use tonic::transport::Server;

use crate::engine::Engine;
pub use service::RateLimitService;

/// `rl serve --grpc`: [`serve_on`] until `stop` turns true (SIGTERM), then drains the calls in
/// flight. A failure is logged: the HTTP side keeps running.
pub async fn run(listener: TcpListener, engine: Arc<Engine>, mut stop: watch::Receiver<bool>) {
    let shutdown = async move {
        let _ = stop.wait_for(|stopped| *stopped).await;
    };
    if let Err(e) = serve_on(listener, engine, shutdown).await {
        tracing::error!(error = %e, "gRPC rate-limit service failed");
    }
}

/// Serves RLS v3 on `addr` until `shutdown` completes, then drains the calls in flight.
pub async fn serve(
    addr: SocketAddr,
    engine: Arc<Engine>,
    shutdown: impl Future<Output = ()> + Send,
) -> std::io::Result<()> {
    let listener = TcpListener::bind(addr).await?;
    serve_on(listener, engine, shutdown).await
}

/// [`serve`] on a listener the caller already bound (`rl serve` binds at startup, so a bad
/// `--grpc` address is refused before anything runs).
pub async fn serve_on(
    listener: TcpListener,
    engine: Arc<Engine>,
    shutdown: impl Future<Output = ()> + Send,
) -> std::io::Result<()> {
    let addr = listener.local_addr()?;
    // Envoy keeps one HTTP/2 connection per worker to its rate-limit cluster: Nagle would add
    // up to 40 ms to every small answer.
    let incoming = TcpIncoming::from(listener).with_nodelay(Some(true));
    tracing::info!(%addr, "gRPC rate-limit service (envoy.service.ratelimit.v3) listening");
    Server::builder()
        .add_service(RateLimitServiceServer::new(RateLimitService::new(engine)))
        .serve_with_incoming_shutdown(incoming, shutdown)
        .await
        .map_err(std::io::Error::other)
}
