//! A blocking caller's lone call is sent and answered on the caller's own thread, on a socket of
//! its own (`backend/in_place.rs`): at most four such sockets per limiter, exact like any other
//! call, and a reply slower than the wait in place is still awaited (the socket handed to the
//! runtime and kept), while a frozen Redis still sends the caller local within the period. A
//! caller alone polls for its reply for up to `busy_poll_us` instead of sleeping, and not at
//! all where replies take longer.

mod common;

use std::collections::HashSet;
use std::time::{Duration, Instant};

use common::*;
use rl_core::audit::max_in_any_window;
use rl_core::{blocking, Decision, Mode, Options};
use rl_harness::{Proxy, RedisServer, Stream, Toxiproxy};
use serde_json::json;

/// Connection ids on `server` (but the one asking).
fn connections(server: &RedisServer) -> HashSet<String> {
    client_list(server)
        .into_iter()
        .filter(|c| !c.iter().any(|f| f == "cmd=client|list"))
        .filter_map(|c| c.into_iter().find(|f| f.starts_with("id=")))
        .collect()
}

/// Connections made since `before`, and the last command each ran.
fn new_connections(server: &RedisServer, before: &HashSet<String>) -> Vec<String> {
    client_list(server)
        .into_iter()
        .filter(|c| {
            c.iter()
                .any(|f| f.starts_with("id=") && !before.contains(f))
        })
        .filter(|c| !c.iter().any(|f| f == "cmd=client|list"))
        .map(|c| {
            c.into_iter()
                .find(|f| f.starts_with("cmd="))
                .expect("every CLIENT LIST entry has cmd=")
        })
        .collect()
}

#[test]
fn a_lone_blocking_caller_sends_its_calls_on_one_socket_of_its_own() {
    let server = server();
    let l = blocking_with(&server, strict());
    // The shared connection first (a ping goes on it), so only what the calls add is counted.
    l.ping().unwrap();
    let before = connections(&server);
    for i in 0..50 {
        let d = l.acquire(format!("k{i}"), 10, 60_000, 1).unwrap();
        assert!(d.allowed && d.remaining == 9, "call {i}: {d:?}");
    }
    let added = new_connections(&server, &before);
    assert_eq!(
        added,
        vec!["cmd=fcall".to_string()],
        "one new connection, for the calls"
    );
    // And they counted: the 11th on a key is denied.
    for _ in 1..10 {
        assert!(l.acquire("k0", 10, 60_000, 1).unwrap().allowed);
    }
    assert!(!l.acquire("k0", 10, 60_000, 1).unwrap().allowed);
}

/// `runtime::run_here_or_block` (Python's synchronous calls: it releases the GIL in `wait`)
/// hands a call that needs Redis to `wait` before it blocks, and the call still goes on a socket
/// of its own; a call that needs no I/O (a lease) is decided right there, without `wait`.
#[test]
fn a_caller_that_must_prepare_to_block_is_decided_in_place_from_a_lease_and_waits_only_for_redis() {
    let server = server();
    let waits = std::cell::Cell::new(0u32);
    let decide = |l: &blocking::Limiter, key: &str| -> Decision {
        rl_core::runtime::run_here_or_block(l.as_async().acquire(key, 1000, 1000, 1), |rest| {
            waits.set(waits.get() + 1);
            rest()
        })
        .unwrap()
        .unwrap()
    };
    let plain = blocking_with(&server, strict());
    plain.ping().unwrap();
    let before = connections(&server);
    for i in 0..5 {
        assert!(decide(&plain, &format!("k{i}")).allowed);
    }
    assert_eq!(
        waits.get(),
        5,
        "every call needed Redis and went through wait"
    );
    assert_eq!(
        new_connections(&server, &before),
        vec!["cmd=fcall".to_string()],
        "after wait the calls went on a socket of their own"
    );

    let leasing = blocking_with(
        &server,
        Options {
            leases: rl_core::Leases::On,
            lease_ms: 200,
            ..strict()
        },
    );
    // No lease yet: Redis decides and grants one (through `wait`, unless the reply happened to
    // be in by the end of the first poll). Then the lease decides, in place, without `wait`.
    assert_eq!(decide(&leasing, "hot").mode, Mode::Lease);
    let mut in_place = 0;
    for _ in 0..20 {
        let w = waits.get();
        let d = decide(&leasing, "hot");
        assert!(d.allowed, "{d:?}");
        if d.mode == Mode::Lease && waits.get() == w {
            in_place += 1;
        }
    }
    assert!(
        in_place >= 15,
        "only {in_place} of 20 calls were decided from the lease without wait"
    );
}

