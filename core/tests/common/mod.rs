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

/// Options without the local fallback: suites that check Redis's exact decisions must not have a
/// busy test machine send a call to the fallback (which `resilience.rs` tests on its own).
pub fn strict() -> Options {
    Options {
        local_fallback: false,
        ..Options::default()
    }
}

/// A limiter on `server` with [`strict`] options.
pub fn limiter(server: &RedisServer) -> Limiter {
    Limiter::open(Some(&server.url()), strict()).unwrap()
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
    Options {
        clock: Some(clock),
        max_clock_skew_ms: 3_600_000,
        ..strict()
    }
}

pub fn wall_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

pub fn cmd(server: &RedisServer, args: &[&[u8]]) -> RespValue {
    server.command(args).expect("redis command")
}

/// Numbers as the window script's arguments carry them: big-endian doubles, one after the other.
pub fn pack(v: &[f64]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_be_bytes()).collect()
}

/// Loads the window script's Functions library, as rl-core does, for tests that FCALL it.
pub fn load_library(server: &RedisServer) {
    cmd(
        server,
        &[
            b"FUNCTION",
            b"LOAD",
            b"REPLACE",
            rl_core::SLIDING_WINDOW_LIBRARY.code.as_bytes(),
        ],
    );
}

pub fn dbsize(server: &RedisServer) -> i64 {
    cmd(server, &[b"DBSIZE"]).as_int().unwrap()
}

/// Whether `k` is an admission's retry record, `<window key>:r:<16-byte call id>` (README: Retry),
/// not a window.
pub fn is_retry_record(k: &[u8]) -> bool {
    k.len() > 19 && &k[k.len() - 19..k.len() - 16] == b":r:" && k[..k.len() - 19].ends_with(b"}")
}

/// The keys that hold windows (or leases): every key but the short-lived retry records.
pub fn window_keys(server: &RedisServer) -> Vec<Vec<u8>> {
    keys(server)
        .into_iter()
        .filter(|k| !is_retry_record(k))
        .collect()
}

pub fn keys(server: &RedisServer) -> Vec<Vec<u8>> {
    match cmd(server, &[b"KEYS", b"*"]) {
        RespValue::Array(items) => items
            .iter()
            .map(|v| v.as_bytes().unwrap().to_vec())
            .collect(),
        other => panic!("KEYS: {other:?}"),
    }
}

pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

pub const SHORT: Duration = Duration::from_millis(200);

/// One decision of a simulated fleet: who asked, when, how long it took and what came back.
#[derive(Debug, Clone)]
pub struct Record {
    pub instance: usize,
    pub started: std::time::Instant,
    pub latency: Duration,
    pub result: Result<rl_core::Decision, rl_core::Error>,
}

impl Record {
    pub fn done(&self) -> std::time::Instant {
        self.started + self.latency
    }
    pub fn mode(&self) -> Option<rl_core::Mode> {
        self.result.as_ref().ok().map(|d| d.mode)
    }
    pub fn admitted(&self) -> Option<(u64, u64)> {
        match &self.result {
            Ok(d) if d.allowed => Some((d.now_ms, 1)),
            _ => None,
        }
    }
}

/// Offers `rate` acquires per second per limiter on `key` for `duration`, open loop (a slow call
/// does not slow the offered load), and returns every decision.
pub async fn drive(
    limiters: &[Limiter],
    key: &str,
    limit: u64,
    window_ms: u64,
    rate: u64,
    duration: Duration,
) -> Vec<Record> {
    drive_at(
        limiters,
        &vec![rate; limiters.len()],
        key,
        limit,
        window_ms,
        duration,
    )
    .await
}

