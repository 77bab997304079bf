//! The degradation state machine and the local fallback against a real redis-server: frozen,
//! down at startup, out of memory, read-only; retry; bounded local state; clock skew. Lines that
//! start with `REPORT` are the measured figures quoted in the scenario table (run with
//! `--nocapture` to see them).

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use common::*;
use rl_core::audit::max_in_any_window;
use rl_core::{Clock, ErrorKind, Limiter, Mode, Options, Stats};

#[test]
fn frozen_redis_goes_local_within_the_period_and_back_only_after_recovery() {
    let _heavy = heavy();
    let server = server();
    let rt = runtime();
    let (n, limit, window) = (4usize, 400u64, 1000u64);
    let limiters: Vec<Limiter> = (0..n)
        .map(|_| limiter_with(&server, Options::default()))
        .collect();
    rt.block_on(async {
        for l in &limiters {
            l.acquire("warm-up", 1000, 1000, 1).await.unwrap();
        }
    });
    wait_until(
        "every instance sees 4 live instances",
        Duration::from_secs(5),
        || limiters.iter().all(|l| l.stats().instances == n as u64),
    );
    let options = Options::default();

    let pid = server.pid();
    let watched = limiters.clone();
    let events = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(1500));
        let frozen = Instant::now();
        signal(pid, libc::SIGSTOP);
        std::thread::sleep(Duration::from_millis(750));
        let mid: Vec<Stats> = watched.iter().map(Limiter::stats).collect();
        std::thread::sleep(Duration::from_millis(750));
        // Read before the thaw, and the thaw timed before its signal: nothing after it counts as
        // "while frozen", and the recovery is never measured shorter than it was.
        let end: Vec<Stats> = watched.iter().map(Limiter::stats).collect();
        let thawed = Instant::now();
        signal(pid, libc::SIGCONT);
        (frozen, mid, end, thawed)
    });
    // 2x the limit: 4 instances x 200/s against 400/s, until 3 s after the thaw.
    let records = rt.block_on(drive(
        &limiters,
        "frozen",
        limit,
        window,
        200,
        Duration::from_millis(6000),
    ));
    let (frozen_at, mid, end, thawed_at) = events.join().unwrap();

    assert!(
        records.iter().all(|r| r.result.is_ok()),
        "a call failed: {:?}",
        records.iter().find(|r| r.result.is_err())
    );
    let slowest = records.iter().map(|r| r.latency).max().unwrap();
    assert!(
        slowest <= options.request_timeout,
        "a call waited {slowest:?}, beyond the request timeout"
    );

    // Local on slow round trips (degrade_rtt for degrade_after), not at the request timeout: the
    // busy machine may add its delays up to the timeout, not beyond.
    let first_local = records
        .iter()
        .filter(|r| r.done() >= frozen_at && r.mode() == Some(Mode::Local))
        .map(|r| r.done())
        .min()
        .expect("no local decision");
    let fallback = first_local - frozen_at;
    assert!(
        fallback < options.request_timeout,
        "fell back {fallback:?} after the freeze, not before the request timeout; configured {:?} + {:?}",
        options.degrade_rtt,
        options.degrade_after
    );
    // No probe can succeed against a stopped Redis: every instance is local halfway through the
    // freeze and stays so, without a single transition, until the thaw.
    for (i, (m, e)) in mid.iter().zip(&end).enumerate() {
        assert_eq!(
            m.mode,
            Mode::Local,
            "instance {i} halfway through the freeze: {m:?}"
        );
        assert_eq!(
            (e.mode, e.transitions_to_local, e.transitions_to_normal),
            (Mode::Local, m.transitions_to_local, m.transitions_to_normal),
            "instance {i} changed state while Redis was frozen: {m:?} then {e:?}"
        );
    }

    // Every instance comes back (within a generous 10 s: 3 s of load after the thaw, then none)
    // and only after recover_after of good probes after the thaw: it was local at the thaw. A
    // busy machine may send one local again later on slow round trips, as configured; the state's
    // age then dates its latest return, later still.
    wait_until(
        "every instance back to normal",
        Duration::from_secs(10),
        || limiters.iter().all(|l| l.stats().mode == Mode::Normal),
    );
    for (i, (l, e)) in limiters.iter().zip(&end).enumerate() {
        let s = l.stats();
        let back = Instant::now() - Duration::from_millis(s.state_ms);
        assert!(
            s.transitions_to_normal > e.transitions_to_normal,
            "instance {i} never recovered: {s:?}"
        );
        assert!(
            back >= thawed_at + options.recover_after,
            "instance {i} back to normal {:?} after the thaw, before recover_after",
            back - thawed_at
        );
    }
    let recovery = records
        .iter()
        .filter(|r| r.started > thawed_at && r.mode() == Some(Mode::Normal))
        .map(|r| format!("{} ms", (r.started - thawed_at).as_millis()))
        .next()
        .unwrap_or_else(|| "not within the run's 3 s".into());
    let flaps: u64 = limiters
        .iter()
        .map(|l| l.stats().transitions_to_local)
        .sum::<u64>()
        - n as u64;

    // Each instance's local decisions stay within its share, counting what it had admitted
    // through Redis in the same window.
    let budget = limit / n as u64;
    let mut worst_local = 0;
    for i in 0..n {
        let local: Vec<_> = records
            .iter()
            .filter(|r| r.instance == i && r.mode() == Some(Mode::Local))
            .filter_map(|r| r.admitted())
            .collect();
        worst_local = worst_local.max(max_in_any_window(&local, window));
    }
    assert!(
        worst_local <= budget,
        "an instance admitted {worst_local} locally in one window; budget {budget}"
    );
    let all: Vec<_> = records.iter().filter_map(|r| r.admitted()).collect();
    let max = max_in_any_window(&all, window);
    assert!(
        max <= limit + limit / n as u64,
        "{max} admitted in one window; bound {}",
        limit + limit / n as u64
    );
    let repaired: u64 = limiters.iter().map(|l| l.stats().repaired_permits).sum();
    println!(
        "REPORT frozen Redis (SIGSTOP 1.5 s), 4 instances x 200/s, limit {limit}/{window} ms: fell back {} ms after the freeze \
         (configured {} + {} ms); first normal decision after the thaw: {} (recover_after {} ms); slowest call {} ms; decisions {}; \
         max admitted in any window {max} (limit {limit}); worst local admissions per instance per window {worst_local} (budget {budget}); \
         permits repaired into Redis {repaired}; transitions to local besides the freeze's {flaps}",
        fallback.as_millis(),
        options.degrade_rtt.as_millis(),
        options.degrade_after.as_millis(),
        recovery,
        options.recover_after.as_millis(),
        slowest.as_millis(),
        per_mode(&records)
    );
}

