#![no_main]
//! See `rl_fuzz::policy`.
libfuzzer_sys::fuzz_target!(|data: &[u8]| rl_fuzz::policy(data));
