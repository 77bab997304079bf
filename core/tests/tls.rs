//! TLS against a real redis-server with a TLS listener and throwaway certificates
//! (`rl_harness::TlsFiles`): a private CA and a client certificate, named in the URL.

mod common;

use std::time::{Duration, Instant};

use common::*;
use rl_core::blocking::Limiter;
use rl_core::{ErrorKind, Mode, Options};
use rl_harness::{free_port, RedisServer, ServerOptions, TlsFiles};

struct TlsServer {
    server: RedisServer,
    files: TlsFiles,
    port: u16,
}

fn tls_server() -> TlsServer {
    let files = TlsFiles::generate().unwrap();
    let port = free_port().unwrap();
    let server =
        RedisServer::start_with(ServerOptions::default().args(files.server_args(port))).unwrap();
    TlsServer {
        server,
        files,
        port,
    }
}

/// `url` with the CA and the client certificate of `files`.
fn with_certs(url: &str, files: &TlsFiles) -> String {
    format!(
        "{url}?tls_ca={}&tls_cert={}&tls_key={}",
        files.ca().display(),
        files.client_cert().display(),
        files.client_key().display()
    )
}

/// Connections on `server` accepted on `port` (a TLS port; the harness talks on the plain one).
fn clients_on(server: &RedisServer, port: u16) -> Vec<Vec<String>> {
    let laddr = format!("laddr=127.0.0.1:{port}");
    client_list(server)
        .into_iter()
        .filter(|c| c.contains(&laddr))
        .collect()
}

impl TlsServer {
    fn url(&self, query: &str) -> String {
        format!("rediss://127.0.0.1:{}/{query}", self.port)
    }

    fn full_url(&self) -> String {
        with_certs(&self.url(""), &self.files)
    }

    fn tls_clients(&self) -> usize {
        clients_on(&self.server, self.port).len()
    }
}

#[test]
fn a_private_ca_and_a_client_certificate_from_the_url_decide_over_tls() {
    let s = tls_server();
    let l = Limiter::open(Some(&s.full_url()), Options::default()).unwrap();
    for i in 1..=3 {
        let d = l.acquire("tls", 3, 60_000, 1).unwrap();
        assert_eq!((d.allowed, d.used, d.mode), (true, i, Mode::Normal));
    }
    assert!(
        !l.acquire("tls", 3, 60_000, 1).unwrap().allowed,
        "the limit holds over TLS too"
    );
    assert!(s.tls_clients() >= 1, "no connection on the TLS port");
    assert_eq!(
        s.server
            .command(&[b"EXISTS", &l.redis_key("tls")])
            .unwrap()
            .as_int(),
        Some(1)
    );
    // The heartbeat and probes share the connection.
    wait_until("a heartbeat over TLS", Duration::from_secs(3), || {
        l.stats().instances == 1
    });
}

/// A certificate or handshake failure is a misconfiguration, like a wrong password: the caller
/// gets `Backend`, even with the local fallback on (an outage would be decided locally instead,
/// which would hide the mistake behind local decisions for good).
#[track_caller]
fn refused_as_misconfiguration(what: &str, url: &str) {
    let l = Limiter::open(Some(url), Options::default()).unwrap();
    let started = Instant::now();
    let r = l.acquire("tls", 3, 60_000, 1);
    let e = r
        .as_ref()
        .err()
        .unwrap_or_else(|| panic!("{what}: decided anyway: {r:?}"));
    assert_eq!(e.kind(), ErrorKind::Backend, "{what}: {e}");
    assert!(
        started.elapsed() < Options::default().request_timeout + Duration::from_millis(500),
        "{what}: {:?}",
        started.elapsed()
    );
    assert_eq!(l.stats().decisions_local, 0, "{what}: {:?}", l.stats());
}

#[test]
fn without_the_ca_or_the_client_certificate_the_handshake_fails_as_a_misconfiguration() {
    let s = tls_server();
    let ca = s.files.ca().display().to_string();
    refused_as_misconfiguration(
        "public roots only: the server's issuer is unknown",
        &s.url(""),
    );
    refused_as_misconfiguration(
        "no client certificate: the server requires one",
        &s.url(&format!("?tls_ca={ca}")),
    );
    refused_as_misconfiguration(
        "a name the certificate does not cover",
        &format!("rediss://localhost:{}/?tls_ca={ca}", s.port),
    );
    assert_eq!(dbsize(&s.server), 0, "nothing was written");
}