#[test]
fn redis_down_at_startup_decides_locally_then_writes_local_permits_back() {
    let mut server = server();
    server.kill().unwrap();
    let options = Options {
        instances: Some(2),
        ..Options::default()
    };
    let l = rl_core::blocking::Limiter::open(Some(&server.url()), options).unwrap();
    let started = Instant::now();
    let d = l.acquire("startup", 100, 60_000, 1).unwrap();
    assert_eq!(d.mode, Mode::Local);
    assert!(
        started.elapsed() >= Options::default().retry_delay,
        "decided locally before the retry"
    );
    for i in 2..=50 {
        let d = l.acquire("startup", 100, 60_000, 1).unwrap();
        assert!(
            d.allowed && d.mode == Mode::Local && d.used == i && d.remaining == 50 - i,
            "{i}: {d:?}"
        );
    }
    let d = l.acquire("startup", 100, 60_000, 1).unwrap();
    assert!(
        !d.allowed && d.retry_after_ms > 0,
        "the budget is 100 / 2 instances: {d:?}"
    );
    let s = l.stats();
    assert_eq!(
        (
            s.mode,
            s.transitions_to_local,
            s.decisions_local,
            s.denied_local,
            s.instances
        ),
        (Mode::Local, 1, 51, 1, 2),
        "{s:?}"
    );
    assert!(s.redis_errors >= 1 && s.retries >= 1, "{s:?}");

    server.restart().unwrap();
    wait_until("back to normal", Duration::from_secs(5), || {
        l.stats().mode == Mode::Normal
    });
    let s = l.stats();
    assert_eq!(s.repaired_permits, 50, "{s:?}");
    let fresh = blocking_with(
        &server,
        Options {
            local_fallback: false,
            ..Options::default()
        },
    );
    let d = fresh.peek("startup", 100, 60_000).unwrap();
    assert_eq!(
        d.used, 50,
        "Redis holds the permits admitted while it was down"
    );
    let d = l.acquire("startup", 100, 60_000, 1).unwrap();
    assert_eq!((d.mode, d.used), (Mode::Normal, 51));

    // A second outage and a second flush (a higher limit, so that this instance has room
    // locally): it writes the new local permits, and the first flush's 50 are not added again.
    let repairs = l.stats().repairs;
    server.freeze().unwrap();
    let (mut local, mut admitted) = (0, 51);
    while local < 20 {
        let d = l.acquire("startup", 1000, 60_000, 1).unwrap();
        assert!(d.allowed, "{d:?}");
        local += u64::from(d.mode == Mode::Local);
        admitted += 1;
    }
    server.thaw().unwrap();
    wait_until("the second flush", Duration::from_secs(5), || {
        l.stats().mode == Mode::Normal && l.stats().repairs > repairs
    });
    let s = l.stats();
    assert_eq!(s.repaired_permits, 50 + local, "{s:?}");
    // The call that met the frozen Redis was already sent: Redis may run it when thawed, though
    // its caller was answered locally. That one permit at most is counted twice.
    let used = fresh.peek("startup", 1000, 60_000).unwrap().used;
    assert!((admitted..=admitted + 1).contains(&used), "Redis holds each admitted permit once, {admitted} ({local} local in the second outage): {used}, {s:?}");
}

