//! The fault schedule: one fault every `every`, in rotation — latency of 4 × `degrade_rtt` ± 5 ms, a
//! blackhole (Toxiproxy `timeout` both ways), resets (`reset_peer`), a restart of the standalone
//! redis-server (data lost: persistence is off) and a Sentinel failover (`SENTINEL FAILOVER`, so
//! it can repeat: the old primary comes back as the replica). Each fault's period runs from just
//! before it starts until every limiter of the group it hit is `normal` again; the exactness check
//! holds windows that touch a period to the documented bound instead of the limit.

use std::sync::atomic::{AtomicBool, AtomicU16, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::sleep;
use std::time::{Duration, Instant};

use rl_core::{Limiter, Mode};
use rl_harness::{Connection, Proxy, RedisServer, RespValue, SentinelTrio, Stream, MASTER_NAME};
use serde_json::json;

use super::now_ms;

/// The rotation. In the test command's 60 s run (a fault every 4 s) the failover, the slow one,
/// falls in the middle third, so the Sentinel Redis is measured calm in the first and last.
pub const KINDS: [&str; 5] = ["restart", "blackhole", "reset", "failover", "latency"];

/// One fault: which group it hit, what, and its period in wall-clock ms.
#[derive(Debug, Clone)]
pub struct Fault {
    pub group: usize,
    pub kind: &'static str,
    pub start_ms: u64,
    /// When the injection itself was done (the toxic lifted, the server back, the new primary
    /// named by the Sentinels and `role:master`).
    pub done_ms: u64,
    pub end_ms: u64,
    /// Whether every limiter of the group was `normal` again before the wait ran out.
    pub recovered: bool,
}

pub type Log = Arc<Mutex<Vec<Fault>>>;

/// What the schedule acts on: group 0 reaches `standalone` through `proxy`, group 1 the trio.
pub struct Targets {
    pub proxy: Proxy,
    pub standalone: RedisServer,
    pub trio: SentinelTrio,
    pub groups: Vec<Vec<Limiter>>,
    /// The trio's primary now, for the sampler.
    pub primary_port: Arc<AtomicU16>,
}

const HOLD: Duration = Duration::from_millis(1500);
const RECOVER_WAIT: Duration = Duration::from_secs(30);
/// The README's "each does within about a second of seeing the new primary".
const REPAIR_TIME: Duration = Duration::from_secs(1);

/// Runs faults until `stop`, the first after `every`; returns the targets to be stopped.
pub fn run(
    mut t: Targets,
    every: Duration,
    latency_ms: u64,
    log: Log,
    stop: Arc<AtomicBool>,
) -> Targets {
    let mut next = Instant::now() + every;
    let mut round = 0usize;
    loop {
        while Instant::now() < next {
            if stop.load(Ordering::Relaxed) {
                return t;
            }
            sleep(Duration::from_millis(50));
        }
        let kind = KINDS[round % KINDS.len()];
        round += 1;
        let group = usize::from(kind == "failover");
        let start_ms = now_ms();
        let seen: Vec<u64> = t.groups[group]
            .iter()
            .map(|l| l.stats().failovers)
            .collect();
        if let Err(e) = inject(&mut t, kind, latency_ms) {
            eprintln!("soak: fault {kind} failed: {e}");
        }
        let done_ms = now_ms();
        let new_primary = matches!(kind, "restart" | "failover");
        let recovered = wait_recovered(&t.groups[group], new_primary.then_some(&seen[..]));
        log.lock().unwrap().push(Fault {
            group,
            kind,
            start_ms,
            done_ms,
            end_ms: now_ms(),
            recovered,
        });
        next = Instant::now() + every;
    }
}

fn inject(t: &mut Targets, kind: &str, latency_ms: u64) -> std::io::Result<()> {
    let p = &t.proxy;
    match kind {
        "latency" => {
            p.add(
                "lat",
                "latency",
                Stream::Downstream,
                json!({"latency": latency_ms, "jitter": 5}),
            )?;
            sleep(HOLD);
            p.remove("lat")
        }
        "blackhole" => {
            p.add(
                "hole-up",
                "timeout",
                Stream::Upstream,
                json!({"timeout": 0}),
            )?;
            p.add(
                "hole-down",
                "timeout",
                Stream::Downstream,
                json!({"timeout": 0}),
            )?;
            sleep(HOLD);
            p.remove("hole-up")?;
            p.remove("hole-down")
        }
        "reset" => {
            for round in 0..6u64 {
                p.add(
                    "reset",
                    "reset_peer",
                    Stream::Downstream,
                    json!({"timeout": 5 + round * 7}),
                )?;
                sleep(Duration::from_millis(60));
                p.remove("reset")?;
                sleep(Duration::from_millis(200));
            }
            Ok(())
        }
        "restart" => {
            t.standalone.stop()?;
            sleep(Duration::from_millis(700));
            t.standalone.restart()
        }
        "failover" => failover(t),
        _ => unreachable!("{kind}"),
    }
}

/// `SENTINEL FAILOVER` on the first Sentinel, then waits until it names a new primary that says
/// `role:master`.
fn failover(t: &mut Targets) -> std::io::Result<()> {
    let sentinel = &t.trio.sentinels()[0];
    let before = t.trio.current_primary_port()?;
    let reply = sentinel.command(&[b"SENTINEL", b"FAILOVER", MASTER_NAME.as_bytes()])?;
    if reply.is_error() {
        return Err(std::io::Error::other(format!(
            "SENTINEL FAILOVER: {reply:?}"
        )));
    }
    let deadline = Instant::now() + Duration::from_secs(30);
    while Instant::now() < deadline {
        sleep(Duration::from_millis(100));
        let Ok(now) = t.trio.current_primary_port() else {
            continue;
        };
        if now != before && role_is_master(now) {
            t.primary_port.store(now, Ordering::Relaxed);
            return Ok(());
        }
    }
    Err(std::io::Error::other("no new primary within 30 s"))
}

fn role_is_master(port: u16) -> bool {
    let addr = ([127, 0, 0, 1], port).into();
    let Ok(mut c) = Connection::open(addr, None, Duration::from_secs(1)) else {
        return false;
    };
    matches!(c.command(&[b"ROLE"]), Ok(RespValue::Array(v))
        if v.first().and_then(RespValue::as_str) == Some("master"))
}

/// Waits until every limiter is `normal` and, after a restart or failover (`failovers` before it
/// given), has seen the new primary, plus [`REPAIR_TIME`] for its failover repair (the README:
/// until the last instance has repaired, the new primary may count fewer permits than were
/// admitted). True if that happened before `RECOVER_WAIT` ran out.
fn wait_recovered(group: &[Limiter], failovers_before: Option<&[u64]>) -> bool {
    let deadline = Instant::now() + RECOVER_WAIT;
    // A fault the limiters have not noticed yet would read as recovered at once.
    sleep(Duration::from_millis(300));
    while Instant::now() < deadline {
        let stats: Vec<_> = group.iter().map(Limiter::stats).collect();
        let normal = stats.iter().all(|s| s.mode == Mode::Normal);
        let seen = failovers_before
            .is_none_or(|before| stats.iter().zip(before).all(|(s, b)| s.failovers > *b));
        if normal && seen {
            if failovers_before.is_some() {
                sleep(REPAIR_TIME);
            }
            return true;
        }
        sleep(Duration::from_millis(50));
    }
    false
}
