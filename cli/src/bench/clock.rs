//! The deciding clock as seen from here: boundary bursts must land on Redis's window boundaries,
//! not the local clock's, and the baseline's live counter key is named by Redis time.

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crate::redis_admin::Admin;
use crate::{CliResult, Failure};

/// Time between the last setup step and the first send, so the first requests are not already
/// late when the generator starts.
pub const START_LEAD: Duration = Duration::from_millis(100);

/// Maps local instants to the deciding clock, so bursts land on the server's window boundaries.
#[derive(Clone, Copy)]
pub struct ServerClock {
    pub start: Instant,
    pub server_start_us: u64,
}

impl ServerClock {
    pub fn now_ms(&self) -> u64 {
        (self.server_start_us
            + Instant::now()
                .saturating_duration_since(self.start)
                .as_micros() as u64)
            / 1000
    }
}

/// The run's start instant and the deciding clock's time at that instant, in µs: Redis TIME (read
/// once), or the system clock the memory backend decides with.
pub async fn align(admin: Option<&Admin>) -> CliResult<(Instant, u64)> {
    match admin {
        Some(ad) => {
            let (server_us, at) = ad.server_time().await?;
            let start = Instant::now() + START_LEAD;
            Ok((start, server_us + (start - at).as_micros() as u64))
        }
        None => {
            let wall = SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_err(|e| Failure::new(e.to_string()))?;
            let start = Instant::now() + START_LEAD;
            Ok((start, (wall + START_LEAD).as_micros() as u64))
        }
    }
}
