//! The limiter handle and the calls on it.

use std::ffi::c_char;
use std::panic::{catch_unwind, AssertUnwindSafe};

use rl_core::blocking::Limiter;

use crate::errors::{invalid, rl_error, rl_status, Failure};
use crate::generated::rl_options;
use crate::options::read_options;
use crate::panic::boundary;
use crate::types::{key_bytes, non_null, opt_str, rl_decision, to_c_decision};

/// A limiter: an exact sliding-window rate limiter over Redis or process memory. Opaque; made by
/// `rl_limiter_open`, freed by `rl_limiter_free`. Thread-safe: one handle may be used by any
/// number of threads at once.
pub struct rl_limiter {
    pub(crate) inner: Limiter,
}

/// # Safety
/// `p` is NULL or points to a live `rl_limiter`.
pub(crate) unsafe fn limiter_ref<'a>(p: *const rl_limiter) -> Result<&'a Limiter, Failure> {
    non_null(p, "limiter")?;
    // SAFETY: non-NULL; the caller promises it came from rl_limiter_open and was not freed.
    Ok(unsafe { &(*p).inner })
}

/// Opens a limiter and stores it in `*out`.
///
/// - `url`: NUL-terminated UTF-8 `redis://[user:password@]host:port[/db]`, `rediss://` (TLS),
///   `redis+unix://` / `unix://`, `redis+sentinel://host:port,host:port/<master>[/db]`,
///   `redis+cluster://host:port,host:port` (and `rediss+` variants), or `memory://`. NULL: the
///   in-process memory backend (exact within this process, shared with nothing else).
/// - `options`: NULL for all defaults, else a struct from `rl_options_default()`; read during the
///   call only.
/// - `out`: must not be NULL. On success `*out` is a new handle the caller owns and must release
///   with `rl_limiter_free`; on failure `*out` is set to NULL.
/// - `err`: NULL, or where to store an `rl_error *` on failure (set to NULL on success). The caller
///   frees it with `rl_error_free`. A previous value in `*err` is overwritten, not freed.
///
/// Does no network I/O: Redis is connected on first use (call `rl_ping` to fail fast at startup),
/// so opening never blocks and a limiter survives Redis restarts.
///
/// Returns `RL_OK`, or `RL_INVALID_ARGUMENT` for a NULL `out`, a non-UTF-8 or unsupported `url`,
/// or a bad option (the message names it). Thread-safe.
///
/// # Safety
/// `url` and `options->key_prefix` are NULL or NUL-terminated; `options` is NULL or points to an
/// `rl_options` of `options->struct_size` bytes; `out` and `err` are NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn rl_limiter_open(
    url: *const c_char,
    options: *const rl_options,
    out: *mut *mut rl_limiter,
    err: *mut *mut rl_error,
) -> rl_status {
    boundary("rl_limiter_open", err, || {
        non_null(out, "out")?;
        // SAFETY: `out` is non-NULL and the caller promises it is writable.
        unsafe { *out = std::ptr::null_mut() };
        // SAFETY: forwarded from the caller's promises above.
        let url = unsafe { opt_str(url, "url") }?;
        // SAFETY: as above.
        let options = unsafe { read_options(options) }?;
        let inner = Limiter::open(url, options)?;
        // SAFETY: as above.
        unsafe { *out = Box::into_raw(Box::new(rl_limiter { inner })) };
        Ok(())
    })
}

/// Returns the limiter's unused leases to Redis (with the `leases` option; see `rl_options`), so
/// other instances can use those permits at once instead of after `lease_ms` plus the window.
/// Call it before `rl_limiter_free` when the limiter took leases; like rustls-ffi's
/// `rustls_connection_send_close_notify`, it is the step that talks to the peer and can fail,
/// while `rl_limiter_free` only releases memory and never does I/O.
///
/// The handle stays owned by the caller and valid: it must still be freed with `rl_limiter_free`,
/// and may still be used (a later decision may lease again). `limiter` must not be NULL; `err` as
/// for `rl_limiter_open`. Blocks at most the request timeout per leased key. Returns `RL_OK` (also
/// with nothing to return, or the memory backend), `RL_INVALID_ARGUMENT` for NULL,
/// `RL_BACKEND_UNAVAILABLE` / `RL_BACKEND_ERROR` when Redis did not take a refund back (those
/// leases then age out, as after a crash), or `RL_PANIC`. Thread-safe.
///
/// # Safety
/// `limiter` is NULL or live; `err` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn rl_limiter_close(
    limiter: *const rl_limiter,
    err: *mut *mut rl_error,
) -> rl_status {
    boundary("rl_limiter_close", err, || {
        // SAFETY: forwarded from the caller's promises above.
        let l = unsafe { limiter_ref(limiter) }?;
        l.close()?;
        Ok(())
    })
}

