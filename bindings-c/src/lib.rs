//! The C ABI of rl: `librl.so` / `librl.a`, declared by `include/rl.h` (generated from this file
//! by cbindgen with `bindings-c/cbindgen.toml`; run `bindings-c/regen-header.sh` after any change
//! here, the test suite fails on a stale header).
//!
//! This layer converts types and errors only; every rule (validation, messages, semantics) lives
//! in rl-core. Conventions, modelled on rustls-ffi:
//!
//! - Every exported function runs its body under [`std::panic::catch_unwind`]: a panic becomes
//!   `RL_PANIC` and never unwinds into C.
//! - Handles are opaque (`rl_limiter`, `rl_error`), created and freed only by this library.
//! - Fallible calls return an `rl_status` and, when the caller passes a non-NULL `rl_error **`,
//!   a heap error with the same code and a human message from the core's `Display`.
//! - Enums travel out of the library as C enums, but come back in as plain integers
//!   (`rl_mode_name(int)`), so an out-of-range value from C is never undefined behaviour here.

#![allow(non_camel_case_types)]
#![deny(unsafe_op_in_unsafe_fn)]

use std::ffi::{c_char, c_int, CStr, CString};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::time::Duration;

use rl_core::blocking::Limiter;
use rl_core::{Decision, Error, ErrorKind, Mode, Options, MAX_KEY_BYTES};

/// Major version of the rl C API this header describes.
pub const RL_VERSION_MAJOR: u32 = 0;
/// Minor version of the rl C API this header describes.
pub const RL_VERSION_MINOR: u32 = 1;
/// Patch version of the rl C API this header describes.
pub const RL_VERSION_PATCH: u32 = 0;
// RL_VERSION (the string) and RL_VERSION_NUMBER are composed from these three in the header
// (cbindgen.toml `after_includes`): cbindgen 0.29 emits no string constants.

/// The outcome of a fallible call. `RL_OK` is 0; every other value is an error. New codes may be
/// added in later versions: treat unknown non-zero values as errors (`rl_status_name` names them
/// "unknown").
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum rl_status {
    /// Success.
    RL_OK = 0,
    /// The caller passed a value the limiter cannot honour (NULL pointer, empty or oversized key,
    /// limit/window/cost out of range, bad URL or option). Nothing was sent to the backend.
    RL_INVALID_ARGUMENT = 1,
    /// The backend could not be reached in time (refused, timed out, dropped). Retrying later may
    /// succeed.
    RL_BACKEND_UNAVAILABLE = 2,
    /// The backend answered with an error (wrong type at the key, script error, auth, OOM ...).
    RL_BACKEND_ERROR = 3,
    /// A client-supplied time was too far from Redis time. (The C API has no client clock yet;
    /// the code is reserved so the mapping from the core stays total.)
    RL_CLOCK_SKEW = 4,
    /// An internal error: a panic inside the library was caught at the boundary, or the core
    /// returned something this build of the binding does not know. Please report it.
    RL_PANIC = 5,
}

/// Which path made a decision. New modes may be added in later versions: handle unknown values
/// (`rl_mode_name` names every mode the library knows).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum rl_mode {
    /// Redis decided, exactly, with one script call.
    RL_MODE_NORMAL = 0,
    /// The in-process memory backend decided (single-process use), exactly.
    RL_MODE_MEMORY = 1,
    /// The local fallback limiter decided while Redis was unhealthy.
    RL_MODE_LOCAL = 2,
}

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

