//! The memory backend is the model: random sequences of acquire/peek/reset with random limits,
//! windows, costs and time steps must get identical decisions from Redis and from memory.

mod common;

use std::sync::Arc;

use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};
use rl_core::{blocking, Limiter, ManualClock};

#[derive(Debug, Clone)]
enum Op {
    Acquire { key: u8, limit: u64, window: u64, cost: u64 },
    Peek { key: u8, limit: u64, window: u64 },
    Reset { key: u8 },
    Advance(u64),
    /// `n` identical acquires at once: on Redis they run concurrently and are coalesced into
    /// batches; their decisions, as a multiset, must equal `n` sequential ones in memory.
    Burst { key: u8, limit: u64, window: u64, cost: u64, n: usize },
}

fn op() -> impl Strategy<Value = Op> {
    // Few keys and small numbers, so windows fill, expire and collide often.
    let limit = 1u64..12;
    let window = prop_oneof![1u64..5, 5u64..200, 200u64..3000];
    prop_oneof![
        6 => (0u8..3, limit.clone(), window.clone(), 1u64..12).prop_map(|(key, limit, window, c)| Op::Acquire { key, limit, window, cost: 1 + c % limit }),
        2 => (0u8..3, limit, window).prop_map(|(key, limit, window)| Op::Peek { key, limit, window }),
        1 => (0u8..3).prop_map(|key| Op::Reset { key }),
        4 => prop_oneof![Just(0u64), 0u64..3, 0u64..400, 0u64..4000].prop_map(Op::Advance),
        1 => (0u8..3, 1u64..12, 1u64..3000, 1u64..12, 2usize..40).prop_map(|(key, limit, window, c, n)| Op::Burst { key, limit, window, cost: 1 + c % limit, n }),
    ]
}

/// Runs one random sequence on fresh keys of both backends; any difference fails the case.
fn run_case(url: &str, case: u64, ops: &[Op]) -> Result<(), TestCaseError> {
    let clock = Arc::new(ManualClock::new(common::wall_ms()));
    // A fresh prefix per case: cases never see each other's windows.
    let options = rl_core::Options { key_prefix: format!("model{case}:"), ..common::client_clock(clock.clone()) };
    let redis = blocking::Limiter::open(Some(url), options.clone()).unwrap();
    let memory = blocking::Limiter::from_async(Limiter::memory(options).unwrap());
    let name = |k: u8| format!("k{k}");
    for (i, op) in ops.iter().enumerate() {
        let (r, m) = match *op {
            Op::Acquire { key, limit, window, cost } => (redis.acquire(name(key), limit, window, cost), memory.acquire(name(key), limit, window, cost)),
            Op::Peek { key, limit, window } => (redis.peek(name(key), limit, window), memory.peek(name(key), limit, window)),
            Op::Reset { key } => {
                redis.reset(name(key)).unwrap();
                memory.reset(name(key)).unwrap();
                continue;
            }
            Op::Advance(ms) => {
                clock.advance(ms);
                continue;
            }
            Op::Burst { key, limit, window, cost, n } => {
                let rt = rl_core::runtime::handle().unwrap();
                let joins: Vec<_> = (0..n)
                    .map(|_| {
                        let (l, k) = (redis.as_async().clone(), name(key));
                        rt.spawn(async move { l.acquire(k, limit, window, cost).await })
                    })
                    .collect();
                let order = |d: &rl_core::Decision| (d.allowed, d.used, d.retry_after_ms, d.reset_after_ms, d.now_ms);
                let mut r: Vec<_> = joins.into_iter().map(|j| order(&rt.block_on(j).unwrap().unwrap())).collect();
                let mut m: Vec<_> = (0..n).map(|_| order(&memory.acquire(name(key), limit, window, cost).unwrap())).collect();
                r.sort_unstable();
                m.sort_unstable();
                prop_assert_eq!(r, m, "op {} {:?}", i, op);
                continue;
            }
        };
        let (mut r, m) = (r.unwrap(), m.unwrap());
        prop_assert_eq!(r.mode, rl_core::Mode::Normal);
        r.mode = m.mode;
        prop_assert_eq!(r, m, "op {} {:?}", i, op);
    }
    Ok(())
}

#[test]
fn redis_and_memory_decide_identically() {
    // The server lives in this test's scope, so it is stopped when the test ends, pass or fail.
    let server = common::server();
    let url = server.url();
    let cases = std::env::var("PROPTEST_CASES").ok().and_then(|c| c.parse().ok()).unwrap_or(200);
    let mut runner = TestRunner::new(Config { cases, ..Config::default() });
    let case = std::sync::atomic::AtomicU64::new(0);
    let result = runner.run(&proptest::collection::vec(op(), 1..60), |ops| {
        run_case(&url, case.fetch_add(1, std::sync::atomic::Ordering::SeqCst), &ops)
    });
    if let Err(e) = result {
        panic!("{e}");
    }
}
