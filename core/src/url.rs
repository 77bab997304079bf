//! The Redis URL grammar, in one place: which deployment a URL names, where its nodes are, its
//! credentials, database and TLS files, and how to print it without its password ([`redact`]).
//! The limiter's connections (`backend/topology.rs`), the `rl` command and every binding read URLs
//! through here, so they accept the same URLs and word the same mistakes the same way.
//!
//! - `redis://` / `rediss://` / `unix://` / `redis+unix://`: one server (redis-rs's own grammar,
//!   query parameters such as `protocol=resp3` included).
//! - `redis+sentinel://[user:pass@]host:port[,host:port...]/<master name>[/db]`: the primary that
//!   the Sentinels name (default port 26379). The credentials are the primary's.
//! - `redis+cluster://[user:pass@]host:port[,host:port...]`: seed nodes of a Cluster (default port
//!   6379; database 0 only).
//!
//! `rediss+sentinel://` and `rediss+cluster://` use TLS, as `rediss://` does; on any of them
//! `?tls_ca=`, `tls_cert=`, `tls_key=` name a private CA and a client certificate (`url/tls.rs`).
//! Names, credentials and file paths are percent-decoded (`%40` for `@`).

mod tls;

use std::path::PathBuf;

use redis::{ConnectionAddr, ConnectionInfo, IntoConnectionInfo, RedisConnectionInfo};

pub use self::tls::TlsFiles;
use crate::error::{Error, Result};

const SENTINEL: [&str; 2] = ["redis+sentinel://", "rediss+sentinel://"];
const CLUSTER: [&str; 2] = ["redis+cluster://", "rediss+cluster://"];
const SINGLE: [&str; 4] = ["redis://", "rediss://", "redis+unix://", "unix://"];

/// A parsed Redis URL.
#[derive(Debug, Clone)]
pub struct RedisUrl {
    pub deployment: Deployment,
    /// `rediss*`: every connection (to Sentinels too) uses TLS.
    pub tls: bool,
    pub username: Option<String>,
    pub password: Option<String>,
    pub tls_files: TlsFiles,
    /// The URL as errors show it (password hidden).
    shown: String,
}

/// Which Redis deployment a URL names, and where its nodes are.
#[derive(Debug, Clone)]
pub enum Deployment {
    /// One server over TCP. `info` is redis-rs's reading of the URL (without the TLS files).
    Standalone {
        node: Node,
        db: i64,
        info: ConnectionInfo,
    },
    /// One server on a Unix socket.
    Unix {
        path: PathBuf,
        db: i64,
        info: ConnectionInfo,
    },
    /// The primary the Sentinels name `master`.
    Sentinel {
        sentinels: Vec<Node>,
        master: String,
        db: i64,
    },
    /// A Cluster, found from its seed nodes.
    Cluster { seeds: Vec<Node> },
}

/// A TCP node: host name or IP (IPv6 without brackets) and port.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Node {
    pub host: String,
    pub port: u16,
}

impl Deployment {
    /// `standalone`, `sentinel` or `cluster` (a Unix socket is a standalone server).
    pub fn name(&self) -> &'static str {
        match self {
            Deployment::Standalone { .. } | Deployment::Unix { .. } => "standalone",
            Deployment::Sentinel { .. } => "sentinel",
            Deployment::Cluster { .. } => "cluster",
        }
    }
}

/// Whether `url` names a Redis deployment (of any topology), by its scheme.
pub fn is_redis_url(url: &str) -> bool {
    SENTINEL
        .iter()
        .chain(&CLUSTER)
        .chain(&SINGLE)
        .any(|s| url.starts_with(s))
}

