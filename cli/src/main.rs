//! `rl`: one-off decisions against a key, and the benchmarks that back the design's numbers.
//!
//! Exit codes are part of the interface so shell scripts can branch on a decision without parsing:
//! 0 allowed (or done), 1 denied (acquire only), 2 error (message on stderr), 130 interrupted.

mod args;
mod bench;
mod cmd_key;
mod latency;
mod options;
mod progress;
mod redis_admin;
mod soak;
mod target;
mod throughput;

use std::process::ExitCode;

use clap::Parser;

use args::{Cli, Command};

/// A failed command: everything that is not a decision ends here, printed once by `main`.
#[derive(Debug)]
pub struct Failure {
    pub message: String,
    pub code: u8,
}

impl Failure {
    pub fn new(message: impl Into<String>) -> Self {
        Failure {
            message: message.into(),
            code: EXIT_ERROR,
        }
    }

    pub fn interrupted() -> Self {
        Failure {
            message: "interrupted".into(),
            code: EXIT_INTERRUPTED,
        }
    }
}

impl<E: std::fmt::Display> From<E> for Failure {
    fn from(e: E) -> Self {
        Failure::new(e.to_string())
    }
}

pub type CliResult<T> = Result<T, Failure>;

pub const EXIT_ALLOWED: u8 = 0;
pub const EXIT_DENIED: u8 = 1;
pub const EXIT_ERROR: u8 = 2;
pub const EXIT_INTERRUPTED: u8 = 130;

fn main() -> ExitCode {
    let cli = Cli::parse();
    let outcome = match cli.command {
        Command::Acquire(a) => cmd_key::acquire(a),
        Command::Peek(a) => cmd_key::peek(a),
        Command::Reset(a) => cmd_key::reset(a),
        Command::Bench(a) => bench::run(a),
        Command::Throughput(a) => throughput::run(a),
        Command::Options => options::list(),
        Command::Serve(a) => serve(a),
        Command::BenchWorker(a) => bench::hotkey::worker::run(a),
        Command::Soak(a) => soak::run(a),
    };
    match outcome {
        Ok(code) => ExitCode::from(code),
        Err(f) => {
            eprintln!("rl: error: {}", f.message);
            ExitCode::from(f.code)
        }
    }
}

/// `rl serve`: runs until SIGTERM / SIGINT (exit 0), or fails to start (exit 2).
fn serve(a: rl_serve::ServeArgs) -> CliResult<u8> {
    rl_serve::init_logs(&a.log_format);
    a.runtime()
        .map_err(|e| Failure::new(format!("cannot start the async runtime: {e}")))?
        .block_on(rl_serve::run(a))
        .map_err(Failure::new)?;
    Ok(EXIT_ALLOWED)
}

/// The runtime every subcommand uses. Multi-threaded because the benchmarks measure a limiter
/// shared across tasks the way a gateway shares it across worker threads.
pub fn runtime() -> CliResult<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| Failure::new(format!("cannot start the async runtime: {e}")))
}

/// Runs `work` until it ends or Ctrl-C, so a benchmark's private redis-server is still stopped by
/// its owner's normal drop path when the user gives up on a run.
pub async fn until_interrupted<T>(
    work: impl std::future::Future<Output = CliResult<T>>,
) -> CliResult<T> {
    tokio::select! {
        r = work => r,
        _ = tokio::signal::ctrl_c() => Err(Failure::interrupted()),
    }
}
