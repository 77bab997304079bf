//! Sharded keys (`key_shards` = N > 1, the design's L3): one limit split over N sub-keys whose hash
//! tags sit on Cluster slots spread evenly over the slot space, so one hot key's load spreads
//! over N slots and, on a Cluster whose masters hold equal slot ranges and N ≥ masters, over
//! every master.
//!
//! **Exact.** Shard `i` holds `limit / N`, plus one permit for each of the first `limit % N`
//! shards, so the sub-limits sum to the limit. Each sub-key is an ordinary exact window of its
//! sub-limit, decided by its own server on that server's clock: any span of `window_ms` on that
//! clock holds at most the sub-limit there, and so any span holds at most the limit over all
//! shards. Offsets between the masters' clocks change nothing (each shard's span is measured on
//! its own clock, and a span of `window_ms` is one on every clock that runs at the same rate);
//! only a step or a different rate of one master's clock matters, exactly as for an unsharded key
//! on that master. Every instance must use the same `key_shards` for a key, as it must use the
//! same limit.
//!
//! **Costs.** One request takes its permits from one shard: a script call cannot touch keys in
//! several slots atomically, so a cost above the largest sub-limit (`ceil(limit / N)`) is refused
//! with `InvalidArgument` naming `cost`, on every backend, before any I/O. Shards whose sub-limit
//! is below the cost (or 0, when `limit < N`) are never asked for it.
//!
//! **Borrowing.** An instance asks its home shard first (a hash of its instance id, so a fleet's
//! instances start on different shards) and, when that one denies, the next shards in order until
//! one admits: up to N calls, the extra ones counted in `stats().shard_borrows`. A request is
//! denied only if every shard that can hold its cost denied it, i.e. had at most `cost - 1` free
//! permits when asked. So against one unsharded key the fleet loses at most `N * (cost - 1)`
//! permits per window to fragmentation (none for cost 1), plus what frees up on a shard between
//! its denial and the call's end (the shards are asked one round trip apart).
//!
//! **Names.** Shard `i` of N is `<prefix>{<escaped key>%s<i>.<N>.<XXXX>}`. The escaped user key
//! (`keys.rs`) never holds `%s`, so the names are distinct from every unsharded key and from each
//! other. `XXXX` are four letters from `@ABCDEFGHIJKLMNO` that put the tag's CRC16 on shard `i`'s
//! target slot, the middle of the `i`-th of N equal slices of `0..16384` (for N = 3: 2730, 8192,
//! 13653, one in each third, the ranges `redis-cli --cluster create` gives 3 masters). CRC16
//! (XMODEM: no initial value, no final xor) is linear, so `crc(T ‖ S) = crc(T ‖ 0000) ⊕ crc(S)`;
//! the letters `0x40 | nibble` make `crc(S)` take every 16-bit value, and a table built once
//! picks the letters for each wanted slot.
//!
//! **Decisions.** `used` and `remaining` sum over the shards this call asked: the home shard's
//! own figures (against its sub-limit) when it admits, every eligible shard's when all deny. An
//! admitted decision carries the deciding shard's `now_ms` and mode; a denial the smallest
//! `retry_after_ms` (the first shard the same request fits on) and the latest `now_ms`;
//! `reset_after_ms` is the largest among the shards asked. `peek` asks every shard (totals of the
//! whole key); `reset` deletes every sub-key. The local fallback, its ledger and the failover
//! repair treat each sub-key like any key, with its sub-limit. The memory backend is one process
//! holding the whole limit exactly and does not shard (it still refuses the same costs).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

use crate::backend::{Request, Verdict};
use crate::decision::{Decision, Mode};
use crate::error::{Error, Result};
use crate::keys;
use crate::primaries::SLOTS;
use crate::redis_path::RedisPath;

/// Most shards per key: beyond that a denial (which asks every shard) costs more calls than it saves.
pub(crate) const MAX_SHARDS: u64 = 64;

/// Shard `i`'s part of `limit`: the sub-limits sum to `limit`.
pub(crate) fn sub_limit(limit: u64, n: u64, i: u64) -> u64 {
    limit / n + u64::from(i < limit % n)
}

/// The largest sub-limit, which bounds one request's cost.
pub(crate) fn max_cost(limit: u64, n: u64) -> u64 {
    limit.div_ceil(n)
}

