//! Memory per key grows with milliseconds that admitted something, not with permits: 5000
//! permits/s in a 1 s window must fit in 128 KiB (the design's ZSET took 631-787 KiB).

mod common;

use std::sync::Arc;

use common::*;
use rl_core::ManualClock;

#[test]
fn five_thousand_permits_per_second_fit_in_128_kib_at_1ms_resolution() {
    let server = server();
    let t0 = wall_ms();
    let clock = Arc::new(ManualClock::new(t0));
    let l = blocking_with(&server, client_clock(clock.clone()));
    // 5 permits in every millisecond for two seconds: the window always holds 1000 buckets.
    for ms in 0..2000u64 {
        clock.set(t0 + ms);
        for _ in 0..5 {
            let d = l.acquire("mem", 5000, 1000, 1).unwrap();
            assert!(d.allowed, "at +{ms} ms: {d:?}");
        }
    }
    let d = l.peek("mem", 5000, 1000).unwrap();
    assert_eq!(
        d.used, 5000,
        "exact: the window (t-1000, t] holds 1000 ms x 5 permits"
    );
    let key = l.redis_key("mem");
    let bytes = cmd(&server, &[b"MEMORY", b"USAGE", &key, b"SAMPLES", b"0"])
        .as_int()
        .unwrap();
    eprintln!(
        "MEMORY USAGE at 5000 permits/s, 1 s window: {bytes} bytes ({:.1} KiB)",
        bytes as f64 / 1024.0
    );
    assert!(bytes <= 128 * 1024, "{bytes} bytes");
    // Full: the 5001st permit in the window is refused.
    assert!(!l.acquire("mem", 5000, 1000, 1).unwrap().allowed);
}
