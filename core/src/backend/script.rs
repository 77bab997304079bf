//! The one Lua script, compiled in, and the native calling convention's reply.
//!
//! The file is the same `lua/sliding_window.lua` a script-calling gateway loads, so a fleet can
//! mix both kinds of caller on one window. On Redis >= 7 rl calls it as a Functions library
//! (`functions.rs`); otherwise redis-rs sends it by EVALSHA and, on `NOSCRIPT` (after a restart,
//! failover or `SCRIPT FLUSH`), loads it and retries at once.

use std::sync::LazyLock;

use redis::Value;

use super::Verdict;
use crate::error::{Error, Result};

// The scripts are read through `core/lua`, a symlink to the repository's `lua/`: a path inside the
// crate, so `cargo package` and the Python sdist (maturin) carry them and rl-core builds from
// either; the files themselves stay where the design's gateways and the README expect them.

/// `lua/sliding_window.lua`, verbatim.
pub const SLIDING_WINDOW_LUA: &str = include_str!("../../lua/sliding_window.lua");

pub(crate) static SLIDING_WINDOW: LazyLock<redis::Script> =
    LazyLock::new(|| redis::Script::new(SLIDING_WINDOW_LUA));

/// `lua/heartbeat.lua`: one instance's heartbeat and the live instance count; also the recovery probe.
pub(crate) static HEARTBEAT: LazyLock<redis::Script> =
    LazyLock::new(|| redis::Script::new(include_str!("../../lua/heartbeat.lua")));

/// `lua/repair.lua`: writes admitted permits a window lacks back into it, idempotently.
pub(crate) static REPAIR: LazyLock<redis::Script> =
    LazyLock::new(|| redis::Script::new(include_str!("../../lua/repair.lua")));

/// The SHA1 that EVALSHA uses for the script, for callers that load it themselves.
pub fn sliding_window_sha() -> &'static str {
    SLIDING_WINDOW.get_hash()
}

/// Numbers for the native calling convention: big-endian doubles, what the script's
/// `struct.unpack('>d...')` reads without parsing text. Every value is at most 1e15, exact in a double.
pub(crate) fn pack(values: &[u64]) -> Vec<u8> {
    let mut out = Vec::with_capacity(8 * values.len());
    pack_into(&mut out, values);
    out
}

/// [`pack`], appended to `out`.
pub(crate) fn pack_into(out: &mut Vec<u8>, values: &[u64]) {
    for &v in values {
        out.extend_from_slice(&(v as f64).to_be_bytes());
    }
}

fn int(v: &Value) -> Option<i64> {
    match v {
        Value::Int(i) => Some(*i),
        Value::BulkString(b) => std::str::from_utf8(b).ok()?.parse().ok(),
        _ => None,
    }
}

fn non_negative(v: &Value) -> Option<u64> {
    int(v).and_then(|i| u64::try_from(i).ok())
}

/// Bytes per request of a packed native reply: `pack('>ddddd', allowed, used, retry_after_ms,
/// reset_after_ms, now_ms)`.
const PACKED: usize = 40;

/// Field `i` of one packed request, if it is a whole number in range (the script writes only
/// those; anything else is a reply this client does not understand).
fn unpacked(v: &[u8], i: usize) -> Option<u64> {
    let f = f64::from_be_bytes(v.get(8 * i..8 * i + 8)?.try_into().ok()?);
    ((0.0..=MAX_EXACT).contains(&f) && f.fract() == 0.0).then_some(f as u64)
}

/// Doubles are whole numbers exactly up to 2^53.
const MAX_EXACT: f64 = 9_007_199_254_740_992.0;

/// One packed request's verdict.
fn verdict(v: &[u8]) -> Option<Verdict> {
    let allowed = unpacked(v, 0)?;
    Some(Verdict {
        // 2: admitted by an earlier attempt of this request (see `answered_again`).
        allowed: allowed == 1 || allowed == 2,
        used: unpacked(v, 1)?,
        retry_after_ms: unpacked(v, 2)?,
        reset_after_ms: unpacked(v, 3)?,
        now_ms: unpacked(v, 4)?,
    })
}

