//! What the serve tests share: the `rl-serve` binary as a child process, a real HTTP client,
//! a small upstream that records when each request reached it, and a policies file on disk.

#![allow(dead_code)]

use std::convert::Infallible;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::{connect::HttpConnector, Client};
use hyper_util::rt::{TokioExecutor, TokioIo};

/// A scratch directory of this test process.
pub fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("rl-serve-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Writes `text` to `path` atomically (a rename), as editors and config managers do.
pub fn write_atomic(path: &Path, text: &str) {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, text).unwrap();
    std::fs::rename(&tmp, path).unwrap();
}

/// `rl-serve`, started with `args`, stopped (SIGTERM, then SIGKILL) when dropped.
pub struct Serve {
    pub child: Child,
    pub addr: SocketAddr,
    pub log: PathBuf,
}

impl Serve {
    pub fn start(config: &Path, redis: Option<&str>, extra: &[&str]) -> Serve {
        let port = rl_harness::free_port().unwrap();
        let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
        let log = config.with_file_name(format!("serve-{port}.log"));
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_rl-serve"));
        cmd.arg("--config")
            .arg(config)
            .arg("--listen")
            .arg(addr.to_string())
            .arg("--reload-ms")
            .arg("100")
            .args(extra)
            .env("RL_LOG", "debug")
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap());
        if let Some(r) = redis {
            cmd.arg("--redis").arg(r);
        }
        let child = cmd.spawn().expect("start rl-serve");
        let s = Serve { child, addr, log };
        let deadline = Instant::now() + Duration::from_secs(10);
        while std::net::TcpStream::connect(addr).is_err() {
            assert!(
                Instant::now() < deadline,
                "rl-serve did not listen:\n{}",
                s.log()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        s
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    pub fn signal(&self, sig: libc::c_int) {
        rl_harness::process::signal(self.child.id(), sig).unwrap();
    }

    /// Waits for the process to exit on its own; its exit status.
    pub fn wait_exit(&mut self, within: Duration) -> Option<std::process::ExitStatus> {
        let deadline = Instant::now() + within;
        loop {
            if let Some(s) = self.child.try_wait().unwrap() {
                return Some(s);
            }
            if Instant::now() > deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        if self.child.try_wait().ok().flatten().is_none() {
            let _ = rl_harness::process::signal(self.child.id(), libc::SIGTERM);
            if self.wait_exit(Duration::from_secs(5)).is_none() {
                let _ = self.child.kill();
                let _ = self.child.wait();
            }
        }
    }
}

pub type HttpClient = Client<HttpConnector, Full<Bytes>>;

pub fn client() -> HttpClient {
    Client::builder(TokioExecutor::new())
        .pool_max_idle_per_host(256)
        .build_http()
}

/// One answer, whole.
#[derive(Debug)]
pub struct Answer {
    pub status: u16,
    pub headers: http::HeaderMap,
    pub body: String,
}

impl Answer {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }
}

pub async fn get(c: &HttpClient, url: &str, headers: &[(&str, &str)]) -> Result<Answer, String> {
    let mut b = http::Request::get(url);
    for (k, v) in headers {
        b = b.header(*k, *v);
    }
    let resp = c
        .request(b.body(Full::new(Bytes::new())).unwrap())
        .await
        .map_err(|e| format!("{e:?}"))?;
    let (parts, body) = resp.into_parts();
    let body = body.collect().await.map_err(|e| e.to_string())?.to_bytes();
    Ok(Answer {
        status: parts.status.as_u16(),
        headers: parts.headers,
        body: String::from_utf8_lossy(&body).into_owned(),
    })
}

/// A trivial upstream: answers 200 `hello` (after `?sleep_ms=N` ms when asked), recording when
/// each request reached it on its own clock, and the decision time it carried (`RL-Decided-At`,
/// Unix ms on Redis's clock; `None` without one) in the same order.
pub struct Upstream {
    pub addr: SocketAddr,
    pub arrivals: Arc<Mutex<Vec<Instant>>>,
    pub decided: Arc<Mutex<Vec<Option<u64>>>>,
}

impl Upstream {
    pub async fn start() -> Upstream {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let arrivals: Arc<Mutex<Vec<Instant>>> = Arc::default();
        let decided: Arc<Mutex<Vec<Option<u64>>>> = Arc::default();
        let (rec, dec) = (arrivals.clone(), decided.clone());
        tokio::spawn(async move {
            loop {
                let Ok((s, _)) = listener.accept().await else {
                    continue;
                };
                let (rec, dec) = (rec.clone(), dec.clone());
                tokio::spawn(async move {
                    let svc = hyper::service::service_fn(move |req: hyper::Request<_>| {
                        let (rec, dec) = (rec.clone(), dec.clone());
                        async move {
                            let t = req
                                .headers()
                                .get("rl-decided-at")
                                .and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
                            {
                                // One lock for both, so the two lists stay in step.
                                let mut r = rec.lock().unwrap();
                                r.push(Instant::now());
                                dec.lock().unwrap().push(t);
                            }
                            let ms = req
                                .uri()
                                .query()
                                .and_then(|q| q.strip_prefix("sleep_ms="))
                                .and_then(|v| v.parse::<u64>().ok());
                            if let Some(ms) = ms {
                                tokio::time::sleep(Duration::from_millis(ms)).await;
                            }
                            Ok::<_, Infallible>(hyper::Response::new(Full::new(Bytes::from(
                                format!("hello {}", req.uri().path()),
                            ))))
                        }
                    });
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(s), svc)
                        .await;
                });
            }
        });
        Upstream {
            addr,
            arrivals,
            decided,
        }
    }

    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub fn count(&self) -> usize {
        self.arrivals.lock().unwrap().len()
    }
}

/// The most arrivals in any span of `span` (timestamps sorted).
pub fn most_in_any(times: &[Instant], span: Duration) -> usize {
    let mut t = times.to_vec();
    t.sort();
    let (mut best, mut lo) = (0, 0);
    for hi in 0..t.len() {
        while t[hi].duration_since(t[lo]) >= span {
            lo += 1;
        }
        best = best.max(hi - lo + 1);
    }
    best
}

/// The most decision times (ms) in any span of `span_ms`: at most the limit if the limiter is
/// exact on its own clock.
pub fn most_in_any_ms(times: &[u64], span_ms: u64) -> usize {
    let mut t = times.to_vec();
    t.sort_unstable();
    let (mut best, mut lo) = (0, 0);
    for hi in 0..t.len() {
        while t[hi] - t[lo] >= span_ms {
            lo += 1;
        }
        best = best.max(hi - lo + 1);
    }
    best
}
