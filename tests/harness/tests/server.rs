//! The library against a real redis-server.

use std::net::TcpStream;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::time::Duration;

use rl_harness::process::is_alive;
use rl_harness::{Deployment, RedisServer, RespValue, ServerOptions, Topology};

fn refuses_connections(server: &RedisServer) -> bool {
    TcpStream::connect_timeout(&server.addr(), Duration::from_millis(500)).is_err()
}

#[test]
fn start_answers_ping_and_stop_frees_port_and_pid() {
    let mut server = RedisServer::start().unwrap();
    server.ping(Duration::from_secs(2)).unwrap();
    assert!(is_alive(server.pid()));
    assert_eq!(
        server.url(),
        format!("redis://127.0.0.1:{}/", server.port())
    );
    let dir = server.dir().to_path_buf();
    assert!(dir
        .file_name()
        .unwrap()
        .to_string_lossy()
        .starts_with("rl-redis-"));
    assert!(dir.join("redis.log").exists());

    server.stop().unwrap();
    assert!(refuses_connections(&server));
    assert!(!is_alive(server.pid()));
    assert!(!dir.exists());
    server.stop().unwrap(); // idempotent
}

#[test]
fn drop_during_panic_stops_the_server() {
    let mut seen = None;
    let result = catch_unwind(AssertUnwindSafe(|| {
        let server = RedisServer::start().unwrap();
        seen = Some((server.port(), server.pid(), server.dir().to_path_buf()));
        panic!("test failure while the server is up");
    }));
    assert!(result.is_err());
    let (port, pid, dir) = seen.unwrap();
    assert!(TcpStream::connect(("127.0.0.1", port)).is_err());
    assert!(!is_alive(pid));
    assert!(!dir.exists());
}

#[test]
fn concurrent_servers_get_different_ports() {
    let a = RedisServer::start().unwrap();
    let b = RedisServer::start().unwrap();
    assert_ne!(a.port(), b.port());
    assert_ne!(a.dir(), b.dir());
    a.ping(Duration::from_secs(2)).unwrap();
    b.ping(Duration::from_secs(2)).unwrap();
}

#[test]
fn freeze_makes_ping_time_out_and_thaw_recovers() {
    let mut server = RedisServer::start().unwrap();
    server.freeze().unwrap();
    let err = server.ping(Duration::from_millis(200)).unwrap_err();
    assert!(
        matches!(
            err.kind(),
            std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
        ),
        "{err:?}"
    );
    server.thaw().unwrap();
    server.ping(Duration::from_secs(2)).unwrap();
}

#[test]
fn drop_stops_a_frozen_server() {
    let mut server = RedisServer::start().unwrap();
    server.freeze().unwrap();
    let pid = server.pid();
    drop(server);
    assert!(!is_alive(pid));
}

#[test]
fn restart_after_kill_comes_back_on_the_same_port() {
    let mut server = RedisServer::start().unwrap();
    let (port, old_pid) = (server.port(), server.pid());
    server.command(&[b"SET", b"k", b"v"]).unwrap();

    server.kill().unwrap();
    assert!(!is_alive(old_pid));
    assert!(refuses_connections(&server));
    assert!(server.ping(Duration::from_millis(200)).is_err());

    server.restart().unwrap();
    assert_eq!(server.port(), port);
    assert_ne!(server.pid(), old_pid);
    server.ping(Duration::from_secs(2)).unwrap();
    // Persistence is off, so the restarted server starts empty.
    assert_eq!(server.command(&[b"DBSIZE"]).unwrap(), RespValue::Integer(0));
}

#[test]
fn command_round_trips_set_get_dbsize() {
    let server = RedisServer::start().unwrap();
    assert_eq!(
        server.command(&[b"SET", b"key", b"va\r\nl"]).unwrap(),
        RespValue::Simple("OK".into())
    );
    assert_eq!(
        server.command(&[b"GET", b"key"]).unwrap(),
        RespValue::Bulk(b"va\r\nl".to_vec())
    );
    assert_eq!(
        server.command(&[b"GET", b"missing"]).unwrap(),
        RespValue::Nil
    );
    assert_eq!(server.command(&[b"DBSIZE"]).unwrap().as_int(), Some(1));
    assert_eq!(
        server.command(&[b"KEYS", b"*"]).unwrap(),
        RespValue::Array(vec![RespValue::Bulk(b"key".to_vec())])
    );
    assert!(server.command(&[b"INCR", b"key"]).unwrap().is_error());
}

#[test]
fn extra_args_reach_the_server() {
    let server =
        RedisServer::start_with(ServerOptions::default().args(["--maxmemory", "1mb"])).unwrap();
    let reply = server.command(&[b"CONFIG", b"GET", b"maxmemory"]).unwrap();
    assert_eq!(
        reply,
        RespValue::Array(vec![
            RespValue::Bulk(b"maxmemory".to_vec()),
            RespValue::Bulk(b"1048576".to_vec())
        ])
    );
}

#[test]
fn requirepass_is_enforced_and_in_the_url() {
    let server = RedisServer::start_with(ServerOptions::default().requirepass("p@ss")).unwrap();
    assert_eq!(
        server.url(),
        format!("redis://:p%40ss@127.0.0.1:{}/", server.port())
    );
    assert_eq!(server.command(&[b"DBSIZE"]).unwrap(), RespValue::Integer(0));
    let mut anonymous =
        rl_harness::Connection::open(server.addr(), None, Duration::from_secs(2)).unwrap();
    let reply = anonymous.command(&[b"DBSIZE"]).unwrap();
    assert!(
        matches!(reply, RespValue::Error(ref e) if e.starts_with("NOAUTH")),
        "{reply:?}"
    );
}

#[test]
fn startup_failure_reports_the_log() {
    let err =
        RedisServer::start_with(ServerOptions::default().arg("--no-such-directive")).unwrap_err();
    let msg = err.to_string();
    assert!(
        msg.contains("exited during startup") && msg.contains("no-such-directive"),
        "{msg}"
    );
}

#[test]
fn standalone_deployment_exports_its_entry_server() {
    let mut deployment = Deployment::start(Topology::Standalone, ServerOptions::default()).unwrap();
    assert_eq!(deployment.servers().len(), 1);
    let entry = deployment.entry();
    let env = deployment.env();
    assert!(env.contains(&(rl_harness::ENV_URL, entry.url())));
    assert!(env.contains(&(rl_harness::ENV_PORT, entry.port().to_string())));
    assert!(env.contains(&(rl_harness::ENV_PID, entry.pid().to_string())));
    let pid = entry.pid();
    deployment.stop().unwrap();
    assert!(!is_alive(pid));
}