/// [`drive`] with its own rate per limiter (`rates[i]` for limiter `i`): uneven load.
pub async fn drive_at(
    limiters: &[Limiter],
    rates: &[u64],
    key: &str,
    limit: u64,
    window_ms: u64,
    duration: Duration,
) -> Vec<Record> {
    let out = Arc::new(std::sync::Mutex::new(Vec::new()));
    let mut tasks = Vec::new();
    for (i, (l, &rate)) in limiters.iter().zip(rates).enumerate() {
        let (l, out, key) = (l.clone(), out.clone(), key.to_string());
        tasks.push(tokio::spawn(async move {
            let mut tick = tokio::time::interval(Duration::from_micros(1_000_000 / rate));
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            let end = std::time::Instant::now() + duration;
            let mut calls = Vec::new();
            while std::time::Instant::now() < end {
                tick.tick().await;
                let (l, out, key) = (l.clone(), out.clone(), key.clone());
                calls.push(tokio::spawn(async move {
                    let started = std::time::Instant::now();
                    let result = l.acquire(&key, limit, window_ms, 1).await;
                    out.lock().unwrap().push(Record {
                        instance: i,
                        started,
                        latency: started.elapsed(),
                        result,
                    });
                }));
            }
            for c in calls {
                c.await.unwrap();
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    let mut v = std::mem::take(&mut *out.lock().unwrap());
    v.sort_by_key(|r| r.started);
    v
}

/// Decisions per mode, as "normal 1234, local 56".
pub fn per_mode(records: &[Record]) -> String {
    let count = |m: rl_core::Mode| records.iter().filter(|r| r.mode() == Some(m)).count();
    let errors = records.iter().filter(|r| r.result.is_err()).count();
    format!(
        "normal {}, local {}, errors {}",
        count(rl_core::Mode::Normal),
        count(rl_core::Mode::Local),
        errors
    )
}

/// Waits until `f` holds, or panics with `what`.
pub fn wait_until(what: &str, timeout: Duration, mut f: impl FnMut() -> bool) {
    let deadline = std::time::Instant::now() + timeout;
    while !f() {
        assert!(
            std::time::Instant::now() < deadline,
            "timed out waiting: {what}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// `CLIENT LIST` on `server`: one entry per connection, its `name=value` fields.
pub fn client_list(server: &RedisServer) -> Vec<Vec<String>> {
    let reply = server.command(&[b"CLIENT", b"LIST"]).unwrap();
    let text = reply
        .as_str()
        .unwrap_or_else(|| panic!("CLIENT LIST on port {} answered {reply:?}", server.port()));
    text.lines()
        .map(|l| l.split(' ').map(str::to_string).collect())
        .collect()
}

/// Held by the tests that put a fleet's load on the machine, so that two of them never share
/// its two cores (their figures are reported, and a starved Redis would be a different test).
pub fn heavy() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    LOCK.lock().unwrap_or_else(|p| p.into_inner())
}

/// The newest heartbeat (Redis ms) in the fleet's key (`<prefix>instances`, a ZSET scored by
/// each instance's last beat) on `server`; `None` before the first.
pub fn last_heartbeat(server: &RedisServer, fleet_key: &[u8]) -> Option<u64> {
    match cmd(server, &[b"ZRANGE", fleet_key, b"-1", b"-1", b"WITHSCORES"]) {
        RespValue::Array(v) if v.is_empty() => None,
        RespValue::Array(v) if v.len() == 2 => Some(
            v[1].as_str()
                .and_then(|s| s.parse().ok())
                .unwrap_or_else(|| panic!("a score: {v:?}")),
        ),
        other => panic!("ZRANGE {}: {other:?}", String::from_utf8_lossy(fleet_key)),
    }
}

/// Waits until a heartbeat newer than the first one seen lands in `server`'s fleet key. The
/// background task beats, then looks at the primaries and writes back what Redis lacks, then
/// sleeps: a beat after another means the look that followed the first is over. (The
/// `instances` stat cannot tell: it is the configured count, or 1 before any beat.)
pub fn wait_for_a_later_heartbeat(server: &RedisServer, fleet_key: &[u8], timeout: Duration) {
    let mut first = None;
    wait_until("a heartbeat after the first", timeout, || {
        match (first, last_heartbeat(server, fleet_key)) {
            (None, now) => {
                first = now;
                false
            }
            (Some(first), now) => now.is_some_and(|n| n > first),
        }
    });
}

/// Waits for forked child `pid` to exit, at most `deadline`: its exit status (128 if killed by a
/// signal), or `None` if it hung (it is then killed and reaped).
pub fn wait_with_deadline(pid: libc::pid_t, deadline: Duration) -> Option<i32> {
    let start = std::time::Instant::now();
    loop {
        let mut status = 0;
        // SAFETY: plain waitpid on our own child.
        let r = unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) };
        if r == pid {
            return Some(if libc::WIFEXITED(status) {
                libc::WEXITSTATUS(status)
            } else {
                128
            });
        }
        if start.elapsed() > deadline {
            // SAFETY: killing and reaping our own hung child.
            unsafe { libc::kill(pid, libc::SIGKILL) };
            unsafe { libc::waitpid(pid, &mut status, 0) };
            return None;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// Sends `sig` to process `pid` (a test's redis-server: SIGSTOP / SIGCONT to freeze and thaw it).
pub fn signal(pid: u32, sig: i32) {
    assert_eq!(
        unsafe { libc::kill(pid as i32, sig) },
        0,
        "kill({pid}, {sig})"
    );
}

/// A small deterministic generator (xorshift), so randomized tests are reproducible from their
/// seed without a dependency. The seed must not be 0.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}
