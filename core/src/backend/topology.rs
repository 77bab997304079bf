//! Which Redis deployment a URL names, and how to reach its primary for a key.
//!
//! One `Limiter` type serves all three: the topology only changes how a connection is made.
//! - `redis://` / `rediss://` / `unix://`: one server.
//! - `redis+sentinel://[user:pass@]host:port[,host:port...]/<master name>[/db]`: the primary that
//!   the Sentinels name, asked again whenever the current one fails or turns read-only, so the
//!   limiter follows the primary across failovers.
//! - `redis+cluster://[user:pass@]host:port[,host:port...]`: seed nodes; redis-rs's cluster client
//!   routes each call to its slot's owner and follows `MOVED`/`ASK` during resharding.
//!
//! `rediss+sentinel://` and `rediss+cluster://` use TLS (rustls), as `rediss://` does; on any of
//! them `?tls_ca=`, `tls_cert=`, `tls_key=` name a private CA and a client certificate (`tls.rs`).

use redis::sentinel::{SentinelClient, SentinelClientBuilder, SentinelServerType};
use redis::{ConnectionAddr, TlsCertificates, TlsMode};

use super::redis::redact;
use crate::error::{Error, Result};
use crate::options::Options;

pub(crate) enum Topology {
    Standalone(redis::Client),
    Sentinel(SentinelSpec),
    /// Boxed: the cluster client is twice the size of the others.
    Cluster(Box<redis::cluster::ClusterClient>),
}

impl Topology {
    pub(crate) fn name(&self) -> &'static str {
        match self {
            Topology::Standalone(_) => "standalone",
            Topology::Sentinel(_) => "sentinel",
            Topology::Cluster(_) => "cluster",
        }
    }
}

/// What a Sentinel client is built from. The client itself holds connections to the Sentinels,
/// which belong to one fork generation, so it is rebuilt per generation from this.
#[derive(Clone)]
pub(crate) struct SentinelSpec {
    sentinels: Vec<ConnectionAddr>,
    master: String,
    username: Option<String>,
    password: Option<String>,
    db: i64,
    tls: bool,
    certs: Option<TlsCertificates>,
}

impl SentinelSpec {
    pub(crate) fn client(&self) -> redis::RedisResult<SentinelClient> {
        let mut b = SentinelClientBuilder::new(
            self.sentinels.clone(),
            self.master.clone(),
            SentinelServerType::Master,
        )?
        .set_client_to_redis_db(self.db)
        .set_client_to_redis_tcp_settings(nodelay())
        .set_client_to_sentinel_tcp_settings(nodelay());
        if let Some(u) = &self.username {
            b = b.set_client_to_redis_username(u);
        }
        if let Some(p) = &self.password {
            b = b.set_client_to_redis_password(p);
        }
        if self.tls {
            b = b
                .set_client_to_redis_tls_mode(TlsMode::Secure)
                .set_client_to_sentinel_tls_mode(TlsMode::Secure);
        }
        if let Some(c) = &self.certs {
            b = b
                .set_client_to_redis_certificates(c.clone())
                .set_client_to_sentinel_certificates(c.clone());
        }
        b.build()
    }
}

/// TCP_NODELAY: requests share one connection, and Nagle's algorithm would hold a small request
/// back until the previous one is acknowledged (milliseconds of tail latency).
fn nodelay() -> redis::io::tcp::TcpSettings {
    redis::io::tcp::TcpSettings::default().set_nodelay(true)
}

const SENTINEL: [&str; 2] = ["redis+sentinel://", "rediss+sentinel://"];
const CLUSTER: [&str; 2] = ["redis+cluster://", "rediss+cluster://"];
const SINGLE: [&str; 4] = ["redis://", "rediss://", "redis+unix://", "unix://"];

/// Whether `url` names a Redis deployment (of any topology).
pub(crate) fn is_redis_url(url: &str) -> bool {
    SENTINEL
        .iter()
        .chain(&CLUSTER)
        .chain(&SINGLE)
        .any(|s| url.starts_with(s))
}