/// How a limiter behaves. Initialise with `rl_options_default()` (or zero it and set
/// `struct_size = sizeof(rl_options)`), then change the fields you care about: a zero or NULL
/// field means "the default", so a zeroed struct is all defaults. The caller owns the struct and
/// every string it points to; the library copies what it needs during `rl_limiter_open` and keeps
/// no pointer.
///
/// Durations are whole milliseconds (`_ms`). Every rule about the values (ranges, and how they
/// relate to each other) is the core's; a value it refuses makes `rl_limiter_open` return
/// `RL_INVALID_ARGUMENT` with a message naming the option, e.g. "invalid argument `recover_rtt`:
/// ...".
///
/// ABI evolution: later versions only append fields. `struct_size` tells the library which
/// version of the struct the caller was compiled against, so an old program keeps working with a
/// newer library: fields past its `struct_size` are never read and take their defaults. Known
/// versions: 1 (up to `request_timeout_ms`) and 2 (up to `local_max_keys`).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct rl_options {
    /// Must be `sizeof(rl_options)` as seen by the caller; `rl_options_default()` sets it.
    pub struct_size: usize,
    /// NUL-terminated UTF-8 prepended to every Redis key (no braces). NULL: `"rl:"`. `""`: no prefix.
    pub key_prefix: *const c_char,
    /// Longest wait to establish a connection, in ms (1..=60000). 0: 500 ms.
    pub connect_timeout_ms: u64,
    /// Longest a caller waits for one decision, connecting included, in ms (1..=60000). 0: 500 ms.
    pub request_timeout_ms: u64,
    // ---- version 2: retry and local fallback ----
    /// Wait before the one retry of a call that failed with a connection-class error (refused or
    /// dropped connection, READONLY, LOADING, TRYAGAIN, CLUSTERDOWN, MASTERDOWN, BUSY, OOM), in
    /// ms; at most the request timeout. 0: 50 ms. `RL_RETRY_IMMEDIATELY`: retry without waiting.
    pub retry_delay_ms: u64,
    /// `false` (default): while Redis is unhealthy, decide locally (`RL_MODE_LOCAL`, against this
    /// instance's share of the limit) instead of failing. `true`: no fallback; calls return
    /// `RL_BACKEND_UNAVAILABLE` when Redis cannot be reached, as in version 1 of this struct.
    /// (Inverted so that zero is the default.)
    pub disable_local_fallback: bool,
    /// normal -> local when the round trips of real calls stay above `degrade_rtt_ms` for
    /// `degrade_after_ms` (or calls fail after their retry). In ms, 1..=60000 each.
    /// 0: 5 ms and 100 ms.
    pub degrade_rtt_ms: u64,
    /// See `degrade_rtt_ms`. 0: 100 ms.
    pub degrade_after_ms: u64,
    /// local -> normal when background probes see round trips below `recover_rtt_ms` for
    /// `recover_after_ms`. In ms, 1..=60000 each; `recover_rtt_ms` must not exceed the
    /// degrade threshold. 0: 2 ms and 500 ms.
    pub recover_rtt_ms: u64,
    /// See `recover_rtt_ms`. 0: 500 ms.
    pub recover_after_ms: u64,
    /// How many instances share each limit: the local budget is `limit / instances` (rounded
    /// down), 1..=1000000. 0: discovered from the live instances' heartbeats in Redis (8, the
    /// design's fleet size, before any was seen).
    pub instances: u64,
    /// Most keys the local record keeps (least recently used ones are forgotten), 1..=10000000.
    /// 0: 10000.
    pub local_max_keys: u64,
}

/// Put in `rl_options.retry_delay_ms` to retry a failed call at once (a zero delay; 0 itself
/// means the default, 50 ms).
pub const RL_RETRY_IMMEDIATELY: u64 = u64::MAX;

