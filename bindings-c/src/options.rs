//! `rl_options` → `rl_core::Options`. The struct and the table of its fields are generated from
//! rl-core's option table (`generated.rs`); here each field the caller's struct version has
//! becomes a `(name, Value)` pair for `Options::from_pairs`, so ranges, defaults and messages are
//! the core's and errors name the option's external key.

use std::ffi::c_char;

use rl_core::options::Value;
use rl_core::Options;

use crate::errors::{invalid, Failure};
use crate::generated::{rl_options, OPTIONS_SIZES, OPTION_FIELDS};
use crate::types::opt_str;

/// Put in `rl_options.retry_delay_ms` to retry a failed call at once (a zero delay; 0 itself
/// means the default, 50 ms).
pub const RL_RETRY_IMMEDIATELY: u64 = u64::MAX;

/// Put in `rl_options.busy_poll_us` for a caller that never polls for its reply (0 itself means
/// the default, 100 µs).
pub const RL_BUSY_POLL_OFF: u64 = u64::MAX;

// What `Convention::MaxForZero` reads as 0 (the constants exist for rl.h).
const _: () = assert!(RL_RETRY_IMMEDIATELY == u64::MAX && RL_BUSY_POLL_OFF == u64::MAX);

/// How a C field spells its option. C has no "unset", so zero (NULL, false) is the default;
/// each variant reads the field's C type.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Convention {
    /// `const char *`: NULL is the default.
    Text,
    /// `uint64_t`: 0 is the default; any other value goes to the core as-is (which names it if it
    /// is out of range).
    Number,
    /// As `Number`, with u64::MAX (`RL_RETRY_IMMEDIATELY`, `RL_BUSY_POLL_OFF`) for 0.
    MaxForZero,
    /// `bool`: false is the default (the option's default is false), true sets it.
    Flag,
    /// `bool` named `disable_<option>`: false is the default (the option's default is true),
    /// true sets the option to false.
    InvertedFlag,
}

/// One field of `rl_options` after `struct_size`.
pub(crate) struct OptionField {
    /// The core's external name of the option the field sets.
    pub option: &'static str,
    /// The struct version that appended the field.
    pub version: u32,
    /// Where the field is in the struct.
    pub offset: usize,
    pub convention: Convention,
}

impl Convention {
    /// # Safety
    /// `field` points to a readable, aligned field of this convention's C type.
    unsafe fn read(self, field: *const u8, option: &'static str) -> Result<Value, Failure> {
        // Bools are read as a byte: any non-zero value a C caller left there means true, never
        // undefined behaviour.
        // SAFETY (every read below): forwarded from the caller.
        Ok(match self {
            Convention::Text => {
                let p = unsafe { field.cast::<*const c_char>().read() };
                // SAFETY: the caller of rl_limiter_open promises a NUL-terminated string or NULL.
                match unsafe { opt_str(p, option) }? {
                    Some(s) => Value::Text(s.to_owned()),
                    None => Value::Null,
                }
            }
            Convention::Number | Convention::MaxForZero => {
                match (self, unsafe { field.cast::<u64>().read() }) {
                    (_, 0) => Value::Null,
                    (Convention::MaxForZero, u64::MAX) => Value::Int(0),
                    (_, n) => Value::Int(n.into()),
                }
            }
            Convention::Flag => match unsafe { field.read() } {
                0 => Value::Null,
                _ => Value::Bool(true),
            },
            Convention::InvertedFlag => match unsafe { field.read() } {
                0 => Value::Null,
                _ => Value::Bool(false),
            },
        })
    }
}

