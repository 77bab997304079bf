//! What the gRPC tests share: `rl serve --grpc` as a child process over a real redis-server,
//! and the Go clients that ask it — `rls-client` on envoyproxy/go-control-plane's generated RLS
//! v3 stubs and envoyproxy/ratelimit's own `client_cmd` — built by
//! `serve/tools/build-go-tools.sh`.

#![allow(dead_code)]

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use rl_harness::RedisServer;
use serde_json::Value;

/// The directory holding the Go tools (the clients and envoyproxy/ratelimit itself), built once
/// per test binary and skipped when present.
pub fn tools() -> &'static Path {
    static TOOLS: OnceLock<PathBuf> = OnceLock::new();
    TOOLS.get_or_init(|| {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tools/build-go-tools.sh");
        let out = Command::new("bash")
            .arg(&script)
            .arg("--peer")
            .output()
            .expect("run build-go-tools.sh");
        assert!(
            out.status.success(),
            "build-go-tools.sh failed:\n{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        let stdout = String::from_utf8_lossy(&out.stdout);
        PathBuf::from(
            stdout
                .lines()
                .last()
                .expect("the script prints the tools dir")
                .trim(),
        )
    })
}

/// The vendored envoyproxy/ratelimit configs.
pub fn envoy_configs() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/envoy-ratelimit")
}

/// `rl serve --grpc` (the `rl-serve` binary, same flags as `rl serve`) on free loopback ports,
/// deciding on a private redis-server; stopped with SIGTERM when dropped.
pub struct Service {
    pub addr: SocketAddr,
    child: Child,
    log: PathBuf,
    _redis: RedisServer,
}

impl Service {
    /// `rl serve --config <config>`: a file, or a directory of `*.yaml` as envoyproxy/ratelimit
    /// reads its runtime directory.
    pub fn start(config: &Path) -> Service {
        Service::start_with(config, &[])
    }

