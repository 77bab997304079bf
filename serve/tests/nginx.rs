//! A real nginx (Debian's package, `scripts/ensure-deps.sh`) with `auth_request` asking
//! `rl serve`'s check endpoint, in front of a small upstream: over-limit requests get 429 from
//! nginx with the IETF fields and `Retry-After`, and the upstream, counting on its own clock,
//! never gets more than the limit in any window.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{client, get, most_in_any, most_in_any_ms, scratch, write_atomic, Serve, Upstream};
use rl_harness::RedisServer;

fn nginx_binary() -> PathBuf {
    let found = std::env::var_os("PATH")
        .map(|p| {
            std::env::split_paths(&p)
                .map(|d| d.join("nginx"))
                .collect::<Vec<_>>()
        })
        .unwrap_or_default()
        .into_iter()
        .chain([PathBuf::from("/usr/sbin/nginx")])
        .find(|p| p.is_file());
    found.expect("nginx is not installed: run scripts/ensure-deps.sh (Debian's nginx package)")
}

/// nginx in the foreground on its own config; stopped (SIGQUIT, then killed) when dropped.
struct Nginx {
    child: Child,
    dir: PathBuf,
}

impl Drop for Nginx {
    fn drop(&mut self) {
        let _ = rl_harness::process::signal(self.child.id(), libc::SIGQUIT);
        let deadline = Instant::now() + Duration::from_secs(5);
        while self.child.try_wait().ok().flatten().is_none() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start_nginx(
    dir: &Path,
    port: u16,
    rl: std::net::SocketAddr,
    app: std::net::SocketAddr,
) -> Nginx {
    let d = dir.display();
    std::fs::create_dir_all(dir.join("tmp")).unwrap();
    let conf = format!(
        r#"
daemon off;
worker_processes 1;
pid {d}/nginx.pid;
error_log {d}/error.log warn;
events {{ worker_connections 1024; }}
http {{
  access_log off;
  client_body_temp_path {d}/tmp/body;
  proxy_temp_path {d}/tmp/proxy;
  fastcgi_temp_path {d}/tmp/fastcgi;
  uwsgi_temp_path {d}/tmp/uwsgi;
  scgi_temp_path {d}/tmp/scgi;
  upstream rl {{ server {rl}; keepalive 32; }}
  upstream app {{ server {app}; keepalive 32; }}
  server {{
    listen 127.0.0.1:{port};
    location = /_rl {{
      internal;
      # auth_request passes only 2xx, 401 and 403 on: ask rl serve for 403 on a denial.
      proxy_pass http://rl/check?deny_status=403;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_pass_request_body off;
      proxy_set_header Content-Length "";
      proxy_set_header X-Original-URI $request_uri;
      proxy_set_header X-Original-Method $request_method;
      proxy_set_header X-Real-IP $remote_addr;
    }}
    location / {{
      auth_request /_rl;
      auth_request_set $rl_policy $upstream_http_ratelimit_policy;
      auth_request_set $rl_state $upstream_http_ratelimit;
      auth_request_set $rl_retry $upstream_http_retry_after;
      auth_request_set $rl_decided_at $upstream_http_rl_decided_at;
      add_header RateLimit-Policy $rl_policy always;
      add_header RateLimit $rl_state always;
      error_page 403 = @over_limit;
      proxy_pass http://app;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      # The decision's Redis time, for the upstream (replaces any the client sent).
      proxy_set_header RL-Decided-At $rl_decided_at;
    }}
    location @over_limit {{
      add_header RateLimit-Policy $rl_policy always;
      add_header RateLimit $rl_state always;
      add_header Retry-After $rl_retry always;
      default_type application/problem+json;
      return 429 '{{"type":"https://iana.org/assignments/http-problem-types#quota-exceeded","title":"Too Many Requests","status":429}}';
    }}
  }}
}}
"#
    );
    let path = dir.join("nginx.conf");
    std::fs::write(&path, conf).unwrap();
    let child = Command::new(nginx_binary())
        .arg("-p")
        .arg(dir)
        .arg("-c")
        .arg(&path)
        .arg("-e")
        .arg(dir.join("error.log"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start nginx");
    let n = Nginx {
        child,
        dir: dir.to_path_buf(),
    };
    let deadline = Instant::now() + Duration::from_secs(10);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            Instant::now() < deadline,
            "nginx did not listen: {}",
            std::fs::read_to_string(n.dir.join("error.log")).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    n
}

#[tokio::test(flavor = "multi_thread")]
async fn nginx_auth_request_denies_over_the_limit_and_the_upstream_gets_at_most_it() {
    let redis = RedisServer::start().unwrap();
    let up = Upstream::start().await;
    let dir = scratch("nginx");
    let cfg = dir.join("p.yaml");
    let (limit, window_ms) = (15u64, 1000u64);
    write_atomic(
        &cfg,
        &format!(
            r#"
domain: edge
http:
  trusted_proxies: ["127.0.0.1"]
  rate_limits:
    - actions:
        - remote_address: {{}}
        - request_headers: {{header_name: ":path", descriptor_key: path}}
descriptors:
  - key: remote_address
    descriptors:
      - key: path
        value: /api/*
        rate_limit: {{window_ms: {window_ms}, requests_per_unit: {limit}, name: api-per-ip}}
"#
        ),
    );
    // Exactness is Redis's: the local fallback is off (see http.rs).
    let serve = Serve::start(
        &cfg,
        Some(&redis.url()),
        &["-o", "local_fallback=false", "--decision-time-header"],
    );
    let port = rl_harness::free_port().unwrap();
    let _nginx = start_nginx(&dir, port, serve.addr, up.addr);
    let c = client();
    let url = format!("http://127.0.0.1:{port}/api/order/create");
    // Outside /api/ no limit applies: nginx passes it, without fields.
    let a = get(
        &c,
        &format!("http://127.0.0.1:{port}/static"),
        &[("RL-Decided-At", "1")],
    )
    .await
    .unwrap();
    assert_eq!((a.status, a.body.as_str()), (200, "hello /static"));
    // Nothing was decided, so no time is passed on, and the client's is not either.
    assert_eq!(up.decided.lock().unwrap().last(), Some(&None));
    let arrivals_before = up.count();

    let (ok, denied) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let run = Duration::from_millis(3000);
    let start = Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..16 {
        let (c, url, ok, denied) = (c.clone(), url.clone(), ok.clone(), denied.clone());
        tasks.push(tokio::spawn(async move {
            while start.elapsed() < run {
                let a = get(&c, &url, &[("RL-Decided-At", "1")])
                    .await
                    .expect("nginx answers");
                let policy = a.header("ratelimit-policy").expect("RateLimit-Policy");
                assert_eq!(policy, format!("\"api-per-ip\";q={limit};w=1"));
                let list: sfv::List = sfv::Parser::new(a.header("ratelimit").unwrap())
                    .parse_list()
                    .expect("RateLimit is an RFC 9651 list");
                assert_eq!(list.len(), 1);
                match a.status {
                    200 => {
                        assert_eq!(a.body, "hello /api/order/create");
                        ok.fetch_add(1, Ordering::Relaxed);
                    }
                    429 => {
                        let retry: u64 = a.header("retry-after").unwrap().parse().unwrap();
                        assert_eq!(retry, 1, "{a:?}");
                        assert!(a.body.contains("quota-exceeded"), "{a:?}");
                        denied.fetch_add(1, Ordering::Relaxed);
                    }
                    s => panic!("nginx answered {s}: {a:?}"),
                }
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    let (ok, denied) = (ok.load(Ordering::Relaxed), denied.load(Ordering::Relaxed));
    let arrivals: Vec<Instant> = up.arrivals.lock().unwrap()[arrivals_before..].to_vec();
    assert_eq!(
        arrivals.len(),
        ok,
        "the upstream got exactly what nginx admitted"
    );
    assert!(
        denied > ok,
        "the load must exceed the limit: {ok} ok, {denied} denied"
    );
    // Exactness on the decisions' own clock, zero slack: nginx passed each admitted request's
    // Redis decision time (from /check's RL-Decided-At) on to the upstream.
    let decided: Vec<u64> = up.decided.lock().unwrap()[arrivals_before..]
        .iter()
        .map(|t| t.expect("every admitted request carries RL-Decided-At"))
        .collect();
    assert!(
        decided.iter().all(|t| *t > 1_600_000_000_000),
        "Redis's Unix ms, not the client's header: {:?}",
        &decided[..decided.len().min(5)]
    );
    let most = most_in_any_ms(&decided, window_ms);
    assert!(
        most as u64 <= limit,
        "{most} decisions in one {window_ms} ms window; limit {limit}"
    );
    // Arrivals are stamped on the upstream's clock, after nginx's queueing: the looser check
    // allows them 100 ms.
    let most_arrived = most_in_any(&arrivals, Duration::from_millis(window_ms - 100));
    println!(
        "most in any {window_ms} ms: {most} by decision time; {most_arrived} arrivals in {} ms",
        window_ms - 100
    );
    assert!(
        most_arrived as u64 <= limit,
        "{most_arrived} arrivals in one window less 100 ms; limit {limit}"
    );
    let windows = run.as_millis() as u64 / window_ms;
    assert!(
        ok as u64 >= (windows - 1) * limit,
        "{ok} admitted in {windows} windows"
    );
}