#[test]
fn sixteen_blocking_threads_use_at_most_four_sockets_and_stay_exact() {
    let _heavy = heavy();
    let server = server();
    let l = blocking_with(&server, strict());
    l.ping().unwrap();
    let before = connections(&server);
    let (limit, window) = (300u64, 60_000u64);
    let decisions: Vec<_> = std::thread::scope(|s| {
        let hs: Vec<_> = (0..16)
            .map(|t| {
                let l = l.clone();
                s.spawn(move || {
                    (0..60)
                        .map(|i| {
                            // Half the calls on one shared key, half on the thread's own keys.
                            let key = if i % 2 == 0 {
                                "shared".to_string()
                            } else {
                                format!("t{t}-{i}")
                            };
                            (key.clone(), l.acquire(&key, limit, window, 1).unwrap())
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        hs.into_iter().flat_map(|h| h.join().unwrap()).collect()
    });
    let added = new_connections(&server, &before);
    assert!(
        !added.is_empty() && added.len() <= 4,
        "new connections: {added:?}"
    );
    let shared: Vec<_> = decisions
        .iter()
        .filter(|(k, _)| k == "shared")
        .map(|(_, d)| *d)
        .collect();
    assert_eq!(shared.len(), 16 * 30);
    let admitted = shared.iter().filter(|d| d.allowed).count() as u64;
    assert_eq!(
        admitted, limit,
        "480 asked for 300 permits on one key in one window"
    );
    let admissions: Vec<(u64, u64)> = shared
        .iter()
        .filter(|d| d.allowed)
        .map(|d| (d.now_ms, 1))
        .collect();
    let most = max_in_any_window(&admissions, window);
    assert!(most <= limit, "{most} admitted within one window");
    assert!(decisions
        .iter()
        .all(|(k, d)| k == "shared" || (d.allowed && d.mode == Mode::Normal)));
}

#[test]
fn a_reply_later_than_the_wait_in_place_is_awaited_and_the_socket_kept() {
    let server = server();
    // Waits 1 ms in place (degrade_rtt), and never goes local within this test.
    let l = blocking_with(
        &server,
        Options {
            degrade_rtt: Duration::from_millis(1),
            recover_rtt: Duration::from_millis(1),
            degrade_after: Duration::from_secs(30),
            request_timeout: Duration::from_secs(5),
            ..Options::default()
        },
    );
    l.ping().unwrap();
    let shared = connections(&server);
    assert!(l.acquire("k", 5, 60_000, 1).unwrap().allowed);
    assert_eq!(new_connections(&server, &shared), vec!["cmd=fcall"]);
    let before = connections(&server);
    let pid = server.pid();
    let thaw = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(200));
        signal(pid, libc::SIGCONT);
    });
    signal(pid, libc::SIGSTOP);
    let started = Instant::now();
    let d = l.acquire("k", 5, 60_000, 1).unwrap();
    let took = started.elapsed();
    thaw.join().unwrap();
    assert!(
        d.allowed && d.mode == Mode::Normal && d.remaining == 3,
        "{d:?}"
    );
    assert!(
        took >= Duration::from_millis(150),
        "answered after {took:?}, before Redis was thawed"
    );
    for left in (0..3).rev() {
        let d = l.acquire("k", 5, 60_000, 1).unwrap();
        assert!(d.allowed && d.remaining == left, "{d:?}");
    }
    assert!(!l.acquire("k", 5, 60_000, 1).unwrap().allowed);
    assert_eq!(
        new_connections(&server, &before),
        Vec::<String>::new(),
        "the socket of the slow call is used again, no other one made"
    );
    assert_eq!(l.as_async().stats().redis_errors, 0);
}

/// `callers` blocking callers at once, each on its own key, while Redis is frozen, with a request
/// timeout far above the period (a call that waited for it, in place or queued, would show):
/// each must be decided `local` and admitted within 2 s. The limiter is returned, Redis thawed.
fn frozen_callers_go_local_in_time(server: &RedisServer, callers: usize) -> blocking::Limiter {
    let options = Options {
        request_timeout: Duration::from_secs(4),
        ..Options::default()
    };
    let l = blocking_with(server, options.clone());
    assert!(l.acquire("warm", 100, 60_000, 1).unwrap().allowed);
    let pid = server.pid();
    signal(pid, libc::SIGSTOP);
    let started = Instant::now();
    let frozen: Vec<(rl_core::Result<Decision>, Duration)> = std::thread::scope(|s| {
        let hs: Vec<_> = (0..callers)
            .map(|t| {
                let l = l.clone();
                s.spawn(move || {
                    let d = l.acquire(format!("frozen-{t}"), 100, 60_000, 1);
                    (d, started.elapsed())
                })
            })
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    });
    signal(pid, libc::SIGCONT);
    for (d, took) in frozen {
        let d = d.unwrap();
        assert!(d.mode == Mode::Local && d.allowed, "{d:?}");
        assert!(
            took < Duration::from_secs(2),
            "went local after {took:?}: degrade_after is {:?}, the request timeout {:?}",
            options.degrade_after,
            options.request_timeout
        );
    }
    l
}

#[test]
fn a_frozen_redis_sends_a_blocking_caller_local_within_the_period() {
    let _heavy = heavy();
    frozen_callers_go_local_in_time(&server(), 1);
}

#[test]
fn the_own_socket_logs_in_as_the_urls_user_and_selects_its_database() {
    let server =
        RedisServer::start_with(rl_harness::ServerOptions::default().requirepass("admin")).unwrap();
    cmd(
        &server,
        &[b"ACL", b"SETUSER", b"gw", b"on", b">gw-pw", b"~*", b"+@all"],
    );
    let url = format!("redis://gw:gw-pw@127.0.0.1:{}/3", server.port());
    let l = rl_core::blocking::Limiter::open(Some(&url), strict()).unwrap();
    l.ping().unwrap();
    let before = connections(&server);
    for _ in 0..3 {
        assert!(l.acquire("k", 3, 60_000, 1).unwrap().allowed);
    }
    assert!(!l.acquire("k", 3, 60_000, 1).unwrap().allowed);
    let own: Vec<Vec<String>> = client_list(&server)
        .into_iter()
        .filter(|c| {
            c.iter()
                .any(|f| f.starts_with("id=") && !before.contains(f))
        })
        .filter(|c| !c.iter().any(|f| f == "cmd=client|list"))
        .collect();
    assert_eq!(own.len(), 1, "{own:?}");
    for field in ["user=gw", "db=3", "cmd=fcall"] {
        assert!(own[0].iter().any(|f| f == field), "{field} in {:?}", own[0]);
    }
    let key = l.redis_key("k");
    // The harness opens a connection per command: a script looks in database 3.
    let found = cmd(
        &server,
        &[
            b"EVAL",
            b"redis.call('SELECT', 3) return redis.call('EXISTS', KEYS[1])",
            b"1",
            &key,
        ],
    );
    assert_eq!(found.as_int(), Some(1), "the window is in database 3");

    let wrong = format!("redis://gw:nope@127.0.0.1:{}/3", server.port());
    let l = rl_core::blocking::Limiter::open(Some(&wrong), strict()).unwrap();
    let e = l.acquire("k", 3, 60_000, 1).unwrap_err();
    assert_eq!(e.kind(), rl_core::ErrorKind::Backend, "{e}");
    assert!(e.to_string().contains("authentication failed"), "{e}");
}

#[test]
fn after_a_restart_the_next_call_gets_a_new_socket_not_a_dead_idle_one() {
    let mut server = server();
    let l = blocking_with(&server, strict());
    // Four sockets, idle in the pool (four threads at once on their own keys, a few rounds).
    std::thread::scope(|s| {
        for t in 0..4 {
            let l = l.clone();
            s.spawn(move || {
                for i in 0..50 {
                    l.acquire(format!("t{t}-{i}"), 10, 60_000, 1).unwrap();
                }
            });
        }
    });
    server.kill().unwrap();
    server.restart().unwrap();
    // Within the second after their last use, so not checked: the first one tried is dead, the
    // call's retry must not take the next dead one (with the fallback off, that is an error).
    let d = l.acquire("after", 10, 60_000, 1).unwrap();
    assert!(d.allowed && d.used == 1, "{d:?}");
    assert!(l.acquire("after", 10, 60_000, 1).unwrap().allowed);
}

#[test]
fn a_socket_redis_closed_while_idle_is_not_used_again() {
    let server = server();
    // Redis closes clients idle for a second.
    cmd(&server, &[b"CONFIG", b"SET", b"timeout", b"1"]);
    let l = blocking_with(&server, strict());
    assert!(l.acquire("k", 10, 60_000, 1).unwrap().allowed);
    std::thread::sleep(Duration::from_millis(2500));
    let errors = l.as_async().stats().redis_errors;
    let d = l.acquire("k", 10, 60_000, 1).unwrap();
    assert!(d.allowed && d.used == 2, "{d:?}");
    assert_eq!(
        l.as_async().stats().redis_errors,
        errors,
        "the closed socket was checked before use, not tried"
    );
}

#[test]
fn a_host_name_keeps_the_shared_connection() {
    let server = server();
    // A name would be resolved on the caller's thread at every connect: only addresses go in place.
    let url = format!("redis://localhost:{}/", server.port());
    let l = rl_core::blocking::Limiter::open(Some(&url), strict()).unwrap();
    l.ping().unwrap();
    let before = connections(&server);
    for i in 0..20 {
        assert!(l.acquire(format!("k{i}"), 10, 60_000, 1).unwrap().allowed);
    }
    assert_eq!(new_connections(&server, &before), Vec::<String>::new());
}

/// Every command `server` runs while `run` runs, as MONITOR shows them: `(client address, line)`.
fn monitored(server: &RedisServer, run: impl FnOnce()) -> Vec<(String, String)> {
    use std::io::{BufRead, BufReader, Write};
    let mut conn = std::net::TcpStream::connect(("127.0.0.1", server.port())).unwrap();
    conn.write_all(b"MONITOR\r\n").unwrap();
    let mut lines = BufReader::new(conn.try_clone().unwrap());
    let mut ok = String::new();
    lines.read_line(&mut ok).unwrap();
    assert_eq!(ok, "+OK\r\n");
    run();
    let marker = format!("end-of-run-{}", std::process::id());
    cmd(server, &[b"ECHO", marker.as_bytes()]);
    conn.set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut seen = Vec::new();
    loop {
        let mut line = String::new();
        lines
            .read_line(&mut line)
            .expect("MONITOR shows the marker");
        if line.contains(&marker) {
            return seen;
        }
        // +1733371069.420183 [0 127.0.0.1:50142] "fcall" "..." ...
        let addr = line
            .split_once('[')
            .and_then(|(_, r)| r.split_once(']'))
            .and_then(|(inside, _)| inside.split_whitespace().nth(1))
            .unwrap_or("")
            .to_string();
        seen.push((addr, line));
    }
}

#[test]
fn calls_beyond_four_sockets_wait_for_one_not_for_the_shared_connection() {
    let _heavy = heavy();
    let server = server();
    let l = blocking_with(
        &server,
        Options {
            request_timeout: Duration::from_secs(5),
            ..strict()
        },
    );
    // The library loaded (a first FCALL is refused and sent again after FUNCTION LOAD), and the
    // socket this made closed, so only the shared connection is left.
    l.ping().unwrap();
    let before = connections(&server);
    assert!(l.acquire("warm", 10, 60_000, 1).unwrap().allowed);
    for id in connections(&server).difference(&before) {
        let id = id.strip_prefix("id=").unwrap();
        cmd(&server, &[b"CLIENT", b"KILL", b"ID", id.as_bytes()]);
    }
    // Idle long enough to be checked before use, so the dead socket is not tried.
    std::thread::sleep(Duration::from_millis(1100));
    let shared: Vec<String> = client_list(&server)
        .into_iter()
        .filter(|c| !c.iter().any(|f| f == "cmd=client|list"))
        .filter_map(|c| {
            c.into_iter()
                .find_map(|f| f.strip_prefix("addr=").map(str::to_string))
        })
        .collect();
    assert_eq!(shared.len(), 1, "the shared connection alone: {shared:?}");
    let pid = server.pid();
    let decisions = std::sync::Mutex::new(Vec::new());
    let seen = monitored(&server, || {
        // Redis frozen while 16 threads call: 4 calls are written on 4 sockets, 12 must queue
        // for them. Then 16 threads at full speed.
        signal(pid, libc::SIGSTOP);
        let thaw = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(300));
            signal(pid, libc::SIGCONT);
        });
        for round in 0..2 {
            std::thread::scope(|s| {
                for t in 0..16 {
                    let (l, decisions) = (l.clone(), &decisions);
                    s.spawn(move || {
                        for i in 0..(if round == 0 { 1 } else { 40 }) {
                            let key = format!("queued-{round}-{t}-{i}");
                            let d = l.acquire(&key, 10, 60_000, 1).unwrap();
                            decisions.lock().unwrap().push(d);
                        }
                    });
                }
            });
        }
        thaw.join().unwrap();
    });
    let decisions = decisions.into_inner().unwrap();
    assert_eq!(decisions.len(), 16 + 16 * 40);
    assert!(
        decisions
            .iter()
            .all(|d| d.allowed && d.used == 1 && d.mode == Mode::Normal),
        "every call its own key's first permit"
    );
    let calls: Vec<&(String, String)> = seen
        .iter()
        .filter(|(_, line)| {
            line.to_ascii_lowercase().contains("\"fcall\"") && line.contains("queued-")
        })
        .collect();
    assert_eq!(calls.len(), 16 + 16 * 40, "one script call per decision");
    let from: HashSet<&str> = calls.iter().map(|(a, _)| a.as_str()).collect();
    assert!(
        !from.contains(shared[0].as_str()),
        "calls went on the shared connection {}",
        shared[0]
    );
    assert!(from.len() <= 4, "calls came from {from:?}");
}

