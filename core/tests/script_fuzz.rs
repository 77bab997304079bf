//! `lua/sliding_window.lua` under random ARGV, on a real redis-server, in each of its calling
//! conventions: the design's (2 KEYS, 6 decimal ARGV), rl's packed `rl1` batch, the `rl1L` lease
//! call and the `rl1C` composite, alone and batched (ARGV[4]). Numbers are drawn from the edges the script checks (0, 1, the
//! maxima and one past them, fractions, negative zero, NaN, the infinities, 2^53, any bit
//! pattern), and the argument counts and packed lengths from the right ones and their neighbours.
//!
//! Oracle, per call: the reply is a decision of its convention's shape, or that convention's
//! refusal (`invalid_args`, `{-1, name, index}`, `{-2, server_ms}` for a refused client clock);
//! never a Lua or Redis error. A refused call writes nothing: DBSIZE and every key's DUMP are what
//! they were before it. The keys hold real windows and leases from the accepted calls. Half the
//! calls go by EVALSHA, half by FCALL to the same file loaded as a Functions library (where the
//! server has Functions). `RL_SCRIPT_FUZZ_CASES` sets the number of calls (default 3000; `make
//! fuzz` runs many more).

mod common;

use std::cell::RefCell;
use std::time::Duration;

use common::*;
use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};
use rl_core::{sliding_window_sha, SLIDING_WINDOW_LIBRARY, SLIDING_WINDOW_LUA};
use rl_harness::{Connection, RespValue};

const POOL: &[&[u8]] = &[
    b"rl:{a}",
    b"rl:{b}",
    b"rl:{c}",
    b"rl:{a}:cfg",
    b"rl:{d}",
    b"rl:{e}",
];

/// A number the script reads as a packed double.
fn num(now: f64) -> impl Strategy<Value = f64> {
    prop_oneof![
        4 => prop::sample::select(vec![
            0.0, 1.0, 2.0, 3.0, 10.0, 1000.0, 60_000.0, 1e15, 1e15 + 1.0, 1e15 - 1.0,
            2_592_000_000.0, 2_592_000_001.0, 4_503_599_627_370_496.0, 9_007_199_254_740_993.0,
            0.5, 1.5, -1.0, -0.0, f64::NAN, f64::INFINITY, f64::NEG_INFINITY, f64::MIN_POSITIVE,
            f64::MAX, 2e15, now, now + 500.0, now - 5000.0,
        ]),
        2 => (1u64..2000).prop_map(|n| n as f64),
        1 => any::<u64>().prop_map(f64::from_bits),
    ]
}

fn packed(values: &[f64]) -> Vec<u8> {
    values.iter().flat_map(|v| v.to_be_bytes()).collect()
}

/// A packed ARGV of `n` doubles, sometimes one byte short or long.
fn blob(n: std::ops::Range<usize>, now: f64) -> impl Strategy<Value = Vec<u8>> {
    (
        prop::collection::vec(num(now), n),
        prop::sample::select(vec![0i8, 0, 0, 0, 0, 0, -1, 1]),
    )
        .prop_map(|(v, skew)| {
            let mut b = packed(&v);
            match skew {
                -1 => {
                    b.pop();
                }
                1 => b.push(0),
                _ => {}
            }
            b
        })
}

/// A decimal argument for the design's convention.
fn decimal(now: u64) -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        3 => prop::sample::select(vec![
            "0".to_string(), "1".into(), "2".into(), "1000".into(), "60000".into(), "-1".into(),
            "1.5".into(), "1e3".into(), "0x10".into(), " 5".into(), "+5".into(), "5 ".into(),
            "inf".into(), "nan".into(), "".into(), "99999999999999999".into(),
            "1000000000000000".into(), "1000000000000001".into(), "2592000000".into(),
            "2592000001".into(), now.to_string(), "gw-03".into(), "\u{e9}".into(),
        ]).prop_map(String::into_bytes),
        2 => (0u64..5000).prop_map(|n| n.to_string().into_bytes()),
        1 => prop::collection::vec(any::<u8>(), 0..20),
    ]
}