/// Refuses a cost no shard can hold.
pub(crate) fn check_cost(cost: u64, limit: u64, n: u64) -> Result<()> {
    if n > 1 && cost > max_cost(limit, n) {
        return Err(Error::invalid(
            "cost",
            format!(
                "is {cost}, above {}, the largest shard of limit {limit} over key_shards {n}: one request is taken from one shard",
                max_cost(limit, n)
            ),
        ));
    }
    Ok(())
}

/// The slot shard `i` of `n` aims at: the middle of the `i`-th of `n` equal slices.
pub(crate) fn target_slot(i: u64, n: u64) -> u16 {
    ((2 * i + 1) * u64::from(SLOTS) / (2 * n)) as u16
}

/// For each 14-bit residue, four letters `0x40 | nibble` whose CRC16 has that residue.
fn letters() -> &'static [[u8; 4]] {
    static TABLE: OnceLock<Vec<[u8; 4]>> = OnceLock::new();
    TABLE.get_or_init(|| {
        let mut t = vec![[0u8; 4]; usize::from(SLOTS)];
        let mut seen = vec![false; usize::from(SLOTS)];
        for v in 0u32..1 << 16 {
            let s = [12, 8, 4, 0].map(|sh| 0x40 | ((v >> sh) & 0xF) as u8);
            let r = usize::from(crc(&s) % SLOTS);
            if !seen[r] {
                seen[r] = true;
                t[r] = s;
            }
        }
        // Linear and onto 16 bits (the unit test checks), so every residue is reached.
        debug_assert!(seen.iter().all(|&s| s));
        t
    })
}

fn crc(bytes: &[u8]) -> u16 {
    crc16::State::<crc16::XMODEM>::calculate(bytes)
}

/// The Redis key of shard `i` of `n` for `user_key` (see the module doc for the layout).
pub fn sub_key(prefix: &str, user_key: &[u8], i: u64, n: u64) -> Vec<u8> {
    let mut out = Vec::with_capacity(prefix.len() + user_key.len() + 24);
    out.extend_from_slice(prefix.as_bytes());
    out.push(b'{');
    let tag_start = out.len();
    keys::push_escaped(&mut out, user_key);
    out.extend_from_slice(format!("%s{i}.{n}.").as_bytes());
    let mut state = crc16::State::<crc16::XMODEM>::new();
    state.update(&out[tag_start..]);
    state.update(&[0; 4]);
    let want = (state.get() ^ target_slot(i, n)) % SLOTS;
    out.extend_from_slice(&letters()[usize::from(want)]);
    out.push(b'}');
    out
}

/// This instance's home shard: FNV-1a of its id, so a fleet's instances spread over the shards.
pub(crate) fn home(instance_id: &str, n: u64) -> u64 {
    let h = instance_id.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    });
    h % n
}

/// One shard's answer, as the Redis path gave it.
struct Answer {
    v: Verdict,
    mode: Mode,
    cap: u64,
}

/// Takes `req.cost` from the home shard, or else from the next shards in order.
pub(crate) async fn acquire(
    path: &Arc<RedisPath>,
    prefix: &str,
    req: &Request<'_>,
    n: u64,
    borrows: &AtomicU64,
) -> Result<Decision> {
    let home = home(path.instance_id(), n);
    let mut asked: Vec<Answer> = Vec::new();
    for i in (0..n).map(|k| (home + k) % n) {
        let limit = sub_limit(req.limit, n, i);
        if limit < req.cost {
            continue;
        }
        if !asked.is_empty() {
            borrows.fetch_add(1, Ordering::Relaxed);
        }
        let sub = Request { limit, ..*req };
        let (v, mode, cap) = path.decide(&sub, &sub_key(prefix, req.key, i, n)).await?;
        asked.push(Answer { v, mode, cap });
        if v.allowed {
            break;
        }
    }
    Ok(combine(&asked))
}

/// Every shard's state without taking anything: the whole key's totals.
pub(crate) async fn peek(
    path: &Arc<RedisPath>,
    prefix: &str,
    req: &Request<'_>,
    n: u64,
) -> Result<Decision> {
    let mut asked: Vec<Answer> = Vec::new();
    for i in 0..n {
        let limit = sub_limit(req.limit, n, i);
        if limit == 0 {
            continue;
        }
        let sub = Request { limit, ..*req };
        let (v, mode, cap) = path.decide(&sub, &sub_key(prefix, req.key, i, n)).await?;
        asked.push(Answer { v, mode, cap });
    }
    Ok(combine(&asked))
}

