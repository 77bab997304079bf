//! The plain types that cross the boundary (decisions, modes) and the checks that turn C
//! pointers into Rust borrows.

use std::ffi::{c_char, c_int, CStr, CString};
use std::sync::OnceLock;

use rl_core::{Decision, Mode, MAX_KEY_BYTES};

use crate::errors::{invalid, Failure};
use crate::generated::{rl_mode, MODES};

/// The answer to one `rl_acquire` or `rl_peek`: every field of the core's Decision. All times are
/// milliseconds on the deciding clock (Redis `TIME` for Redis, the system clock for memory).
/// The caller owns it (usually on the stack); the library only writes it.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct rl_decision {
    /// Whether the permits were granted (for `rl_peek`: whether one permit would be).
    pub allowed: bool,
    /// Permits left in the window after this call: `limit - used`.
    pub remaining: u64,
    /// Permits counted in the window after this call (denied requests are not counted).
    pub used: u64,
    /// 0 if allowed; otherwise the wait after which the same request fits, if nothing else is
    /// admitted meanwhile.
    pub retry_after_ms: u64,
    /// When the window is empty again if nothing else is admitted; 0 if it is empty now.
    pub reset_after_ms: u64,
    /// Which path decided.
    pub mode: rl_mode,
    /// The time of the decision (Unix ms): Redis server time for Redis.
    pub now_ms: u64,
}

/// The C value of a core mode (its index in `Mode::ALL`).
pub(crate) fn to_c_mode(mode: Mode) -> Result<rl_mode, Failure> {
    Mode::ALL
        .iter()
        .position(|m| *m == mode)
        .and_then(|i| MODES.get(i).copied())
        // A mode added to the core needs `cargo run -p rl-gen`. Never invent a value.
        .ok_or_else(|| {
            Failure::Internal(format!(
                "internal error: rl-core decided in mode {mode:?}, which this build of the C binding cannot represent (please report this)"
            ))
        })
}

pub(crate) fn to_c_decision(d: Decision) -> Result<rl_decision, Failure> {
    Ok(rl_decision {
        allowed: d.allowed,
        remaining: d.remaining,
        used: d.used,
        retry_after_ms: d.retry_after_ms,
        reset_after_ms: d.reset_after_ms,
        mode: to_c_mode(d.mode)?,
        now_ms: d.now_ms,
    })
}

/// The lowercase name of a mode (`rl_core::Mode::as_str`: "normal", "memory", "local"), the same
/// names every rl binding uses; "unknown" for a value this library does not know. Takes an `int`
/// so any value is safe to pass. Returns a static string: never NULL, never freed. Thread-safe.
#[no_mangle]
pub extern "C" fn rl_mode_name(mode: c_int) -> *const c_char {
    mode_name(mode).as_ptr()
}

fn mode_name(mode: c_int) -> &'static CStr {
    static NAMES: OnceLock<Vec<CString>> = OnceLock::new();
    let names = NAMES.get_or_init(|| {
        Mode::ALL
            .iter()
            .map(|m| CString::new(m.as_str()).unwrap_or_default())
            .collect()
    });
    usize::try_from(mode)
        .ok()
        .and_then(|i| names.get(i))
        .map_or(c"unknown", |n| n.as_c_str())
}

pub(crate) fn non_null<T>(p: *const T, name: &'static str) -> Result<(), Failure> {
    if p.is_null() {
        Err(invalid(name, "must not be NULL"))
    } else {
        Ok(())
    }
}

/// # Safety
/// `p` is NULL or a NUL-terminated string that stays valid for `'a`.
pub(crate) unsafe fn opt_str<'a>(
    p: *const c_char,
    name: &'static str,
) -> Result<Option<&'a str>, Failure> {
    if p.is_null() {
        return Ok(None);
    }
    // SAFETY: forwarded from the caller.
    let bytes = unsafe { CStr::from_ptr(p) };
    match bytes.to_str() {
        Ok(s) => Ok(Some(s)),
        Err(e) => Err(invalid(
            name,
            format!(
                "is not valid UTF-8 (invalid byte at offset {})",
                e.valid_up_to()
            ),
        )),
    }
}

/// # Safety
/// `key` is NULL or points to `len` readable bytes.
pub(crate) unsafe fn key_bytes<'a>(key: *const u8, len: usize) -> Result<&'a [u8], Failure> {
    non_null(key, "key")?;
    if len > MAX_KEY_BYTES {
        // Checked here, before a slice exists, so a length the caller got wrong is never read
        // (and a length past isize::MAX never becomes a slice). Same words as the core's check;
        // a unit test keeps them identical.
        return Err(invalid(
            "key",
            format!("is {len} bytes; at most {MAX_KEY_BYTES} are allowed"),
        ));
    }
    // SAFETY: non-NULL, and the caller promises `len` readable bytes.
    Ok(unsafe { std::slice::from_raw_parts(key, len) })
}

/// `s` as a NUL-terminated C string in a fixed array: cut at the first NUL, and truncated at a
/// character boundary to leave room for the terminator.
pub(crate) fn c_chars<const N: usize>(s: &str) -> [c_char; N] {
    let s = s.split('\0').next().unwrap_or("");
    let mut end = s.len().min(N - 1);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    let mut a = [0 as c_char; N];
    for (d, b) in a.iter_mut().zip(&s.as_bytes()[..end]) {
        *d = *b as c_char;
    }
    a
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modes_are_the_cores_in_order() {
        for (i, m) in Mode::ALL.iter().enumerate() {
            let c = to_c_mode(*m).ok().unwrap();
            assert_eq!(c as usize, i);
            assert_eq!(mode_name(c as c_int).to_str().unwrap(), m.as_str());
        }
        assert_eq!(mode_name(-1).to_str().unwrap(), "unknown");
        assert_eq!(
            mode_name(Mode::ALL.len() as c_int).to_str().unwrap(),
            "unknown"
        );
    }

    #[test]
    fn c_chars_truncates_at_a_char_boundary() {
        let a: [c_char; 4] = c_chars("abcdef");
        assert_eq!(a.map(|c| c as u8), *b"abc\0");
        let a: [c_char; 4] = c_chars("a\u{e9}\u{e9}"); // a + two 2-byte chars: only one fits
        assert_eq!(a.map(|c| c as u8), [b'a', 0xc3, 0xa9, 0]);
        let a: [c_char; 8] = c_chars("x\0y");
        assert_eq!(a.map(|c| c as u8), *b"x\0\0\0\0\0\0\0");
    }
}
