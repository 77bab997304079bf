//! rl's `http:` extension of a domain: how the HTTP front ends (the nginx `auth_request` /
//! Traefik `forwardAuth` check endpoint and the reverse proxy) make descriptors from a request.
//! The shape is Envoy's own route `rate_limits` (`actions:` of `remote_address`,
//! `request_headers`, `generic_key`), so a rule reads the same in front of Envoy and of nginx;
//! `:method`, `:path` and `:authority` are the request's, as Envoy's pseudo-headers are.

use std::net::IpAddr;

use serde::Deserialize;

use super::raw::scalar;

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawHttp {
    /// Peers whose `X-Forwarded-For` / `X-Real-IP` (and, on the check endpoint,
    /// `X-Original-URI` / `X-Forwarded-Uri` / `X-Original-Method` / `X-Forwarded-Method`) are
    /// believed. Anyone else's are ignored: the client address is the peer's.
    #[serde(default)]
    pub trusted_proxies: Vec<Cidr>,
    #[serde(default)]
    pub rate_limits: Vec<HttpRateLimit>,
}

/// One descriptor: its entries, one per action, in order (Envoy's `RateLimit`).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HttpRateLimit {
    pub actions: Vec<Action>,
}

/// One entry of a descriptor (Envoy's `RateLimit.Action`, the request-side subset).
#[derive(Debug, Clone, Deserialize)]
#[serde(try_from = "RawAction")]
pub enum Action {
    /// `remote_address: {}` — the client address, after the trusted-proxy rule.
    RemoteAddress {},
    /// A request header's value (`:method`, `:path`, `:authority` for the request's own).
    RequestHeaders {
        header_name: String,
        descriptor_key: String,
        /// Absent header: false (Envoy's default) drops the whole descriptor; true drops
        /// only this entry.
        skip_if_absent: bool,
    },
    /// A fixed entry.
    GenericKey {
        descriptor_value: String,
        descriptor_key: String,
    },
}

/// An action as written: a map with exactly one of Envoy's action names.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawAction {
    #[serde(default)]
    remote_address: Option<Empty>,
    #[serde(default)]
    request_headers: Option<RequestHeaders>,
    #[serde(default)]
    generic_key: Option<GenericKey>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Empty {}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RequestHeaders {
    #[serde(deserialize_with = "scalar")]
    header_name: String,
    #[serde(deserialize_with = "scalar")]
    descriptor_key: String,
    #[serde(default)]
    skip_if_absent: bool,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct GenericKey {
    #[serde(deserialize_with = "scalar")]
    descriptor_value: String,
    #[serde(default = "generic_key")]
    descriptor_key: String,
}

impl TryFrom<RawAction> for Action {
    type Error = String;

    fn try_from(a: RawAction) -> Result<Action, String> {
        match (a.remote_address, a.request_headers, a.generic_key) {
            (Some(Empty {}), None, None) => Ok(Action::RemoteAddress {}),
            (None, Some(h), None) => Ok(Action::RequestHeaders {
                header_name: h.header_name,
                descriptor_key: h.descriptor_key,
                skip_if_absent: h.skip_if_absent,
            }),
            (None, None, Some(g)) => Ok(Action::GenericKey {
                descriptor_value: g.descriptor_value,
                descriptor_key: g.descriptor_key,
            }),
            _ => Err(
                "an action is exactly one of remote_address, request_headers, generic_key".into(),
            ),
        }
    }
}

fn generic_key() -> String {
    "generic_key".into()
}

/// An address block: `10.0.0.0/8`, `::1/128`, or one address.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(try_from = "String")]
pub struct Cidr {
    net: IpAddr,
    bits: u8,
}

impl TryFrom<String> for Cidr {
    type Error = String;

    fn try_from(s: String) -> Result<Self, String> {
        let (ip, bits) = match s.split_once('/') {
            Some((ip, b)) => (ip, Some(b)),
            None => (s.as_str(), None),
        };
        let net: IpAddr = ip
            .trim()
            .parse()
            .map_err(|_| format!("{s:?} is not an address or address/prefix"))?;
        let max = if net.is_ipv4() { 32 } else { 128 };
        let bits = match bits {
            None => max,
            Some(b) => b
                .trim()
                .parse::<u8>()
                .ok()
                .filter(|b| *b <= max)
                .ok_or_else(|| format!("{s:?} has a prefix length outside 0..={max}"))?,
        };
        Ok(Cidr { net, bits })
    }
}

impl Cidr {
    pub fn contains(&self, ip: IpAddr) -> bool {
        let ip = canonical(ip);
        match (canonical(self.net), ip) {
            (IpAddr::V4(n), IpAddr::V4(a)) => prefix_eq(&n.octets(), &a.octets(), self.bits),
            (IpAddr::V6(n), IpAddr::V6(a)) => prefix_eq(&n.octets(), &a.octets(), self.bits),
            _ => false,
        }
    }
}

/// An IPv4-mapped IPv6 address (a dual-stack socket's peer) as the IPv4 address it is.
pub fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    }
}

fn prefix_eq(a: &[u8], b: &[u8], bits: u8) -> bool {
    let (whole, rest) = ((bits / 8) as usize, bits % 8);
    if a[..whole] != b[..whole] {
        return false;
    }
    rest == 0 || (a[whole] ^ b[whole]) >> (8 - rest) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cidrs_match_their_block_only() {
        let c = Cidr::try_from("10.1.0.0/16".to_string()).unwrap();
        assert!(c.contains("10.1.200.3".parse().unwrap()));
        assert!(!c.contains("10.2.0.1".parse().unwrap()));
        assert!(c.contains("::ffff:10.1.0.9".parse().unwrap()));
        let one = Cidr::try_from("::1".to_string()).unwrap();
        assert!(one.contains("::1".parse().unwrap()));
        assert!(!one.contains("::2".parse().unwrap()));
        let odd = Cidr::try_from("192.168.0.0/23".to_string()).unwrap();
        assert!(odd.contains("192.168.1.1".parse().unwrap()));
        assert!(!odd.contains("192.168.2.1".parse().unwrap()));
        assert!(Cidr::try_from("1.2.3.4/33".to_string()).is_err());
        assert!(Cidr::try_from("nope".to_string()).is_err());
    }
}