fn keys(n: std::ops::Range<usize>) -> impl Strategy<Value = Vec<Vec<u8>>> {
    prop::collection::vec(prop::sample::select(POOL).prop_map(<[u8]>::to_vec), n)
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Conv {
    Design,
    Native,
    Lease,
    Composite,
    /// `rl1C` with ARGV[4], each request's number of rules: a batch of composite requests.
    CompositeBatch,
}

#[derive(Debug, Clone)]
struct Call {
    conv: Conv,
    keys: Vec<Vec<u8>>,
    argv: Vec<Vec<u8>>,
}

/// ARGV[2]: client clock and skew allowance, usually in shape, sometimes not.
fn clock(now: f64) -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        6 => Just(packed(&[0.0, 1000.0])),
        2 => prop::sample::select(vec![0.0, now, now + 200.0]).prop_flat_map(move |c| {
            prop::sample::select(vec![0.0, 1000.0, 1e6, -1.0, 0.5])
                .prop_map(move |s| packed(&[c, s]))
        }),
        1 => blob(2..3, now),
        1 => prop::collection::vec(any::<u8>(), 0..20),
    ]
}

/// Trailing extra or missing ARGV, sometimes.
fn arity(argv: Vec<Vec<u8>>, cut: u8) -> Vec<Vec<u8>> {
    let mut argv = argv;
    match cut {
        0 => {
            argv.pop();
        }
        1 => argv.push(b"x".to_vec()),
        _ => {}
    }
    argv
}

