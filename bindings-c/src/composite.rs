//! `rl_acquire_all`: the core's composite acquire (several rules, all or nothing, one atomic
//! decision). The caller owns every byte: the rules, the result struct and the array its decisions
//! are written to, so nothing here is allocated for C and nothing needs freeing.

use rl_core::composite::MAX_GROUP_BYTES;
use rl_core::{CompositeDecision, Decision, Mode, Rule, MAX_RULES};

use crate::errors::{invalid, rl_error, rl_status, Failure};
use crate::generated::{rl_mode, MODES};
use crate::limiter::{limiter_ref, rl_limiter};
use crate::panic::boundary;
use crate::types::{key_bytes, non_null, rl_decision, to_c_decision, to_c_mode};

/// Most rules in one `rl_acquire_all` call.
pub const RL_MAX_RULES: usize = 16;

/// Longest group name of an `rl_acquire_all` call, in bytes.
pub const RL_MAX_GROUP_BYTES: usize = 1024;

/// One rule of an `rl_acquire_all` call: at most `limit` permits in any `window_ms` span of
/// `key`'s window, of which this call asks for `cost`. Ranges as for `rl_acquire`. Rules on the
/// same key must ask the same `cost` (one window, checked against each rule's limit and window).
/// The caller owns the rules and their keys; they are read during the call only.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct rl_rule {
    /// The key's bytes (any bytes; not NUL-terminated); must not be NULL.
    pub key: *const u8,
    /// The key's length: 1 to 65536 bytes.
    pub key_len: usize,
    pub limit: u64,
    pub window_ms: u64,
    pub cost: u64,
}

/// The answer to one `rl_acquire_all` call: the overall decision and one `rl_decision` per rule.
///
/// The caller owns the struct and the decisions array (usually both on the stack): set
/// `struct_size = sizeof(rl_composite)`, point `decisions` at an array of `decisions_cap`
/// entries (at least the call's `n_rules`; `RL_MAX_RULES` always suffices), and the library writes
/// the rest, and `decisions[0 .. n_decisions]`, on `RL_OK` only. Nothing to free.
///
/// ABI evolution: later versions only append fields; `struct_size` says which version the caller
/// has.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct rl_composite {
    /// In: `sizeof(rl_composite)`.
    pub struct_size: usize,
    /// In: the caller's array the per-rule decisions are written to; must not be NULL.
    pub decisions: *mut rl_decision,
    /// In: how many entries `decisions` holds.
    pub decisions_cap: usize,
    /// Out: how many decisions were written: the call's `n_rules`, one per rule, in the rules'
    /// order. A rule's `allowed` says whether it alone would admit its cost; its `used` and
    /// `remaining` count the cost only when the call was admitted.
    pub n_decisions: usize,
    /// Out: whether the cost was taken from every rule (if false, nothing was taken from any).
    pub allowed: bool,
    /// Out: 0 if allowed; otherwise the wait after which every rule fits (the longest of the
    /// denying rules' waits), if nothing else is admitted meanwhile.
    pub retry_after_ms: u64,
    /// Out: which path decided (every rule is decided by the same one).
    pub mode: rl_mode,
    /// Out: the latest of the rules' decision times (Unix ms).
    pub now_ms: u64,
}

const V1: usize = std::mem::size_of::<rl_composite>();

/// Checks `struct_size` (the first field of every version), naming `name` in errors.
///
/// # Safety
/// `p` is non-NULL and points to at least a `usize`.
pub(crate) unsafe fn check_size(p: *const rl_composite, name: &'static str) -> Result<(), Failure> {
    // SAFETY: forwarded from the caller.
    let size = unsafe { std::ptr::addr_of!((*p).struct_size).read() };
    if size == V1 {
        return Ok(());
    }
    Err(invalid(
        name,
        if size == 0 {
            "struct_size is 0; set struct_size = sizeof(rl_composite)".to_string()
        } else if size > V1 {
            format!("struct_size is {size}, larger than this library's rl_composite ({V1} bytes): the program was built against a newer rl.h than the librl it runs with")
        } else {
            format!("struct_size is {size}, which is no version of rl_composite (known size: {V1} bytes); set struct_size = sizeof(rl_composite)")
        },
    ))
}

