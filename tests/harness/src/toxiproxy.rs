//! A real TCP fault proxy between rl and Redis: Toxiproxy (`github.com/Shopify/toxiproxy/v2`),
//! its server started on a free loopback port and driven over its HTTP API, so tests can add
//! latency, jitter, a blackhole, resets and sliced replies to one connection path at a time.
//!
//! The binary comes from `scripts/toxiproxy.sh` (`go install` into `target/tools/bin`), which
//! [`toxiproxy_path`] runs when the binary is missing; [`ENV_TOXIPROXY`] names another one.

use std::io::{self, Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::Duration;

use serde_json::{json, Value};

use crate::free_port;
use crate::poll::poll;

/// Overrides where `toxiproxy-server` is looked for.
pub const ENV_TOXIPROXY: &str = "RL_TOXIPROXY_SERVER";

const START_TIMEOUT: Duration = Duration::from_secs(10);
const HTTP_TIMEOUT: Duration = Duration::from_secs(5);

/// The `toxiproxy-server` executable: [`ENV_TOXIPROXY`], else `tools/bin` of the target
/// directory (`CARGO_TARGET_DIR`, or this workspace's `target`), where `scripts/toxiproxy.sh`
/// installs it; when it is not there yet, that script is run (once per process).
pub fn toxiproxy_path() -> io::Result<PathBuf> {
    if let Some(p) = std::env::var_os(ENV_TOXIPROXY).filter(|p| !p.is_empty()) {
        return Ok(PathBuf::from(p));
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("target"));
    let p = target.join("tools/bin/toxiproxy-server");
    static INSTALL: Mutex<()> = Mutex::new(());
    let _one = INSTALL.lock().unwrap_or_else(|e| e.into_inner());
    if !p.is_file() {
        let status = Command::new("bash")
            .arg(root.join("scripts/toxiproxy.sh"))
            .env("TOOLS", target.join("tools"))
            .stdout(Stdio::null())
            .status()?;
        if !status.success() || !p.is_file() {
            return Err(io::Error::new(
                io::ErrorKind::NotFound,
                format!(
                    "scripts/toxiproxy.sh did not install {} ({status}); set {ENV_TOXIPROXY}",
                    p.display()
                ),
            ));
        }
    }
    Ok(p)
}

/// One toxiproxy-server process, killed on drop.
#[derive(Debug)]
pub struct Toxiproxy {
    child: Child,
    api: SocketAddr,
}

/// A proxy of a [`Toxiproxy`]: clients connect to `listen`, which forwards to the upstream.
#[derive(Debug, Clone)]
pub struct Proxy {
    api: SocketAddr,
    pub name: String,
    pub listen: SocketAddr,
}

/// Which way a toxic acts: on what the server sends back (`Downstream`), or on what the client
/// sends (`Upstream`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stream {
    Upstream,
    Downstream,
}

impl Stream {
    fn as_str(self) -> &'static str {
        match self {
            Stream::Upstream => "upstream",
            Stream::Downstream => "downstream",
        }
    }
}

