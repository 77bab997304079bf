//! `rl_stats_get`: the core's `Stats::fields()`, in `STATS_FIELDS` order, into the generated
//! `rl_stats` (whose field order is that table's, and is ABI).

use std::ffi::c_char;

use rl_core::options::Value;
use rl_core::{Mode, StatsField};

use crate::errors::{invalid, rl_error, rl_status, Failure};
use crate::generated::{rl_mode, rl_stats};
use crate::limiter::{limiter_ref, rl_limiter};
use crate::panic::boundary;
use crate::types::{c_chars, non_null, to_c_mode};

/// A C field type a stats value converts to.
pub(crate) trait FromStat: Sized {
    fn from_stat(v: Value) -> Option<Self>;
}

impl FromStat for u64 {
    fn from_stat(v: Value) -> Option<Self> {
        match v {
            Value::Int(n) => u64::try_from(n).ok(),
            _ => None,
        }
    }
}

impl FromStat for rl_mode {
    fn from_stat(v: Value) -> Option<Self> {
        match v {
            Value::Text(name) => to_c_mode(Mode::from_name(&name)?).ok(),
            _ => None,
        }
    }
}

impl<const N: usize> FromStat for [c_char; N] {
    fn from_stat(v: Value) -> Option<Self> {
        match v {
            Value::Text(s) => Some(c_chars(&s)),
            _ => None,
        }
    }
}

/// The next stats field, which must be `name` (the generated struct's next field), as `T`.
pub(crate) fn take<T: FromStat>(
    fields: &mut impl Iterator<Item = (&'static StatsField, Value)>,
    name: &str,
) -> Result<T, Failure> {
    let next = fields.next();
    let found = next.as_ref().map(|(f, _)| f.name);
    match next {
        Some((f, v)) if f.name == name => T::from_stat(v.clone()).ok_or_else(|| {
            Failure::Internal(format!(
                "internal error: stats field `{name}` is {v:?}, which rl_stats cannot hold (please report this)"
            ))
        }),
        _ => Err(Failure::Internal(format!(
            "internal error: rl_stats expects `{name}` next, rl-core gave {found:?}; the C binding was generated from another stats table (please report this)"
        ))),
    }
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
        let stats = rl_stats::from_fields(size, &mut l.stats().fields())?;
        // SAFETY: non-NULL, and the caller promises `struct_size` (== V1) writable bytes.
        unsafe { out.write(stats) };
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use rl_core::{Stats, STATS_FIELDS};

    /// The order of version 1 of `rl_stats`, as released: the core's table must keep it (new
    /// fields append), or old programs would read the wrong fields.
    const V1: [&str; 22] = [
        "mode",
        "topology",
        "decisions_normal",
        "decisions_local",
        "decisions_memory",
        "transitions_to_local",
        "transitions_to_normal",
        "state_ms",
        "state_reason",
        "redis_errors",
        "retries",
        "probes",
        "repairs",
        "repaired_permits",
        "failovers",
        "instances",
        "local_keys",
        "rtt_samples",
        "rtt_last_us",
        "rtt_p50_us",
        "rtt_p99_us",
        "rtt_max_us",
    ];

    #[test]
    fn c_struct_order_is_stats_fields_order() {
        let names: Vec<&str> = STATS_FIELDS.iter().map(|f| f.name).collect();
        assert_eq!(names[..V1.len()], V1);
        // Every field lands in the struct: distinct values come back at their names.
        let s = Stats {
            mode: Mode::Local,
            topology: "cluster",
            decisions_normal: 1,
            decisions_local: 2,
            decisions_memory: 3,
            transitions_to_local: 4,
            transitions_to_normal: 5,
            state_ms: 6,
            state_reason: "why".into(),
            redis_errors: 7,
            retries: 8,
            probes: 9,
            repairs: 10,
            repaired_permits: 11,
            failovers: 12,
            instances: 13,
            local_keys: 14,
            rtt_samples: 15,
            rtt_last_us: 16,
            rtt_p50_us: 17,
            rtt_p99_us: 18,
            rtt_max_us: 19,
            shard_borrows: 20,
            decisions_lease: 21,
            leases_taken: 22,
            lease_refunds: 23,
            leased_permits: 24,
            refunded_permits: 25,
            denials_cached: 26,
            denied_normal: 27,
            denied_local: 28,
            denied_memory: 29,
        };
        let c = match rl_stats::from_fields(7, &mut s.fields()) {
            Ok(c) => c,
            Err(f) => panic!("{}", f.message()),
        };
        assert_eq!(c.struct_size, 7);
        assert_eq!(c.mode, rl_mode::RL_MODE_LOCAL);
        assert_eq!(
            c.topology[..8].iter().map(|&b| b as u8).collect::<Vec<_>>(),
            b"cluster\0"
        );
        assert_eq!(
            c.state_reason[..4]
                .iter()
                .map(|&b| b as u8)
                .collect::<Vec<_>>(),
            b"why\0"
        );
        // The counts, in struct order, are 1..=29: the struct's order is the table's.
        let counts = [
            c.decisions_normal,
            c.decisions_local,
            c.decisions_memory,
            c.transitions_to_local,
            c.transitions_to_normal,
            c.state_ms,
            c.redis_errors,
            c.retries,
            c.probes,
            c.repairs,
            c.repaired_permits,
            c.failovers,
            c.instances,
            c.local_keys,
            c.rtt_samples,
            c.rtt_last_us,
            c.rtt_p50_us,
            c.rtt_p99_us,
            c.rtt_max_us,
            c.shard_borrows,
            c.decisions_lease,
            c.leases_taken,
            c.lease_refunds,
            c.leased_permits,
            c.refunded_permits,
            c.denials_cached,
            c.denied_normal,
            c.denied_local,
            c.denied_memory,
        ];
        assert_eq!(counts, std::array::from_fn(|i| i as u64 + 1));
    }

    #[test]
    fn a_field_out_of_order_is_an_internal_error() {
        let mut wrong = STATS_FIELDS.iter().skip(1).map(|f| (f, Value::Int(0)));
        assert!(matches!(
            take::<rl_mode>(&mut wrong, "mode"),
            Err(Failure::Internal(_))
        ));
    }
}