/// The core's rules from the caller's array. A count above the core's maximum is refused in the
/// core's words before any rule is read, so a wrong count is never used to read memory.
///
/// # Safety
/// `rules` is NULL or points to `n` readable `rl_rule`s whose keys point to `key_len` bytes.
unsafe fn read_rules(rules: *const rl_rule, n: usize) -> Result<Vec<Rule>, Failure> {
    if n == 0 {
        return Ok(Vec::new()); // the core names the empty list
    }
    non_null(rules, "rules")?;
    if n > MAX_RULES {
        return Err(invalid(
            "rules",
            format!("holds {n} rules; at most {MAX_RULES} are allowed"),
        ));
    }
    // SAFETY: non-NULL, and the caller promises `n` readable rules.
    let rules = unsafe { std::slice::from_raw_parts(rules, n) };
    rules
        .iter()
        .enumerate()
        .map(|(i, r)| {
            // SAFETY: forwarded from the caller.
            let key = unsafe { key_bytes(r.key, r.key_len) }.map_err(|f| in_rule(f, i))?;
            Ok(Rule::new(key, r.limit, r.window_ms, r.cost))
        })
        .collect()
}

/// A key the binding refused, its message saying which rule it is in (as the core's do).
fn in_rule(f: Failure, i: usize) -> Failure {
    match f {
        Failure::Core(rl_core::Error::InvalidArgument { name, message }) => {
            invalid(name, format!("{message} (rule {i})"))
        }
        f => f,
    }
}

/// The group: NULL (with length 0) for none; otherwise its bytes, checked by the core (an empty or
/// oversized group is refused in its words; an oversized one before it is read).
///
/// # Safety
/// `group` is NULL or points to `len` readable bytes.
unsafe fn read_group<'a>(group: *const u8, len: usize) -> Result<Option<&'a [u8]>, Failure> {
    if group.is_null() {
        if len != 0 {
            return Err(invalid(
                "group",
                format!("is NULL with group_len {len}; pass NULL and 0 for no group"),
            ));
        }
        return Ok(None);
    }
    if len > MAX_GROUP_BYTES {
        return Err(invalid(
            "group",
            format!("is {len} bytes; must be 1 to {MAX_GROUP_BYTES} (or no group)"),
        ));
    }
    // SAFETY: non-NULL, and the caller promises `len` readable bytes.
    Ok(Some(unsafe { std::slice::from_raw_parts(group, len) }))
}

/// Takes every rule's `cost` if every rule fits, else nothing from any: one atomic decision (on
/// Redis, one script call). Typical uses: per-IP + per-user + per-tenant limits on one request, or
/// a burst and a daily limit on one key (see `rl_policies_parse`).
///
/// - `limiter`: a live handle; must not be NULL.
/// - `rules`, `n_rules`: the rules, 1 to `RL_MAX_RULES`; read during the call only. `rules` may
///   be NULL only with `n_rules` 0 (refused as empty).
/// - `group`, `group_len`: NULL and 0 for none; else 1 to `RL_MAX_GROUP_BYTES` bytes naming a
///   Redis Cluster hash tag for the call's keys. All keys of one call must share a Cluster slot:
///   without a group, keys on different slots are refused (`RL_INVALID_ARGUMENT` naming them, on
///   every backend and topology, so code that works on one Redis works on a Cluster). A grouped
///   key is a window apart from the same key ungrouped or in another group (`rl_peek` and
///   `rl_reset` see the ungrouped one), and a whole group lives on one Cluster node.
/// - `out`: must not be NULL; `struct_size`, `decisions` and `decisions_cap` set by the caller
///   (see `rl_composite`); everything else is written on `RL_OK` only.
/// - `err`: as for `rl_limiter_open`.
///
/// Refused with `RL_INVALID_ARGUMENT`, before any I/O and with nothing taken, naming the value:
/// "rules" (empty, more than `RL_MAX_RULES`, keys on different slots without a group), "group",
/// "key" / "limit" / "window_ms" / "cost" of a rule (the message says which rule; "cost" also for
/// two rules on one key with different costs), "key_shards" (a limiter with `key_shards` > 1),
/// "limiter" / "out" (NULL, a bad `struct_size`, a NULL or short `decisions` array).
///
/// Blocks like `rl_acquire`. Returns `RL_OK` (allowed or denied: see `out->allowed`),
/// `RL_INVALID_ARGUMENT`, `RL_BACKEND_UNAVAILABLE`, `RL_BACKEND_ERROR` or `RL_PANIC`; with the
/// local fallback on, an unhealthy Redis gives `RL_OK` in `RL_MODE_LOCAL`, every rule honoured
/// within this instance's share of its limit. Takes no lease. Thread-safe.
///
/// # Safety
/// `limiter` is NULL or live; `rules` is NULL or `n_rules` readable `rl_rule`s, each `key`
/// NULL or `key_len` readable bytes; `group` is NULL or `group_len` readable bytes; `out` is NULL
/// or a writable `rl_composite` of `out->struct_size` bytes whose `decisions` is NULL or
/// `decisions_cap` writable entries; `err` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn rl_acquire_all(
    limiter: *const rl_limiter,
    rules: *const rl_rule,
    n_rules: usize,
    group: *const u8,
    group_len: usize,
    out: *mut rl_composite,
    err: *mut *mut rl_error,
) -> rl_status {
    boundary("rl_acquire_all", err, || {
        // SAFETY (every block below): forwarded from the caller's promises above.
        let l = unsafe { limiter_ref(limiter) }?;
        let rules = unsafe { read_rules(rules, n_rules) }?;
        let group = unsafe { read_group(group, group_len) }?;
        non_null(out, "out")?;
        unsafe { check_size(out, "out") }?;
        let (decisions, cap) = unsafe { ((*out).decisions, (*out).decisions_cap) };
        non_null(decisions, "out").map_err(|_| {
            invalid(
                "out",
                "decisions must not be NULL; point it at an array of at least n_rules rl_decision",
            )
        })?;
        if cap < rules.len() {
            return Err(invalid(
                "out",
                format!(
                    "decisions_cap is {cap}; the call has {} rules and needs one rl_decision each",
                    rules.len()
                ),
            ));
        }
        let c = l.acquire_all(&rules, group)?;
        let each: Vec<rl_decision> = c
            .decisions
            .iter()
            .map(|d| to_c_decision(*d))
            .collect::<Result<_, _>>()?;
        let mode = to_c_mode(c.mode)?;
        // SAFETY: `decisions` holds `cap` >= each.len() writable entries; `out` is writable.
        unsafe {
            std::ptr::copy_nonoverlapping(each.as_ptr(), decisions, each.len());
            let o = &mut *out;
            o.n_decisions = each.len();
            o.allowed = c.allowed;
            o.retry_after_ms = c.retry_after_ms;
            o.mode = mode;
            o.now_ms = c.now_ms;
        }
        Ok(())
    })
}

