//! One prepared-policies decision (`Prepared::rules`, `acquire_all`, `Prepared::respond`) every
//! few ms, as a middleware at moderate load makes them, each timed by step: what a decision
//! costs when the caches are cold, which a closed loop cannot show (it keeps them warm). A
//! 16 MB sweep between decisions pushes the core's code and data out of the CPU caches.
//!
//!   cargo run --release -p rl-cli --example cold_call -- [URL] [SWEEP_MB] [GAP_US] [N] [blocking|async]
//!
//! URL `memory://` (the default) or a Redis URL, which decides from leases (`leases=on`, one key,
//! 500/s); SWEEP_MB 0; GAP_US 4000 (250 decisions/s); N 5000, the first fifth unmeasured. Prints
//! P50 / P99 / P99.9 per step, the decisions' modes, and the decisions slower than 60 µs.
//! `async` decides as the bindings' async calls do (the async limiter's future polled once in
//! place by `runtime::run_or_spawn`, boxed), rather than by the blocking facade, and prints the
//! future's size.
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use rl_core::blocking::Limiter;
use rl_core::headers::Prepared;
use rl_core::{HeaderStyle, Options, Policy};

fn arg<T: std::str::FromStr>(i: usize, default: T) -> T {
    std::env::args()
        .nth(i)
        .map(|s| s.parse().unwrap_or_else(|_| panic!("argument {i} is {s}")))
        .unwrap_or(default)
}

fn main() {
    let url: String = arg(1, "memory://".to_string());
    let sweep_mb: usize = arg(2, 0);
    let gap = Duration::from_micros(arg(3, 4000));
    let n: usize = arg(4, 5000);
    let via_spawn = match arg::<String>(5, "blocking".into()).as_str() {
        "blocking" => false,
        "async" => true,
        other => panic!("argument 5 is {other:?}; use blocking or async"),
    };
    let mut options = Options::default();
    if url != "memory://" {
        options.set_text("leases=on").expect("leases=on");
    }
    let limiter = Limiter::open(Some(&url), options).expect("open the limiter");
    let policies = Policy::parse_many("500/s").expect("policy");
    let prepared = Prepared::new(policies, HeaderStyle::Ietf).expect("prepare");
    let mut sweep = vec![0u8; sweep_mb << 20];
    let mut steps = [(); 4].map(|_| Histogram::<u64>::new(3).expect("histogram"));
    let mut modes = BTreeMap::new();
    let mut slow = Vec::new();
    for i in 0..n {
        std::thread::sleep(gap);
        for j in (0..sweep.len()).step_by(64) {
            sweep[j] = sweep[j].wrapping_add(1);
        }
        let t0 = Instant::now();
        let rules = prepared.rules(b"client-1", 1);
        let t1 = Instant::now();
        let c = if via_spawn {
            let a = limiter.as_async().clone();
            let fut = async move { a.acquire_all(&rules, None).await };
            if i == 0 {
                println!("future size {}", std::mem::size_of_val(&fut));
            }
            let (tx, rx) = std::sync::mpsc::channel();
            let started = rl_core::runtime::run_or_spawn(fut, move || {
                move |c| {
                    let _ = tx.send(c);
                }
            });
            match started.expect("start") {
                rl_core::runtime::Started::Ready(c) => c,
                rl_core::runtime::Started::Spawned => rx.recv().expect("the spawned decision"),
            }
            .expect("decide")
        } else {
            limiter.acquire_all(&rules, None).expect("decide")
        };
        let t2 = Instant::now();
        let r = prepared.respond(&c).expect("respond");
        let t3 = Instant::now();
        std::hint::black_box(&r);
        if i < n / 5 {
            continue;
        }
        *modes.entry(format!("{:?}", c.mode)).or_insert(0u32) += 1;
        if t3 - t0 > Duration::from_micros(60) {
            slow.push((i, (t3 - t0).as_micros()));
        }
        for (h, d) in steps.iter_mut().zip([t1 - t0, t2 - t1, t3 - t2, t3 - t0]) {
            h.record(d.as_nanos() as u64).expect("record");
        }
    }
    for (name, h) in ["rules", "decide", "respond", "total"].iter().zip(&steps) {
        let q = |p: f64| h.value_at_quantile(p) as f64 / 1e3;
        println!(
            "{name:8} P50 {:6.1} µs  P99 {:6.1} µs  P99.9 {:6.1} µs",
            q(0.5),
            q(0.99),
            q(0.999)
        );
    }
    println!("modes {modes:?}");
    println!("slower than 60 µs: {} (decision, µs): {slow:?}", slow.len());
}
