//! Signals and liveness checks by pid, for processes we may not be the parent of.

use std::io;
use std::path::Path;
use std::thread::sleep;
use std::time::{Duration, Instant};

pub fn signal(pid: u32, sig: libc::c_int) -> io::Result<()> {
    // SAFETY: kill(2) has no memory-safety preconditions.
    if unsafe { libc::kill(pid as libc::pid_t, sig) } == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// A zombie counts as dead: once a detached server's launcher exits, its
/// reaper may be a pid 1 that never calls wait, so kill(pid, 0) alone would
/// report it alive forever.
pub fn is_alive(pid: u32) -> bool {
    if signal(pid, 0).is_err_and(|e| e.raw_os_error() == Some(libc::ESRCH)) {
        return false;
    }
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        // The state follows the parenthesised command name, which may itself contain ')'.
        Ok(stat) => !stat
            .rsplit_once(')')
            .is_some_and(|(_, rest)| rest.trim_start().starts_with(['Z', 'X'])),
        // Without procfs, trust kill(2); with it, the process just vanished.
        Err(_) => !Path::new("/proc/self").exists(),
    }
}

pub fn wait_until_dead(pid: u32, timeout: Duration) -> bool {
    let deadline = Instant::now() + timeout;
    while is_alive(pid) {
        if Instant::now() >= deadline {
            return false;
        }
        sleep(Duration::from_millis(10));
    }
    true
}

/// SIGTERM, then SIGKILL if it has not exited within `grace`. For processes
/// that are not our children; our own children are stopped via `Child`.
pub fn terminate(pid: u32, grace: Duration) -> io::Result<()> {
    let _ = signal(pid, libc::SIGCONT); // a frozen server cannot act on SIGTERM
    match signal(pid, libc::SIGTERM) {
        Err(e) if e.raw_os_error() == Some(libc::ESRCH) => return Ok(()),
        r => r?,
    }
    if !wait_until_dead(pid, grace) {
        let _ = signal(pid, libc::SIGKILL);
        if !wait_until_dead(pid, Duration::from_secs(5)) {
            return Err(io::Error::other(format!("pid {pid} survived SIGKILL")));
        }
    }
    Ok(())
}
