//! One sample a second: each group's decisions by mode, RTT, transitions and local-record keys
//! (from `stats()`), this process's RSS and open file descriptors (/proc/self), and each Redis's
//! `used_memory` and DBSIZE (asked directly, not through the fault proxy).

use std::time::Duration;

use rl_core::Limiter;
use rl_harness::{Connection, RespValue};

/// A group's figures at one second (counts are totals since the start).
#[derive(Debug, Clone, Copy, Default)]
pub struct GroupSample {
    pub normal: u64,
    pub local: u64,
    pub lease: u64,
    pub denied: u64,
    pub to_local: u64,
    pub to_normal: u64,
    pub repairs: u64,
    pub repaired_permits: u64,
    pub failovers: u64,
    pub redis_errors: u64,
    /// The slowest limiter's p50 and p99 round trip, in microseconds.
    pub rtt_p50_us: u64,
    pub rtt_p99_us: u64,
    /// Limiters in `local` now, and the largest local record.
    pub local_now: u64,
    pub local_keys: u64,
    pub errors: u64,
    /// Redis: `used_memory` and DBSIZE (`None` while it does not answer).
    pub redis_memory: Option<u64>,
    pub redis_keys: Option<u64>,
}

#[derive(Debug, Clone, Default)]
pub struct Sample {
    pub secs: f64,
    pub rss_kb: u64,
    pub fds: u64,
    pub groups: Vec<GroupSample>,
}

pub fn group(limiters: &[Limiter], errors: u64, redis_port: u16) -> GroupSample {
    let mut g = GroupSample {
        errors,
        ..GroupSample::default()
    };
    for l in limiters {
        let s = l.stats();
        g.normal += s.decisions_normal + s.denials_cached;
        g.local += s.decisions_local;
        g.lease += s.decisions_lease;
        g.denied += s.denied_normal + s.denied_local + s.denials_cached;
        g.to_local += s.transitions_to_local;
        g.to_normal += s.transitions_to_normal;
        g.repairs += s.repairs;
        g.repaired_permits += s.repaired_permits;
        g.failovers += s.failovers;
        g.redis_errors += s.redis_errors;
        g.rtt_p50_us = g.rtt_p50_us.max(s.rtt_p50_us);
        g.rtt_p99_us = g.rtt_p99_us.max(s.rtt_p99_us);
        g.local_now += u64::from(s.mode == rl_core::Mode::Local);
        g.local_keys = g.local_keys.max(s.local_keys);
    }
    (g.redis_memory, g.redis_keys) =
        redis(redis_port).map_or((None, None), |(m, k)| (Some(m), Some(k)));
    g
}

fn redis(port: u16) -> Option<(u64, u64)> {
    let mut c = Connection::open(
        ([127, 0, 0, 1], port).into(),
        None,
        Duration::from_millis(500),
    )
    .ok()?;
    let info = c.command(&[b"INFO", b"memory"]).ok()?;
    let memory = info
        .as_str()?
        .lines()
        .find_map(|l| l.strip_prefix("used_memory:"))?;
    let keys = match c.command(&[b"DBSIZE"]).ok()? {
        RespValue::Integer(n) => n as u64,
        _ => return None,
    };
    Some((memory.trim().parse().ok()?, keys))
}

/// This process's resident set (kB, from /proc/self/status) and open descriptors.
pub fn process() -> (u64, u64) {
    let rss = std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmRSS:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        })
        .unwrap_or(0);
    let fds = std::fs::read_dir("/proc/self/fd").map_or(0, |d| d.count() as u64);
    (rss, fds)
}