#[test]
fn sixteen_blocking_callers_on_a_frozen_redis_all_go_local_in_time_and_come_back() {
    let _heavy = heavy();
    let server = server();
    let l = frozen_callers_go_local_in_time(&server, 16);
    // Back to Redis: every caller, queued or not, ends in `normal` again.
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let back: Vec<Decision> = std::thread::scope(|s| {
            let hs: Vec<_> = (0..16)
                .map(|t| {
                    let l = l.clone();
                    s.spawn(move || l.acquire(format!("after-{t}"), 1000, 60_000, 1).unwrap())
                })
                .collect();
            hs.into_iter().map(|h| h.join().unwrap()).collect()
        });
        if back.iter().all(|d| d.mode == Mode::Normal) {
            break;
        }
        assert!(Instant::now() < deadline, "still local: {back:?}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn a_restart_under_sixteen_blocking_callers_fails_or_answers_each_call_and_none_hangs() {
    let _heavy = heavy();
    let mut server = server();
    let l = blocking_with(&server, strict());
    let stop = std::sync::atomic::AtomicBool::new(false);
    let (answered, failed) = std::thread::scope(|s| {
        let hs: Vec<_> = (0..16)
            .map(|t| {
                let (l, stop) = (l.clone(), &stop);
                s.spawn(move || {
                    let (mut ok, mut err) = (0u32, 0u32);
                    let mut i = 0;
                    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                        match l.acquire(format!("r-{t}-{i}"), 10, 60_000, 1) {
                            Ok(d) => {
                                assert!(d.allowed && d.used == 1, "{d:?}");
                                ok += 1
                            }
                            Err(_) => err += 1,
                        }
                        i += 1;
                    }
                    (ok, err)
                })
            })
            .collect();
        std::thread::sleep(Duration::from_millis(300));
        server.kill().unwrap();
        server.restart().unwrap();
        std::thread::sleep(Duration::from_millis(500));
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        hs.into_iter()
            .map(|h| h.join().unwrap())
            .fold((0, 0), |(a, b), (ok, err)| (a + ok, b + err))
    });
    assert!(answered > 0, "{answered} answered, {failed} failed");
    // After it, every caller is answered by the new server.
    std::thread::scope(|s| {
        for t in 0..16 {
            let l = l.clone();
            s.spawn(move || {
                for i in 0..20 {
                    let d = l.acquire(format!("after-{t}-{i}"), 10, 60_000, 1).unwrap();
                    assert!(d.allowed && d.used == 1 && d.mode == Mode::Normal, "{d:?}");
                }
            });
        }
    });
}