pub(crate) fn parse(url: &str, options: &Options) -> Result<Topology> {
    let bad = |msg: String| Error::invalid("url", format!("{}: {msg}", redact(url)));
    let tls = url.starts_with("rediss");
    if tls {
        // rustls needs one process-wide crypto provider; another library may have set one.
        let _ = rustls::crypto::ring::default_provider().install_default();
    }
    let (url, certs) = super::tls::take(url, tls).map_err(bad)?;
    let url = url.as_str();
    let multi = SENTINEL.iter().chain(&CLUSTER).any(|s| url.starts_with(s));
    if multi && url.contains('?') {
        return Err(bad(
            "takes no query parameters but tls_ca, tls_cert and tls_key".into(),
        ));
    }
    if let Some(rest) = SENTINEL.iter().find_map(|s| url.strip_prefix(s)) {
        let (creds, hosts, path) = split(rest);
        let (username, password) = credentials(creds);
        let mut parts = path.split('/').filter(|p| !p.is_empty());
        let master = parts.next().ok_or_else(|| {
            bad("names no master (redis+sentinel://host:port,.../<master name>)".into())
        })?;
        let db = match parts.next() {
            Some(d) => d
                .parse::<i64>()
                .map_err(|_| bad(format!("database {d:?} is not a number")))?,
            None => 0,
        };
        let sentinels = addresses(hosts, 26379, tls).map_err(bad)?;
        let spec = SentinelSpec {
            sentinels,
            master: decode(master),
            username,
            password,
            db,
            tls,
            certs,
        };
        spec.client().map_err(|e| bad(e.to_string()))?;
        return Ok(Topology::Sentinel(spec));
    }
    if let Some(rest) = CLUSTER.iter().find_map(|s| url.strip_prefix(s)) {
        let (creds, hosts, path) = split(rest);
        if !path.trim_matches('/').is_empty() {
            return Err(bad("a Cluster has only database 0; remove the path".into()));
        }
        let (username, password) = credentials(creds);
        let scheme = if tls { "rediss" } else { "redis" };
        let nodes: Vec<String> = addresses(hosts, 6379, tls)
            .map_err(bad)?
            .into_iter()
            .map(|a| match a {
                ConnectionAddr::Tcp(h, p)
                | ConnectionAddr::TcpTls {
                    host: h, port: p, ..
                } => format!("{scheme}://{h}:{p}"),
                _ => unreachable!("addresses() makes TCP addresses only"),
            })
            .collect();
        let mut b = redis::cluster::ClusterClient::builder(nodes)
            .connection_timeout(options.connect_timeout)
            .response_timeout(options.request_timeout)
            .tcp_settings(nodelay())
            // MOVED/ASK are followed at once; other retries are ours (one, after retry_delay).
            .retries(2);
        if let Some(u) = username {
            b = b.username(u);
        }
        if let Some(p) = password {
            b = b.password(p);
        }
        if tls {
            b = b.tls(TlsMode::Secure);
        }
        if let Some(c) = certs {
            b = b.certs(c);
        }
        return Ok(Topology::Cluster(Box::new(
            b.build().map_err(|e| bad(e.to_string()))?,
        )));
    }
    let info = redis::IntoConnectionInfo::into_connection_info(url)
        .map_err(|e| bad(e.to_string()))?
        .set_tcp_settings(nodelay());
    let client = match certs {
        Some(c) => redis::Client::build_with_tls(info, c),
        None => redis::Client::open(info),
    };
    Ok(Topology::Standalone(
        client.map_err(|e| bad(e.to_string()))?,
    ))
}

/// `user:pass@hosts/path` into its three parts.
fn split(rest: &str) -> (Option<&str>, &str, &str) {
    let (creds, rest) = match rest.rfind('@') {
        Some(at) => (Some(&rest[..at]), &rest[at + 1..]),
        None => (None, rest),
    };
    match rest.find('/') {
        Some(slash) => (creds, &rest[..slash], &rest[slash..]),
        None => (creds, rest, ""),
    }
}

fn credentials(creds: Option<&str>) -> (Option<String>, Option<String>) {
    match creds {
        None => (None, None),
        Some(c) => match c.split_once(':') {
            Some((u, p)) => ((!u.is_empty()).then(|| decode(u)), Some(decode(p))),
            None => ((!c.is_empty()).then(|| decode(c)), None),
        },
    }
}

/// Percent-decoding for names, credentials and file paths (`%40` for `@`, ...).
pub(crate) fn decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' && i + 2 < b.len() {
            if let Some(v) = std::str::from_utf8(&b[i + 1..i + 3])
                .ok()
                .and_then(|h| u8::from_str_radix(h, 16).ok())
            {
                out.push(v);
                i += 3;
                continue;
            }
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// `h1:p1,h2,[::1]:p3` into addresses.
fn addresses(
    hosts: &str,
    default_port: u16,
    tls: bool,
) -> std::result::Result<Vec<ConnectionAddr>, String> {
    let mut out = Vec::new();
    for h in hosts.split(',') {
        if h.is_empty() {
            return Err("empty host in the host list".into());
        }
        let (host, port) = if let Some(v6) = h.strip_prefix('[') {
            let (host, after) = v6
                .split_once(']')
                .ok_or_else(|| format!("bad IPv6 host {h:?}"))?;
            (host, after.strip_prefix(':'))
        } else {
            match h.rsplit_once(':') {
                Some((host, port)) => (host, Some(port)),
                None => (h, None),
            }
        };
        let port = match port {
            Some(p) => p
                .parse::<u16>()
                .map_err(|_| format!("port {p:?} of {h:?} is not a port number"))?,
            None => default_port,
        };
        out.push(if tls {
            ConnectionAddr::TcpTls {
                host: host.to_string(),
                port,
                insecure: false,
                tls_params: None,
            }
        } else {
            ConnectionAddr::Tcp(host.to_string(), port)
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sentinel_url_parts() {
        let o = Options::default();
        let Topology::Sentinel(s) = parse(
            "redis+sentinel://app:p%40ss@127.0.0.1:1,[::1]:2,host/mymaster/3",
            &o,
        )
        .unwrap() else {
            panic!("not sentinel")
        };
        assert_eq!(s.master, "mymaster");
        assert_eq!(s.db, 3);
        assert_eq!(s.username.as_deref(), Some("app"));
        assert_eq!(s.password.as_deref(), Some("p@ss"));
        assert_eq!(s.sentinels.len(), 3);
        assert!(matches!(&s.sentinels[2], ConnectionAddr::Tcp(h, 26379) if h == "host"));
    }

    #[test]
    fn bad_urls_name_the_problem() {
        let o = Options::default();
        for (url, needle) in [
            ("redis+sentinel://127.0.0.1:1", "names no master"),
            ("redis+sentinel://127.0.0.1:x/m", "not a port"),
            ("redis+cluster://127.0.0.1:1/2", "database 0"),
            ("redis+cluster://,", "empty host"),
        ] {
            let e = parse(url, &o)
                .err()
                .unwrap_or_else(|| panic!("{url} parsed"));
            assert!(e.to_string().contains(needle), "{url}: {e}");
        }
    }
}