/// Deletes every sub-key.
pub(crate) async fn reset(path: &RedisPath, prefix: &str, key: &[u8], n: u64) -> Result<()> {
    for i in 0..n {
        path.reset(&sub_key(prefix, key, i, n)).await?;
    }
    Ok(())
}

/// One decision from the shards asked (see the module doc). `asked` is never empty: the cost
/// check leaves at least the first shard eligible.
fn combine(asked: &[Answer]) -> Decision {
    let used = asked.iter().map(|a| a.v.used).sum();
    let remaining = asked.iter().map(|a| a.cap.saturating_sub(a.v.used)).sum();
    let reset_after_ms = asked.iter().map(|a| a.v.reset_after_ms).max().unwrap_or(0);
    let base = Decision {
        allowed: false,
        remaining,
        used,
        retry_after_ms: 0,
        reset_after_ms,
        mode: Mode::Normal,
        now_ms: 0,
    };
    if let Some(a) = asked.iter().find(|a| a.v.allowed) {
        return Decision {
            allowed: true,
            mode: a.mode,
            now_ms: a.v.now_ms,
            ..base
        };
    }
    let first_fit = asked.iter().min_by_key(|a| a.v.retry_after_ms);
    Decision {
        retry_after_ms: first_fit.map_or(0, |a| a.v.retry_after_ms),
        mode: first_fit.map_or(Mode::Normal, |a| a.mode),
        now_ms: asked.iter().map(|a| a.v.now_ms).max().unwrap_or(0),
        ..base
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sub_limits_sum_to_the_limit() {
        for limit in [1, 2, 7, 8, 9, 100, 1001, 1_000_000_000_000_000] {
            for n in 1..=MAX_SHARDS {
                let subs: Vec<u64> = (0..n).map(|i| sub_limit(limit, n, i)).collect();
                assert_eq!(subs.iter().sum::<u64>(), limit, "limit {limit} n {n}");
                assert_eq!(*subs.iter().max().unwrap(), max_cost(limit, n));
                assert!(subs.windows(2).all(|w| w[0] >= w[1]), "remainder first");
            }
        }
    }

    #[test]
    fn every_slot_has_letters() {
        let mut seen = vec![false; usize::from(SLOTS)];
        for v in 0u32..1 << 16 {
            let s = [12, 8, 4, 0].map(|sh| 0x40 | ((v >> sh) & 0xF) as u8);
            seen[usize::from(crc(&s) % SLOTS)] = true;
        }
        assert!(seen.iter().all(|&s| s));
    }

    #[test]
    fn sub_keys_land_on_their_target_slots() {
        for key in [&b"api:order"[..], b"", b"a}b{c%", &[0xff; 300], b"user:42"] {
            for n in 1..=MAX_SHARDS {
                for i in 0..n {
                    let k = sub_key("rl:", key, i, n);
                    assert_eq!(keys::slot(&k), target_slot(i, n), "{k:?}");
                }
            }
        }
    }

    #[test]
    fn targets_fall_in_each_third_for_three_shards() {
        // The ranges redis-cli --cluster create (and the test harness) give three masters.
        let thirds = [(0, 5460), (5461, 10922), (10923, 16383)];
        for (i, (lo, hi)) in thirds.iter().enumerate() {
            let s = target_slot(i as u64, 3);
            assert!((*lo..=*hi).contains(&s), "shard {i} at {s}");
        }
    }

    #[test]
    fn names_are_distinct_from_plain_keys_and_each_other() {
        let k = sub_key("rl:", b"api", 0, 4);
        assert!(
            k.starts_with(b"rl:{api%s0.4."),
            "{:?}",
            String::from_utf8_lossy(&k)
        );
        assert_ne!(k, keys::redis_key("rl:", b"api%s0.4."));
        let all: std::collections::HashSet<Vec<u8>> =
            (0..8).map(|i| sub_key("rl:", b"api", i, 8)).collect();
        assert_eq!(all.len(), 8);
    }

    #[test]
    fn cost_above_the_largest_shard_is_refused_naming_cost() {
        assert!(check_cost(3, 10, 4).is_ok());
        let e = check_cost(4, 10, 4).unwrap_err();
        assert_eq!(e.argument(), Some("cost"));
        assert!(e.to_string().contains("key_shards 4"), "{e}");
        assert!(check_cost(10, 10, 1).is_ok());
    }

    #[test]
    fn homes_spread() {
        let homes: std::collections::HashSet<u64> =
            (0..64).map(|i| home(&format!("host-{i}"), 8)).collect();
        assert!(homes.len() >= 6, "{homes:?}");
    }
}