/// This thread's voluntary context switches (each sleep for a reply is one) and CPU time.
fn thread_usage() -> (i64, Duration) {
    // SAFETY: getrusage writes the zeroed struct it is given.
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    assert_eq!(unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut u) }, 0);
    let cpu = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    (u.ru_nvcsw, cpu(u.ru_utime) + cpu(u.ru_stime))
}

/// Sleeps (voluntary context switches) and CPU time of this thread over `calls` lone calls on
/// `l`, each on a new key, after 20 to warm it up.
fn usage_over(l: &blocking::Limiter, tag: &str, calls: i64) -> (i64, Duration) {
    warm(l, tag);
    let (sleeps, cpu) = thread_usage();
    for i in 0..calls {
        let d = l.acquire(format!("{tag}-{i}"), 1, 60_000, 1).unwrap();
        assert!(d.allowed && d.mode == Mode::Normal, "{d:?}");
    }
    let (sleeps_after, cpu_after) = thread_usage();
    (sleeps_after - sleeps, cpu_after - cpu)
}

/// 20 calls, each on a new key: the socket made, the recent replies' average known.
fn warm(l: &blocking::Limiter, tag: &str) {
    for i in 0..20 {
        let d = l.acquire(format!("warm-{tag}-{i}"), 1, 60_000, 1).unwrap();
        assert!(d.allowed, "{d:?}");
    }
}

