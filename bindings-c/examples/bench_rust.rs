//! The Rust side of `bindings-c/bench`: the same two workloads as `bench/bench_c.c`, through
//! `rl_core::blocking::Limiter` as a Rust program without an async runtime would call it, so
//! `bench/run.sh` can put the C ABI's cost next to the facade it wraps.
//!
//!   bench_rust memory ITERATIONS             one thread, memory backend: ns per acquire
//!   bench_rust redis URL THREADS SECONDS     THREADS threads sharing one limiter: decisions/s
//!
//! Output lines match bench_c's: `memory ns_per_call=...` and `redis threads=... decisions_per_s=...`.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rl_core::blocking::Limiter;
use rl_core::{Options, MAX_PERMITS};

const KEY: &[u8] = b"bench:c-vs-rust";
const WINDOW_MS: u64 = 1000;

fn usage() -> ! {
    eprintln!("usage: bench_rust memory ITERATIONS | bench_rust redis URL THREADS SECONDS");
    std::process::exit(2)
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("memory") => {
            let iters: u64 = args
                .get(1)
                .and_then(|s| s.parse().ok())
                .unwrap_or_else(|| usage());
            let l = Limiter::open(None, Options::default()).expect("open memory limiter");
            // Warm up: the runtime, the shard map, the key's window.
            for _ in 0..iters / 10 {
                l.acquire(KEY, MAX_PERMITS, WINDOW_MS, 1).expect("acquire");
            }
            let start = Instant::now();
            let mut allowed = 0u64;
            for _ in 0..iters {
                let d = l.acquire(KEY, MAX_PERMITS, WINDOW_MS, 1).expect("acquire");
                allowed += d.allowed as u64;
            }
            let ns = start.elapsed().as_nanos() as f64 / iters as f64;
            assert_eq!(allowed, iters);
            println!("memory ns_per_call={ns:.1}");
        }
        Some("redis") => {
            let url = args.get(1).unwrap_or_else(|| usage()).clone();
            let threads: usize = args
                .get(2)
                .and_then(|s| s.parse().ok())
                .unwrap_or_else(|| usage());
            let seconds: f64 = args
                .get(3)
                .and_then(|s| s.parse().ok())
                .unwrap_or_else(|| usage());
            let opts = Options {
                request_timeout: Duration::from_secs(5),
                connect_timeout: Duration::from_secs(5),
                ..Options::default()
            };
            let l = Limiter::open(Some(&url), opts).expect("open redis limiter");
            l.ping().expect("ping");
            l.reset(KEY).expect("reset");
            let stop = Arc::new(AtomicBool::new(false));
            let done = Arc::new(AtomicU64::new(0));
            let start = Instant::now();
            let workers: Vec<_> = (0..threads)
                .map(|_| {
                    let (l, stop, done) = (l.clone(), stop.clone(), done.clone());
                    std::thread::spawn(move || {
                        let mut n = 0u64;
                        while !stop.load(Ordering::Relaxed) {
                            l.acquire(KEY, MAX_PERMITS, WINDOW_MS, 1).expect("acquire");
                            n += 1;
                        }
                        done.fetch_add(n, Ordering::Relaxed);
                    })
                })
                .collect();
            std::thread::sleep(Duration::from_secs_f64(seconds));
            stop.store(true, Ordering::Relaxed);
            for w in workers {
                w.join().expect("worker");
            }
            let elapsed = start.elapsed().as_secs_f64();
            let n = done.load(Ordering::Relaxed);
            println!(
                "redis threads={threads} decisions_per_s={:.0}",
                n as f64 / elapsed
            );
        }
        _ => usage(),
    }
}
