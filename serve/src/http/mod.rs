//! The HTTP side of `rl serve` on one listener:
//! - `/check`: the check endpoint for nginx `auth_request` and Traefik `forwardAuth`: 200, or
//!   429 (`?deny_status=403` for nginx, whose `auth_request` only passes 401 and 403 on), with
//!   the IETF `RateLimit` / `RateLimit-Policy` fields (and `Retry-After`, a problem+json body on
//!   a denial) for the proxy to pass on;
//! - `/metrics`, `/healthz`, `/readyz`;
//! - with an upstream, every other path: the reverse proxy (`proxy.rs`).
//!
//! HTTP/1.1 with keep-alive on both sides. On shutdown every connection is told to finish its
//! request in flight and close (`graceful_shutdown`), and the server waits for them.

pub mod extract;
mod ops;
mod proxy;

use std::convert::Infallible;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{header, HeaderValue, Response, StatusCode};
use http_body_util::{combinators::BoxBody, BodyExt, Full};
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;
use tokio::sync::watch;

use crate::decide::{CheckResult, Code};
use crate::Engine;

pub use proxy::Upstream;

/// The header that carries a decision's time (`CheckResult::decided_at_ms`, Unix ms on the
/// deciding clock) to the upstream, so it can count admissions per window on that clock.
pub const DECIDED_AT: &str = "rl-decided-at";

pub type BoxError = Box<dyn std::error::Error + Send + Sync>;
pub type Body = BoxBody<Bytes, BoxError>;

pub fn full(b: impl Into<Bytes>) -> Body {
    Full::new(b.into()).map_err(|e| match e {}).boxed()
}

/// What every connection shares.
pub struct Http {
    pub engine: Arc<Engine>,
    pub upstream: Option<Upstream>,
    /// `--decision-time-header`: pass [`DECIDED_AT`] on.
    pub decided_at: bool,
    /// Set on SIGTERM: `/readyz` says so, so a balancer stops sending before we close.
    pub draining: AtomicBool,
}

/// Serves `listener` until `stop` turns true, then drains: connections finish their request in
/// flight (for at most `grace`).
pub async fn serve(
    listener: TcpListener,
    state: Arc<Http>,
    mut stop: watch::Receiver<bool>,
    grace: Duration,
) {
    let mut conns = tokio::task::JoinSet::new();
    loop {
        tokio::select! {
            r = listener.accept() => {
                let Ok((stream, peer)) = r else { continue };
                let _ = stream.set_nodelay(true);
                let st = state.clone();
                let mut stop = stop.clone();
                conns.spawn(async move {
                    let svc = hyper::service::service_fn(move |req| {
                        let st = st.clone();
                        async move { Ok::<_, Infallible>(handle(st, peer, req).await) }
                    });
                    let conn = hyper::server::conn::http1::Builder::new()
                        .keep_alive(true)
                        .serve_connection(TokioIo::new(stream), svc);
                    tokio::pin!(conn);
                    tokio::select! {
                        _ = conn.as_mut() => {}
                        _ = stopped(&mut stop) => {
                            conn.as_mut().graceful_shutdown();
                            let _ = conn.await;
                        }
                    }
                });
                while conns.try_join_next().is_some() {}
            }
            _ = stopped(&mut stop) => break,
        }
    }
    drop(listener);
    let n = conns.len();
    tracing::info!(connections = n, "draining HTTP connections");
    if tokio::time::timeout(grace, async { while conns.join_next().await.is_some() {} })
        .await
        .is_err()
    {
        tracing::warn!(left = conns.len(), "drain timed out; closing the rest");
        conns.abort_all();
    }
}

/// Resolves once `stop` turns true.
async fn stopped(stop: &mut watch::Receiver<bool>) {
    let _ = stop.wait_for(|s| *s).await;
}

