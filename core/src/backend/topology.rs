//! How to reach the primary for a key, per deployment (the URL grammar is `url.rs`'s).
//!
//! One `Limiter` type serves all three: the topology only changes how a connection is made.
//! - standalone (`redis://`, `rediss://`, `unix://`): one redis-rs client.
//! - Sentinel: the primary that the Sentinels name, asked again whenever the current one fails or
//!   turns read-only, so the limiter follows the primary across failovers.
//! - Cluster: redis-rs's cluster client routes each call to its slot's owner and follows
//!   `MOVED`/`ASK` during resharding.
//!
//! TLS is rustls, with the URL's own CA and client certificate when it names them.

use std::time::Duration;

use redis::sentinel::{SentinelClient, SentinelClientBuilder, SentinelServerType};
use redis::{ConnectionAddr, TlsCertificates, TlsMode};

use crate::error::Result;
use crate::url::Deployment;

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

/// The connection recipe for `url` (see `url.rs` for the grammar). The TLS files are read now, so
/// a wrong path is an error when the limiter opens. The timeouts bound the Cluster client's own
/// calls (its slot map); the other topologies are bounded by the caller.
pub(crate) fn open(
    url: &str,
    connect_timeout: Duration,
    request_timeout: Duration,
) -> Result<Topology> {
    let url = crate::url::parse(url)?;
    let certs = url.certificates()?;
    let bad = |e: redis::RedisError| url.invalid(e.to_string());
    let tls = url.tls;
    match &url.deployment {
        Deployment::Sentinel {
            sentinels,
            master,
            db,
        } => {
            let spec = SentinelSpec {
                sentinels: sentinels
                    .iter()
                    .map(|n| url.sentinel_info(n).addr().clone())
                    .collect(),
                master: master.clone(),
                username: url.username.clone(),
                password: url.password.clone(),
                db: *db,
                tls,
                certs,
            };
            spec.client().map_err(bad)?;
            Ok(Topology::Sentinel(spec))
        }
        Deployment::Cluster { seeds } => {
            let scheme = if tls { "rediss" } else { "redis" };
            let nodes: Vec<String> = seeds
                .iter()
                .map(|n| format!("{scheme}://{}:{}", n.host, n.port))
                .collect();
            let mut b = redis::cluster::ClusterClient::builder(nodes)
                .connection_timeout(connect_timeout)
                .response_timeout(request_timeout)
                .tcp_settings(nodelay())
                // MOVED/ASK are followed at once; other retries are ours (one, after retry_delay).
                .retries(2);
            if let Some(u) = &url.username {
                b = b.username(u.clone());
            }
            if let Some(p) = &url.password {
                b = b.password(p.clone());
            }
            if tls {
                b = b.tls(TlsMode::Secure);
            }
            if let Some(c) = certs {
                b = b.certs(c);
            }
            Ok(Topology::Cluster(Box::new(b.build().map_err(bad)?)))
        }
        Deployment::Standalone { info, .. } | Deployment::Unix { info, .. } => {
            let info = info.clone().set_tcp_settings(nodelay());
            let client = match certs {
                Some(c) => redis::Client::build_with_tls(info, c),
                None => redis::Client::open(info),
            };
            Ok(Topology::Standalone(client.map_err(bad)?))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sentinel_spec_from_url() {
        let d = Duration::from_millis(500);
        let Topology::Sentinel(s) = open(
            "redis+sentinel://app:p%40ss@127.0.0.1:1,[::1]:2,host/mymaster/3",
            d,
            d,
        )
        .unwrap() else {
            panic!("not sentinel")
        };
        assert_eq!((s.master.as_str(), s.db), ("mymaster", 3));
        assert_eq!(s.password.as_deref(), Some("p@ss"));
        assert!(matches!(&s.sentinels[2], ConnectionAddr::Tcp(h, 26379) if h == "host"));
    }
}