#[test]
fn bad_tls_parameters_are_refused_when_the_limiter_opens() {
    let s = tls_server();
    let plain = format!(
        "redis://127.0.0.1:{}/?tls_ca={}",
        s.server.port(),
        s.files.ca().display()
    );
    for (url, says) in [
        (s.url("?tls_ca=/nonexistent/ca.pem"), "/nonexistent/ca.pem"),
        (
            s.url(&format!("?tls_cert={}", s.files.client_cert().display())),
            "go together",
        ),
        (plain, "rediss://"),
        (
            format!("rediss+cluster://127.0.0.1:{}?tls_ca=", s.port),
            "`tls_ca` needs a file path",
        ),
        (
            "redis+sentinel://127.0.0.1:1/m?db=2".to_string(),
            "no query parameters",
        ),
    ] {
        let e = Limiter::open(Some(&url), Options::default()).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{url}: {e}");
        assert!(e.to_string().contains(says), "{url}: {e}");
    }
}

#[test]
fn a_tls_cluster_decides_on_every_master_with_the_urls_certificates() {
    let files = TlsFiles::generate().unwrap();
    let cluster = rl_harness::Cluster::start_tls(&files).unwrap();
    let url = with_certs(&cluster.url(), &files);
    assert!(url.starts_with("rediss+cluster://"), "{url}");
    let l = Limiter::open(Some(&url), Options::default()).unwrap();
    let mut per_node = [0usize; 3];
    for i in 0..60 {
        let key = format!("tls-{i}");
        let d = l.acquire(&key, 10, 60_000, 1).unwrap();
        assert_eq!((d.mode, d.used), (Mode::Normal, 1), "{key}");
        let owner = cluster.key_owner(&l.redis_key(&key)).unwrap();
        assert_eq!(
            cluster.nodes()[owner]
                .command(&[b"EXISTS", &l.redis_key(&key)])
                .unwrap()
                .as_int(),
            Some(1)
        );
        per_node[owner] += 1;
    }
    assert!(
        per_node.iter().all(|&c| c > 0),
        "keys on every master: {per_node:?}"
    );
    for (i, node) in cluster.nodes().iter().enumerate() {
        assert!(
            !clients_on(node, cluster.tls_port(i).unwrap()).is_empty(),
            "no client connection on node {i}'s TLS port"
        );
    }
    // The background task works over TLS: the heartbeat, then the primaries check, which asks
    // every master for its run id by address, so INFO is the last command on each node's TLS
    // connection for a while (the harness itself only uses the plain ports).
    wait_until("a heartbeat over TLS", Duration::from_secs(3), || {
        l.stats().instances == 1
    });
    wait_until(
        "INFO asked of every master over TLS",
        Duration::from_secs(5),
        || {
            cluster.nodes().iter().enumerate().all(|(i, node)| {
                clients_on(node, cluster.tls_port(i).unwrap())
                    .iter()
                    .any(|c| c.iter().any(|f| f == "cmd=info"))
            })
        },
    );
    assert_eq!(l.stats().redis_errors, 0, "{:?}", l.stats());
    refused_as_misconfiguration("Cluster, public roots only", &cluster.url());
}

#[test]
fn a_tls_sentinel_trio_leads_to_the_primary_with_the_urls_certificates() {
    let files = TlsFiles::generate().unwrap();
    let trio = rl_harness::SentinelTrio::start_tls(&files).unwrap();
    let url = with_certs(&trio.url(), &files);
    assert!(url.starts_with("rediss+sentinel://"), "{url}");
    let l = Limiter::open(Some(&url), Options::default()).unwrap();
    for i in 1..=3 {
        let d = l.acquire("tls", 10, 60_000, 1).unwrap();
        assert_eq!((d.mode, d.used), (Mode::Normal, i));
    }
    assert_eq!(
        trio.primary()
            .command(&[b"EXISTS", &l.redis_key("tls")])
            .unwrap()
            .as_int(),
        Some(1)
    );
    // The Sentinels were asked over TLS, and named the primary's TLS port, which the limiter used.
    let on_tls = clients_on(trio.primary(), trio.tls_port(0).unwrap());
    // Sentinels (named `sentinel-...`) and the replica (`cmd=replconf`) connect there too; the
    // limiter's connection last sent a decision (FCALL), a heartbeat (EVALSHA) or its primary
    // check (INFO).
    let ours = |c: &Vec<String>| {
        !c.iter().any(|f| f.starts_with("name=sentinel-"))
            && c.iter()
                .any(|f| f == "cmd=fcall" || f == "cmd=evalsha" || f == "cmd=info")
    };
    assert!(
        on_tls.iter().any(ours),
        "no decision arrived on the primary's TLS port: {on_tls:?}"
    );
    wait_until("a heartbeat over TLS", Duration::from_secs(3), || {
        l.stats().instances == 1
    });
    refused_as_misconfiguration("Sentinel, public roots only", &trio.url());
}
