//! The C ABI of rl: `librl.so` / `librl.a`, declared by `include/rl.h` (generated from this crate
//! by cbindgen with `bindings-c/cbindgen.toml`; run `bindings-c/regen-header.sh` after any change
//! here, the test suite fails on a stale header). `generated.rs` is written by rl-gen from
//! rl-core's tables (`cargo run -p rl-gen`).
//!
//! This layer converts types and errors only; every rule (validation, messages, semantics) lives
//! in rl-core. Conventions, modelled on rustls-ffi, one module each:
//!
//! - [`panic`]: every exported function runs its body under [`std::panic::catch_unwind`]: a panic
//!   becomes `RL_PANIC` and never unwinds into C.
//! - [`types`]: the plain types that cross the boundary, and borrowing C pointers safely.
//!   Enums travel out of the library as C enums, but come back in as plain integers
//!   (`rl_mode_name(int)`), so an out-of-range value from C is never undefined behaviour here.
//! - [`errors`]: fallible calls return an `rl_status` and, when the caller passes a non-NULL
//!   `rl_error **`, a heap error with the same code and the core's `Display` message.
//! - [`options`], [`limiter`], [`stats`], [`composite`], [`policies`], [`headers`]: the API
//!   itself. Handles are opaque (`rl_limiter`, `rl_error`, `rl_policies`, `rl_headers`), created
//!   and freed only by this library; result structs (`rl_decision`, `rl_stats`, `rl_composite`)
//!   are the caller's, written by the library.

#![allow(non_camel_case_types)]
#![deny(unsafe_op_in_unsafe_fn)]

mod composite;
mod errors;
mod generated;
mod headers;
mod limiter;
mod options;
mod panic;
mod policies;
mod stats;
mod types;

use std::ffi::c_char;

pub use composite::{RL_MAX_GROUP_BYTES, RL_MAX_RULES};
pub use headers::rl_header_style;

/// Major version of the rl C API this header describes.
pub const RL_VERSION_MAJOR: u32 = 0;
/// Minor version of the rl C API this header describes.
pub const RL_VERSION_MINOR: u32 = 1;
/// Patch version of the rl C API this header describes.
pub const RL_VERSION_PATCH: u32 = 0;
// RL_VERSION (the string) and RL_VERSION_NUMBER are composed from these three in the header
// (cbindgen.toml `after_includes`): cbindgen 0.29 emits no string constants.

/// The library's version, e.g. "0.1.0": a static string, never NULL, never freed. Compare with
/// the header's `RL_VERSION` to catch a program running against a different librl than it was built with.
/// Thread-safe.
#[no_mangle]
pub extern "C" fn rl_version() -> *const c_char {
    concat!(env!("CARGO_PKG_VERSION"), "\0").as_ptr().cast()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::CStr;

    #[test]
    fn version_constants_match_the_package() {
        let want = format!("{RL_VERSION_MAJOR}.{RL_VERSION_MINOR}.{RL_VERSION_PATCH}");
        assert_eq!(want, env!("CARGO_PKG_VERSION"));
        assert_eq!(
            unsafe { CStr::from_ptr(rl_version()) }.to_str().unwrap(),
            want
        );
    }
}