/// Reads a lease call's reply `{0, granted, now, used, reset_after}`.
pub(crate) fn parse_lease_reply(
    reply: Value,
    client_now: Option<u64>,
    max_skew_ms: u64,
) -> Result<super::redis::LeaseReply> {
    if let Value::Array(items) = &reply {
        if items.len() == 5 && items.first().and_then(int) == Some(0) {
            let n: Option<Vec<u64>> = items[1..].iter().map(non_negative).collect();
            if let Some(n) = n {
                return Ok(super::redis::LeaseReply {
                    granted: n[0],
                    now_ms: n[1],
                    used: n[2],
                    reset_after_ms: n[3],
                });
            }
        }
    }
    // Errors share convention 2's shapes.
    parse_reply(reply, 0, client_now, max_skew_ms).and_then(|_| {
        Err(Error::Backend(
            "unexpected reply from the rl script's lease call".into(),
        ))
    })
}

/// Reads a composite call's reply, `{0, then per request: allowed, retry_after, now, then 5 per
/// rule}` (`sizes`: each request's rules), into one verdict per rule, per request (the overall
/// figures follow from them; a reply whose `allowed` disagrees is refused as unexpected).
pub(crate) fn parse_composite_reply(
    reply: Value,
    sizes: &[usize],
    client_now: Option<u64>,
    max_skew_ms: u64,
) -> Result<Vec<Vec<Verdict>>> {
    if let Value::Array(items) = &reply {
        let len = 1 + sizes.iter().map(|n| 3 + 5 * n).sum::<usize>();
        if items.len() == len && items.first().and_then(int) == Some(0) {
            let mut out = Vec::with_capacity(sizes.len());
            let mut at = 1;
            for &n in sizes {
                let allowed = items.get(at).and_then(non_negative);
                // Convention 2's shape, without the overall figures.
                let rest = Value::Array(
                    std::iter::once(Value::Int(0))
                        .chain(items[at + 3..at + 3 + 5 * n].iter().cloned())
                        .collect(),
                );
                let verdicts = parse_reply(rest, n, client_now, max_skew_ms)?;
                if allowed != Some(u64::from(verdicts.iter().all(|v| v.allowed))) {
                    break;
                }
                out.push(verdicts);
                at += 3 + 5 * n;
            }
            if out.len() == sizes.len() {
                return Ok(out);
            }
        }
    }
    parse_reply(reply, 0, client_now, max_skew_ms).and_then(|_| {
        Err(Error::Backend(
            "unexpected reply from the rl script's composite call".into(),
        ))
    })
}

/// A composite batch's `{-3, k, ...}`: the keys (0-based places among the call's `nkeys`) that
/// are not rl windows; `None` for any other reply.
pub(crate) fn not_windows(reply: &Value, nkeys: usize) -> Option<Result<Vec<usize>>> {
    let Value::Array(items) = reply else {
        return None;
    };
    if items.first().and_then(int) != Some(-3) {
        return None;
    }
    let bad: Option<Vec<usize>> = items[1..]
        .iter()
        .map(|v| match int(v) {
            Some(k) if k >= 1 && k as usize <= nkeys => Some(k as usize - 1),
            _ => None,
        })
        .collect();
    Some(match bad {
        Some(bad) if !bad.is_empty() => Ok(bad),
        _ => Err(Error::Backend(
            "unexpected reply from the rl script's composite call".into(),
        )),
    })
}

/// Reads `{status, ...}` (see the script's header) into one verdict per request, or a typed error.
/// How many requests of a native reply were retries answered from their first attempt's record
/// (`allowed` 2: admitted then, not counted again).
pub(crate) fn answered_again(reply: &Value) -> u64 {
    if let Value::BulkString(b) = reply {
        return b
            .chunks_exact(PACKED)
            .filter(|v| unpacked(v, 0) == Some(2))
            .count() as u64;
    }
    let Value::Array(items) = reply else {
        return 0;
    };
    if items.first().and_then(int) != Some(0) {
        return 0;
    }
    items[1..]
        .chunks(5)
        .filter(|v| v.first().and_then(int) == Some(2))
        .count() as u64
}

