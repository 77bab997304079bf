#![no_main]
//! See `rl_fuzz::serve_config`.
libfuzzer_sys::fuzz_target!(|data: &[u8]| rl_fuzz::serve_config(data));