fn calls(now_ms: u64) -> impl Strategy<Value = Call> {
    let now = now_ms as f64;
    let cut = 0u8..12;
    let good = (1u64..5000, 1u64..50).prop_map(move |(w, l)| {
        [
            now_ms.to_string(),
            w.to_string(),
            l.to_string(),
            "0".into(),
            "0".into(),
            "gw".into(),
        ]
        .map(String::into_bytes)
        .to_vec()
    });
    let design_argv = prop_oneof![
        2 => prop::collection::vec(decimal(now_ms), 5..8),
        1 => (good, 0usize..6, decimal(now_ms)).prop_map(|(mut a, i, d)| {
            a[i] = d;
            a
        }),
    ];
    let design =
        (prop_oneof![3 => keys(2..3), 1 => keys(0..4)], design_argv).prop_map(|(keys, argv)| {
            Call {
                conv: Conv::Design,
                keys,
                argv,
            }
        });
    // Requests: op, window, limit, cost; ops and small numbers often valid so writes happen.
    let request = prop_oneof![
        2 => (0u8..2, 1u64..5000, 1u64..50, 1u64..4)
            .prop_map(|(o, w, l, c)| vec![f64::from(o), w as f64, l as f64, c as f64]),
        1 => prop::collection::vec(num(now), 4..5),
    ];
    // Retry records (the script's `Retries`): the call id's first 8 bytes and the records' TTL
    // after the clock, a call id
    // (ARGV[4]) from a small pool, so that later calls' retries (ARGV[5]) find earlier calls'
    // records, and per request the call and place it retries.
    let ids = || prop::sample::select(vec![[1u8; 16], [2u8; 16], [0u8; 16]]);
    // Valid TTLs are long: a record expiring between the before/after snapshots of a refused
    // call would look like a write.
    let ttl = prop_oneof![
        3 => Just(b"600000".to_vec()),
        1 => prop::sample::select(vec![
            "0", "-1", "2592000001", "1e6", " 600000", "600000.5", "0x100000", "", "inf",
        ])
        .prop_map(|t| t.as_bytes().to_vec()),
        1 => prop::collection::vec(any::<u8>(), 1..6),
    ];
    let id = prop_oneof![
        4 => ids().prop_map(|id| id.to_vec()),
        1 => prop::collection::vec(any::<u8>(), 0..20),
    ];
    let retry = prop_oneof![
        4 => prop::collection::vec((ids(), prop_oneof![3 => 0u64..4, 1 => Just(1001u64)]), 0..5)
            .prop_map(|v| {
                v.iter()
                    .flat_map(|(id, place)| [id.to_vec(), packed(&[*place as f64])].concat())
                    .collect::<Vec<u8>>()
            }),
        1 => prop::collection::vec(any::<u8>(), 0..30),
    ];
    let record = prop_oneof![
        3 => Just(None),
        2 => (ttl, id, prop::option::of(retry)).prop_map(Some),
    ];
    let native = (
        prop_oneof![4 => keys(1..2), 1 => keys(0..3)],
        clock(now),
        prop_oneof![
            3 => prop::collection::vec(request.clone(), 0..5)
                .prop_map(|r| packed(&r.concat())),
            1 => blob(0..9, now),
        ],
        record,
        cut.clone(),
        any::<bool>(),
    )
        .prop_map(|(keys, mut clock, reqs, record, cut, packed_reply)| {
            let tag: &[u8] = if packed_reply { b"rl1P" } else { b"rl1" };
            let mut argv = vec![tag.to_vec()];
            let mut extra = Vec::new();
            if let Some((ttl, id, retry)) = record {
                clock.extend(id.iter().take(8));
                clock.extend(ttl);
                extra.push(id);
                extra.extend(retry);
            }
            argv.extend([clock, reqs]);
            argv.extend(extra);
            Call {
                conv: Conv::Native,
                keys,
                argv: arity(argv, cut),
            }
        });
    // Well-formed calls with records: acquisitions on a pooled key, a call id from the pool, and
    // (half the time) one retry entry per request naming a pooled call and a place, so that
    // retries meet records that earlier calls wrote.
    let recorded = (
        keys(1..2),
        prop::collection::vec((1u64..3000, 1u64..30, 1u64..3, ids(), 0u64..4), 1..4),
        ids(),
        any::<bool>(),
    )
        .prop_map(|(keys, reqs, id, retry)| {
            let requests: Vec<f64> = reqs
                .iter()
                .flat_map(|&(w, l, c, _, _)| [1.0, w as f64, l as f64, c.min(l) as f64])
                .collect();
            let mut argv = vec![
                b"rl1".to_vec(),
                [packed(&[0.0, 1000.0]), id[..8].to_vec(), b"600000".to_vec()].concat(),
                packed(&requests),
                id.to_vec(),
            ];
            if retry {
                argv.push(
                    reqs.iter()
                        .flat_map(|(_, _, _, was, place)| {
                            [was.to_vec(), packed(&[*place as f64])].concat()
                        })
                        .collect(),
                );
            }
            Call {
                conv: Conv::Native,
                keys,
                argv,
            }
        });
    let lease_args = prop_oneof![
        2 => (1u64..5000, 1u64..100, 0u64..20, 1u64..5, 1u64..2000, 0u64..4, 0u64..4, 0u64..20)
            .prop_map(|(w, l, want, least, ms, seq, old, used)| {
                packed(&[w, l, want.min(l), least, ms, seq, old, used].map(|v| v as f64))
            }),
        1 => blob(7..10, now),
    ];
    let instance = prop_oneof![
        3 => prop::sample::select(vec![b"i1".to_vec(), b"i2".to_vec()]),
        1 => prop::collection::vec(any::<u8>(), 0..3),
        1 => Just(vec![b'x'; 257]),
    ];
    let lease = (
        prop_oneof![4 => keys(1..2), 1 => keys(0..3)],
        clock(now),
        lease_args,
        instance,
        cut.clone(),
    )
        .prop_map(|(keys, clock, args, id, cut)| Call {
            conv: Conv::Lease,
            keys,
            argv: arity(vec![b"rl1L".to_vec(), clock, args, id], cut),
        });
    let rule = prop_oneof![
        2 => (1u64..4, 1u64..5000, 1u64..50, 1u64..3)
            .prop_map(|(k, w, l, c)| vec![k as f64, w as f64, l as f64, c.min(l) as f64]),
        1 => prop::collection::vec(num(now), 4..5),
    ];
    // Distinct keys, each with a rule of cost 1, then more rules: well-formed but for the edits.
    let distinct = prop::sample::subsequence(POOL.to_vec(), 1..4)
        .prop_map(|k| k.into_iter().map(<[u8]>::to_vec).collect::<Vec<_>>());
    let well_formed = (
        distinct,
        prop::collection::vec((0usize..3, 1u64..5000, 1u64..20), 0..4),
    )
        .prop_map(|(keys, extra)| {
            let n = keys.len();
            let mut rules: Vec<f64> = Vec::new();
            for k in 1..=n {
                rules.extend([k as f64, 1000.0, 10.0, 1.0]);
            }
            for (k, w, l) in extra {
                rules.extend([(k % n + 1) as f64, w as f64, l as f64, 1.0]);
            }
            (keys, packed(&rules))
        });
    let composite = (
        prop_oneof![
            3 => well_formed,
            1 => (keys(0..5), prop::collection::vec(rule, 0..6))
                .prop_map(|(k, r)| (k, packed(&r.concat()))),
            1 => (keys(0..5), blob(0..9, now)),
            1 => keys(1..2).prop_map(|k| (k, packed(&[1.0, 1000.0, 5.0, 1.0].repeat(17)))),
        ],
        clock(now),
        cut.clone(),
    )
        .prop_map(|((keys, rules), clock, cut)| Call {
            conv: Conv::Composite,
            keys,
            argv: arity(vec![b"rl1C".to_vec(), clock, rules], cut),
        });
    // Batches: 1..6 requests on the batch's distinct keys (often the same ones, so later
    // requests meet earlier ones' admissions; small limits, so some deny), each request of one
    // cost; then, half the time, one edit: a bad size, sizes that do not add up, a bad or
    // truncated sizes blob, a bad rule, a rule on a key the batch does not have.
    let batch_keys = prop::sample::subsequence(POOL.to_vec(), 1..5)
        .prop_map(|k| k.into_iter().map(<[u8]>::to_vec).collect::<Vec<_>>());
    let batch_requests = prop::collection::vec(
        (
            1u64..3,
            prop::collection::vec((0usize..4, 1u64..5000, 1u64..8), 1..5),
        ),
        1..7,
    );
    let edit = (
        0u8..12,
        any::<prop::sample::Index>(),
        num(now),
        blob(0..4, now),
    );
    let composite_batch = (batch_keys, batch_requests, edit, clock(now), cut.clone()).prop_map(
        |(keys, reqs, (edit, at, x, junk), clock, cut)| {
            let n = keys.len();
            let mut used = vec![false; n];
            let mut rules: Vec<[f64; 4]> = Vec::new();
            let mut sizes: Vec<f64> = Vec::new();
            let last = reqs.len() - 1;
            for (r, (cost, list)) in reqs.iter().enumerate() {
                let mut mine: Vec<[f64; 4]> = list
                    .iter()
                    .map(|&(k, w, l)| [(k % n) as f64, w as f64, l.max(*cost) as f64, *cost as f64])
                    .collect();
                if r == last {
                    // Every key of the batch is some rule's.
                    mine.extend((0..n).map(|k| [k as f64, 1000.0, 10.0, *cost as f64]));
                }
                for rule in &mut mine {
                    used[rule[0] as usize] = true;
                    rule[0] += 1.0;
                }
                sizes.push(mine.len() as f64);
                rules.extend(mine);
            }
            debug_assert!(used.iter().all(|&u| u));
            let mut sizes_blob = packed(&sizes);
            match edit {
                0 | 1 => {
                    let (mut s, i) = (sizes.clone(), at.index(sizes.len()));
                    s[i] = if edit == 0 { x } else { s[i] + 1.0 };
                    sizes_blob = packed(&s);
                }
                2 => sizes_blob = junk,
                3 => {
                    sizes_blob.pop();
                }
                4 => {
                    let i = at.index(rules.len());
                    rules[i][at.index(4)] = x;
                }
                5 => {
                    let i = at.index(rules.len());
                    rules[i][0] = (n + 1) as f64;
                }
                _ => {}
            }
            let rules: Vec<f64> = rules.concat();
            Call {
                conv: Conv::CompositeBatch,
                keys,
                argv: arity(
                    vec![b"rl1C".to_vec(), clock, packed(&rules), sizes_blob],
                    cut,
                ),
            }
        },
    );
    prop_oneof![
        2 => design,
        2 => native,
        1 => recorded,
        2 => lease,
        2 => composite,
        3 => composite_batch
    ]
}