fn busy_poll_us(us: u64) -> Options {
    Options {
        busy_poll: Duration::from_micros(us),
        ..strict()
    }
}

/// Redis behind a toxiproxy proxy: its replies take long enough (some 100 µs) that a caller that
/// does not poll always sleeps for them, even in a debug build.
struct Proxied {
    proxy: Proxy,
    _toxiproxy: Toxiproxy,
    _server: RedisServer,
}

fn proxied() -> Proxied {
    let server = server();
    let toxiproxy = Toxiproxy::start().expect("toxiproxy-server (scripts/toxiproxy.sh)");
    let proxy = toxiproxy.proxy("redis", server.addr()).unwrap();
    Proxied {
        proxy,
        _toxiproxy: toxiproxy,
        _server: server,
    }
}

impl Proxied {
    fn limiter(&self, busy_poll: u64) -> blocking::Limiter {
        blocking::Limiter::open(Some(&self.proxy.url()), busy_poll_us(busy_poll)).unwrap()
    }
}

#[test]
fn a_lone_blocking_caller_polls_for_its_reply_rather_than_sleep_unless_busy_poll_is_off() {
    let _heavy = heavy();
    let redis = proxied();
    let calls = 300;
    let (sleeping, _) = usage_over(&redis.limiter(0), "off", calls);
    let (polling, _) = usage_over(&redis.limiter(1000), "on", calls);
    assert!(
        sleeping >= calls * 3 / 4,
        "busy_poll_us = 0: {sleeping} sleeps in {calls} calls; each call should sleep for its reply"
    );
    assert!(
        polling < sleeping / 3,
        "busy_poll_us = 1000: {polling} sleeps in {calls} calls (against {sleeping} without \
         polling); a reply through a loopback proxy should come within the poll"
    );
}