/// Forgets everything admitted on `key` inside `group` (the window `rl_acquire_all` keeps for
/// `key` when called with that group); without a group (NULL and 0), `rl_reset`. The same key
/// ungrouped or in another group is untouched: each is a window of its own.
///
/// `limiter` and `key` must not be NULL; `key`/`key_len` as for `rl_acquire`; `group`/`group_len`
/// as for `rl_acquire_all`; `err` as for `rl_limiter_open`. Refused with `RL_INVALID_ARGUMENT`
/// naming "key" or "group" before any I/O. Blocks at most the request timeout. Returns `RL_OK`,
/// `RL_INVALID_ARGUMENT`, `RL_BACKEND_UNAVAILABLE`, `RL_BACKEND_ERROR` or `RL_PANIC`.
/// Thread-safe.
///
/// # Safety
/// `limiter` is NULL or live; `key` is NULL or points to `key_len` readable bytes; `group` is NULL
/// or points to `group_len` readable bytes; `err` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn rl_reset_in_group(
    limiter: *const rl_limiter,
    key: *const u8,
    key_len: usize,
    group: *const u8,
    group_len: usize,
    err: *mut *mut rl_error,
) -> rl_status {
    boundary("rl_reset_in_group", err, || {
        // SAFETY (every block below): forwarded from the caller's promises above.
        let l = unsafe { limiter_ref(limiter) }?;
        let key = unsafe { key_bytes(key, key_len) }?;
        let group = unsafe { read_group(group, group_len) }?;
        l.reset_in_group(key, group)?;
        Ok(())
    })
}

/// The core's composite decision back from a caller's `rl_composite` (for headers and problem
/// bodies). Read field by field, booleans as bytes and modes as integers, so a struct a caller
/// filled in by hand is never undefined behaviour here.
///
/// # Safety
/// `p` is non-NULL, a `rl_composite` of `struct_size` bytes whose `decisions` is NULL or
/// `n_decisions` readable entries.
pub(crate) unsafe fn read_composite(
    p: *const rl_composite,
    name: &'static str,
) -> Result<CompositeDecision, Failure> {
    // SAFETY (every block below): forwarded from the caller.
    unsafe { check_size(p, name) }?;
    let c = unsafe { &*p.cast::<RawComposite>() };
    if c.n_decisions > MAX_RULES {
        return Err(invalid(
            name,
            format!(
                "n_decisions is {}; an rl_acquire_all result has at most {MAX_RULES}",
                c.n_decisions
            ),
        ));
    }
    let raw: &[RawDecision] = if c.n_decisions == 0 {
        &[]
    } else {
        non_null(c.decisions, name).map_err(|_| invalid(name, "decisions must not be NULL"))?;
        unsafe { std::slice::from_raw_parts(c.decisions, c.n_decisions) }
    };
    let mode = |m: u32| -> Result<Mode, Failure> {
        MODES
            .iter()
            .position(|c| *c as u32 == m)
            .map(|i| Mode::ALL[i])
            .ok_or_else(|| invalid(name, format!("holds the mode {m}, which is no rl_mode")))
    };
    Ok(CompositeDecision {
        allowed: c.allowed != 0,
        retry_after_ms: c.retry_after_ms,
        mode: mode(c.mode)?,
        now_ms: c.now_ms,
        decisions: raw
            .iter()
            .map(|d| {
                Ok(Decision {
                    allowed: d.allowed != 0,
                    remaining: d.remaining,
                    used: d.used,
                    retry_after_ms: d.retry_after_ms,
                    reset_after_ms: d.reset_after_ms,
                    mode: mode(d.mode)?,
                    now_ms: d.now_ms,
                })
            })
            .collect::<Result<_, Failure>>()?,
    })
}