#[test]
fn out_of_memory_redis_goes_local_or_gives_a_typed_error_never_a_crash() {
    let server = server();
    let warm = blocking_with(&server, Options::default());
    assert!(warm.acquire("oom", 10, 60_000, 1).unwrap().allowed);
    cmd(
        &server,
        &[b"CONFIG", b"SET", b"maxmemory-policy", b"noeviction"],
    );
    cmd(&server, &[b"CONFIG", b"SET", b"maxmemory", b"1"]);

    let strict = blocking_with(
        &server,
        Options {
            local_fallback: false,
            ..Options::default()
        },
    );
    let e = strict.acquire("oom-new", 10, 60_000, 1).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::BackendUnavailable, "{e}");
    assert!(e.to_string().contains("OOM"), "{e}");

    let d = warm.acquire("oom-new", 10, 60_000, 1).unwrap();
    assert_eq!(d.mode, Mode::Local, "{d:?}");
    // The probe writes (a heartbeat), so an OOM Redis does not look healthy.
    std::thread::sleep(Duration::from_millis(1200));
    assert_eq!(warm.stats().mode, Mode::Local, "{:?}", warm.stats());

    cmd(&server, &[b"CONFIG", b"SET", b"maxmemory", b"0"]);
    wait_until(
        "back to normal once memory is available",
        Duration::from_secs(5),
        || warm.stats().mode == Mode::Normal,
    );
    assert_eq!(
        warm.acquire("oom-new", 10, 60_000, 1).unwrap().mode,
        Mode::Normal
    );
    println!("REPORT OOM (maxmemory 1 byte, noeviction): fallback off -> {:?}; fallback on -> local until maxmemory was lifted, then normal", e.kind());
}

#[test]
fn a_read_only_primary_is_retried_once_after_the_delay() {
    let server = server();
    let nowhere = rl_harness::free_port().unwrap();
    let retry_delay = Duration::from_secs(1);
    let options = Options {
        local_fallback: false,
        retry_delay,
        request_timeout: Duration::from_secs(5),
        ..Options::default()
    };
    let l = blocking_with(&server, options);
    assert!(l.acquire("ro", 10, 60_000, 1).unwrap().allowed);
    cmd(
        &server,
        &[b"REPLICAOF", b"127.0.0.1", nowhere.to_string().as_bytes()],
    );
    let e = l.acquire("ro", 10, 60_000, 1).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::BackendUnavailable, "{e}");
    assert!(e.to_string().to_lowercase().contains("read only"), "{e}");
    assert_eq!((l.stats().retries, l.stats().redis_errors), (1, 2));

    // Promoted back while the call waits for its retry: once its first try has failed (the third
    // error counted), so the retry, a whole retry_delay later, meets a primary.
    let port = server.port();
    let (d, elapsed) = std::thread::scope(|s| {
        let promote = s.spawn(|| {
            wait_until("the first try failed", Duration::from_secs(5), || {
                l.stats().redis_errors == 3
            });
            let mut c = rl_harness::Connection::open(
                ([127, 0, 0, 1], port).into(),
                None,
                Duration::from_secs(1),
            )
            .unwrap();
            c.command(&[b"REPLICAOF", b"NO", b"ONE"]).unwrap();
        });
        let started = Instant::now();
        let d = l.acquire("ro", 10, 60_000, 1);
        let elapsed = started.elapsed();
        promote.join().unwrap();
        (d.unwrap(), elapsed)
    });
    assert!(d.allowed && d.mode == Mode::Normal && d.used == 2, "{d:?}");
    assert!(
        elapsed >= retry_delay,
        "answered {elapsed:?} after the call, before the retry delay"
    );
    assert_eq!((l.stats().retries, l.stats().redis_errors), (2, 3));
}

