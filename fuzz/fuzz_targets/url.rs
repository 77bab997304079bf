#![no_main]
//! See `rl_fuzz::url`.
libfuzzer_sys::fuzz_target!(|data: &[u8]| rl_fuzz::url(data));
