//! Envoy's RLS v3 messages to and from [`crate::decide`]: field-by-field, no policy logic, so
//! the gRPC answer says exactly what the engine decided.

use std::time::Duration;

use envoy_types::pb::envoy::config::core::v3::HeaderValue;
use envoy_types::pb::envoy::extensions::common::ratelimit::v3::RateLimitDescriptor;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::{
    rate_limit::Unit as PbUnit, Code as PbCode, DescriptorStatus as PbStatus, RateLimit as PbLimit,
};
use envoy_types::pb::envoy::service::ratelimit::v3::{RateLimitRequest, RateLimitResponse};
use envoy_types::pb::google::protobuf::{
    value::Kind, Duration as PbDuration, ListValue, Struct, Value,
};
use tonic::Status;

use crate::decide::{
    AppliedLimit, CheckRequest, CheckResult, Code, DescriptorRequest, DescriptorStatus, Entry, Unit,
};

/// The `dynamic_metadata` field naming the shadow-mode limits that would have denied: Envoy's
/// messages have no per-descriptor place for "denied but not enforced" (envoyproxy/ratelimit
/// answers such a descriptor OK with `limit_remaining: 0` and counts it in its stats only).
pub const SHADOW_DENIED: &str = "rl_shadow_denied";

/// Envoy's request as the engine's question. Envoy's `hits_addend` 0 means 1; the engine applies
/// that rule, so both numbers pass through untouched.
pub fn check_request(req: RateLimitRequest) -> CheckRequest {
    CheckRequest {
        domain: req.domain,
        descriptors: req.descriptors.into_iter().map(descriptor).collect(),
        hits_addend: u64::from(req.hits_addend),
    }
}

fn descriptor(d: RateLimitDescriptor) -> DescriptorRequest {
    DescriptorRequest {
        entries: d
            .entries
            .into_iter()
            .map(|e| Entry {
                key: e.key,
                value: e.value,
            })
            .collect(),
        hits_addend: d.hits_addend.map(|h| h.value),
    }
}

/// The engine's answer as Envoy's response: statuses in request order, the IETF fields in
/// `response_headers_to_add` (Envoy adds them to the client's response, allowed or denied), and
/// on a denial the problem+json body as `raw_body`.
pub fn response(result: CheckResult) -> RateLimitResponse {
    let shadow: Vec<Value> = result
        .statuses
        .iter()
        .filter(|s| s.shadow_denied)
        .filter_map(|s| s.limit.as_ref())
        .map(|l| string_value(l.name.clone()))
        .collect();
    let mut headers: Vec<HeaderValue> = result
        .headers
        .into_iter()
        .map(|(key, value)| HeaderValue {
            key,
            value,
            ..Default::default()
        })
        .collect();
    let raw_body = match result.problem_body {
        Some(body) if result.overall == Code::OverLimit => {
            headers.push(HeaderValue {
                key: "content-type".into(),
                value: "application/problem+json".into(),
                ..Default::default()
            });
            body.into_bytes()
        }
        _ => Vec::new(),
    };
    RateLimitResponse {
        overall_code: code(result.overall) as i32,
        statuses: result.statuses.into_iter().map(status).collect(),
        response_headers_to_add: headers,
        raw_body,
        dynamic_metadata: (!shadow.is_empty()).then(|| Struct {
            fields: [(
                SHADOW_DENIED.to_string(),
                Value {
                    kind: Some(Kind::ListValue(ListValue { values: shadow })),
                },
            )]
            .into_iter()
            .collect(),
        }),
        ..Default::default()
    }
}

fn string_value(s: String) -> Value {
    Value {
        kind: Some(Kind::StringValue(s)),
    }
}

fn status(s: DescriptorStatus) -> PbStatus {
    PbStatus {
        code: code(s.code) as i32,
        duration_until_reset: s.limit.is_some().then(|| duration(s.duration_until_reset)),
        current_limit: s.limit.map(limit),
        limit_remaining: saturate(s.limit_remaining),
        quota: None,
    }
}

fn limit(l: AppliedLimit) -> PbLimit {
    PbLimit {
        name: l.name,
        requests_per_unit: saturate(l.requests_per_unit),
        unit: unit(l.unit) as i32,
    }
}

fn code(c: Code) -> PbCode {
    match c {
        Code::Ok => PbCode::Ok,
        Code::OverLimit => PbCode::OverLimit,
    }
}