/// What `rl_stats_get` reports: which path decides now, how often each path decided, the fallback
/// state machine's transitions, and Redis round-trip times. Plain numbers and fixed-size strings:
/// the caller owns the struct (usually on the stack) and must set `struct_size` to
/// `sizeof(rl_stats)` before the call; the library writes every other field.
///
/// Counters count since the limiter was opened. ABI evolution as for `rl_options`: later versions
/// only append fields.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct rl_stats {
    /// Set by the caller to `sizeof(rl_stats)`; the library leaves it as it was.
    pub struct_size: usize,
    /// The path new decisions take now: `RL_MODE_NORMAL` (Redis), `RL_MODE_LOCAL` (the fallback)
    /// or `RL_MODE_MEMORY` (the memory backend).
    pub mode: rl_mode,
    /// NUL-terminated: "standalone", "sentinel", "cluster" or "memory".
    pub topology: [c_char; 16],
    /// Decisions Redis made.
    pub decisions_normal: u64,
    /// Decisions the local fallback made.
    pub decisions_local: u64,
    /// Decisions the memory backend made.
    pub decisions_memory: u64,
    /// Transitions normal -> local.
    pub transitions_to_local: u64,
    /// Transitions local -> normal.
    pub transitions_to_normal: u64,
    /// How long the current state has lasted, in ms.
    pub state_ms: u64,
    /// NUL-terminated UTF-8: what caused the current state ("start" at first), truncated to 127
    /// bytes (at a character boundary) if longer.
    pub state_reason: [c_char; 128],
    /// Redis calls that failed with a connection-class error.
    pub redis_errors: u64,
    /// Of those, how many were retried.
    pub retries: u64,
    /// Recovery probes sent while local.
    pub probes: u64,
    /// Repair calls that wrote permits admitted locally (or lost in a failover) back to Redis.
    pub repairs: u64,
    /// The permits those repairs added.
    pub repaired_permits: u64,
    /// New Redis primaries seen.
    pub failovers: u64,
    /// The divisor of the local budget (`limit / instances`): configured, or live instances seen
    /// in Redis.
    pub instances: u64,
    /// Keys the local record holds (at most `local_max_keys`).
    pub local_keys: u64,
    /// Round trips measured (of the last 1024 Redis decisions), and their statistics in
    /// microseconds.
    pub rtt_samples: u64,
    /// The last round trip, in us.
    pub rtt_last_us: u64,
    /// Median round trip, in us.
    pub rtt_p50_us: u64,
    /// 99th percentile round trip, in us.
    pub rtt_p99_us: u64,
    /// Longest round trip, in us.
    pub rtt_max_us: u64,
}

/// A limiter: an exact sliding-window rate limiter over Redis or process memory. Opaque; made by
/// `rl_limiter_open`, freed by `rl_limiter_free`. Thread-safe: one handle may be used by any
/// number of threads at once.
pub struct rl_limiter {
    inner: Limiter,
}

/// An error's details: a status code and a message. Opaque; made by the library when the caller
/// asks for it through an `rl_error **` out-parameter, owned by the caller from then on and freed
/// with `rl_error_free`. Immutable, so it may be read from several threads.
pub struct rl_error {
    status: rl_status,
    message: CString,
}

/// What went wrong inside one call, before it becomes a status and a message.
enum Failure {
    Core(Error),
    Internal(String),
}

impl From<Error> for Failure {
    fn from(e: Error) -> Self {
        Failure::Core(e)
    }
}

impl Failure {
    fn status(&self) -> rl_status {
        match self {
            Failure::Core(e) => match e.kind() {
                ErrorKind::InvalidArgument => rl_status::RL_INVALID_ARGUMENT,
                ErrorKind::BackendUnavailable => rl_status::RL_BACKEND_UNAVAILABLE,
                ErrorKind::Backend => rl_status::RL_BACKEND_ERROR,
                ErrorKind::ClockSkew => rl_status::RL_CLOCK_SKEW,
            },
            Failure::Internal(_) => rl_status::RL_PANIC,
        }
    }

    fn message(&self) -> String {
        match self {
            Failure::Core(e) => e.to_string(),
            Failure::Internal(m) => m.clone(),
        }
    }
}

/// The core's own error for a bad argument, so messages read the same as from every binding.
fn invalid(name: &'static str, message: impl Into<String>) -> Failure {
    Failure::Core(Error::InvalidArgument {
        name,
        message: message.into(),
    })
}

fn non_null<T>(p: *const T, name: &'static str) -> Result<(), Failure> {
    if p.is_null() {
        Err(invalid(name, "must not be NULL"))
    } else {
        Ok(())
    }
}

fn panic_message(payload: &(dyn std::any::Any + Send)) -> &str {
    if let Some(s) = payload.downcast_ref::<&str>() {
        s
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s
    } else {
        "non-string panic payload"
    }
}