fn int(v: &RespValue) -> Option<i64> {
    v.as_int()
}

fn ints(items: &[RespValue]) -> Result<Vec<i64>, String> {
    items
        .iter()
        .map(|v| int(v).ok_or_else(|| format!("not an integer: {v:?}")))
        .collect()
}

/// What a reply is: a decision (`true`) or a refusal (`false`); `Err` for anything else.
fn classify(call: &Call, reply: &RespValue) -> Result<bool, String> {
    let packed = call.conv == Conv::Native && call.argv.first().map(Vec::as_slice) == Some(b"rl1P");
    let unpacked;
    let reply = match reply {
        // 'rl1P': a decision is one string, 5 doubles per request; checked below as the array
        // `{0, ...}` it stands for.
        RespValue::Bulk(b) if packed => {
            if b.len() % 40 != 0 {
                return Err("a packed reply is 40 bytes per request".into());
            }
            let mut items = vec![RespValue::Integer(0)];
            for c in b.chunks(8) {
                let f = f64::from_be_bytes(c.try_into().unwrap());
                if !f.is_finite() || f.fract() != 0.0 {
                    return Err(format!("a packed field that is not a whole number: {f}"));
                }
                items.push(RespValue::Integer(f as i64));
            }
            unpacked = RespValue::Array(items);
            &unpacked
        }
        RespValue::Array(items) if packed && items.first().and_then(int) == Some(0) => {
            return Err("an rl1P decision answered as an array".into());
        }
        r => r,
    };
    let RespValue::Array(items) = reply else {
        return Err(format!("not an array: {reply:?}"));
    };
    if call.conv == Conv::Design {
        if items.len() != 4 {
            return Err("the design's reply has 4 fields".into());
        }
        let status = items[3].as_str().unwrap_or_default();
        let n = ints(&items[..3])?;
        return match (n.as_slice(), status) {
            ([-1, 0, 0], "invalid_args") => Ok(false),
            ([a, remaining, current], "normal") if (*a == 0 || *a == 1) && *current >= 0 => {
                let max: i64 = std::str::from_utf8(&call.argv[2]).unwrap().parse().unwrap();
                if remaining + current != max {
                    return Err(format!("remaining + current != max_req ({max})"));
                }
                Ok(true)
            }
            _ => Err("not a design decision".into()),
        };
    }
    match items.first().and_then(int) {
        Some(-1) => {
            if items.len() == 3 && items[1].as_bytes().is_some() && int(&items[2]).is_some() {
                Ok(false)
            } else {
                Err("a malformed {-1, name, index}".into())
            }
        }
        Some(-2) => {
            if items.len() == 2 && int(&items[1]).is_some_and(|t| t > 1_600_000_000_000) {
                Ok(false)
            } else {
                Err("a malformed {-2, server_ms}".into())
            }
        }
        Some(0) => {
            let n = ints(&items[1..])?;
            let bit = |x: i64| x == 0 || x == 1;
            let valid = match call.conv {
                Conv::Native => {
                    let reqs = call.argv[2].len() / 32;
                    // 2: a retry its earlier attempt's record shows as admitted (only a retry).
                    let retry = call.argv.len() == 5;
                    n.len() == 5 * reqs
                        && n.chunks(5).all(|r| {
                            (bit(r[0]) || (retry && r[0] == 2))
                                && r[1..].iter().all(|&x| x >= 0)
                                && r[4] > 0
                        })
                }
                Conv::Lease => {
                    let want = f64::from_be_bytes(call.argv[2][16..24].try_into().unwrap());
                    n.len() == 4 && n[0] >= 0 && n[0] as f64 <= want && n[1] > 0 && n[2] >= 0
                }
                Conv::Composite | Conv::CompositeBatch => {
                    // Per request (one without ARGV[4]): allowed, retry, now, 5 per rule.
                    let sizes: Vec<usize> = match call.argv.get(3) {
                        Some(s) if call.argv.len() == 4 => s
                            .chunks(8)
                            .map(|c| f64::from_be_bytes(c.try_into().unwrap()) as usize)
                            .collect(),
                        _ => vec![call.argv[2].len() / 32],
                    };
                    let mut rest = n.as_slice();
                    let mut ok = true;
                    for &rules in &sizes {
                        if rest.len() < 3 + 5 * rules {
                            ok = false;
                            break;
                        }
                        let (req, tail) = rest.split_at(3 + 5 * rules);
                        ok &= bit(req[0])
                            && req[1] >= 0
                            && req[2] > 0
                            && req[3..]
                                .chunks(5)
                                .all(|r| bit(r[0]) && r[1..].iter().all(|&x| x >= 0))
                            && (req[0] == 1) == req[3..].chunks(5).all(|r| r[0] == 1)
                            // A denied request took nothing: its rules' `used` exclude its cost,
                            // and its retry is some denying rule's.
                            && (req[0] == 1 && req[1] == 0
                                || req[0] == 0
                                    && req[3..].chunks(5).any(|r| r[0] == 0 && r[2] == req[1]));
                        rest = tail;
                    }
                    ok && rest.is_empty()
                }
                Conv::Design => unreachable!(),
            };
            if valid {
                Ok(true)
            } else {
                Err("not a decision of this convention's shape".into())
            }
        }
        _ => Err("an unknown reply".into()),
    }
}

