//! Coalescing for composite calls ([`crate::Limiter::acquire_all`]): while one composite script
//! call is in flight for a Cluster hash slot, further composite calls from this process on that
//! slot wait, and go together in the next call — one script call (`rl1C` with its request sizes,
//! `lua/sliding_window.lua`) decides them all, strictly in arrival order, each all-or-nothing as
//! alone: a request that denies takes nothing from any rule, and later requests in the call see
//! the earlier ones' admissions. The queueing, its bounds and timeouts are plain coalescing's
//! (`coalesce.rs`, `redis.rs`); only the queue key and the call differ.
//!
//! **The queue key is the slot** of the call's keys (every key of one composite call shares a
//! slot: `composite.rs`). A slot is exactly what one script call may span on a Cluster, and it is
//! what `rl serve` (one group per domain) and other grouped callers share: requests of one group
//! with different keys (per client IP, per user, and a global key) still share one call. A
//! narrower key (the call's set of keys) would leave such requests one call each, which is the
//! cost this module removes. The price: unrelated groups whose tags hash to one slot (1 in 16 384
//! pairs) share a queue — one call decides both, each request on its own keys — exactly as they
//! share one master on a Cluster anyway.
//!
//! **Bounds.** At most [`MAX_BATCH`] requests and [`MAX_BATCH_RULES`] rules per call, well inside
//! the script's own limits: a script call blocks Redis while it runs, and a composite request costs
//! about what it costs alone minus the call's overhead (measured by FCALL on a loaded 2-core host:
//! 36 µs of script time per two-rule request alone, 21 µs each in batches of 8 and 32), so a full
//! batch holds Redis for a few milliseconds at most.
//!
//! **Errors.** A key holding another program's value fails only the requests that name it, with
//! an error naming the key, and they take no permit. The script checks a batch's keys before it
//! decides anything and names those that are not rl windows (`{-3, ...}`, nothing written); the
//! other requests then go again in one call. Any other error reply (a script error, a refused
//! call) fails every request of the call.

use std::collections::HashMap;

use super::coalesce::Queued;
use super::redis::{Batcher, Shared};
use super::script;
use super::Verdict;
use crate::composite::{Plan, Planned};
use crate::error::{Error, Result};

/// Most composite requests one script call decides.
pub(crate) const MAX_BATCH: usize = 128;
/// Most rules one script call decides (a request has at most 16).
pub(crate) const MAX_BATCH_RULES: usize = 256;

/// One composite request, owned so it can wait in a queue: its window keys (the plan's, in its
/// order) and its rules.
#[derive(Clone)]
pub(crate) struct CompositeOp {
    keys: Vec<Vec<u8>>,
    rules: Vec<Planned>,
}

impl CompositeOp {
    pub(crate) fn new(redis_keys: &[&[u8]], plan: &Plan<'_>) -> Self {
        CompositeOp {
            keys: redis_keys.iter().map(|k| k.to_vec()).collect(),
            rules: plan.rules.clone(),
        }
    }

    /// The request's queue: the slot of its keys (see the module's doc).
    pub(crate) fn queue_key(&self) -> [u8; 2] {
        crate::keys::slot(&self.keys[0]).to_be_bytes()
    }
}

impl Queued for CompositeOp {
    /// Per request: a request naming a key that holds another program's value fails alone.
    type Out = Result<Vec<Verdict>>;
    const MAX_BATCH: usize = MAX_BATCH;
    const MAX_WEIGHT: usize = MAX_BATCH_RULES;

    fn weight(&self) -> usize {
        self.rules.len()
    }
}

impl Batcher for CompositeOp {
    const WHAT: &'static str = "acquire_all";

    fn queues(shared: &Shared) -> &super::coalesce::Queues<Self> {
        &shared.composite_queues
    }

    fn call<'a>(
        shared: &'a Shared,
        _slot: &'a [u8],
        ops: &'a [Self],
    ) -> impl std::future::Future<Output = Result<Vec<Result<Vec<Verdict>>>>> + Send + 'a {
        decide(shared, ops)
    }
}

/// What one composite script call answered.
enum Sent {
    /// One verdict per rule, per request.
    Decided(Vec<Vec<Verdict>>),
    /// Nothing decided: these keys (places in the call's key list) are not rl windows.
    NotWindows(Vec<usize>),
}

/// Decides `ops` in one script call. Where some of their keys are not rl windows, the requests
/// that name one fail here, naming it, and the others go again in one call (until one decides
/// them: each such answer names at least one key of the call, so each round fails at least one
/// request). No request waits for a call of its own, so a batch with bad keys costs one round trip
/// more, whatever their number.
async fn decide(shared: &Shared, ops: &[CompositeOp]) -> Result<Vec<Result<Vec<Verdict>>>> {
    let mut bad: Vec<Vec<u8>> = match send(shared, ops).await? {
        Sent::Decided(all) => return Ok(all.into_iter().map(Ok).collect()),
        Sent::NotWindows(places) => named(ops, &places),
    };
    let mut out: Vec<Option<Result<Vec<Verdict>>>> = vec![None; ops.len()];
    loop {
        let mut rest = Vec::new();
        for (i, op) in ops.iter().enumerate() {
            if out[i].is_some() {
                continue;
            }
            match op.keys.iter().find(|k| bad.contains(k)) {
                Some(key) => out[i] = Some(Err(not_a_window(key))),
                None => rest.push(i),
            }
        }
        if rest.is_empty() {
            break;
        }
        let batch: Vec<CompositeOp> = rest.iter().map(|&i| ops[i].clone()).collect();
        match send(shared, &batch).await {
            Ok(Sent::Decided(all)) => {
                for (&i, v) in rest.iter().zip(all) {
                    out[i] = Some(Ok(v));
                }
                break;
            }
            // Another program wrote one of their keys meanwhile.
            Ok(Sent::NotWindows(places)) => bad.extend(named(&batch, &places)),
            Err(e) => {
                for &i in &rest {
                    out[i] = Some(Err(e.clone()));
                }
                break;
            }
        }
    }
    Ok(out.into_iter().flatten().collect())
}

