//! Reverse-proxy mode (`--upstream URL`), the design's gateway: each request is decided by the
//! `http:` section; an admitted one is forwarded over a keep-alive pool and its answer gets the
//! rate-limit fields, a denied one gets 429 with the fields and the problem+json body, and the
//! upstream never sees it.

use std::net::IpAddr;
use std::time::Duration;

use http::uri::{Authority, Scheme};
use http::{HeaderValue, StatusCode, Uri};
use http_body_util::BodyExt;
use hyper::body::Incoming;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;

use super::{add_fields, decide, denied, failed, text, Body, Http, DECIDED_AT};
use crate::decide::Code;

/// The upstream and its connection pool.
pub struct Upstream {
    scheme: Scheme,
    authority: Authority,
    /// A path the upstream URL has, prefixed to every forwarded path (without a trailing `/`).
    base: String,
    client: Client<HttpConnector, Incoming>,
}

impl Upstream {
    /// `url`: `http://host:port[/base]` (plain HTTP: the upstream is beside us).
    pub fn new(url: &str) -> Result<Upstream, String> {
        let uri: Uri = url
            .parse()
            .map_err(|e| format!("--upstream {url:?} is not a URL: {e}"))?;
        if uri.scheme() != Some(&Scheme::HTTP) {
            return Err(format!(
                "--upstream {url:?}: only http:// upstreams are supported"
            ));
        }
        let authority = uri
            .authority()
            .cloned()
            .ok_or_else(|| format!("--upstream {url:?} has no host"))?;
        let mut conn = HttpConnector::new();
        conn.set_nodelay(true);
        conn.set_keepalive(Some(Duration::from_secs(60)));
        let client = Client::builder(TokioExecutor::new())
            .pool_idle_timeout(Duration::from_secs(60))
            .pool_max_idle_per_host(4096)
            .build(conn);
        Ok(Upstream {
            scheme: Scheme::HTTP,
            authority,
            base: uri.path().trim_end_matches('/').to_string(),
            client,
        })
    }
}

/// Headers that describe one hop, not the request (RFC 9110 section 7.6.1).
const HOP: &[&str] = &[
    "connection",
    "keep-alive",
    "proxy-connection",
    "proxy-authenticate",
    "proxy-authorization",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
];

pub async fn forward(
    st: &Http,
    peer: IpAddr,
    req: hyper::Request<Incoming>,
) -> http::Response<Body> {
    let up = st.upstream.as_ref().expect("proxy mode");
    let (mut parts, body) = req.into_parts();
    let result = match decide(st, peer, &parts, false).await {
        None => {
            return text(
                StatusCode::SERVICE_UNAVAILABLE,
                "rl: no domain of the policies has an http: section\n",
            )
        }
        Some(Err(e)) => return failed(&e),
        Some(Ok(r)) => r,
    };
    if result.overall == Code::OverLimit {
        return denied(&result, StatusCode::TOO_MANY_REQUESTS);
    }
    let pq = parts.uri.path_and_query().map_or("/", |p| p.as_str());
    let uri = Uri::builder()
        .scheme(up.scheme.clone())
        .authority(up.authority.clone())
        .path_and_query(format!("{}{pq}", up.base))
        .build();
    let Ok(uri) = uri else {
        return text(StatusCode::BAD_REQUEST, "rl: bad request target\n");
    };
    parts.uri = uri;
    parts.version = http::Version::HTTP_11;
    for h in HOP {
        parts.headers.remove(*h);
    }
    let xff = match parts
        .headers
        .get("x-forwarded-for")
        .and_then(|v| v.to_str().ok())
    {
        Some(prev) => format!("{prev}, {peer}"),
        None => peer.to_string(),
    };
    if let Ok(v) = HeaderValue::from_str(&xff) {
        parts.headers.insert("x-forwarded-for", v);
    }
    if st.decided_at {
        // Only ours reaches the upstream: a client cannot forge the time it was admitted at.
        parts.headers.remove(DECIDED_AT);
        if let Some(t) = result.decided_at_ms {
            parts.headers.insert(DECIDED_AT, HeaderValue::from(t));
        }
    }
    match up
        .client
        .request(hyper::Request::from_parts(parts, body))
        .await
    {
        Ok(resp) => {
            let (mut rp, rb) = resp.into_parts();
            for h in HOP {
                rp.headers.remove(*h);
            }
            add_fields(&mut rp.headers, &result);
            http::Response::from_parts(rp, rb.map_err(Into::into).boxed())
        }
        Err(e) => {
            tracing::warn!(error = %e, "upstream failed");
            text(StatusCode::BAD_GATEWAY, "rl: the upstream did not answer\n")
        }
    }
}