/// DBSIZE, and every key's DUMP and PTTL.
type Snapshot = (i64, Vec<(Vec<u8>, RespValue, i64)>);

fn snapshot(c: &mut Connection) -> Snapshot {
    // Two round trips, not two per key: the fuzz takes one before every call.
    let replies = c.pipeline(&[vec![b"DBSIZE"], vec![b"KEYS", b"*"]]).unwrap();
    let size = replies[0].as_int().unwrap();
    let RespValue::Array(names) = &replies[1] else {
        panic!("KEYS")
    };
    let mut names: Vec<Vec<u8>> = names
        .iter()
        .map(|v| v.as_bytes().unwrap().to_vec())
        .collect();
    names.sort();
    let looks: Vec<Vec<&[u8]>> = names
        .iter()
        .flat_map(|k| [vec![&b"DUMP"[..], k], vec![&b"PTTL"[..], k]])
        .collect();
    let mut replies = c.pipeline(&looks).unwrap().into_iter();
    let dumps = names
        .into_iter()
        .map(|k| {
            let d = replies.next().unwrap();
            let ttl = replies.next().unwrap().as_int().unwrap_or(-2);
            (k, d, ttl)
        })
        .collect();
    (size, dumps)
}

/// Whether `after` shows no write since `before`: every key as it was, or gone because its TTL
/// ran out meanwhile (windows and lease HASHes here live a few seconds; a key that expires
/// between the two looks is not the refused call's doing), and no new key.
fn unchanged(before: &Snapshot, after: &Snapshot) -> Result<(), String> {
    let found = |k: &[u8]| after.1.iter().find(|(a, _, _)| a == k);
    for (k, dump, ttl) in &before.1 {
        match found(k) {
            Some((_, d, _)) if d == dump => {}
            // Expired between KEYS and DUMP already, or since.
            None if *dump == RespValue::Nil => {}
            Some((_, RespValue::Nil, _)) | None if (0..=10_000).contains(ttl) => {}
            other => {
                return Err(format!(
                    "{:?} changed: {dump:?} (PTTL {ttl}) -> {other:?}",
                    String::from_utf8_lossy(k)
                ))
            }
        }
    }
    for (k, d, _) in &after.1 {
        if *d != RespValue::Nil && !before.1.iter().any(|(b, _, _)| b == k) {
            return Err(format!("new key {:?}", String::from_utf8_lossy(k)));
        }
    }
    if after.0 > before.0 {
        return Err(format!("DBSIZE {} -> {}", before.0, after.0));
    }
    Ok(())
}