#[test]
fn a_caller_with_company_sleeps_for_its_reply_rather_than_poll() {
    let _heavy = heavy();
    let redis = proxied();
    let l = redis.limiter(1000);
    let (alone, _) = usage_over(&l, "alone", 200);
    // Two threads on one key: while one's call is on the wire, the other waits to be sent in the
    // next batch (coalesced, not on a socket), and needs the core when that reply comes.
    let calls = 200;
    let sleeps: i64 = std::thread::scope(|s| {
        let hs: Vec<_> = (0..2)
            .map(|_| {
                let l = l.clone();
                s.spawn(move || {
                    let (before, _) = thread_usage();
                    for _ in 0..calls {
                        let d = l.acquire("together", 1_000_000, 60_000, 1).unwrap();
                        assert!(d.allowed && d.mode == Mode::Normal, "{d:?}");
                    }
                    thread_usage().0 - before
                })
            })
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).sum()
    });
    assert!(
        sleeps >= calls,
        "two threads on one key slept {sleeps} times in {} calls (a caller alone: {alone} in \
         200): a caller polled while the other waited for its turn",
        2 * calls
    );
}

#[test]
fn no_caller_polls_while_replies_take_longer_than_busy_poll_us() {
    let _heavy = heavy();
    let redis = proxied();
    redis
        .proxy
        .add("slow", "latency", Stream::Downstream, json!({"latency": 3}))
        .unwrap();
    let l = redis.limiter(1000);
    let calls = 40;
    let (sleeps, cpu) = usage_over(&l, "slow", calls);
    // Polling each call would cost 1 ms of CPU: 40 ms.
    assert!(
        cpu < Duration::from_millis(20),
        "{cpu:?} of CPU for {calls} calls of 3 ms: the caller polled for replies slower than \
         busy_poll_us"
    );
    assert!(sleeps >= calls, "{sleeps} sleeps in {calls} calls of 3 ms");
}

#[test]
fn a_caller_polls_no_longer_than_busy_poll_us_and_then_sleeps() {
    let server = server();
    let l = blocking_with(
        &server,
        Options {
            busy_poll: Duration::from_micros(1000),
            request_timeout: Duration::from_secs(5),
            ..strict()
        },
    );
    warm(&l, "frozen");
    let pid = server.pid();
    let thaw = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(300));
        signal(pid, libc::SIGCONT);
    });
    signal(pid, libc::SIGSTOP);
    let (_, cpu_before) = thread_usage();
    let started = Instant::now();
    let d = l.acquire("late", 1, 60_000, 1).unwrap();
    let (took, cpu) = (started.elapsed(), thread_usage().1 - cpu_before);
    thaw.join().unwrap();
    assert!(d.allowed && d.mode == Mode::Normal, "{d:?}");
    assert!(
        took >= Duration::from_millis(250),
        "answered after {took:?}"
    );
    assert!(
        cpu < Duration::from_millis(60),
        "the caller used {cpu:?} of CPU in a {took:?} wait: it should poll for 1 ms, then sleep"
    );
}
