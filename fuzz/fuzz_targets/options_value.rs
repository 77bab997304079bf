#![no_main]
//! See `rl_fuzz::options_value`.
libfuzzer_sys::fuzz_target!(|data: &[u8]| rl_fuzz::options_value(data));