/// Reads a Redis URL. A malformed one is `InvalidArgument` on `url`, naming the problem (the TLS
/// files are not read here: see [`RedisUrl::certificates`]).
pub fn parse(url: &str) -> Result<RedisUrl> {
    let shown = redact(url);
    let bad = |msg: String| Error::invalid("url", format!("{shown}: {msg}"));
    let tls = url.starts_with("rediss");
    if tls {
        // rustls needs one process-wide crypto provider; another library may have set one.
        let _ = rustls::crypto::ring::default_provider().install_default();
    }
    let (url, tls_files) = tls::take(url, tls).map_err(bad)?;
    let url = url.as_str();
    let multi = SENTINEL.iter().chain(&CLUSTER).any(|s| url.starts_with(s));
    if multi && url.contains('?') {
        return Err(bad(
            "takes no query parameters but tls_ca, tls_cert and tls_key".into(),
        ));
    }
    let parsed = |deployment, (username, password)| RedisUrl {
        deployment,
        tls,
        username,
        password,
        tls_files: tls_files.clone(),
        shown: shown.clone(),
    };
    if let Some(rest) = SENTINEL.iter().find_map(|s| url.strip_prefix(s)) {
        let (creds, hosts, path) = split(rest);
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
        let sentinels = nodes(hosts, 26379).map_err(bad)?;
        let master = decode(master);
        return Ok(parsed(
            Deployment::Sentinel {
                sentinels,
                master,
                db,
            },
            credentials(creds),
        ));
    }
    if let Some(rest) = CLUSTER.iter().find_map(|s| url.strip_prefix(s)) {
        let (creds, hosts, path) = split(rest);
        if !path.trim_matches('/').is_empty() {
            return Err(bad("a Cluster has only database 0; remove the path".into()));
        }
        let seeds = nodes(hosts, 6379).map_err(bad)?;
        return Ok(parsed(Deployment::Cluster { seeds }, credentials(creds)));
    }
    let info = url
        .into_connection_info()
        .map_err(|e| bad(redis_reason(url, &e)))?;
    let r = info.redis_settings();
    let creds = (
        r.username().map(str::to_string),
        r.password().map(str::to_string),
    );
    let db = r.db();
    let deployment = match info.addr() {
        ConnectionAddr::Tcp(host, port) | ConnectionAddr::TcpTls { host, port, .. } => {
            Deployment::Standalone {
                node: Node {
                    host: host.clone(),
                    port: *port,
                },
                db,
                info: info.clone(),
            }
        }
        ConnectionAddr::Unix(path) => Deployment::Unix {
            path: path.clone(),
            db,
            info: info.clone(),
        },
        other => return Err(bad(format!("unsupported address {other}"))),
    };
    Ok(parsed(deployment, creds))
}

impl RedisUrl {
    /// The URL's TLS files, read now (`None` when it names none): a missing or unreadable file is
    /// `InvalidArgument` on `url`.
    pub fn certificates(&self) -> Result<Option<redis::TlsCertificates>> {
        self.tls_files.read().map_err(|m| self.invalid(m))
    }

    /// An `InvalidArgument` on `url` about this URL.
    pub(crate) fn invalid(&self, msg: String) -> Error {
        Error::invalid("url", format!("{}: {msg}", self.shown))
    }

    /// How to reach `node` as a data node of this deployment (a Cluster master, the Sentinels'
    /// primary): this URL's TLS, credentials and database. For a standalone URL, its own server
    /// keeps redis-rs's reading of the URL (protocol and the like).
    pub fn node_info(&self, node: &Node) -> ConnectionInfo {
        let db = match &self.deployment {
            Deployment::Standalone { info, .. } | Deployment::Unix { info, .. } => {
                return info.clone().set_addr(self.addr(node));
            }
            Deployment::Sentinel { db, .. } => *db,
            Deployment::Cluster { .. } => 0,
        };
        let mut redis = RedisConnectionInfo::default().set_db(db);
        if let Some(u) = &self.username {
            redis = redis.set_username(u);
        }
        if let Some(p) = &self.password {
            redis = redis.set_password(p);
        }
        self.sentinel_info(node).set_redis_settings(redis)
    }

    /// How to reach a Sentinel: this URL's TLS, no credentials (they are the primary's).
    pub fn sentinel_info(&self, node: &Node) -> ConnectionInfo {
        (node.host.as_str(), node.port)
            .into_connection_info()
            .expect("a host and port are a connection info")
            .set_addr(self.addr(node))
    }

    fn addr(&self, node: &Node) -> ConnectionAddr {
        if self.tls {
            ConnectionAddr::TcpTls {
                host: node.host.clone(),
                port: node.port,
                insecure: false,
                tls_params: None,
            }
        } else {
            ConnectionAddr::Tcp(node.host.clone(), node.port)
        }
    }
}

/// The URL without its password, for messages and reports: `redis://app:***@host:6379/2`. Every
/// URL rl prints goes through here (the core's errors, the `rl` command, the bindings).
pub fn redact(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(s), Some(at)) if at > s => {
            let creds = &url[s + 3..at];
            match creds.find(':') {
                Some(c) => format!("{}{}:***{}", &url[..s + 3], &creds[..c], &url[at..]),
                None => url.to_string(),
            }
        }
        _ => url.to_string(),
    }
}