/// The struct version whose size is `size`, or an error saying what is wrong with it.
fn version(size: usize) -> Result<u32, Failure> {
    if let Some((v, _)) = OPTIONS_SIZES.iter().find(|(_, s)| *s == size) {
        return Ok(*v);
    }
    let (smallest, largest) = (OPTIONS_SIZES[0].1, OPTIONS_SIZES[OPTIONS_SIZES.len() - 1].1);
    Err(invalid(
        "options",
        if size == 0 {
            "struct_size is 0; initialise the struct with rl_options_default() or set struct_size = sizeof(rl_options)".to_string()
        } else if size < smallest {
            format!("struct_size is {size}; the smallest known rl_options is {smallest} bytes")
        } else if size > largest {
            format!("struct_size is {size}, larger than this library's rl_options ({largest} bytes): the program was built against a newer rl.h than the librl it runs with")
        } else {
            let known: Vec<String> = OPTIONS_SIZES.iter().map(|(_, s)| s.to_string()).collect();
            format!("struct_size is {size}, which is no version of rl_options (known sizes: {} bytes); set struct_size = sizeof(rl_options)", known.join(", "))
        },
    ))
}

/// # Safety
/// `p` is NULL or points to an `rl_options` of at least `struct_size` bytes whose `key_prefix` is
/// NULL or NUL-terminated.
pub(crate) unsafe fn read_options(p: *const rl_options) -> Result<Options, Failure> {
    if p.is_null() {
        return Ok(Options::default());
    }
    // SAFETY: every version of the struct starts with `struct_size`.
    let size = unsafe { std::ptr::addr_of!((*p).struct_size).read() };
    let version = version(size)?;
    // Only the fields the caller's version has are read, so a caller compiled against an older
    // header (a smaller struct) keeps working and gets defaults for the rest.
    let mut pairs = Vec::with_capacity(OPTION_FIELDS.len());
    for f in OPTION_FIELDS.iter().filter(|f| f.version <= version) {
        // SAFETY: the field lies within the caller's `size` bytes (its version is at most the
        // caller's), at its offset in the struct.
        let value = unsafe { f.convention.read(p.cast::<u8>().add(f.offset), f.option) }?;
        pairs.push((f.option, value));
    }
    Ok(Options::from_pairs(pairs)?)
}

/// Returns an `rl_options` with `struct_size` set and every other field zero/NULL, i.e. all
/// defaults (each field's doc gives its default).
///
/// Never fails. Thread-safe.
#[no_mangle]
pub extern "C" fn rl_options_default() -> rl_options {
    // SAFETY: every field is an integer, a bool or a raw pointer, for which zero bytes are valid
    // (0, false, NULL).
    let mut o: rl_options = unsafe { std::mem::zeroed() };
    o.struct_size = std::mem::size_of::<rl_options>();
    o
}

#[cfg(test)]
mod tests {
    use super::*;
    use rl_core::options::OPTIONS;
    use std::time::Duration;

    fn read(o: &rl_options) -> Options {
        match unsafe { read_options(o) } {
            Ok(o) => o,
            Err(f) => panic!("{}", f.message()),
        }
    }

    fn error(o: &rl_options) -> String {
        match unsafe { read_options(o) } {
            Ok(_) => panic!("accepted"),
            Err(f) => f.message(),
        }
    }

    #[test]
    fn every_option_has_one_field() {
        for s in OPTIONS {
            let n = OPTION_FIELDS.iter().filter(|f| f.option == s.name).count();
            assert_eq!(n, 1, "{}", s.name);
        }
    }

    #[test]
    fn zeroed_is_all_defaults() {
        let d = format!("{:?}", Options::default());
        assert_eq!(format!("{:?}", read(&rl_options_default())), d);
        assert_eq!(
            format!(
                "{:?}",
                unsafe { read_options(std::ptr::null()) }.ok().unwrap()
            ),
            d
        );
    }

