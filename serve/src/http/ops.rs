//! `/healthz` (the process answers), `/readyz` (it can decide: Redis answers, or the local
//! fallback decides while it does not — "degraded", still ready) and `/metrics`.

use std::sync::atomic::Ordering;
use std::time::Duration;

use http::{header, HeaderValue, Response, StatusCode};
use rl_core::Mode;

use super::{full, text, Body, Http};

pub fn healthz() -> Response<Body> {
    text(StatusCode::OK, "ok\n")
}

/// 200 `ready` (Redis decides), 200 `degraded: ...` (the local fallback decides, exact per
/// instance share; the header `RL-Mode: local` says so too), 503 while draining or when Redis
/// does not answer and no fallback is on.
pub async fn readyz(st: &Http) -> Response<Body> {
    if st.draining.load(Ordering::SeqCst) {
        return text(StatusCode::SERVICE_UNAVAILABLE, "draining\n");
    }
    let lim = st.engine.limiter();
    let stats = lim.stats();
    let fallback = lim.options().local_fallback;
    let (status, body, mode) = if stats.mode == Mode::Local {
        (
            StatusCode::OK,
            format!(
                "degraded: the local fallback decides ({})\n",
                stats.state_reason
            ),
            "local",
        )
    } else {
        let ping = tokio::time::timeout(Duration::from_secs(1), lim.ping()).await;
        match ping {
            Ok(Ok(())) => (StatusCode::OK, "ready\n".to_string(), stats.mode.as_str()),
            Ok(Err(e)) if fallback => (
                StatusCode::OK,
                format!("degraded: Redis does not answer ({e}); the local fallback decides\n"),
                "local",
            ),
            Err(_) if fallback => (
                StatusCode::OK,
                "degraded: Redis does not answer in 1 s; the local fallback decides\n".into(),
                "local",
            ),
            Ok(Err(e)) => (
                StatusCode::SERVICE_UNAVAILABLE,
                format!("not ready: Redis does not answer ({e}) and local_fallback is off\n"),
                "normal",
            ),
            Err(_) => (
                StatusCode::SERVICE_UNAVAILABLE,
                "not ready: Redis does not answer in 1 s and local_fallback is off\n".into(),
                "normal",
            ),
        }
    };
    let mut r = text(status, &body);
    r.headers_mut()
        .insert("rl-mode", HeaderValue::from_static(mode));
    r
}

pub fn metrics(st: &Http) -> Response<Body> {
    let e = &st.engine;
    let mut r = Response::new(full(e.metrics().render(&e.limiter().stats())));
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; version=0.0.4; charset=utf-8"),
    );
    r
}
