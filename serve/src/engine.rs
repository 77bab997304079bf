//! `Engine::check`: one [`CheckRequest`] decided against the current policies.
//!
//! - Each descriptor is matched in its domain's tree as envoyproxy/ratelimit matches it
//!   (`config/tree.rs`); no match, `unlimited: true` or a limit another matched limit
//!   `replaces` means OK with no limit.
//! - The enforced limits of one request are decided in ONE `Limiter::acquire_all` call, all or
//!   nothing: a request one limit denies takes nothing from the others (ratelimit counts every
//!   descriptor). The domain is the call's `group` (its Cluster hash tag) unless `key_group`
//!   says otherwise.
//! - Shadow-mode limits are decided in a second call, concurrently, so a shadow denial never
//!   blocks; they are reported with `shadow_denied`.
//! - `quota_mode` limits (ratelimit: the request is over only when every quota limit is) are
//!   decided first, one call each; when they all deny, the enforced limits are not asked. A
//!   quota limit that admitted keeps its count even if an enforced one then denies, as in
//!   ratelimit.
//! - A limit of 0 (ratelimit's ban) or a cost above the limit never fits: denied with no
//!   Redis call.
//! - A request with an empty domain, no descriptors or a descriptor with no entries is refused
//!   (`InvalidArgument`), as envoyproxy/ratelimit refuses the first two.
//! - Headers and the problem body come from `rl_core::headers`, over the enforced and quota
//!   limits in request order.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rl_core::{CompositeDecision, Decision, HeaderStyle, Limiter, Mode, Rule};

use crate::config::{Match, Policies, Shared};
use crate::decide::{AppliedLimit, CheckRequest, CheckResult, Code, DescriptorStatus};
use crate::metrics::{Metrics, Outcome};

/// The policies, the limiter and the metrics every front end shares.
pub struct Engine {
    limiter: Limiter,
    policies: Shared,
    metrics: Arc<Metrics>,
    style: HeaderStyle,
}

/// How one descriptor is decided.
enum Class {
    /// No limit applies (no match, unlimited, or replaced).
    Free {
        unlimited: bool,
    },
    /// Never fits (limit 0, or a cost above the limit): denied without asking Redis.
    Never(Match),
    Enforced(Match, u64),
    Shadow(Match, u64),
    Quota(Match, u64),
}

impl Engine {
    pub fn new(limiter: Limiter, policies: Policies, metrics: Arc<Metrics>) -> Engine {
        Engine {
            limiter,
            policies: Arc::new(arc_swap::ArcSwap::from_pointee(policies)),
            metrics,
            style: HeaderStyle::Ietf,
        }
    }

    /// Which rate-limit fields answers carry (default: the IETF ones).
    pub fn with_header_style(mut self, style: HeaderStyle) -> Engine {
        self.style = style;
        self
    }

    pub fn limiter(&self) -> &Limiter {
        &self.limiter
    }

    pub fn metrics(&self) -> &Arc<Metrics> {
        &self.metrics
    }

    /// The policies now in force (a check in flight keeps the ones it started with).
    pub fn policies(&self) -> Arc<Policies> {
        self.policies.load_full()
    }

    /// Puts `p` in force for every check that starts from now on.
    pub fn swap(&self, p: Policies) {
        self.policies.store(Arc::new(p));
    }

    pub async fn check(&self, req: &CheckRequest) -> Result<CheckResult, rl_core::Error> {
        let start = Instant::now();
        if let Err(e) = req.validate() {
            self.metrics.error();
            return Err(e);
        }
        let policies = self.policies.load_full();
        let r = self.decide(&policies, req).await;
        self.metrics.observe(start.elapsed());
        if r.is_err() {
            self.metrics.error();
        }
        r
    }