fn unit(u: Unit) -> PbUnit {
    match u {
        Unit::Unknown => PbUnit::Unknown,
        Unit::Second => PbUnit::Second,
        Unit::Minute => PbUnit::Minute,
        Unit::Hour => PbUnit::Hour,
        Unit::Day => PbUnit::Day,
        Unit::Week => PbUnit::Week,
        Unit::Month => PbUnit::Month,
        Unit::Year => PbUnit::Year,
    }
}

/// Envoy's counts are `uint32`; a larger limit or remainder is reported as the largest it can.
fn saturate(n: u64) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

fn duration(d: Duration) -> PbDuration {
    PbDuration {
        seconds: i64::try_from(d.as_secs()).unwrap_or(i64::MAX),
        nanos: d.subsec_nanos() as i32,
    }
}

/// An engine error as a gRPC status. Envoy's `failure_mode_deny` decides what the proxy does with
/// any of them; the code tells operators whether retrying can help.
pub fn error_status(err: &rl_core::Error) -> Status {
    use rl_core::ErrorKind;
    let message = err.to_string();
    match err.kind() {
        ErrorKind::InvalidArgument => Status::invalid_argument(message),
        ErrorKind::BackendUnavailable => Status::unavailable(message),
        ErrorKind::Backend | ErrorKind::ClockSkew => Status::internal(message),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn result(overall: Code, statuses: Vec<DescriptorStatus>) -> CheckResult {
        CheckResult {
            overall,
            statuses,
            headers: vec![("RateLimit".into(), "\"a\";r=0;t=1".into())],
            problem_body: Some("{}".into()),
            retry_after: Duration::from_secs(1),
            mode: rl_core::Mode::Normal,
            decided_at_ms: None,
        }
    }

    fn limited(code: Code, remaining: u64, shadow_denied: bool) -> DescriptorStatus {
        DescriptorStatus {
            code,
            limit: Some(AppliedLimit {
                name: "a".into(),
                requests_per_unit: 5_000_000_000,
                unit: Unit::Week,
                window: Duration::from_secs(7 * 86_400),
            }),
            limit_remaining: remaining,
            duration_until_reset: Duration::from_millis(1_500),
            shadow_denied,
        }
    }

    #[test]
    fn counts_saturate_at_uint32_and_durations_keep_their_nanos() {
        let r = response(result(Code::Ok, vec![limited(Code::Ok, 1 << 40, false)]));
        let s = &r.statuses[0];
        let l = s.current_limit.as_ref().unwrap();
        assert_eq!(l.requests_per_unit, u32::MAX);
        assert_eq!(l.unit, PbUnit::Week as i32);
        assert_eq!(s.limit_remaining, u32::MAX);
        let d = s.duration_until_reset.as_ref().unwrap();
        assert_eq!((d.seconds, d.nanos), (1, 500_000_000));
    }

    #[test]
    fn the_problem_body_and_its_type_go_only_with_a_denial() {
        let ok = response(result(Code::Ok, vec![limited(Code::Ok, 1, false)]));
        assert!(ok.raw_body.is_empty());
        assert!(ok
            .response_headers_to_add
            .iter()
            .all(|h| h.key != "content-type"));
        let denied = response(result(
            Code::OverLimit,
            vec![limited(Code::OverLimit, 0, false)],
        ));
        assert_eq!(denied.overall_code, PbCode::OverLimit as i32);
        assert_eq!(denied.raw_body, b"{}");
        assert!(denied
            .response_headers_to_add
            .iter()
            .any(|h| h.key == "content-type" && h.value == "application/problem+json"));
    }

    #[test]
    fn shadow_denials_are_named_in_dynamic_metadata_and_unmatched_descriptors_have_no_limit() {
        let none = DescriptorStatus {
            code: Code::Ok,
            limit: None,
            limit_remaining: 0,
            duration_until_reset: Duration::ZERO,
            shadow_denied: false,
        };
        let r = response(result(Code::Ok, vec![limited(Code::Ok, 0, true), none]));
        let meta = r.dynamic_metadata.expect("a shadow denial is reported");
        let Some(Kind::ListValue(names)) = &meta.fields[SHADOW_DENIED].kind else {
            panic!("a list of names")
        };
        assert_eq!(names.values, vec![string_value("a".into())]);
        assert!(r.statuses[1].current_limit.is_none());
        assert!(r.statuses[1].duration_until_reset.is_none());
    }
}