#[test]
fn local_state_is_bounded_however_many_keys_arrive() {
    let mut server = server();
    server.kill().unwrap();
    let l = rl_core::blocking::Limiter::open(
        Some(&server.url()),
        Options {
            local_max_keys: 1000,
            instances: Some(1),
            ..Options::default()
        },
    )
    .unwrap();
    let mut admitted = Vec::new();
    for i in 0..20_000 {
        let d = l.acquire(format!("many-{i}"), 10, 60_000, 1).unwrap();
        assert_eq!(d.mode, Mode::Local);
        if d.allowed {
            admitted.push(i);
        }
    }
    let s = l.stats();
    assert!(s.local_keys <= 1000 + 16, "{} keys kept", s.local_keys);
    assert_eq!(s.decisions_local, 20_000);
    assert_eq!(s.denied_local, 20_000 - admitted.len() as u64);
    // Keys with permits Redis has not seen are never forgotten: once the record is full, new
    // keys are denied rather than admitted and lost.
    assert!(
        admitted.len() <= 1000 + 16 && admitted.len() >= 900,
        "{} keys admitted",
        admitted.len()
    );
    server.restart().unwrap();
    wait_until("back to normal", Duration::from_secs(10), || {
        l.stats().mode == Mode::Normal
    });
    let fresh = blocking_with(&server, strict());
    let written: u64 = (0..20_000)
        .map(|i| fresh.peek(format!("many-{i}"), 10, 60_000).unwrap().used)
        .sum();
    assert_eq!(
        written,
        admitted.len() as u64,
        "every permit admitted locally was written back to Redis"
    );
}

#[test]
fn invalid_fallback_options_are_refused_by_name() {
    let cases: Vec<(Options, &str)> = vec![
        (
            Options {
                retry_delay: Duration::from_secs(61),
                ..Options::default()
            },
            "retry_delay_ms",
        ),
        (
            Options {
                degrade_rtt: Duration::ZERO,
                ..Options::default()
            },
            "degrade_rtt_ms",
        ),
        (
            Options {
                degrade_after: Duration::from_secs(61),
                ..Options::default()
            },
            "degrade_after_ms",
        ),
        (
            Options {
                recover_rtt: Duration::from_millis(6),
                ..Options::default()
            },
            "recover_rtt_ms",
        ),
        (
            Options {
                recover_after: Duration::ZERO,
                ..Options::default()
            },
            "recover_after_ms",
        ),
        (
            Options {
                instances: Some(0),
                ..Options::default()
            },
            "instances",
        ),
        (
            Options {
                local_max_keys: 0,
                ..Options::default()
            },
            "local_max_keys",
        ),
    ];
    let short = Options {
        request_timeout: Duration::from_millis(20),
        ..Options::default()
    };
    assert!(
        Limiter::open(Some("redis://127.0.0.1:1/"), short).is_ok(),
        "a request timeout under the retry delay means no retry, not an error"
    );
    for (o, name) in cases {
        match Limiter::open(Some("redis://127.0.0.1:1/"), o).unwrap_err() {
            rl_core::Error::InvalidArgument { name: got, .. } => assert_eq!(got, name),
            e => panic!("{name}: {e}"),
        }
    }
}

/// A client clock `offset_ms` away from the host's (and so from Redis's, on loopback).
#[derive(Debug)]
struct Skewed(i64);

impl Clock for Skewed {
    fn now_ms(&self) -> u64 {
        (wall_ms() as i64 + self.0) as u64
    }
}

const OFFSETS: [i64; 4] = [-2000, -667, 667, 2000];

#[test]
fn client_time_beyond_the_allowed_skew_is_refused_with_nothing_written() {
    let server = server();
    for offset in OFFSETS {
        let l = blocking_with(
            &server,
            Options {
                clock: Some(Arc::new(Skewed(offset))),
                ..Options::default()
            },
        );
        let key = format!("skew{offset}");
        let exists = || {
            cmd(&server, &[b"EXISTS", &l.redis_key(&key)])
                .as_int()
                .unwrap()
        };
        match l.acquire(&key, 10, 1000, 1) {
            Ok(d) => assert!(
                offset.abs() < 1000 && d.allowed && exists() == 1,
                "{offset}: {d:?}"
            ),
            Err(rl_core::Error::ClockSkew {
                skew_ms,
                max_skew_ms,
                ..
            }) => {
                assert!(offset.abs() > 1000, "{offset} refused");
                assert_eq!(max_skew_ms, 1000);
                assert!(
                    skew_ms.abs_diff(offset.unsigned_abs()) < 100,
                    "{skew_ms} vs {offset}"
                );
                assert_eq!(exists(), 0, "a refused call wrote nothing");
            }
            Err(e) => panic!("{offset}: {e}"),
        }
    }
}