    async fn decide(
        &self,
        policies: &Policies,
        req: &CheckRequest,
    ) -> Result<CheckResult, rl_core::Error> {
        let domain = policies.domain(&req.domain);
        let matched: Vec<Option<Match>> = req
            .descriptors
            .iter()
            .map(|d| domain.and_then(|dom| dom.lookup(&d.entries)))
            .collect();
        let replaced: HashSet<&str> = matched
            .iter()
            .flatten()
            .flat_map(|m| m.limit.replaces.iter().map(String::as_str))
            .collect();
        let classes: Vec<Class> = matched
            .iter()
            .zip(&req.descriptors)
            .map(|(m, d)| {
                let Some(m) = m else {
                    return Class::Free { unlimited: false };
                };
                let l = &m.limit;
                if l.unlimited {
                    return Class::Free { unlimited: true };
                }
                if l.config_name
                    .as_deref()
                    .is_some_and(|n| replaced.contains(n))
                {
                    return Class::Free { unlimited: false };
                }
                let cost = d.hits_addend.unwrap_or(req.hits_addend).max(1);
                if cost > l.policy.limit && !l.shadow && !l.quota {
                    return Class::Never(m.clone());
                }
                match (l.shadow, l.quota) {
                    (true, _) => Class::Shadow(m.clone(), cost),
                    (_, true) => Class::Quota(m.clone(), cost),
                    _ => Class::Enforced(m.clone(), cost),
                }
            })
            .collect();
        let group = domain.and_then(|d| d.group.as_deref());

        // Quota limits first, one call each.
        let mut decisions: Vec<Option<Decision>> = vec![None; classes.len()];
        let (mut quotas, mut quota_denials) = (0, 0);
        for (i, c) in classes.iter().enumerate() {
            if let Class::Quota(m, cost) = c {
                quotas += 1;
                let d = match never(m, *cost) {
                    Some(d) => d,
                    None => self.one(m, *cost, group).await?,
                };
                quota_denials += usize::from(!d.allowed);
                decisions[i] = Some(d);
            }
        }
        let quota_over = quotas > 0 && quotas == quota_denials;
        let never_enforced = classes.iter().any(|c| matches!(c, Class::Never(_)));

        let pick = |want: fn(&Class) -> Option<(&Match, u64)>| -> (Vec<usize>, Vec<Rule>) {
            classes
                .iter()
                .enumerate()
                .filter_map(|(i, c)| want(c).map(|(m, cost)| (i, rule(m, cost))))
                .unzip()
        };
        let (e_idx, e_rules) = pick(|c| match c {
            Class::Enforced(m, cost) => Some((m, *cost)),
            _ => None,
        });
        let (s_idx, s_rules) = pick(|c| match c {
            Class::Shadow(m, cost) => Some((m, *cost)),
            _ => None,
        });
        let ask_enforced = !e_rules.is_empty() && !never_enforced && !quota_over;
        let (enforced, shadow) = tokio::join!(
            async {
                if ask_enforced {
                    Some(self.limiter.acquire_all(&e_rules, group).await).transpose()
                } else {
                    Ok(None)
                }
            },
            async {
                if s_rules.is_empty() {
                    Ok(None)
                } else {
                    Some(self.shadow(&s_rules, group).await).transpose()
                }
            }
        );
        let (enforced, shadow) = (enforced?, shadow?);
        let mut mode = None;
        for (idx, cd) in [(&e_idx, &enforced), (&s_idx, &shadow)] {
            if let Some(cd) = cd {
                mode = mode.or(Some(cd.mode));
                for (k, &i) in idx.iter().enumerate() {
                    decisions[i] = Some(cd.decisions[k]);
                }
            }
        }
        for (i, c) in classes.iter().enumerate() {
            if let Class::Never(m) = c {
                decisions[i] = never(m, u64::MAX);
            }
        }
        let mode = mode
            .or_else(|| decisions.iter().flatten().map(|d| d.mode).next())
            .unwrap_or(match self.limiter.backend() {
                rl_core::BackendKind::Memory => Mode::Memory,
                _ => Mode::Normal,
            });

        let decided_at_ms = match &enforced {
            Some(cd) => Some(cd.now_ms),
            None => decisions.iter().flatten().map(|d| d.now_ms).max(),
        }
        .filter(|t| *t > 0);
        let over = never_enforced || quota_over || enforced.as_ref().is_some_and(|d| !d.allowed);
        let mut statuses = Vec::with_capacity(classes.len());
        let mut shown: Vec<(&rl_core::Policy, &Decision)> = Vec::new();
        let mut retry_ms = 0;
        for (c, d) in classes.iter().zip(&decisions) {
            let (m, enforced_kind) = match c {
                Class::Free { unlimited } => {
                    statuses.push(DescriptorStatus {
                        code: Code::Ok,
                        limit: None,
                        limit_remaining: if *unlimited { u32::MAX.into() } else { 0 },
                        duration_until_reset: Duration::ZERO,
                        shadow_denied: false,
                    });
                    continue;
                }
                Class::Shadow(m, _) => (m, false),
                Class::Never(m) | Class::Enforced(m, _) | Class::Quota(m, _) => (m, true),
            };
            let l = &m.limit;
            let applied = AppliedLimit {
                name: l.policy.name.clone(),
                requests_per_unit: l.policy.limit,
                unit: l.unit,
                window: Duration::from_millis(l.policy.window_ms),
            };
            let Some(d) = d else {
                // Not asked: the request was denied before this limit's call.
                statuses.push(DescriptorStatus {
                    code: Code::Ok,
                    limit: Some(applied),
                    limit_remaining: 0,
                    duration_until_reset: Duration::ZERO,
                    shadow_denied: false,
                });
                continue;
            };
            let denied = !d.allowed;
            let wait = if denied {
                d.retry_after_ms
            } else {
                d.reset_after_ms
            };
            let quota_only = matches!(c, Class::Quota(..)) && !quota_over;
            let outcome = match (enforced_kind, denied) {
                (_, false) => Outcome::Ok,
                (true, true) => Outcome::OverLimit,
                (false, true) => Outcome::ShadowOverLimit,
            };
            l.counters.count(outcome, d.mode);
            if enforced_kind {
                if denied && !quota_only {
                    retry_ms = retry_ms.max(d.retry_after_ms);
                }
                shown.push((&l.policy, d));
            }
            statuses.push(DescriptorStatus {
                code: if enforced_kind && denied {
                    Code::OverLimit
                } else {
                    Code::Ok
                },
                limit: Some(applied),
                limit_remaining: d.remaining,
                duration_until_reset: Duration::from_millis(wait),
                shadow_denied: !enforced_kind && denied,
            });
        }
        let headers = rl_core::headers::render(&shown, !over, retry_ms, self.style)
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect();
        let problem_body = over.then(|| rl_core::headers::problem_body(&shown, retry_ms));
        Ok(CheckResult {
            overall: if over { Code::OverLimit } else { Code::Ok },
            statuses,
            headers,
            problem_body,
            retry_after: Duration::from_millis(retry_ms),
            mode,
            decided_at_ms,
        })
    }