/// Releases a limiter made by `rl_limiter_open`: its connection and memory. Does no I/O: leases
/// still held are not returned (call `rl_limiter_close` first) and age out after `lease_ms` plus
/// the window.
///
/// NULL is accepted and does nothing. Freeing a handle twice, or using it after this call, is
/// undefined behaviour. Must not run while another thread is still using the same handle; other
/// handles are unaffected. Never fails.
///
/// # Safety
/// `limiter` is NULL or a live handle from `rl_limiter_open` that no other thread is using.
#[no_mangle]
pub unsafe extern "C" fn rl_limiter_free(limiter: *mut rl_limiter) {
    if limiter.is_null() {
        return;
    }
    // SAFETY: the caller promises a live handle from Box::into_raw in rl_limiter_open.
    let owned = unsafe { Box::from_raw(limiter) };
    // A panic while dropping cannot be reported (no return value); it must not cross into C.
    let _ = catch_unwind(AssertUnwindSafe(move || drop(owned)));
}

/// Takes `cost` permits from `key`'s window if they fit: at most `limit` permits in any span of
/// `window_ms` milliseconds. A denied request takes nothing. The decision is written to `*out`.
///
/// - `limiter`: a live handle; must not be NULL.
/// - `key`, `key_len`: the key as bytes (any bytes, NUL included; not NUL-terminated), 1 to 65536
///   bytes; `key` must not be NULL. Copied during the call; the caller keeps ownership.
/// - `limit`: 1 to 10^15. `window_ms`: 1 to 2592000000 (30 days). `cost`: 1 to `limit`.
///   A negative value cast to `uint64_t` is out of range and rejected, never wrapped.
/// - `out`: must not be NULL; written only on `RL_OK`.
/// - `err`: as for `rl_limiter_open`.
///
/// Blocks the calling thread until the backend answers, at most the request timeout.
/// Returns `RL_OK` (whether allowed or denied: see `out->allowed`), `RL_INVALID_ARGUMENT` (nothing
/// sent to the backend), `RL_BACKEND_UNAVAILABLE`, `RL_BACKEND_ERROR`, or `RL_PANIC`. With the
/// local fallback on (the default), an unhealthy Redis gives `RL_OK` with `out->mode ==
/// RL_MODE_LOCAL` (decided against `limit / instances`) instead of `RL_BACKEND_UNAVAILABLE`.
/// Thread-safe: any number of threads may call it on one handle at once.
///
/// # Safety
/// `limiter` is NULL or live; `key` is NULL or points to `key_len` readable bytes; `out` and `err`
/// are NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn rl_acquire(
    limiter: *const rl_limiter,
    key: *const u8,
    key_len: usize,
    limit: u64,
    window_ms: u64,
    cost: u64,
    out: *mut rl_decision,
    err: *mut *mut rl_error,
) -> rl_status {
    boundary("rl_acquire", err, || {
        // SAFETY: forwarded from the caller's promises above.
        let l = unsafe { limiter_ref(limiter) }?;
        // SAFETY: as above.
        let key = unsafe { key_bytes(key, key_len) }?;
        non_null(out, "out")?;
        let d = to_c_decision(l.acquire(key, limit, window_ms, cost)?)?;
        // SAFETY: non-NULL and writable by the caller's promise.
        unsafe { out.write(d) };
        Ok(())
    })
}

/// Reports `key`'s window without taking anything: `out->allowed` tells whether one permit would
/// be granted now; `used`, `remaining`, `reset_after_ms` and `retry_after_ms` describe the window.
///
/// Arguments, ownership, NULL handling, errors and thread safety as for `rl_acquire` (no `cost`).
///
/// # Safety
/// As for `rl_acquire`.
#[no_mangle]
pub unsafe extern "C" fn rl_peek(
    limiter: *const rl_limiter,
    key: *const u8,
    key_len: usize,
    limit: u64,
    window_ms: u64,
    out: *mut rl_decision,
    err: *mut *mut rl_error,
) -> rl_status {
    boundary("rl_peek", err, || {
        // SAFETY: forwarded from the caller's promises above.
        let l = unsafe { limiter_ref(limiter) }?;
        // SAFETY: as above.
        let key = unsafe { key_bytes(key, key_len) }?;
        non_null(out, "out")?;
        let d = to_c_decision(l.peek(key, limit, window_ms)?)?;
        // SAFETY: non-NULL and writable by the caller's promise.
        unsafe { out.write(d) };
        Ok(())
    })
}

/// Forgets everything admitted on `key` (on Redis: deletes its window), so the next acquire starts
/// from an empty window.
///
/// `limiter` and `key` must not be NULL; `key`/`key_len` as for `rl_acquire`; `err` as for
/// `rl_limiter_open`. Blocks at most the request timeout. Returns `RL_OK`, `RL_INVALID_ARGUMENT`,
/// `RL_BACKEND_UNAVAILABLE`, `RL_BACKEND_ERROR` or `RL_PANIC`. Thread-safe.
///
/// # Safety
/// `limiter` is NULL or live; `key` is NULL or points to `key_len` readable bytes; `err` is NULL
/// or writable.
#[no_mangle]
pub unsafe extern "C" fn rl_reset(
    limiter: *const rl_limiter,
    key: *const u8,
    key_len: usize,
    err: *mut *mut rl_error,
) -> rl_status {
    boundary("rl_reset", err, || {
        // SAFETY: forwarded from the caller's promises above.
        let l = unsafe { limiter_ref(limiter) }?;
        // SAFETY: as above.
        let key = unsafe { key_bytes(key, key_len) }?;
        l.reset(key)?;
        Ok(())
    })
}

