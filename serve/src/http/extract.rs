//! An HTTP request as descriptors, by the domain's `http:` section (`config/http.rs`).
//!
//! - The client address is the peer's, unless the peer is a trusted proxy: then the rightmost
//!   `X-Forwarded-For` address that is not itself a trusted proxy (the hop that reached the
//!   first trusted one), else `X-Real-IP`. An untrusted peer's forwarding headers are ignored,
//!   so a client cannot pick whose quota it spends.
//! - On the check endpoint the request is the proxy's subrequest: its method and URI are the
//!   original request's as nginx (`X-Original-Method`, `X-Original-URI`, set in its config) or
//!   Traefik (`X-Forwarded-Method`, `X-Forwarded-Uri`) send them. These only choose which limit
//!   applies, never whose quota, so they are read from any peer.

use std::net::IpAddr;

use http::request::Parts;

use crate::config::http::canonical;
use crate::config::{Action, RawHttp};
use crate::decide::{DescriptorRequest, Entry};

/// What the actions read from one request.
pub struct View<'a> {
    pub method: &'a str,
    /// Path and query, as Envoy's `:path`.
    pub path: &'a str,
    pub authority: Option<&'a str>,
    pub headers: &'a http::HeaderMap,
    pub client: IpAddr,
}

fn header<'a>(h: &'a http::HeaderMap, name: &str) -> Option<&'a str> {
    h.get(name).and_then(|v| v.to_str().ok())
}

/// The request as the actions see it; `check` for the check endpoint's subrequests.
pub fn view<'a>(parts: &'a Parts, peer: IpAddr, http: &RawHttp, check: bool) -> View<'a> {
    let h = &parts.headers;
    let (mut method, mut path) = (
        parts.method.as_str(),
        parts.uri.path_and_query().map_or("/", |p| p.as_str()),
    );
    let mut authority = header(h, "host").or(parts.uri.authority().map(|a| a.as_str()));
    if check {
        if let Some(m) = header(h, "x-original-method").or(header(h, "x-forwarded-method")) {
            method = m;
        }
        if let Some(u) = header(h, "x-original-uri").or(header(h, "x-forwarded-uri")) {
            path = u;
        }
        if let Some(a) = header(h, "x-forwarded-host") {
            authority = Some(a);
        }
    }
    View {
        method,
        path,
        authority,
        headers: h,
        client: client_ip(h, peer, http),
    }
}

/// The client address after the trusted-proxy rule.
pub fn client_ip(h: &http::HeaderMap, peer: IpAddr, http: &RawHttp) -> IpAddr {
    let peer = canonical(peer);
    let trusted = |ip: IpAddr| http.trusted_proxies.iter().any(|c| c.contains(ip));
    if !trusted(peer) {
        return peer;
    }
    let hops: Vec<IpAddr> = h
        .get_all("x-forwarded-for")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .filter_map(|s| s.trim().parse::<IpAddr>().ok())
        .map(canonical)
        .collect();
    if let Some(first) = hops.first() {
        return hops
            .iter()
            .rev()
            .find(|ip| !trusted(**ip))
            .copied()
            .unwrap_or(*first);
    }
    header(h, "x-real-ip")
        .and_then(|s| s.trim().parse::<IpAddr>().ok())
        .map_or(peer, canonical)
}

/// The descriptors `http` makes of `v`, in order; a descriptor an absent header drops (Envoy's
/// `skip_if_absent: false`) is left out.
pub fn descriptors(http: &RawHttp, v: &View) -> Vec<DescriptorRequest> {
    let mut out = Vec::with_capacity(http.rate_limits.len());
    'limits: for rl in &http.rate_limits {
        let mut entries = Vec::with_capacity(rl.actions.len());
        for a in &rl.actions {
            let (key, value) = match a {
                Action::RemoteAddress {} => ("remote_address".to_string(), v.client.to_string()),
                Action::GenericKey {
                    descriptor_value,
                    descriptor_key,
                } => (descriptor_key.clone(), descriptor_value.clone()),
                Action::RequestHeaders {
                    header_name,
                    descriptor_key,
                    skip_if_absent,
                } => {
                    let value = match header_name.to_ascii_lowercase().as_str() {
                        ":method" => Some(v.method),
                        ":path" => Some(v.path),
                        ":authority" => v.authority,
                        name => header(v.headers, name),
                    };
                    match value {
                        Some(x) => (descriptor_key.clone(), x.to_string()),
                        None if *skip_if_absent => continue,
                        None => continue 'limits,
                    }
                }
            };
            entries.push(Entry { key, value });
        }
        if !entries.is_empty() {
            out.push(DescriptorRequest {
                entries,
                hits_addend: None,
            });
        }
    }
    out
}