async fn handle(st: Arc<Http>, peer: SocketAddr, req: hyper::Request<Incoming>) -> Response<Body> {
    match req.uri().path() {
        "/healthz" => ops::healthz(),
        "/readyz" => ops::readyz(&st).await,
        "/metrics" => ops::metrics(&st),
        "/check" => check(&st, peer.ip(), req).await,
        _ if st.upstream.is_some() => proxy::forward(&st, peer.ip(), req).await,
        _ => text(StatusCode::NOT_FOUND, "not found\n"),
    }
}

pub fn text(status: StatusCode, body: &str) -> Response<Body> {
    let mut r = Response::new(full(body.to_string()));
    *r.status_mut() = status;
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    r
}

/// Decides `req` by the `http:` section: `None` when there is no such section.
async fn decide(
    st: &Http,
    peer: IpAddr,
    parts: &http::request::Parts,
    check: bool,
) -> Option<Result<CheckResult, rl_core::Error>> {
    let policies = st.engine.policies();
    let (domain, http) = policies.http()?;
    let v = extract::view(parts, peer, http, check);
    let req = crate::decide::CheckRequest {
        domain: domain.name.clone(),
        descriptors: extract::descriptors(http, &v),
        hits_addend: 0,
    };
    if req.descriptors.is_empty() {
        // Every rule needed a header this request lacks: nothing to ask, as Envoy's filter
        // does not call the service then. (The engine refuses an empty list from a client.)
        return Some(Ok(CheckResult::nothing_to_ask()));
    }
    Some(st.engine.check(&req).await)
}

/// The answer to a denied request: `status`, the fields and the problem body.
pub fn denied(result: &CheckResult, status: StatusCode) -> Response<Body> {
    let mut r = Response::new(full(result.problem_body.clone().unwrap_or_default()));
    *r.status_mut() = status;
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(rl_core::headers::PROBLEM_CONTENT_TYPE),
    );
    add_fields(r.headers_mut(), result);
    r
}

pub fn add_fields(h: &mut http::HeaderMap, result: &CheckResult) {
    for (k, v) in &result.headers {
        if let (Ok(k), Ok(v)) = (
            http::HeaderName::from_bytes(k.as_bytes()),
            HeaderValue::from_str(v),
        ) {
            h.append(k, v);
        }
    }
}

/// A check that failed: 400 when the request was invalid (a descriptor the limiter cannot take),
/// else 500.
pub fn failed(e: &rl_core::Error) -> Response<Body> {
    tracing::warn!(error = %e, "check failed");
    let status = match e.kind() {
        rl_core::ErrorKind::InvalidArgument => StatusCode::BAD_REQUEST,
        _ => StatusCode::INTERNAL_SERVER_ERROR,
    };
    text(status, &format!("rl: {e}\n"))
}

async fn check(st: &Http, peer: IpAddr, req: hyper::Request<Incoming>) -> Response<Body> {
    let deny = req
        .uri()
        .query()
        .and_then(|q| q.split('&').find_map(|kv| kv.strip_prefix("deny_status=")))
        .and_then(|s| s.parse::<u16>().ok())
        .and_then(|s| StatusCode::from_u16(s).ok())
        .filter(|s| s.is_client_error() || s.is_server_error())
        .unwrap_or(StatusCode::TOO_MANY_REQUESTS);
    let (parts, _body) = req.into_parts();
    match decide(st, peer, &parts, true).await {
        None => text(
            StatusCode::SERVICE_UNAVAILABLE,
            "rl: no domain of the policies has an http: section\n",
        ),
        Some(Err(e)) => failed(&e),
        Some(Ok(r)) => {
            let mut resp = if r.overall == Code::OverLimit {
                denied(&r, deny)
            } else {
                let mut resp = Response::new(full(Bytes::new()));
                add_fields(resp.headers_mut(), &r);
                resp
            };
            if st.decided_at {
                if let Some(t) = r.decided_at_ms {
                    resp.headers_mut().insert(DECIDED_AT, HeaderValue::from(t));
                }
            }
            resp
        }
    }
}

/// Marks the server as draining (for `/readyz`).
pub fn drain(st: &Http) {
    st.draining.store(true, Ordering::SeqCst);
}
