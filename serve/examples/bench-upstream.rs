//! The benchmark's trivial upstream (`serve/bench/run.sh`): answers 200 `ok` to everything and
//! stamps each arrival on its own clock, so the run can count what the gateway let through per
//! window, and keeps the decision time each request carried (`RL-Decided-At`, Redis's Unix ms,
//! from `rl serve --decision-time-header`), so it can also count per window on the decisions'
//! own clock, where queueing between the decision and the arrival cannot blur a window's edge.
//! `GET /_stats?window_ms=W&slack_ms=S&windows=K` answers `count most_in_any_W
//! most_in_any_W_minus_S count_in_the_first_K_windows most_decided_in_any_W with_decision_time`
//! (windows counted from the first arrival) and forgets the arrivals.
//!
//! Usage: `bench-upstream PORT [reuse-port]`; with `reuse-port` several processes can share PORT
//! (the run's control rows: the bare upstream with as many processes as rl serve has, so the
//! machine's own floor under the same process count is measured alongside).

use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use bytes::Bytes;
use http_body_util::Full;
use hyper_util::rt::TokioIo;

fn most_in_any(t: &mut [u64], span_us: u64) -> usize {
    t.sort_unstable();
    let (mut best, mut lo) = (0, 0);
    for hi in 0..t.len() {
        while t[hi] - t[lo] >= span_us {
            lo += 1;
        }
        best = best.max(hi - lo + 1);
    }
    best
}

fn param(q: &str, name: &str) -> u64 {
    q.split('&')
        .find_map(|kv| kv.strip_prefix(name)?.strip_prefix('='))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

#[tokio::main]
async fn main() {
    let port: u16 = std::env::args()
        .nth(1)
        .and_then(|p| p.parse().ok())
        .expect("usage: bench-upstream PORT [reuse-port]");
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    if std::env::args().nth(2).as_deref() == Some("reuse-port") {
        socket.set_reuseport(true).unwrap();
    }
    socket.bind(([127, 0, 0, 1], port).into()).unwrap();
    let listener = socket.listen(1024).unwrap();
    let start = Instant::now();
    let arrivals: Arc<Mutex<Vec<u64>>> = Arc::default();
    let decided: Arc<Mutex<Vec<u64>>> = Arc::default();
    loop {
        let Ok((s, _)) = listener.accept().await else {
            continue;
        };
        let _ = s.set_nodelay(true);
        let (arrivals, decided) = (arrivals.clone(), decided.clone());
        tokio::spawn(async move {
            let svc = hyper::service::service_fn(move |req: hyper::Request<_>| {
                let (arrivals, decided) = (arrivals.clone(), decided.clone());
                async move {
                    let body = if req.uri().path() == "/_stats" {
                        let q = req.uri().query().unwrap_or("");
                        let w = param(q, "window_ms") * 1000;
                        let slack = param(q, "slack_ms") * 1000;
                        let mut t = std::mem::take(&mut *arrivals.lock().unwrap());
                        let most = most_in_any(&mut t, w.max(1));
                        let most_slack = most_in_any(&mut t, w.saturating_sub(slack).max(1));
                        let first = t.first().copied().unwrap_or(0);
                        let k = param(q, "windows") * w;
                        let in_k = t.iter().filter(|x| **x - first < k).count();
                        let mut d = std::mem::take(&mut *decided.lock().unwrap());
                        let most_decided = most_in_any(&mut d, (w / 1000).max(1));
                        format!(
                            "{} {most} {most_slack} {in_k} {most_decided} {}\n",
                            t.len(),
                            d.len()
                        )
                    } else {
                        let us = start.elapsed().as_micros() as u64;
                        arrivals.lock().unwrap().push(us);
                        let t = req.headers().get("rl-decided-at");
                        if let Some(ms) = t.and_then(|v| v.to_str().ok()?.parse::<u64>().ok()) {
                            decided.lock().unwrap().push(ms);
                        }
                        "ok\n".to_string()
                    };
                    Ok::<_, Infallible>(hyper::Response::new(Full::new(Bytes::from(body))))
                }
            });
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(s), svc)
                .await;
        });
    }
}