    #[test]
    fn options_versions() {
        // Version 1 ended after request_timeout_ms: four 8-byte fields on 64-bit targets;
        // version 2 after local_max_keys; version 4 after disable_denial_cache, padded (what
        // `sizeof` gave programs built against it).
        #[cfg(target_pointer_width = "64")]
        assert_eq!(
            OPTIONS_SIZES[..4],
            [(1, 32), (2, 96), (3, 112), (4, 152)],
            "a released version's size changed"
        );
        for w in OPTIONS_SIZES.windows(2) {
            assert!(
                w[0].1 < w[1].1,
                "versions {:?} and {:?} share a size",
                w[0],
                w[1]
            );
        }
        // A version-1 struct: only its fields are read, the rest are defaults.
        #[repr(C)]
        struct V1 {
            struct_size: usize,
            key_prefix: *const c_char,
            connect_timeout_ms: u64,
            request_timeout_ms: u64,
        }
        assert_eq!(std::mem::size_of::<V1>(), OPTIONS_SIZES[0].1);
        let v1 = V1 {
            struct_size: OPTIONS_SIZES[0].1,
            key_prefix: c"p:".as_ptr(),
            connect_timeout_ms: 7,
            request_timeout_ms: 0,
        };
        let o = unsafe { read_options((&v1 as *const V1).cast()) }
            .ok()
            .unwrap();
        let d = Options::default();
        assert_eq!(o.key_prefix, "p:");
        assert_eq!(o.connect_timeout, Duration::from_millis(7));
        assert_eq!(o.request_timeout, d.request_timeout);
        assert_eq!(o.retry_delay, d.retry_delay);
        assert!(o.local_fallback);
        assert_eq!(o.instances, None);
        // The current version: every field converted; zero is the default.
        let mut c = rl_options_default();
        c.retry_delay_ms = RL_RETRY_IMMEDIATELY;
        c.disable_local_fallback = true;
        c.degrade_rtt_ms = 11;
        c.degrade_after_ms = 12;
        c.recover_rtt_ms = 3;
        c.recover_after_ms = 14;
        c.instances = 4;
        c.local_max_keys = 15;
        c.client_clock = true;
        c.max_clock_skew_ms = 16;
        let o = read(&c);
        assert_eq!(o.retry_delay, Duration::ZERO);
        assert!(!o.local_fallback);
        assert_eq!(
            (
                o.degrade_rtt,
                o.degrade_after,
                o.recover_rtt,
                o.recover_after
            ),
            (
                Duration::from_millis(11),
                Duration::from_millis(12),
                Duration::from_millis(3),
                Duration::from_millis(14)
            )
        );
        assert_eq!((o.instances, o.local_max_keys), (Some(4), 15));
        assert!(o.clock.is_some());
        assert_eq!(o.max_clock_skew_ms, 16);
        c.retry_delay_ms = 20;
        assert_eq!(read(&c).retry_delay, Duration::from_millis(20));
        assert_eq!(o.busy_poll, d.busy_poll);
        c.busy_poll_us = RL_BUSY_POLL_OFF;
        assert_eq!(read(&c).busy_poll, Duration::ZERO);
        c.busy_poll_us = 250;
        assert_eq!(read(&c).busy_poll, Duration::from_micros(250));
        // Version 4: busy_poll_us is not read.
        c.struct_size = OPTIONS_SIZES[3].1;
        assert_eq!(read(&c).busy_poll, d.busy_poll);
        // Version 2: client_clock and max_clock_skew_ms are not read.
        c.struct_size = OPTIONS_SIZES[1].1;
        let o = read(&c);
        assert!(o.clock.is_none());
        assert_eq!(o.max_clock_skew_ms, d.max_clock_skew_ms);
        assert_eq!(o.local_max_keys, 15);
        // Sizes between the versions are refused.
        c.struct_size = OPTIONS_SIZES[0].1 + 8;
        assert!(error(&c).contains("which is no version of rl_options"));
    }

    #[test]
    fn errors_name_the_cores_key() {
        let mut c = rl_options_default();
        c.local_max_keys = u64::MAX;
        assert_eq!(
            error(&c),
            "invalid argument `local_max_keys`: is 18446744073709551615; must be between 1 and 10000000"
        );
        let mut c = rl_options_default();
        c.retry_delay_ms = 60_001;
        assert_eq!(
            error(&c),
            "invalid argument `retry_delay_ms`: is 60001 ms; must be between 0 and 60000 ms"
        );
        let mut c = rl_options_default();
        c.key_prefix = c"a\xff".as_ptr();
        assert_eq!(
            error(&c),
            "invalid argument `key_prefix`: is not valid UTF-8 (invalid byte at offset 1)"
        );
    }
}