/// Checks that the backend answers (connecting if needed): for readiness probes and fail-fast
/// startup. Always `RL_OK` for the memory backend.
///
/// `limiter` must not be NULL; `err` as for `rl_limiter_open`. Blocks at most the request
/// timeout. Returns `RL_OK`, `RL_INVALID_ARGUMENT` (NULL limiter), `RL_BACKEND_UNAVAILABLE`,
/// `RL_BACKEND_ERROR` or `RL_PANIC`. Thread-safe.
///
/// # Safety
/// `limiter` is NULL or live; `err` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn rl_ping(limiter: *const rl_limiter, err: *mut *mut rl_error) -> rl_status {
    boundary("rl_ping", err, || {
        // SAFETY: forwarded from the caller's promise above.
        let l = unsafe { limiter_ref(limiter) }?;
        l.ping()?;
        Ok(())
    })
}

/// Copies the limiter's instance id (its member in the fleet's heartbeats in Redis, and the
/// prefix of its repair tokens) into the caller's buffer `buf` of `cap` bytes, NUL-terminated.
/// The memory backend has none: it writes "" (length 0). The id is per process: a child forked
/// from the process that opened the limiter reports (and heartbeats with) its own id.
///
/// - `limiter`: a live handle; must not be NULL.
/// - `buf`: must not be NULL; owned by the caller, written only on `RL_OK`.
/// - `cap`: `buf`'s size in bytes, including room for the NUL.
/// - `len_out`: NULL, or where the id's length (without the NUL) is stored, on `RL_OK` and also
///   when `cap` is too small, so the caller can retry with `*len_out + 1` bytes.
/// - `err`: as for `rl_limiter_open`.
///
/// Never blocks and does no I/O. Returns `RL_OK`, `RL_INVALID_ARGUMENT` (NULL `limiter` or `buf`,
/// or `cap` shorter than the id plus its NUL) or `RL_PANIC`. Thread-safe.
///
/// # Safety
/// `limiter` is NULL or live; `buf` is NULL or `cap` writable bytes; `len_out` is NULL or
/// writable; `err` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn rl_instance_id(
    limiter: *const rl_limiter,
    buf: *mut c_char,
    cap: usize,
    len_out: *mut usize,
    err: *mut *mut rl_error,
) -> rl_status {
    boundary("rl_instance_id", err, || {
        // SAFETY: forwarded from the caller's promises above.
        let l = unsafe { limiter_ref(limiter) }?;
        non_null(buf, "buf")?;
        let id: String = l.instance_id().map(|s| s.to_string()).unwrap_or_default();
        let id = id.split('\0').next().unwrap_or("");
        if !len_out.is_null() {
            // SAFETY: non-NULL, and the caller promises it is writable.
            unsafe { len_out.write(id.len()) };
        }
        if cap <= id.len() {
            return Err(invalid(
                "cap",
                format!(
                    "is {cap} bytes; the instance id and its NUL need {}",
                    id.len() + 1
                ),
            ));
        }
        // SAFETY: `buf` is non-NULL with `cap` > id.len() writable bytes (the caller's promise).
        unsafe {
            std::ptr::copy_nonoverlapping(id.as_ptr(), buf.cast::<u8>(), id.len());
            buf.add(id.len()).write(0);
        }
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::errors::message;
    use rl_core::{Options, MAX_KEY_BYTES};
    use std::ptr::{null, null_mut};

    #[test]
    fn oversized_key_message_is_the_cores() {
        // The binding rejects an oversized key before making a slice; the words must be the core's.
        let key = vec![b'k'; MAX_KEY_BYTES + 1];
        let core = Limiter::open(None, Options::default())
            .unwrap()
            .acquire(&key, 1, 1, 1)
            .unwrap_err();
        let mut lim = null_mut();
        assert_eq!(
            unsafe { rl_limiter_open(null(), null(), &mut lim, null_mut()) },
            rl_status::RL_OK
        );
        let mut d = std::mem::MaybeUninit::<rl_decision>::uninit();
        let mut e = null_mut();
        let st = unsafe {
            rl_acquire(
                lim,
                key.as_ptr(),
                key.len(),
                1,
                1,
                1,
                d.as_mut_ptr(),
                &mut e,
            )
        };
        assert_eq!(st, rl_status::RL_INVALID_ARGUMENT);
        assert_eq!(message(e), core.to_string());
        unsafe { rl_limiter_free(lim) };
    }
}