/// redis-rs's reason for refusing `url`, quoting the URL's own text only where [`redact`] shows
/// it too: redis-rs quotes a bad query value, and text this parser counts as the password (all up
/// to the last `@`) can hold a `?` (found by fuzzing, `fuzz/README.md`).
fn redis_reason(url: &str, e: &redis::RedisError) -> String {
    let reason = e.to_string();
    match e.detail() {
        Some(d) if !d.is_empty() && !redact(url).contains(d) => {
            reason.replace(d, "(a part of the URL that is not shown)")
        }
        _ => reason,
    }
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
fn decode(s: &str) -> String {
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

/// `h1:p1,h2,[::1]:p3` into nodes.
fn nodes(hosts: &str, default_port: u16) -> std::result::Result<Vec<Node>, String> {
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
        out.push(Node {
            host: host.to_string(),
            port,
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sentinel_url_parts() {
        let u = parse("redis+sentinel://app:p%40ss@127.0.0.1:1,[::1]:2,host/mymaster/3").unwrap();
        let Deployment::Sentinel {
            sentinels,
            master,
            db,
        } = &u.deployment
        else {
            panic!("not sentinel")
        };
        assert_eq!((master.as_str(), *db), ("mymaster", 3));
        assert_eq!(u.username.as_deref(), Some("app"));
        assert_eq!(u.password.as_deref(), Some("p@ss"));
        assert_eq!(sentinels.len(), 3);
        assert_eq!(sentinels[1].host, "::1");
        assert_eq!(
            (sentinels[2].host.as_str(), sentinels[2].port),
            ("host", 26379)
        );
    }

    #[test]
    fn cluster_and_standalone_parts() {
        let u = parse("rediss+cluster://:pw@a:7000,b").unwrap();
        let Deployment::Cluster { seeds } = &u.deployment else {
            panic!("not cluster")
        };
        assert_eq!(seeds[1].port, 6379);
        assert!(u.tls);
        assert_eq!(
            (u.username.as_deref(), u.password.as_deref()),
            (None, Some("pw"))
        );
        let u = parse("redis://u:p@127.0.0.1:6380/2").unwrap();
        let Deployment::Standalone { node, db, .. } = &u.deployment else {
            panic!("not standalone")
        };
        assert_eq!(
            (node.port, *db, u.password.as_deref()),
            (6380, 2, Some("p"))
        );
        assert!(matches!(
            parse("unix:///tmp/r.sock").unwrap().deployment,
            Deployment::Unix { .. }
        ));
    }

    #[test]
    fn bad_urls_name_the_problem() {
        for (url, needle) in [
            ("redis+sentinel://127.0.0.1:1", "names no master"),
            ("redis+sentinel://127.0.0.1:x/m", "not a port"),
            ("redis+sentinel://h/m/x", "is not a number"),
            ("redis+cluster://127.0.0.1:1/2", "database 0"),
            ("redis+cluster://,", "empty host"),
            (
                "redis+cluster://h?protocol=resp3",
                "takes no query parameters",
            ),
        ] {
            let e = parse(url).err().unwrap_or_else(|| panic!("{url} parsed"));
            assert!(e.to_string().contains(needle), "{url}: {e}");
        }
    }

    #[test]
    fn a_password_redis_rs_reads_as_a_query_is_not_quoted_in_the_error() {
        // `redact` hides all from the first `:` to the last `@`; redis-rs reads a `protocol`
        // value there and quotes it.
        let url = "redis+unix:///run/redis.sock:pw?protocol=hunter2-secret@x";
        let e = parse(url).err().unwrap_or_else(|| panic!("{url} parsed"));
        let text = e.to_string();
        assert!(!text.contains("hunter2-secret"), "{text}");
        assert!(text.contains(&redact(url)), "{text}");
        // A bad value that the redacted URL shows anyway is still quoted.
        let e = parse("redis://127.0.0.1:6379?protocol=resp9")
            .err()
            .unwrap_or_else(|| panic!("protocol=resp9 parsed"));
        assert!(e.to_string().contains("resp9"), "{e}");
    }

    #[test]
    fn redact_hides_password_only() {
        assert_eq!(
            redact("redis://app:s3cret@127.0.0.1:6379/2"),
            "redis://app:***@127.0.0.1:6379/2"
        );
        assert_eq!(redact("redis://127.0.0.1:6379"), "redis://127.0.0.1:6379");
    }
}