    /// [`Service::start`] with more `rl serve` flags.
    pub fn start_with(config: &Path, extra: &[&str]) -> Service {
        let redis = RedisServer::start().expect("start redis-server");
        let port = || rl_harness::free_port().expect("a free port");
        let addr: SocketAddr = format!("127.0.0.1:{}", port()).parse().unwrap();
        let log = redis.dir().join(format!("rl-serve-{}.log", addr.port()));
        let child = Command::new(env!("CARGO_BIN_EXE_rl-serve"))
            .arg("--config")
            .arg(config)
            .args(["--redis", &redis.url()])
            .args(["--listen", &format!("127.0.0.1:{}", port())])
            .args(["--grpc", &addr.to_string()])
            .args(extra)
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .expect("start rl-serve");
        let svc = Service {
            addr,
            child,
            log,
            _redis: redis,
        };
        let deadline = Instant::now() + Duration::from_secs(10);
        while std::net::TcpStream::connect(addr).is_err() {
            assert!(
                Instant::now() < deadline,
                "rl serve --grpc did not listen:\n{}",
                svc.log()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        svc
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// SIGTERM, and the exit status if it exits within `within`.
    pub fn terminate(&mut self, within: Duration) -> Option<std::process::ExitStatus> {
        rl_harness::process::signal(self.child.id(), libc::SIGTERM).unwrap();
        let deadline = Instant::now() + within;
        while Instant::now() < deadline {
            if let Some(status) = self.child.try_wait().unwrap() {
                return Some(status);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        None
    }

    /// One `ShouldRateLimit` through `rls-client check`; `args` are its flags after `-domain`.
    pub fn check(&self, domain: &str, args: &[&str]) -> Value {
        check(self.addr, domain, args)
    }

    /// One `ShouldRateLimit` through `rls-client check` that the service must refuse: the
    /// client's error line (`rls-client: rpc error: code = ... desc = ...`).
    pub fn check_error(&self, domain: &str, args: &[&str]) -> String {
        let out = Command::new(tools().join("rls-client"))
            .args(["check", "-addr", &self.addr.to_string(), "-domain", domain])
            .args(args)
            .output()
            .expect("run rls-client");
        assert!(
            !out.status.success(),
            "the service answered instead of refusing: {}",
            String::from_utf8_lossy(&out.stdout)
        );
        String::from_utf8_lossy(&out.stderr).trim().to_string()
    }

    /// One request through envoyproxy/ratelimit's `client_cmd`: its printed response line.
    pub fn client_cmd(&self, domain: &str, descriptors: &[&str]) -> String {
        let mut cmd = Command::new(tools().join("client_cmd"));
        cmd.args(["-dial_string", &self.addr.to_string(), "-domain", domain]);
        for d in descriptors {
            cmd.args(["-descriptors", d]);
        }
        let out = run(&mut cmd);
        out.lines()
            .find(|l| l.starts_with("response:"))
            .unwrap_or_else(|| panic!("no response line: {out}"))
            .to_string()
    }

    /// `rls-client pace`: one request at a time at `rate`/s; (send, receive, admitted) per request.
    pub fn pace(&self, domain: &str, args: &[&str], rate: u32, count: u32) -> Vec<Paced> {
        let out = run(Command::new(tools().join("rls-client"))
            .args(["pace", "-addr", &self.addr.to_string(), "-domain", domain])
            .args(["-rate", &rate.to_string(), "-count", &count.to_string()])
            .args(args));
        out.lines()
            .map(|l| {
                let v: Value = serde_json::from_str(l).unwrap();
                Paced {
                    send_ns: v["send_ns"].as_i64().unwrap(),
                    recv_ns: v["recv_ns"].as_i64().unwrap(),
                    admitted: match v["code"].as_str().unwrap() {
                        "OK" => true,
                        "OVER_LIMIT" => false,
                        other => panic!("unexpected code {other}"),
                    },
                }
            })
            .collect()
    }
}

impl Drop for Service {
    fn drop(&mut self) {
        if self.child.try_wait().ok().flatten().is_none()
            && self.terminate(Duration::from_secs(5)).is_none()
        {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// envoyproxy/ratelimit itself (`service_cmd`, built from the Go module proxy) on free loopback
/// ports and its own redis-server, reading `config` from a runtime directory as it does in
/// production; stopped when dropped.
pub struct Peer {
    pub addr: SocketAddr,
    child: Child,
    log: PathBuf,
    _redis: RedisServer,
}

impl Peer {
    pub fn start(config: &Path) -> Peer {
        let redis = RedisServer::start().expect("start redis-server");
        let runtime = redis.dir().join("runtime");
        let app = runtime.join("ratelimit/config");
        std::fs::create_dir_all(&app).unwrap();
        std::fs::copy(config, app.join(config.file_name().unwrap())).unwrap();
        let port = || rl_harness::free_port().expect("a free port").to_string();
        let grpc = port();
        let addr: SocketAddr = format!("127.0.0.1:{grpc}").parse().unwrap();
        let log = redis.dir().join("ratelimit.log");
        let child = Command::new(tools().join("service_cmd"))
            .env("REDIS_SOCKET_TYPE", "tcp")
            .env("REDIS_URL", format!("127.0.0.1:{}", redis.port()))
            .env("RUNTIME_ROOT", &runtime)
            .env("RUNTIME_SUBDIRECTORY", "ratelimit")
            .env("RUNTIME_WATCH_ROOT", "false")
            .env("USE_STATSD", "false")
            .env("LOG_LEVEL", "warn")
            .env("HOST", "127.0.0.1")
            .env("PORT", port())
            .env("DEBUG_HOST", "127.0.0.1")
            .env("DEBUG_PORT", port())
            .env("GRPC_HOST", "127.0.0.1")
            .env("GRPC_PORT", &grpc)
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .expect("start envoyproxy/ratelimit");
        let peer = Peer {
            addr,
            child,
            log,
            _redis: redis,
        };
        let deadline = Instant::now() + Duration::from_secs(15);
        while std::net::TcpStream::connect(addr).is_err() {
            assert!(
                Instant::now() < deadline,
                "envoyproxy/ratelimit did not listen:\n{}",
                std::fs::read_to_string(&peer.log).unwrap_or_default()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        peer
    }

    /// One `ShouldRateLimit` through `rls-client check`.
    pub fn check(&self, domain: &str, args: &[&str]) -> Value {
        check(self.addr, domain, args)
    }
}

impl Drop for Peer {
    fn drop(&mut self) {
        let _ = rl_harness::process::terminate(self.child.id(), Duration::from_secs(5));
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn check(addr: SocketAddr, domain: &str, args: &[&str]) -> Value {
    let out = run(Command::new(tools().join("rls-client"))
        .args(["check", "-addr", &addr.to_string(), "-domain", domain])
        .args(args));
    serde_json::from_str(out.trim()).unwrap_or_else(|e| panic!("{e}: {out}"))
}

fn run(cmd: &mut Command) -> String {
    let out = cmd.output().expect("run a Go client");
    assert!(
        out.status.success(),
        "{cmd:?} failed:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// One paced request as the client saw it.
#[derive(Debug, Clone, Copy)]
pub struct Paced {
    pub send_ns: i64,
    pub recv_ns: i64,
    pub admitted: bool,
}

/// The most admitted requests that certainly fell inside one `window`: the server decided each
/// between its send and its receive, so requests sent at or after an admitted one's send and
/// answered before that send plus the window were decided less than a window apart. A lower
/// bound on the true most (exact up to the loopback round trip), so a count above the limit is
/// a real overshoot, never an artefact of the client's clock.
pub fn most_admitted_in_window(paced: &[Paced], window: Duration, cost: u64) -> u64 {
    let w = window.as_nanos() as i64;
    let mut ok: Vec<Paced> = paced.iter().copied().filter(|p| p.admitted).collect();
    ok.sort_by_key(|p| p.send_ns);
    let mut best = 0;
    for (i, first) in ok.iter().enumerate() {
        let end = first.send_ns + w;
        let n = ok[i..]
            .iter()
            .take_while(|p| p.send_ns < end)
            .filter(|p| p.recv_ns < end)
            .count() as u64;
        best = best.max(n * cost);
    }
    best
}

/// A protojson `google.protobuf.Duration` ("59.250s") as a Duration.
pub fn pb_duration(v: &Value) -> Duration {
    let s = v.as_str().unwrap_or_else(|| panic!("not a duration: {v}"));
    Duration::from_secs_f64(s.strip_suffix('s').unwrap().parse().unwrap())
}

/// `response_headers_to_add` as (name, value) pairs.
pub fn headers(resp: &Value) -> Vec<(String, String)> {
    resp["response_headers_to_add"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| {
            (
                h["key"].as_str().unwrap().to_string(),
                h["value"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

/// The value of header `name` (case-insensitive).
pub fn header<'a>(headers: &'a [(String, String)], name: &str) -> Option<&'a str> {
    headers
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case(name))
        .map(|(_, v)| v.as_str())
}
