//! `rl acquire|peek|reset KEY`: one decision against one key, for shell scripts and for poking at a
//! limiter by hand.

use rl_core::{BackendKind, Decision, Limiter, Options};
use serde::Serialize;

use crate::args::{Backend, KeyCmd, PeekCmd, ResetCmd};
use crate::{runtime, CliResult, EXIT_ALLOWED, EXIT_DENIED};

/// Read only when `--redis` is absent; lets a shell session point every call at one Redis.
pub const ENV_REDIS_URL: &str = "RL_REDIS_URL";

pub fn acquire(a: KeyCmd) -> CliResult<u8> {
    let limiter = open(&a.backend)?;
    let d = runtime()?.block_on(limiter.acquire(&a.key, a.rule.limit, a.rule.window, a.cost))?;
    print_decision(
        &limiter,
        "acquire",
        &a.key,
        a.rule.limit,
        a.rule.window,
        Some(a.cost),
        &d,
        a.backend.json,
    )?;
    Ok(if d.allowed { EXIT_ALLOWED } else { EXIT_DENIED })
}

/// Exits 0 whatever the answer: a peek is a question, not a request that can be refused.
pub fn peek(a: PeekCmd) -> CliResult<u8> {
    let limiter = open(&a.backend)?;
    let d = runtime()?.block_on(limiter.peek(&a.key, a.rule.limit, a.rule.window))?;
    print_decision(
        &limiter,
        "peek",
        &a.key,
        a.rule.limit,
        a.rule.window,
        None,
        &d,
        a.backend.json,
    )?;
    Ok(EXIT_ALLOWED)
}

pub fn reset(a: ResetCmd) -> CliResult<u8> {
    let limiter = open(&a.backend)?;
    runtime()?.block_on(limiter.reset(&a.key))?;
    if a.backend.json {
        let out = ResetJson {
            op: "reset",
            key: &a.key,
            backend: limiter.backend().to_string(),
        };
        println!("{}", serde_json::to_string(&out)?);
    } else {
        println!("reset {:?} ({})", a.key, limiter.backend());
    }
    Ok(EXIT_ALLOWED)
}

fn open(b: &Backend) -> CliResult<Limiter> {
    let url = b
        .redis
        .clone()
        .or_else(|| std::env::var(ENV_REDIS_URL).ok().filter(|u| !u.is_empty()));
    // A one-shot command keeps no state between runs, so a local decision would mean nothing:
    // an unreachable Redis is an error (exit 2), not a local answer.
    let options = crate::options::build(
        Options {
            local_fallback: false,
            ..Options::default()
        },
        b.prefix.as_deref(),
        &b.options,
    )?;
    let limiter = Limiter::open(url.as_deref(), options)?;
    if limiter.backend() == BackendKind::Memory {
        // Each `rl` invocation is its own process, so a memory window never outlives one call.
        eprintln!(
            "rl: note: no --redis or {ENV_REDIS_URL}: using the in-process memory backend, \
             whose state is gone when this command exits"
        );
    }
    Ok(limiter)
}

#[derive(Serialize)]
struct DecisionJson<'a> {
    op: &'a str,
    key: &'a str,
    allowed: bool,
    remaining: u64,
    used: u64,
    limit: u64,
    window_ms: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    cost: Option<u64>,
    retry_after_ms: u64,
    reset_after_ms: u64,
    mode: &'static str,
    now_ms: u64,
    backend: String,
}

#[derive(Serialize)]
struct ResetJson<'a> {
    op: &'a str,
    key: &'a str,
    backend: String,
}

#[allow(clippy::too_many_arguments)]
fn print_decision(
    limiter: &Limiter,
    op: &str,
    key: &str,
    limit: u64,
    window_ms: u64,
    cost: Option<u64>,
    d: &Decision,
    json: bool,
) -> CliResult<()> {
    if json {
        let out = DecisionJson {
            op,
            key,
            allowed: d.allowed,
            remaining: d.remaining,
            used: d.used,
            limit,
            window_ms,
            cost,
            retry_after_ms: d.retry_after_ms,
            reset_after_ms: d.reset_after_ms,
            mode: d.mode.as_str(),
            now_ms: d.now_ms,
            backend: limiter.backend().to_string(),
        };
        println!("{}", serde_json::to_string(&out)?);
        return Ok(());
    }
    let verdict = match (op, d.allowed) {
        ("peek", true) => "would allow",
        ("peek", false) => "would deny",
        (_, true) => "ALLOWED",
        (_, false) => "DENIED",
    };
    println!("{verdict} {key:?}");
    println!("  used         {} of {limit} in {window_ms} ms", d.used);
    println!("  remaining    {}", d.remaining);
    if !d.allowed {
        println!("  retry after  {} ms", d.retry_after_ms);
    }
    println!("  reset after  {} ms", d.reset_after_ms);
    println!(
        "  decided by   {} ({} mode) at {} ms",
        limiter.backend(),
        d.mode,
        d.now_ms
    );
    Ok(())
}