#[test]
fn random_argv_in_every_convention_is_decided_or_refused_and_a_refusal_writes_nothing() {
    let cases: u32 = std::env::var("RL_SCRIPT_FUZZ_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(3000);
    let server = server();
    let c = RefCell::new(server.connect(Duration::from_secs(5)).unwrap());
    let sha = c
        .borrow_mut()
        .command(&[b"SCRIPT", b"LOAD", SLIDING_WINDOW_LUA.as_bytes()])
        .unwrap();
    assert_eq!(sha.as_str(), Some(sliding_window_sha()));
    // The same file as a Functions library (Redis >= 7), called by FCALL on every other call.
    let lib = &*SLIDING_WINDOW_LIBRARY;
    let functions = !c
        .borrow_mut()
        .command(&[b"FUNCTION", b"LOAD", lib.code.as_bytes()])
        .unwrap()
        .is_error();
    let counts = RefCell::new(std::collections::BTreeMap::<(String, bool), u32>::new());
    let sent = std::cell::Cell::new(0u64);
    // Decisions made through FCALL: the Functions path must be exercised, not just loaded.
    let by_fcall = std::cell::Cell::new(0u64);
    // rl1 calls decided with a call id (they may write a record), and retries a record answered.
    let (recorded, answered) = (std::cell::Cell::new(0u64), std::cell::Cell::new(0u64));
    let mut runner = TestRunner::new(Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    });
    runner
        .run(&calls(wall_ms()), |call| {
            let mut c = c.borrow_mut();
            let before = snapshot(&mut c);
            let numkeys = call.keys.len().to_string();
            let n = sent.get();
            sent.set(n + 1);
            let mut args: Vec<&[u8]> = if functions && n % 2 == 1 {
                vec![b"FCALL", lib.function.as_bytes(), numkeys.as_bytes()]
            } else {
                vec![
                    b"EVALSHA",
                    sliding_window_sha().as_bytes(),
                    numkeys.as_bytes(),
                ]
            };
            args.extend(call.keys.iter().map(Vec::as_slice));
            args.extend(call.argv.iter().map(Vec::as_slice));
            let reply = c.command(&args).unwrap();
            let decided = classify(&call, &reply)
                .map_err(|e| TestCaseError::fail(format!("{e}: {call:?} -> {reply:?}")))?;
            if decided && args[0] == b"FCALL" {
                by_fcall.set(by_fcall.get() + 1);
            }
            if decided && call.conv == Conv::Native && call.argv.len() >= 4 {
                recorded.set(recorded.get() + 1);
                if let RespValue::Array(items) = &reply {
                    let again = items[1..].chunks(5).filter(|r| int(&r[0]) == Some(2));
                    answered.set(answered.get() + again.count() as u64);
                }
            }
            if !decided {
                let after = snapshot(&mut c);
                if let Err(e) = unchanged(&before, &after) {
                    return Err(TestCaseError::fail(format!(
                        "refused but wrote ({e}): {call:?} -> {reply:?}"
                    )));
                }
            }
            *counts
                .borrow_mut()
                .entry((format!("{:?}", call.conv), decided))
                .or_default() += 1;
            Ok(())
        })
        .unwrap_or_else(|e| panic!("{e}"));
    let counts = counts.into_inner();
    eprintln!(
        "calls (convention, decided): {counts:?}; decided by FCALL: {}; rl1 with a call id {}, \
         retries answered from a record {}",
        by_fcall.get(),
        recorded.get(),
        answered.get()
    );
    assert!(
        cases < 400 || (recorded.get() > 0 && answered.get() > 0),
        "the retry records were never exercised: {} calls with an id, {} answered",
        recorded.get(),
        answered.get()
    );
    assert!(
        !functions || cases < 400 || by_fcall.get() > 0,
        "the server loaded the library but no FCALL call was decided"
    );
    // Both outcomes of every convention were exercised.
    for conv in ["Design", "Native", "Lease", "Composite", "CompositeBatch"] {
        for decided in [true, false] {
            assert!(
                counts
                    .get(&(conv.to_string(), decided))
                    .copied()
                    .unwrap_or(0)
                    > 0
                    || cases < 400,
                "no {conv} call was {}: {counts:?}",
                if decided { "decided" } else { "refused" }
            );
        }
    }
}