/// The keys at `places` of the call that carried `ops` (its keys in first-seen order).
fn named(ops: &[CompositeOp], places: &[usize]) -> Vec<Vec<u8>> {
    let keys = args(ops).keys;
    places.iter().map(|&k| keys[k].to_vec()).collect()
}

/// What a request naming `key` fails with: the words of the script's own error for a lone call.
fn not_a_window(key: &[u8]) -> Error {
    Error::Backend(format!(
        "rl: {} holds something that is not an rl window",
        String::from_utf8_lossy(key)
    ))
}

/// What one composite script call carries: the distinct keys of its requests (first-seen order),
/// per rule its key's place there (1-based), window, limit and cost, and per request its number
/// of rules. A lone request is the script's one-request shape (no sizes), as before batching.
struct Args<'a> {
    keys: Vec<&'a [u8]>,
    rules: Vec<u8>,
    sizes: Option<Vec<u8>>,
}

fn args(ops: &[CompositeOp]) -> Args<'_> {
    let mut keys: Vec<&[u8]> = Vec::new();
    let mut place: HashMap<&[u8], u64> = HashMap::new();
    let mut rules = Vec::with_capacity(ops.iter().map(|o| o.rules.len() * 4).sum());
    for op in ops {
        for r in &op.rules {
            let key = op.keys[r.key].as_slice();
            let k = *place.entry(key).or_insert_with(|| {
                keys.push(key);
                keys.len() as u64
            });
            rules.extend_from_slice(&[k, r.window_ms, r.limit, r.cost]);
        }
    }
    let sizes: Vec<u64> = ops.iter().map(|o| o.rules.len() as u64).collect();
    Args {
        keys,
        rules: script::pack(&rules),
        sizes: (ops.len() > 1).then(|| script::pack(&sizes)),
    }
}

/// One script call deciding `ops` in order: one verdict per rule, per request.
async fn send(shared: &Shared, ops: &[CompositeOp]) -> Result<Sent> {
    let (id, mut conn) = shared.connector.get().await?;
    let client_now = shared.clock.as_ref().map(|c| c.now_ms());
    let clock = script::pack(&[client_now.unwrap_or(0), shared.max_skew_ms]);
    let a = args(ops);
    let mut argv: Vec<&[u8]> = vec![b"rl1C", &clock, &a.rules];
    if let Some(sizes) = &a.sizes {
        argv.push(sizes);
    }
    let r = shared.caller.call_keys(&mut conn, &a.keys, &argv).await;
    let reply = shared
        .check(id, r)
        .map_err(|e| crate::error::naming_keys(e, &a.keys))?;
    if let Some(bad) = script::not_windows(&reply, a.keys.len()) {
        return Ok(Sent::NotWindows(bad?));
    }
    let sizes: Vec<usize> = ops.iter().map(|o| o.rules.len()).collect();
    script::parse_composite_reply(reply, &sizes, client_now, shared.max_skew_ms).map(Sent::Decided)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn op(keys: &[&str], rules: &[(usize, u64)]) -> CompositeOp {
        CompositeOp {
            keys: keys.iter().map(|k| k.as_bytes().to_vec()).collect(),
            rules: rules
                .iter()
                .map(|&(key, cost)| Planned {
                    key,
                    limit: 10,
                    window_ms: 1000,
                    cost,
                })
                .collect(),
        }
    }

    #[test]
    fn a_batch_names_each_key_once_and_a_lone_request_keeps_its_shape() {
        let a = op(&["rl:{g}{ip}", "rl:{g}{all}"], &[(0, 1), (1, 1)]);
        let b = op(&["rl:{g}{all}", "rl:{g}{user}"], &[(0, 2), (1, 2), (0, 2)]);
        let lone = args(std::slice::from_ref(&a));
        assert_eq!(lone.keys.len(), 2);
        assert!(lone.sizes.is_none(), "one request: the one-request shape");
        let both = [a, b];
        let batch = args(&both);
        let keys: Vec<&[u8]> = vec![b"rl:{g}{ip}", b"rl:{g}{all}", b"rl:{g}{user}"];
        assert_eq!(batch.keys, keys);
        let places: Vec<f64> = batch
            .rules
            .chunks(32)
            .map(|r| f64::from_be_bytes(r[..8].try_into().unwrap()))
            .collect();
        assert_eq!(places, vec![1.0, 2.0, 2.0, 3.0, 2.0]);
        assert_eq!(batch.sizes, Some(script::pack(&[2, 3])));
    }
}
