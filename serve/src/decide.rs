//! The one question every front end asks, in Envoy's terms: a domain and a list of descriptors
//! (each a list of key/value entries), and how many hits this request counts for.
//!
//! The types mirror `envoy.service.ratelimit.v3` closely enough that the gRPC front end is a
//! field-by-field conversion, while staying free of any protobuf type so the HTTP front ends do
//! not depend on one.

use std::time::Duration;

use rl_core::Mode;

/// One `key`/`value` pair of a descriptor (Envoy's `RateLimitDescriptor.Entry`).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Entry {
    pub key: String,
    pub value: String,
}

/// One descriptor of a request: its entries, in order, and its own hits when it names them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DescriptorRequest {
    pub entries: Vec<Entry>,
    /// Envoy's per-descriptor `hits_addend`; `None` means the request's.
    pub hits_addend: Option<u64>,
}

/// One check: Envoy's `RateLimitRequest`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckRequest {
    pub domain: String,
    pub descriptors: Vec<DescriptorRequest>,
    /// The request's `hits_addend`; 0 means 1, as in Envoy.
    pub hits_addend: u64,
}

impl CheckRequest {
    /// Refuses what envoyproxy/ratelimit refuses (an empty domain, an empty descriptor list) and
    /// a descriptor with no entries (Envoy's proto requires at least one): such a request names
    /// no limit, and answering it OK would hide a misconfigured client. `InvalidArgument`, so
    /// gRPC answers `INVALID_ARGUMENT` and HTTP 400.
    pub fn validate(&self) -> Result<(), rl_core::Error> {
        let invalid =
            |name, message: String| Err(rl_core::Error::InvalidArgument { name, message });
        if self.domain.is_empty() {
            return invalid("domain", "rate limit domain must not be empty".into());
        }
        if self.descriptors.is_empty() {
            return invalid(
                "descriptors",
                "rate limit descriptor list must not be empty".into(),
            );
        }
        if let Some(i) = self.descriptors.iter().position(|d| d.entries.is_empty()) {
            return invalid(
                "descriptors",
                format!("descriptor {i} has no entries (a descriptor is at least one key/value)"),
            );
        }
        Ok(())
    }
}

/// The unit a policy was written in (Envoy's `RateLimitResponse.RateLimit.Unit`). A window given
/// in milliseconds (an rl extension) that is not a whole unit reports `Unknown`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Unit {
    Unknown,
    Second,
    Minute,
    Hour,
    Day,
    Week,
    Month,
    Year,
}

/// The limit that applied to a descriptor (Envoy's `RateLimitResponse.RateLimit`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AppliedLimit {
    /// The policy's name: the config's `name`, or one derived from the descriptor path.
    pub name: String,
    pub requests_per_unit: u64,
    pub unit: Unit,
    /// The sliding window the limit is counted over.
    pub window: Duration,
}

/// Envoy's `RateLimitResponse.Code` (UNKNOWN is never produced).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Code {
    Ok,
    OverLimit,
}

/// The answer for one descriptor, in request order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DescriptorStatus {
    /// `OverLimit` only when the limit denied and is not in shadow mode.
    pub code: Code,
    /// `None` when no policy matched the descriptor (or it is `unlimited`).
    pub limit: Option<AppliedLimit>,
    pub limit_remaining: u64,
    pub duration_until_reset: Duration,
    /// The limit denied, but it is in shadow mode: counted and reported, not enforced.
    pub shadow_denied: bool,
}

/// The answer to one [`CheckRequest`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckResult {
    /// `OverLimit` if any descriptor is.
    pub overall: Code,
    pub statuses: Vec<DescriptorStatus>,
    /// The IETF `RateLimit-Policy` / `RateLimit` fields (and `Retry-After` on a denial), rendered
    /// by `rl_core::headers`, for Envoy's `response_headers_to_add` and the HTTP answers.
    pub headers: Vec<(String, String)>,
    /// The RFC 9457 problem+json body of a denial (`rl_core::headers::problem_body`).
    pub problem_body: Option<String>,
    /// 0 when admitted; else the wait until every denying limit fits.
    pub retry_after: Duration,
    /// Which path decided (`local` while Redis is unhealthy).
    pub mode: Mode,
    /// When the request was decided, in ms on the deciding clock (Redis TIME): the `now_ms` of
    /// the call that decided the enforced limits, else the latest of the other calls' (quota,
    /// shadow). `None` when nothing was asked (no limit applied, or a limit that never fits).
    /// The HTTP front ends can pass it on (`--decision-time-header`), so exactness can be
    /// checked on the decisions' own clock.
    pub decided_at_ms: Option<u64>,
}

impl CheckResult {
    /// OK with nothing limited: what an HTTP front end answers for a request its `http:` rules
    /// make no descriptor of (Envoy does not call its rate-limit service then either).
    pub fn nothing_to_ask() -> CheckResult {
        CheckResult {
            overall: Code::Ok,
            statuses: Vec::new(),
            headers: Vec::new(),
            problem_body: None,
            retry_after: Duration::ZERO,
            mode: Mode::Normal,
            decided_at_ms: None,
        }
    }
}
