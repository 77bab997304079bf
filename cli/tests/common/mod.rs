//! What every CLI test file needs: the `rl` binary run as a shell would, and its JSON report.
#![allow(dead_code)] // each test file uses its own subset

use std::process::{Command, Output};
use std::sync::Mutex;

use serde_json::Value;

/// The machine has two cores: two benchmarks at once would measure each other.
pub static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

/// Runs `rl` with `args`; an ambient URL must not redirect a test to someone else's Redis.
pub fn rl(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_rl"))
        .args(args)
        .env_remove("RL_REDIS_URL")
        .output()
        .expect("run rl")
}

/// The JSON a successful `rl ... --json` printed.
pub fn report(out: &Output) -> Value {
    assert_eq!(
        out.status.code(),
        Some(0),
        "rl failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "stdout is not JSON ({e}): {}",
            String::from_utf8_lossy(&out.stdout)
        )
    })
}