impl Toxiproxy {
    /// Starts the server from [`toxiproxy_path`] on a free loopback port and waits until its API
    /// answers.
    pub fn start() -> io::Result<Self> {
        let binary = toxiproxy_path()?;
        let port = free_port()?;
        let child = Command::new(&binary)
            .args(["-host", "127.0.0.1", "-port", &port.to_string()])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()?;
        let mut t = Toxiproxy {
            child,
            api: SocketAddr::from((Ipv4Addr::LOCALHOST, port)),
        };
        poll(START_TIMEOUT, "toxiproxy API", || {
            if let Ok(Some(status)) = t.child.try_wait() {
                return Err(format!("toxiproxy-server exited: {status}"));
            }
            request(t.api, "GET", "/version", None)
                .map(|_| ())
                .map_err(|e| e.to_string())
        })?;
        Ok(t)
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// A new proxy on a free loopback port to `upstream`, with no toxic yet.
    pub fn proxy(&self, name: &str, upstream: SocketAddr) -> io::Result<Proxy> {
        self.proxy_on(name, free_port()?, upstream)
    }

    /// A new proxy listening on `port` (e.g. a port a Cluster node announces) to `upstream`.
    pub fn proxy_on(&self, name: &str, port: u16, upstream: SocketAddr) -> io::Result<Proxy> {
        let body = json!({
            "name": name,
            "listen": format!("127.0.0.1:{port}"),
            "upstream": upstream.to_string(),
            "enabled": true,
        });
        let reply = request(self.api, "POST", "/proxies", Some(&body))?;
        let listen = reply["listen"]
            .as_str()
            .and_then(|l| l.parse().ok())
            .ok_or_else(|| io::Error::other(format!("proxy created as {reply}")))?;
        Ok(Proxy {
            api: self.api,
            name: name.to_string(),
            listen,
        })
    }
}

impl Drop for Toxiproxy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Proxy {
    pub fn port(&self) -> u16 {
        self.listen.port()
    }

    pub fn url(&self) -> String {
        format!("redis://{}/", self.listen)
    }

    /// Adds toxic `name` of `kind` (`latency`, `bandwidth`, `timeout`, `reset_peer`, `slicer`,
    /// ...) with `attributes`, on every connection of this proxy, new and open ones alike.
    pub fn add(&self, name: &str, kind: &str, stream: Stream, attributes: Value) -> io::Result<()> {
        let body = json!({
            "name": name,
            "type": kind,
            "stream": stream.as_str(),
            "toxicity": 1.0,
            "attributes": attributes,
        });
        let path = format!("/proxies/{}/toxics", self.name);
        request(self.api, "POST", &path, Some(&body)).map(|_| ())
    }

    /// Changes a toxic's attributes in place.
    pub fn update(&self, name: &str, attributes: Value) -> io::Result<()> {
        let path = format!("/proxies/{}/toxics/{name}", self.name);
        let body = json!({ "attributes": attributes });
        request(self.api, "POST", &path, Some(&body)).map(|_| ())
    }

    pub fn remove(&self, name: &str) -> io::Result<()> {
        let path = format!("/proxies/{}/toxics/{name}", self.name);
        request(self.api, "DELETE", &path, None).map(|_| ())
    }

    /// Disabled, the proxy closes every connection and refuses new ones (Redis "down").
    pub fn set_enabled(&self, enabled: bool) -> io::Result<()> {
        let path = format!("/proxies/{}", self.name);
        request(
            self.api,
            "POST",
            &path,
            Some(&json!({ "enabled": enabled })),
        )
        .map(|_| ())
    }
}

/// One HTTP/1.0 exchange (no chunked replies to decode); the body as JSON (`null` when empty,
/// a string when it is not JSON).
fn request(api: SocketAddr, method: &str, path: &str, body: Option<&Value>) -> io::Result<Value> {
    let mut s = TcpStream::connect_timeout(&api, HTTP_TIMEOUT)?;
    s.set_read_timeout(Some(HTTP_TIMEOUT))?;
    let body = body.map(Value::to_string).unwrap_or_default();
    write!(
        s,
        "{method} {path} HTTP/1.0\r\nHost: {api}\r\nConnection: close\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )?;
    let mut reply = Vec::new();
    s.read_to_end(&mut reply)?;
    let text = String::from_utf8_lossy(&reply);
    let (head, payload) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status: u16 = head
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .ok_or_else(|| io::Error::other(format!("toxiproxy answered {head:?}")))?;
    if !(200..300).contains(&status) {
        return Err(io::Error::other(format!(
            "toxiproxy {method} {path}: {status} {payload}"
        )));
    }
    let payload = payload.trim();
    if payload.is_empty() {
        return Ok(Value::Null);
    }
    // `/version` answers plain text; everything else JSON.
    Ok(serde_json::from_str(payload).unwrap_or_else(|_| Value::String(payload.to_string())))
}
