//! Shared helpers for the core's integration tests: a real redis-server per test (from
//! `rl-harness`), limiters on it, and a look at its keyspace.
#![allow(dead_code)]

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use rl_core::{blocking, Clock, Limiter, Options};
use rl_harness::{RedisServer, RespValue};

pub fn server() -> RedisServer {
    RedisServer::start().expect("start redis-server (apt-get install redis-server)")
}

pub fn limiter(server: &RedisServer) -> Limiter {
    Limiter::open(Some(&server.url()), Options::default()).unwrap()
}

pub fn limiter_with(server: &RedisServer, options: Options) -> Limiter {
    Limiter::open(Some(&server.url()), options).unwrap()
}

pub fn blocking_with(server: &RedisServer, options: Options) -> blocking::Limiter {
    blocking::Limiter::open(Some(&server.url()), options).unwrap()
}

/// Options that decide on `clock` instead of Redis TIME, with a skew allowance wide enough for
/// a test clock that runs ahead of real time.
pub fn client_clock(clock: Arc<dyn Clock>) -> Options {
    Options { clock: Some(clock), max_clock_skew_ms: 3_600_000, ..Options::default() }
}

pub fn wall_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_millis() as u64
}

pub fn cmd(server: &RedisServer, args: &[&[u8]]) -> RespValue {
    server.command(args).expect("redis command")
}

pub fn dbsize(server: &RedisServer) -> i64 {
    cmd(server, &[b"DBSIZE"]).as_int().unwrap()
}

pub fn keys(server: &RedisServer) -> Vec<Vec<u8>> {
    match cmd(server, &[b"KEYS", b"*"]) {
        RespValue::Array(items) => items.iter().map(|v| v.as_bytes().unwrap().to_vec()).collect(),
        other => panic!("KEYS: {other:?}"),
    }
}

pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap()
}

pub const SHORT: Duration = Duration::from_millis(200);
