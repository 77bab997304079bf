//! Gives librl.so its SONAME, `librl.so.<major>`, so programs record the ABI they were linked
//! against and a later compatible librl.so.<major>.<minor>.<patch> can replace it in place.
//! `cargo:rustc-cdylib-link-arg` reaches only this crate's cdylib (not librl.a, not other
//! crates), unlike a RUSTFLAGS setting. The exported symbols need no version script: rustc
//! already exports only the `#[no_mangle] extern "C"` functions from a cdylib (scripts/test-dist.sh
//! checks that `nm -D` shows exactly the functions rl.h declares).
fn main() {
    let major =
        std::env::var("CARGO_PKG_VERSION_MAJOR").expect("cargo sets CARGO_PKG_VERSION_MAJOR");
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,librl.so.{major}");
}