/// The boundary every fallible export goes through: runs `body` under `catch_unwind`, stores the
/// error for the caller if asked, returns the status. The success path is kept to a few
/// instructions; everything about failures lives in the cold `fail`.
#[inline(always)]
fn boundary(
    function: &'static str,
    err: *mut *mut rl_error,
    body: impl FnOnce() -> Result<(), Failure>,
) -> rl_status {
    match catch_unwind(AssertUnwindSafe(body)) {
        Ok(Ok(())) => {
            if !err.is_null() {
                // SAFETY: the caller promises a non-NULL `err` points to a writable `rl_error *`.
                unsafe { *err = std::ptr::null_mut() };
            }
            rl_status::RL_OK
        }
        Ok(Err(f)) => fail(err, f),
        Err(payload) => fail(
            err,
            Failure::Internal(format!(
                "internal error: panic in {function}: {} (please report this)",
                panic_message(&*payload)
            )),
        ),
    }
}

/// Turns a failure into its status and, if the caller asked, an `rl_error`.
#[cold]
#[inline(never)]
fn fail(err: *mut *mut rl_error, failure: Failure) -> rl_status {
    let status = failure.status();
    if !err.is_null() {
        // Building the error allocates; keep even that from unwinding into C.
        let made = catch_unwind(AssertUnwindSafe(|| {
            let message = CString::new(failure.message().replace('\0', "\\0")).unwrap_or_default();
            Box::into_raw(Box::new(rl_error { status, message }))
        }))
        .unwrap_or(std::ptr::null_mut());
        // SAFETY: the caller promises a non-NULL `err` points to a writable `rl_error *`.
        unsafe { *err = made };
    }
    status
}

