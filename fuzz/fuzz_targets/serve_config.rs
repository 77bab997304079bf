#![no_main]
//! See `fuzz/src/serve_config.rs`: kept out of `rl_fuzz`'s lib, which rl-core's tests include.

#[path = "../src/serve_config.rs"]
mod target;

libfuzzer_sys::fuzz_target!(|data: &[u8]| target::serve_config(data));
