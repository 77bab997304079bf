//! Coalescing under load, against a real redis-server: closed-loop callers on one key are
//! answered in batches that take (nearly) all of them, one script call per round trip, instead of
//! alternating between a lone call and a batch of everyone else (which halves the round trips'
//! worth of decisions).

mod common;

use std::time::Duration;

use common::*;
use rl_core::Options;

const CALLERS: usize = 16;
const EACH: usize = 300;

/// Script calls Redis ran so far (FCALL where functions load, else EVALSHA).
fn script_calls(server: &rl_harness::RedisServer) -> i64 {
    let info = cmd(server, &[b"INFO", b"commandstats"]);
    let text = info.as_str().unwrap().to_string();
    text.lines()
        .filter_map(|l| {
            l.strip_prefix("cmdstat_evalsha:calls=")
                .or_else(|| l.strip_prefix("cmdstat_fcall:calls="))
        })
        .map(|rest| rest.split(',').next().unwrap().parse::<i64>().unwrap())
        .sum()
}

#[test]
fn closed_loop_callers_on_one_key_rejoin_the_next_batch() {
    let server = server();
    let limiter = limiter_with(
        &server,
        Options {
            request_timeout: Duration::from_secs(10),
            ..strict()
        },
    );
    // The callers run on the core's runtime, as Node's and asyncio's futures do.
    let rt = rl_core::runtime::handle().unwrap();
    rt.block_on(limiter.acquire("warm", 1, 1000, 1)).unwrap();
    let before = script_calls(&server);
    let tasks: Vec<_> = (0..CALLERS)
        .map(|_| {
            let l = limiter.clone();
            rt.spawn(async move {
                for _ in 0..EACH {
                    let d = l.acquire("hot", 1_000_000, 60_000, 1).await.unwrap();
                    assert!(d.allowed, "{d:?}");
                }
            })
        })
        .collect();
    rt.block_on(async {
        for t in tasks {
            t.await.unwrap();
        }
    });
    let calls = (script_calls(&server) - before) as f64;
    let decisions = (CALLERS * EACH) as f64;
    let per_call = decisions / calls;
    println!("REPORT {CALLERS} closed-loop callers, {decisions} decisions: {calls} script calls, {per_call:.1} decisions per call");
    // A lone call then a batch of the other 15 decides at most 8 per call on average; callers
    // that rejoin the batch after the one that answered them bring it near 16.
    assert!(
        per_call >= 11.0,
        "{per_call:.1} decisions per script call for {CALLERS} closed-loop callers"
    );
    let state = rt.block_on(limiter.peek("hot", 1_000_000, 60_000)).unwrap();
    assert_eq!(state.used, decisions as u64, "every decision counted once");
}