pub(crate) fn parse_reply(
    reply: Value,
    requests: usize,
    client_now: Option<u64>,
    max_skew_ms: u64,
) -> Result<Vec<Verdict>> {
    let bad = |what: &str| {
        Error::Backend(format!(
            "unexpected reply from the rl script ({what}): {reply:?}"
        ))
    };
    let items = match &reply {
        // 'rl1P': one success reply, packed (see the script's header).
        Value::BulkString(b) if b.len() == PACKED * requests => {
            return b
                .chunks_exact(PACKED)
                .map(|v| verdict(v).ok_or_else(|| bad("field")))
                .collect();
        }
        Value::Array(items) => items,
        _ => return Err(bad("neither a packed reply nor an array")),
    };
    match items.first().and_then(int) {
        Some(0) if items.len() == 1 + 5 * requests => items[1..]
            .chunks(5)
            .map(|v| {
                let mut n = [0u64; 5];
                for (n, v) in n.iter_mut().zip(v) {
                    *n = non_negative(v).ok_or_else(|| bad("field"))?;
                }
                Ok(Verdict {
                    // 2: admitted by an earlier attempt of this request (see `answered_again`).
                    allowed: n[0] == 1 || n[0] == 2,
                    used: n[1],
                    retry_after_ms: n[2],
                    reset_after_ms: n[3],
                    now_ms: n[4],
                })
            })
            .collect(),
        Some(-1) => {
            let name = match items.get(1) {
                Some(Value::BulkString(b)) => String::from_utf8_lossy(b).into_owned(),
                _ => "?".into(),
            };
            Err(Error::Backend(format!(
                "the rl script rejected argument `{name}`"
            )))
        }
        Some(-2) => {
            let server_ms = items
                .get(1)
                .and_then(non_negative)
                .ok_or_else(|| bad("server time"))?;
            let client_ms = client_now.unwrap_or(0);
            Err(Error::ClockSkew {
                client_ms,
                server_ms,
                skew_ms: client_ms.abs_diff(server_ms),
                max_skew_ms,
            })
        }
        _ => Err(bad("status")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_batchs_keys_that_are_not_windows_are_read_as_places() {
        let r = |items: &[i64]| Value::Array(items.iter().map(|&i| Value::Int(i)).collect());
        assert_eq!(
            not_windows(&r(&[-3, 2, 3]), 3).unwrap().unwrap(),
            vec![1, 2]
        );
        assert!(not_windows(&r(&[0, 1, 2]), 3).is_none(), "a decision");
        assert!(not_windows(&r(&[-2, 5]), 3).is_none(), "another error");
        assert!(not_windows(&Value::BulkString(vec![0; 40]), 3).is_none());
        for bad in [&[-3][..], &[-3, 0], &[-3, 4], &[-3, 1, -1]] {
            assert!(not_windows(&r(bad), 3).unwrap().is_err(), "{bad:?}");
        }
    }

    fn packed(requests: &[[f64; 5]]) -> Value {
        Value::BulkString(
            requests
                .iter()
                .flatten()
                .flat_map(|v| v.to_be_bytes())
                .collect(),
        )
    }

    #[test]
    fn a_packed_reply_reads_as_one_verdict_per_request() {
        let reply = packed(&[
            [1.0, 3.0, 0.0, 1000.0, 1_700_000_000_123.0],
            [0.0, 4.0, 250.0, 900.0, 1_700_000_000_123.0],
            [2.0, 4.0, 0.0, 900.0, 1_700_000_000_123.0],
        ]);
        assert_eq!(answered_again(&reply), 1);
        let v = parse_reply(reply, 3, None, 0).unwrap();
        assert_eq!(v.len(), 3);
        assert!(v[0].allowed && !v[1].allowed && v[2].allowed);
        assert_eq!(
            (v[1].used, v[1].retry_after_ms, v[1].reset_after_ms),
            (4, 250, 900)
        );
        assert_eq!(v[0].now_ms, 1_700_000_000_123);
    }

    #[test]
    fn a_packed_reply_of_the_wrong_size_or_with_a_number_out_of_range_is_refused() {
        let one = [1.0, 3.0, 0.0, 1000.0, 5.0];
        // One request's reply for a batch of two.
        assert!(parse_reply(packed(&[one]), 2, None, 0).is_err());
        for bad in [-1.0, 0.5, f64::NAN, f64::INFINITY, 1e17] {
            let mut r = one;
            r[1] = bad;
            let e = parse_reply(packed(&[r]), 1, None, 0).unwrap_err();
            assert!(e.to_string().contains("field"), "{bad}: {e}");
        }
    }
}