#[test]
fn server_time_is_immune_to_client_clock_skew() {
    let _heavy = heavy();
    let server = server();
    let rt = runtime();
    let (limit, window) = (300u64, 1000u64);
    // Server time: the instances' clocks play no part.
    // Without the fallback, in both halves: these check Redis's decisions, not the local ones.
    let on_server: Vec<Limiter> = OFFSETS.iter().map(|_| limiter(&server)).collect();
    let records = rt.block_on(drive(
        &on_server,
        "server-time",
        limit,
        window,
        150,
        Duration::from_millis(3000),
    ));
    let admitted: Vec<_> = records.iter().filter_map(|r| r.admitted()).collect();
    let server_max = max_in_any_window(&admitted, window);
    assert_eq!(server_max, limit, "server time: max in any window");
    for i in 0..OFFSETS.len() {
        assert!(
            records
                .iter()
                .any(|r| r.instance == i && r.admitted().is_some()),
            "instance {i} admitted nothing"
        );
    }
    // Client time with the skew accepted (max_clock_skew_ms 3000): each script runs on its
    // caller's clock, raised to the window's newest bucket (a window's time never runs
    // backwards), so the window follows the fastest clock.
    let on_client: Vec<Limiter> = OFFSETS
        .iter()
        .map(|&o| {
            limiter_with(
                &server,
                Options {
                    clock: Some(Arc::new(Skewed(o))),
                    max_clock_skew_ms: 3000,
                    ..strict()
                },
            )
        })
        .collect();
    let records = rt.block_on(drive(
        &on_client,
        "client-time",
        limit,
        window,
        150,
        Duration::from_millis(3000),
    ));
    // Pair the monotonic clock with the wall clock from the tightest of several readings: a
    // preemption between the two reads would shift every mapped time by its length.
    let (base, wall) = (0..20)
        .map(|_| {
            let before = Instant::now();
            let wall = wall_ms();
            (before.elapsed(), before, wall)
        })
        .min_by_key(|(gap, _, _)| *gap)
        .map(|(_, before, wall)| (before, wall))
        .unwrap();
    let wall_at = |t: Instant| wall - (base - t).as_millis() as u64;
    let decided: Vec<_> = records
        .iter()
        .filter_map(|r| r.result.as_ref().ok().map(|d| (r, d)))
        .collect();
    // Exact on the window's own clock: the decisions' now_ms.
    let on_window: Vec<_> = records.iter().filter_map(|r| r.admitted()).collect();
    assert_eq!(
        max_in_any_window(&on_window, window),
        limit,
        "client time: max in any window of the decisions' now_ms"
    );
    // Each decision is on its caller's clock or later, never earlier (it was raised, not lowered;
    // 5 ms for reading the host's two clocks)...
    for (r, d) in &decided {
        let own = wall_at(r.started) as i64 + OFFSETS[r.instance];
        assert!(
            d.now_ms as i64 >= own - 5,
            "instance {} (clock {:+} ms) decided at {}, before its own clock {own}",
            r.instance,
            OFFSETS[r.instance],
            d.now_ms
        );
    }
    // ...and the window ran on client time: ahead of the server by about the fastest skew.
    let ahead = decided
        .iter()
        .map(|(r, d)| d.now_ms as i64 - wall_at(r.done()) as i64)
        .max()
        .unwrap();
    assert!(
        ahead > 1000,
        "the fastest client clock (+2000 ms) set the window's time: at most {ahead} ms ahead"
    );
    // Audited on the host's clock at completion, which on loopback is Redis's: reported, as the
    // completion times carry the busy machine's scheduling delays.
    let admitted: Vec<_> = decided
        .iter()
        .filter(|(_, d)| d.allowed)
        .map(|(r, _)| (wall_at(r.done()), 1))
        .collect();
    let client_max = max_in_any_window(&admitted, window);
    println!(
        "REPORT clock skew -2000/-667/+667/+2000 ms, 4 instances x 150/s, limit {limit}/{window} ms: server time -> max {server_max} in any window; \
         client time (skew accepted) -> max {limit} in any window of the decisions' own time, which ran up to {ahead} ms ahead of the server; \
         max {client_max} in any window by server clock"
    );
}