    /// One limit alone (a quota-mode limit).
    async fn one(&self, m: &Match, cost: u64, group: Option<&[u8]>) -> rl_core::Result<Decision> {
        let cd = self.limiter.acquire_all(&[rule(m, cost)], group).await?;
        Ok(cd.decisions[0])
    }

    /// The shadow limits' call: those that can never fit are answered without Redis.
    async fn shadow(
        &self,
        rules: &[Rule],
        group: Option<&[u8]>,
    ) -> rl_core::Result<CompositeDecision> {
        let (fit, unfit): (Vec<&Rule>, Vec<&Rule>) =
            rules.iter().partition(|r| r.limit > 0 && r.cost <= r.limit);
        if unfit.is_empty() {
            return self.limiter.acquire_all(rules, group).await;
        }
        let fit: Vec<Rule> = fit.into_iter().cloned().collect();
        let asked = if fit.is_empty() {
            None
        } else {
            Some(self.limiter.acquire_all(&fit, group).await?)
        };
        let mut k = 0;
        let decisions = rules
            .iter()
            .map(|r| {
                if r.limit > 0 && r.cost <= r.limit {
                    k += 1;
                    asked.as_ref().expect("asked").decisions[k - 1]
                } else {
                    unfit_decision(r.window_ms)
                }
            })
            .collect();
        Ok(CompositeDecision {
            allowed: false,
            retry_after_ms: 0,
            mode: asked.as_ref().map_or(Mode::Normal, |a| a.mode),
            now_ms: asked.as_ref().map_or(0, |a| a.now_ms),
            decisions,
        })
    }
}

fn rule(m: &Match, cost: u64) -> Rule {
    Rule::new(
        m.key.clone(),
        m.limit.policy.limit,
        m.limit.policy.window_ms,
        cost,
    )
}

/// The decision for a limit that can never admit `cost` (limit 0, or cost above it); `None`
/// when it can.
fn never(m: &Match, cost: u64) -> Option<Decision> {
    let p = &m.limit.policy;
    (p.limit == 0 || cost > p.limit).then(|| unfit_decision(p.window_ms))
}

/// Denied, nothing left; "retry" after a window (it will not fit then either, but a client
/// that obeys it does not hammer).
fn unfit_decision(window_ms: u64) -> Decision {
    Decision {
        allowed: false,
        remaining: 0,
        used: 0,
        retry_after_ms: window_ms,
        reset_after_ms: 0,
        mode: Mode::Normal,
        now_ms: 0,
    }
}