/// `rl_decision`'s layout with the bool and the enum as plain integers.
#[repr(C)]
struct RawDecision {
    allowed: u8,
    remaining: u64,
    used: u64,
    retry_after_ms: u64,
    reset_after_ms: u64,
    mode: u32,
    now_ms: u64,
}

/// `rl_composite`'s layout with the bool and the enum as plain integers.
#[repr(C)]
struct RawComposite {
    struct_size: usize,
    decisions: *const RawDecision,
    decisions_cap: usize,
    n_decisions: usize,
    allowed: u8,
    retry_after_ms: u64,
    mode: u32,
    now_ms: u64,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::errors::message;
    use crate::limiter::{rl_limiter_free, rl_limiter_open};
    use rl_core::blocking::Limiter;
    use rl_core::Options;
    use std::mem::{align_of, offset_of, size_of};
    use std::ptr::{null, null_mut};

    #[test]
    fn limits_are_the_cores() {
        assert_eq!(RL_MAX_RULES, MAX_RULES);
        assert_eq!(RL_MAX_GROUP_BYTES, MAX_GROUP_BYTES);
    }

    #[test]
    fn raw_layouts_match_the_c_structs() {
        assert_eq!(size_of::<RawDecision>(), size_of::<rl_decision>());
        assert_eq!(align_of::<RawDecision>(), align_of::<rl_decision>());
        assert_eq!(size_of::<RawComposite>(), size_of::<rl_composite>());
        assert_eq!(size_of::<rl_mode>(), size_of::<u32>());
        macro_rules! same {
            ($a:ty, $b:ty, $($f:ident),*) => {$(assert_eq!(offset_of!($a, $f), offset_of!($b, $f), stringify!($f));)*};
        }
        same!(
            RawDecision,
            rl_decision,
            allowed,
            remaining,
            used,
            retry_after_ms,
            reset_after_ms,
            mode,
            now_ms
        );
        same!(
            RawComposite,
            rl_composite,
            struct_size,
            decisions,
            decisions_cap,
            n_decisions,
            allowed,
            retry_after_ms,
            mode,
            now_ms
        );
    }

    /// The binding refuses a huge count and an oversized group before reading them; its words
    /// must be the core's.
    #[test]
    fn early_refusals_use_the_cores_words() {
        let core = Limiter::open(None, Options::default()).unwrap();
        let many: Vec<Rule> = (0..MAX_RULES + 1)
            .map(|_| Rule::new("k", 1, 1, 1))
            .collect();
        let big = vec![b'g'; MAX_GROUP_BYTES + 1];
        let want_many = core.acquire_all(&many, None).unwrap_err().to_string();
        let want_group = core
            .acquire_all(&[Rule::new("k", 1, 1, 1)], Some(&big))
            .unwrap_err()
            .to_string();

        let mut lim = null_mut();
        assert_eq!(
            unsafe { rl_limiter_open(null(), null(), &mut lim, null_mut()) },
            rl_status::RL_OK
        );
        let key = b"k";
        let rule = rl_rule {
            key: key.as_ptr(),
            key_len: 1,
            limit: 1,
            window_ms: 1,
            cost: 1,
        };
        let rules = vec![rule; MAX_RULES + 1];
        let mut ds = vec![std::mem::MaybeUninit::<rl_decision>::uninit(); MAX_RULES + 1];
        let mut out = rl_composite {
            struct_size: V1,
            decisions: ds.as_mut_ptr().cast(),
            decisions_cap: ds.len(),
            n_decisions: 7,
            allowed: false,
            retry_after_ms: 0,
            mode: rl_mode::RL_MODE_NORMAL,
            now_ms: 0,
        };
        for (n, group, glen, want) in [
            (MAX_RULES + 1, null(), 0, &want_many),
            (1, big.as_ptr(), big.len(), &want_group),
        ] {
            let mut e = null_mut();
            let st =
                unsafe { rl_acquire_all(lim, rules.as_ptr(), n, group, glen, &mut out, &mut e) };
            assert_eq!(st, rl_status::RL_INVALID_ARGUMENT);
            assert_eq!(&message(e), want);
        }
        assert_eq!(out.n_decisions, 7, "nothing written on failure");
        unsafe { rl_limiter_free(lim) };
    }
}
