//! Waiting for several servers to agree on something (a replication link, a
//! failover, cluster state), which they reach asynchronously via gossip.

use std::io;
use std::thread::sleep;
use std::time::{Duration, Instant};

use crate::resp::RespValue;
use crate::server::RedisServer;

const INTERVAL: Duration = Duration::from_millis(50);

/// Calls `check` until it returns `Ok`. `Err` carries why it is not done yet;
/// the last such reason ends up in the timeout error, so a failing test says
/// what never happened instead of just "timed out".
pub(crate) fn poll<T>(
    timeout: Duration,
    what: &str,
    mut check: impl FnMut() -> Result<T, String>,
) -> io::Result<T> {
    let deadline = Instant::now() + timeout;
    loop {
        let reason = match check() {
            Ok(value) => return Ok(value),
            Err(reason) => reason,
        };
        if Instant::now() >= deadline {
            return Err(io::Error::new(
                io::ErrorKind::TimedOut,
                format!("{what} did not happen within {timeout:?}; last seen: {reason}"),
            ));
        }
        sleep(INTERVAL);
    }
}

/// One `field:value` line of `INFO section`, as a `poll` reason on failure.
pub(crate) fn info_field(
    server: &RedisServer,
    section: &str,
    field: &str,
) -> Result<String, String> {
    let reply = server
        .command(&[b"INFO", section.as_bytes()])
        .map_err(|e| format!("INFO on port {}: {e}", server.port()))?;
    let text = reply
        .as_str()
        .ok_or_else(|| format!("INFO on port {} answered {reply:?}", server.port()))?;
    text.lines()
        .find_map(|line| line.trim().strip_prefix(field)?.strip_prefix(':'))
        .map(str::to_string)
        .ok_or_else(|| format!("no {field} in INFO {section} on port {}", server.port()))
}

/// Administrative commands answer `+OK`; anything else means the topology
/// is not what the harness thinks it is, which no test should run on.
pub(crate) fn expect_ok(server: &RedisServer, args: &[&[u8]]) -> io::Result<()> {
    match server.command(args)? {
        RespValue::Simple(s) if s == "OK" => Ok(()),
        other => Err(io::Error::other(format!(
            "{} on port {} answered {other:?}",
            String::from_utf8_lossy(&args.join(&b' ')),
            server.port()
        ))),
    }
}