/// # Safety
/// `p` is NULL or a NUL-terminated string that stays valid for `'a`.
unsafe fn opt_str<'a>(p: *const c_char, name: &'static str) -> Result<Option<&'a str>, Failure> {
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
unsafe fn key_bytes<'a>(key: *const u8, len: usize) -> Result<&'a [u8], Failure> {
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

/// # Safety
/// `p` is NULL or points to a live `rl_limiter`.
unsafe fn limiter_ref<'a>(p: *const rl_limiter) -> Result<&'a Limiter, Failure> {
    non_null(p, "limiter")?;
    // SAFETY: non-NULL; the caller promises it came from rl_limiter_open and was not freed.
    Ok(unsafe { &(*p).inner })
}

/// The size of version 1 of `rl_options` (up to `request_timeout_ms`), as compiled by a caller of
/// that version: the offset where version 2's fields start (no padding before them).
const OPTIONS_V1: usize = std::mem::offset_of!(rl_options, retry_delay_ms);
/// The size of version 2, this one.
const OPTIONS_V2: usize = std::mem::size_of::<rl_options>();

/// Reads one field of the caller's struct.
macro_rules! field {
    ($p:expr, $f:ident) => {
        // SAFETY: the callers check that the caller's struct covers the field.
        unsafe { std::ptr::addr_of!((*$p).$f).read() }
    };
}

/// A millisecond option where 0 means "keep the default".
fn millis_or(default: Duration, ms: u64) -> Duration {
    if ms == 0 {
        default
    } else {
        Duration::from_millis(ms)
    }
}

/// # Safety
/// `p` is NULL or points to an `rl_options` of at least `struct_size` bytes.
unsafe fn read_options(p: *const rl_options) -> Result<Options, Failure> {
    let mut o = Options::default();
    if p.is_null() {
        return Ok(o);
    }
    // SAFETY: every version of the struct starts with `struct_size`.
    let size = unsafe { std::ptr::addr_of!((*p).struct_size).read() };
    // Fields are read one by one, and only those the caller's version has, so a caller compiled
    // against an older header (a smaller struct) keeps working and gets defaults for the rest.
    if size == 0 {
        return Err(invalid(
            "options",
            "struct_size is 0; initialise the struct with rl_options_default() or set struct_size = sizeof(rl_options)",
        ));
    }
    if size < OPTIONS_V1 {
        return Err(invalid(
            "options",
            format!("struct_size is {size}; the smallest known rl_options is {OPTIONS_V1} bytes"),
        ));
    }
    if size > OPTIONS_V2 {
        return Err(invalid(
            "options",
            format!("struct_size is {size}, larger than this library's rl_options ({OPTIONS_V2} bytes): the program was built against a newer rl.h than the librl it runs with"),
        ));
    }
    if size != OPTIONS_V1 && size != OPTIONS_V2 {
        return Err(invalid(
            "options",
            format!("struct_size is {size}, which is no version of rl_options (known sizes: {OPTIONS_V1} and {OPTIONS_V2} bytes); set struct_size = sizeof(rl_options)"),
        ));
    }
    // Version 1.
    let key_prefix = field!(p, key_prefix);
    // SAFETY: the caller promises key_prefix is NULL or a valid C string for this call.
    if let Some(prefix) = unsafe { opt_str(key_prefix, "key_prefix") }? {
        o.key_prefix = prefix.to_owned();
    }
    o.connect_timeout = millis_or(o.connect_timeout, field!(p, connect_timeout_ms));
    o.request_timeout = millis_or(o.request_timeout, field!(p, request_timeout_ms));
    if size < OPTIONS_V2 {
        return Ok(o);
    }
    // Version 2.
    o.retry_delay = match field!(p, retry_delay_ms) {
        RL_RETRY_IMMEDIATELY => Duration::ZERO,
        ms => millis_or(o.retry_delay, ms),
    };
    // Read as a byte: any non-zero value a C caller left there means true, never undefined
    // behaviour.
    // SAFETY: as for `field!`; a bool is one byte.
    let disable = unsafe {
        std::ptr::addr_of!((*p).disable_local_fallback)
            .cast::<u8>()
            .read()
    };
    o.local_fallback = disable == 0;
    o.degrade_rtt = millis_or(o.degrade_rtt, field!(p, degrade_rtt_ms));
    o.degrade_after = millis_or(o.degrade_after, field!(p, degrade_after_ms));
    o.recover_rtt = millis_or(o.recover_rtt, field!(p, recover_rtt_ms));
    o.recover_after = millis_or(o.recover_after, field!(p, recover_after_ms));
    o.instances = match field!(p, instances) {
        0 => None,
        n => Some(n),
    };
    match field!(p, local_max_keys) {
        0 => {}
        // Past usize (32-bit targets): the largest usize, which the core refuses by name.
        n => o.local_max_keys = usize::try_from(n).unwrap_or(usize::MAX),
    }
    Ok(o)
}

fn to_c_mode(mode: Mode) -> Result<rl_mode, Failure> {
    Ok(match mode {
        Mode::Normal => rl_mode::RL_MODE_NORMAL,
        Mode::Memory => rl_mode::RL_MODE_MEMORY,
        Mode::Local => rl_mode::RL_MODE_LOCAL,
        // Mode is #[non_exhaustive]: a mode added to the core needs a value here. Never invent one.
        other => {
            return Err(Failure::Internal(format!(
                "internal error: rl-core decided in mode {other:?}, which this build of the C binding cannot represent (please report this)"
            )))
        }
    })
}

fn to_c_decision(d: Decision) -> Result<rl_decision, Failure> {
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

/// Returns an `rl_options` with `struct_size` set and every other field zero/NULL, i.e. all
/// defaults: key prefix `"rl:"`, connect and request timeouts 500 ms, retry delay 50 ms, local
/// fallback on (degrade above 5 ms for 100 ms, recover below 2 ms for 500 ms), instances
/// discovered from Redis, at most 10000 local keys.
///
/// Never fails. Thread-safe.
#[no_mangle]
pub extern "C" fn rl_options_default() -> rl_options {
    rl_options {
        struct_size: std::mem::size_of::<rl_options>(),
        key_prefix: std::ptr::null(),
        connect_timeout_ms: 0,
        request_timeout_ms: 0,
        retry_delay_ms: 0,
        disable_local_fallback: false,
        degrade_rtt_ms: 0,
        degrade_after_ms: 0,
        recover_rtt_ms: 0,
        recover_after_ms: 0,
        instances: 0,
        local_max_keys: 0,
    }
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

/// Releases a limiter made by `rl_limiter_open`: its connection and memory.
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

/// Writes the limiter's statistics to `*out`: the path new decisions take now (`mode`), how many
/// decisions each path made, the fallback state machine's transitions and current state, Redis
/// errors, retries, probes and repairs, the local budget's divisor (`instances`), and Redis round
/// trips. For the memory backend: mode `RL_MODE_MEMORY`, topology "memory", only
/// `decisions_memory` counts.
///
/// - `limiter`: a live handle; must not be NULL.
/// - `out`: must not be NULL, with `out->struct_size` set to `sizeof(rl_stats)`; every other
///   field is written on `RL_OK` (strings NUL-terminated, in the struct: nothing to free), nothing
///   on failure.
/// - `err`: as for `rl_limiter_open`.
///
/// Never blocks and does no I/O (it reads counters). Returns `RL_OK`, `RL_INVALID_ARGUMENT` (NULL
/// `limiter` or `out`, or a `struct_size` this library does not know) or `RL_PANIC`. Thread-safe.
///
/// # Safety
/// `limiter` is NULL or live; `out` is NULL or points to a writable `rl_stats` of
/// `out->struct_size` bytes; `err` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn rl_stats_get(
    limiter: *const rl_limiter,
    out: *mut rl_stats,
    err: *mut *mut rl_error,
) -> rl_status {
    boundary("rl_stats_get", err, || {
        // SAFETY: forwarded from the caller's promises above.
        let l = unsafe { limiter_ref(limiter) }?;
        non_null(out, "out")?;
        // SAFETY: non-NULL; every version of the struct starts with `struct_size`.
        let size = unsafe { std::ptr::addr_of!((*out).struct_size).read() };
        const V1: usize = std::mem::size_of::<rl_stats>();
        if size != V1 {
            return Err(invalid(
                "out",
                if size == 0 {
                    "struct_size is 0; set out->struct_size = sizeof(rl_stats) before the call"
                        .to_string()
                } else if size > V1 {
                    format!("struct_size is {size}, larger than this library's rl_stats ({V1} bytes): the program was built against a newer rl.h than the librl it runs with")
                } else {
                    format!("struct_size is {size}, which is no version of rl_stats (known size: {V1} bytes); set out->struct_size = sizeof(rl_stats)")
                },
            ));
        }
        let s = l.stats();
        let stats = rl_stats {
            struct_size: size,
            mode: to_c_mode(s.mode)?,
            topology: c_chars(s.topology),
            decisions_normal: s.decisions_normal,
            decisions_local: s.decisions_local,
            decisions_memory: s.decisions_memory,
            transitions_to_local: s.transitions_to_local,
            transitions_to_normal: s.transitions_to_normal,
            state_ms: s.state_ms,
            state_reason: c_chars(&s.state_reason),
            redis_errors: s.redis_errors,
            retries: s.retries,
            probes: s.probes,
            repairs: s.repairs,
            repaired_permits: s.repaired_permits,
            failovers: s.failovers,
            instances: s.instances,
            local_keys: s.local_keys,
            rtt_samples: s.rtt_samples,
            rtt_last_us: s.rtt_last_us,
            rtt_p50_us: s.rtt_p50_us,
            rtt_p99_us: s.rtt_p99_us,
            rtt_max_us: s.rtt_max_us,
        };
        // SAFETY: non-NULL, and the caller promises `struct_size` (== V1) writable bytes.
        unsafe { out.write(stats) };
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

/// `s` as a NUL-terminated C string in a fixed array: cut at the first NUL, and truncated at a
/// character boundary to leave room for the terminator.
fn c_chars<const N: usize>(s: &str) -> [c_char; N] {
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

/// The status code stored in `err`; `RL_OK` for NULL. Thread-safe.
///
/// # Safety
/// `err` is NULL or a live error from this library.
#[no_mangle]
pub unsafe extern "C" fn rl_error_code(err: *const rl_error) -> rl_status {
    if err.is_null() {
        return rl_status::RL_OK;
    }
    // SAFETY: the caller promises a live error.
    unsafe { (*err).status }
}

/// The error's message: NUL-terminated UTF-8 naming what went wrong and the offending value. By
/// status:
/// - `RL_INVALID_ARGUMENT`: "invalid argument `PARAM`: WHAT", e.g.
///   "invalid argument `window_ms`: is 0; must be between 1 and 2592000000 (30 days)",
///   "invalid argument `key`: must not be NULL", "invalid argument `url`: is not valid UTF-8 ...";
/// - `RL_BACKEND_UNAVAILABLE`: "backend unavailable: ..."; `RL_BACKEND_ERROR`: "backend error: ...";
/// - `RL_CLOCK_SKEW`: "clock skew: ..."; `RL_PANIC`: "internal error: ...".
///
/// Owned by `err` and valid until `rl_error_free(err)`. For NULL, returns "" (a static string).
/// Thread-safe.
///
/// # Safety
/// `err` is NULL or a live error from this library.
#[no_mangle]
pub unsafe extern "C" fn rl_error_message(err: *const rl_error) -> *const c_char {
    if err.is_null() {
        return c"".as_ptr();
    }
    // SAFETY: the caller promises a live error.
    unsafe { (*err).message.as_ptr() }
}

/// Frees an error from an `rl_error **` out-parameter. NULL is accepted and does nothing; freeing
/// twice is undefined behaviour. Never fails.
///
/// # Safety
/// `err` is NULL or a live error from this library, not used after this call.
#[no_mangle]
pub unsafe extern "C" fn rl_error_free(err: *mut rl_error) {
    if err.is_null() {
        return;
    }
    // SAFETY: the caller promises it came from Box::into_raw in `boundary` and is freed once.
    let owned = unsafe { Box::from_raw(err) };
    let _ = catch_unwind(AssertUnwindSafe(move || drop(owned)));
}

/// The lowercase name of a mode ("normal", "memory", "local", "lease"), the same names every rl
/// binding uses; "unknown" for a value this library does not know. Takes an `int` so any value is
/// safe to pass. Returns a static string: never NULL, never freed. Thread-safe.
#[no_mangle]
pub extern "C" fn rl_mode_name(mode: c_int) -> *const c_char {
    mode_name(mode).as_ptr()
}

fn mode_name(mode: c_int) -> &'static CStr {
    match mode {
        m if m == rl_mode::RL_MODE_NORMAL as c_int => c"normal",
        m if m == rl_mode::RL_MODE_MEMORY as c_int => c"memory",
        m if m == rl_mode::RL_MODE_LOCAL as c_int => c"local",
        _ => c"unknown",
    }
}

/// The name of a status: "ok", "invalid_argument", "backend_unavailable", "backend_error",
/// "clock_skew", "panic"; "unknown" for any other value. Returns a static string: never NULL,
/// never freed. Thread-safe.
#[no_mangle]
pub extern "C" fn rl_status_name(status: c_int) -> *const c_char {
    status_name(status).as_ptr()
}

fn status_name(status: c_int) -> &'static CStr {
    use rl_status::*;
    match status {
        s if s == RL_OK as c_int => c"ok",
        s if s == RL_INVALID_ARGUMENT as c_int => c"invalid_argument",
        s if s == RL_BACKEND_UNAVAILABLE as c_int => c"backend_unavailable",
        s if s == RL_BACKEND_ERROR as c_int => c"backend_error",
        s if s == RL_CLOCK_SKEW as c_int => c"clock_skew",
        s if s == RL_PANIC as c_int => c"panic",
        _ => c"unknown",
    }
}

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
    use std::ptr::{null, null_mut};

    fn message(e: *mut rl_error) -> String {
        let s = unsafe { CStr::from_ptr(rl_error_message(e)) }
            .to_string_lossy()
            .into_owned();
        unsafe { rl_error_free(e) };
        s
    }

    #[test]
    fn version_constants_match_the_package() {
        let want = format!("{RL_VERSION_MAJOR}.{RL_VERSION_MINOR}.{RL_VERSION_PATCH}");
        assert_eq!(want, env!("CARGO_PKG_VERSION"));
        assert_eq!(
            unsafe { CStr::from_ptr(rl_version()) }.to_str().unwrap(),
            want
        );
    }

    #[test]
    fn names_match_the_core() {
        for (m, core) in [
            (rl_mode::RL_MODE_NORMAL, Mode::Normal),
            (rl_mode::RL_MODE_MEMORY, Mode::Memory),
            (rl_mode::RL_MODE_LOCAL, Mode::Local),
        ] {
            assert_eq!(to_c_mode(core).ok(), Some(m));
            assert_eq!(mode_name(m as c_int).to_str().unwrap(), core.as_str());
        }
        assert_eq!(mode_name(-1).to_str().unwrap(), "unknown");
        for (s, kind) in [
            (rl_status::RL_INVALID_ARGUMENT, ErrorKind::InvalidArgument),
            (
                rl_status::RL_BACKEND_UNAVAILABLE,
                ErrorKind::BackendUnavailable,
            ),
            (rl_status::RL_BACKEND_ERROR, ErrorKind::Backend),
            (rl_status::RL_CLOCK_SKEW, ErrorKind::ClockSkew),
        ] {
            assert_eq!(status_name(s as c_int).to_str().unwrap(), kind.as_str());
        }
    }

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

    #[test]
    fn options_versions() {
        // Version 1 ended after request_timeout_ms: four 8-byte fields on 64-bit targets.
        #[cfg(target_pointer_width = "64")]
        assert_eq!((OPTIONS_V1, OPTIONS_V2), (32, 96));
        // A version-1 struct: only its fields are read, the rest are defaults.
        #[repr(C)]
        struct V1 {
            struct_size: usize,
            key_prefix: *const c_char,
            connect_timeout_ms: u64,
            request_timeout_ms: u64,
        }
        assert_eq!(std::mem::size_of::<V1>(), OPTIONS_V1);
        let v1 = V1 {
            struct_size: OPTIONS_V1,
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
        // Version 2: every field converted; zero is the default.
        let mut c = rl_options_default();
        let o = unsafe { read_options(&c) }.ok().unwrap();
        assert_eq!(format!("{o:?}"), format!("{d:?}"));
        c.retry_delay_ms = RL_RETRY_IMMEDIATELY;
        c.disable_local_fallback = true;
        c.degrade_rtt_ms = 11;
        c.degrade_after_ms = 12;
        c.recover_rtt_ms = 3;
        c.recover_after_ms = 14;
        c.instances = 4;
        c.local_max_keys = 15;
        let o = unsafe { read_options(&c) }.ok().unwrap();
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
        c.retry_delay_ms = 20;
        assert_eq!(
            unsafe { read_options(&c) }.ok().unwrap().retry_delay,
            Duration::from_millis(20)
        );
        // Sizes between the versions are refused.
        c.struct_size = OPTIONS_V1 + 8;
        assert!(unsafe { read_options(&c) }.is_err());
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

    #[test]
    fn a_panic_becomes_rl_panic_with_a_message() {
        let mut e = null_mut();
        let st = boundary("rl_test", &mut e, || panic!("boom"));
        assert_eq!(st, rl_status::RL_PANIC);
        assert_eq!(unsafe { rl_error_code(e) }, rl_status::RL_PANIC);
        let m = message(e);
        assert!(m.contains("panic in rl_test: boom"), "{m}");
        // Without an error out-param the status alone comes back.
        assert_eq!(
            boundary("rl_test", null_mut(), || panic!("boom")),
            rl_status::RL_PANIC
        );
    }

    #[test]
    fn nul_bytes_in_messages_are_escaped() {
        let mut e = null_mut();
        let st = boundary("rl_test", &mut e, || Err(invalid("key", "has \0 inside")));
        assert_eq!(st, rl_status::RL_INVALID_ARGUMENT);
        assert_eq!(message(e), "invalid argument `key`: has \\0 inside");
    }
}
