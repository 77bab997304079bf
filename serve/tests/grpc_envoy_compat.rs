//! Envoy's rate-limit service (RLS v3 over gRPC) answered by `rl serve --grpc` (the `rl-serve`
//! binary), with envoyproxy/ratelimit's own configs loaded unchanged (tests/envoy-ratelimit,
//! Apache-2.0) and asked by clients nobody on rl wrote the wire code of: `rls-client` on
//! envoyproxy/go-control-plane's generated stubs, and envoyproxy/ratelimit's `client_cmd`.
//! Real redis-server, real gRPC over loopback.

mod grpc_support;

use std::time::Duration;

use base64::Engine as _;
use grpc_support::{envoy_configs, header, headers, most_admitted_in_window, pb_duration, Service};
use serde_json::Value;

const MOCK: &str = "source_cluster=proxy,destination_cluster=mock";

fn overall(resp: &Value) -> &str {
    resp["overall_code"].as_str().unwrap()
}

fn status(resp: &Value, i: usize) -> &Value {
    &resp["statuses"][i]
}

fn remaining(resp: &Value, i: usize) -> u64 {
    status(resp, i)["limit_remaining"].as_u64().unwrap()
}

/// One RFC 9651 List member's string and integer parameters, parsed by the `sfv` crate.
struct Member {
    name: String,
    params: Vec<(String, i64)>,
}

impl Member {
    fn param(&self, key: &str) -> i64 {
        self.params
            .iter()
            .find(|(k, _)| k == key)
            .unwrap_or_else(|| panic!("no `{key}` on {}", self.name))
            .1
    }
}

fn sf_list(value: &str) -> Vec<Member> {
    let list: sfv::List = sfv::Parser::new(value)
        .parse()
        .unwrap_or_else(|e| panic!("`{value}` is not a Structured Field List: {e}"));
    list.into_iter()
        .map(|entry| match entry {
            sfv::ListEntry::Item(item) => Member {
                name: item
                    .bare_item
                    .as_string()
                    .expect("a policy is named by a String")
                    .as_str()
                    .to_string(),
                params: item
                    .params
                    .iter()
                    .map(|(k, v)| {
                        let n = v.as_integer().expect("integer parameters");
                        (k.as_str().to_string(), i64::from(n))
                    })
                    .collect(),
            },
            sfv::ListEntry::InnerList(_) => panic!("`{value}`: inner lists are not expected"),
        })
        .collect()
}

/// The overall code `client_cmd` printed (its text-format response; spacing varies by build).
fn client_cmd_code(line: &str) -> String {
    let squeezed: String = line.chars().filter(|c| !c.is_whitespace()).collect();
    let after = squeezed
        .split_once("overall_code:")
        .unwrap_or_else(|| panic!("no overall_code in {line}"))
        .1;
    after
        .chars()
        .take_while(|c| c.is_ascii_uppercase() || *c == '_')
        .collect()
}

#[test]
fn example_config_answers_ok_then_over_limit_with_remaining_reset_and_ietf_headers() {
    let svc = Service::start(&envoy_configs());

    // `source_cluster: proxy` → `destination_cluster: mock`: 1 per minute.
    let first = svc.check("rl", &["-d", MOCK]);
    assert_eq!(overall(&first), "OK", "{first}");
    let s = status(&first, 0);
    assert_eq!(s["code"], "OK");
    assert_eq!(s["current_limit"]["requests_per_unit"], 1, "{s}");
    assert_eq!(s["current_limit"]["unit"], "MINUTE", "{s}");
    assert_eq!(remaining(&first, 0), 0, "one of one used");
    let reset = pb_duration(&s["duration_until_reset"]);
    assert!(
        reset > Duration::ZERO && reset <= Duration::from_secs(60),
        "the window empties within its minute: {reset:?}"
    );
    let name = s["current_limit"]["name"].as_str().unwrap().to_string();
    assert!(!name.is_empty(), "the limit is named: {s}");

    let h = headers(&first);
    let policy = sf_list(header(&h, "RateLimit-Policy").expect("RateLimit-Policy"));
    assert_eq!(policy.len(), 1);
    assert_eq!(policy[0].name, name, "the header names the status's limit");
    assert_eq!(policy[0].param("q"), 1);
    assert_eq!(policy[0].param("w"), 60);
    let state = sf_list(header(&h, "RateLimit").expect("RateLimit"));
    assert_eq!(state[0].name, name);
    assert_eq!(state[0].param("r"), 0);
    let t = state[0].param("t");
    assert!((1..=60).contains(&t), "t={t}");
    assert!(header(&h, "Retry-After").is_none(), "admitted: {h:?}");
    assert_eq!(first["raw_body"], "", "no body when admitted");

    // The second within the minute is over the limit.
    let second = svc.check("rl", &["-d", MOCK]);
    assert_eq!(overall(&second), "OVER_LIMIT", "{second}");
    let s = status(&second, 0);
    assert_eq!(s["code"], "OVER_LIMIT");
    assert_eq!(remaining(&second, 0), 0);
    let wait = pb_duration(&s["duration_until_reset"]);
    assert!(
        wait > Duration::ZERO && wait <= Duration::from_secs(60),
        "{wait:?}"
    );
    let h = headers(&second);
    let retry: sfv::Integer = sfv::Parser::new(header(&h, "Retry-After").expect("Retry-After"))
        .parse_item::<sfv::Item>()
        .expect("Retry-After is an integer")
        .bare_item
        .as_integer()
        .expect("integer");
    let retry = i64::from(retry);
    assert!((1..=60).contains(&retry), "Retry-After {retry}");
    let state = sf_list(header(&h, "RateLimit").expect("RateLimit on a denial too"));
    assert_eq!(state[0].param("r"), 0);
    assert!(
        state[0].param("t") <= retry,
        "no policy says later than Retry-After"
    );
    assert_eq!(
        header(&h, "content-type"),
        Some("application/problem+json"),
        "Envoy sends raw_body with this type"
    );
    let body = base64::engine::general_purpose::STANDARD
        .decode(second["raw_body"].as_str().unwrap())
        .unwrap();
    let problem: Value = serde_json::from_slice(&body).expect("problem+json");
    assert_eq!(problem["status"], 429);
    assert_eq!(problem["violated-policies"][0], name.as_str());
}

#[test]
fn envoyproxy_ratelimit_client_cmd_sees_ok_then_over_limit_and_sigterm_stops_cleanly() {
    let mut svc = Service::start(&envoy_configs());
    // `destination_cluster: bkthomps` under `source_cluster: proxy`: 2 per minute.
    let d = ["source_cluster=proxy,destination_cluster=bkthomps"];
    let codes: Vec<String> = (0..3)
        .map(|_| client_cmd_code(&svc.client_cmd("rl", &d)))
        .collect();
    assert_eq!(codes, ["OK", "OK", "OVER_LIMIT"]);
    // A descriptor the config does not know is not limited.
    let line = svc.client_cmd("rl", &["nothing=here"]);
    assert_eq!(client_cmd_code(&line), "OK", "{line}");

    let status = svc.terminate(Duration::from_secs(10));
    assert!(
        status.is_some_and(|s| s.success()),
        "rl serve --grpc exits 0 on SIGTERM: {status:?}\n{}",
        svc.log()
    );
}

#[test]
fn wildcards_unlimited_bans_and_replaces_as_envoyproxy_ratelimit_matches_them() {
    let svc = Service::start(&envoy_configs());
    // `key: foo` without a value: 2 per minute for each value, counted apart.
    for _ in 0..2 {
        assert_eq!(overall(&svc.check("rl", &["-d", "foo=a"])), "OK");
    }
    let third = svc.check("rl", &["-d", "foo=a"]);
    assert_eq!(overall(&third), "OVER_LIMIT", "{third}");
    assert_eq!(status(&third, 0)["current_limit"]["requests_per_unit"], 2);
    assert_eq!(
        overall(&svc.check("rl", &["-d", "foo=b"])),
        "OK",
        "foo=b has its own counter"
    );

    // `bay` under `foo`: unlimited — OK, no limit reported, however often.
    for _ in 0..4 {
        let r = svc.check("rl", &["-d", "foo=x,bay=y"]);
        assert_eq!(overall(&r), "OK");
        assert!(status(&r, 0)["current_limit"].is_null(), "{r}");
    }
    // An unknown descriptor: OK with no limit.
    let r = svc.check("rl", &["-d", "nothing=here"]);
    assert_eq!(overall(&r), "OK");
    assert!(status(&r, 0)["current_limit"].is_null(), "{r}");

    // `bar: banned`: 0 per minute denies from the first request.
    let r = svc.check("rl", &["-d", "foo=x,bar=banned"]);
    assert_eq!(overall(&r), "OVER_LIMIT", "{r}");
    assert_eq!(status(&r, 0)["current_limit"]["requests_per_unit"], 0);

    // `category: account` replaces the limit named `bkthomps` (foo → bar: bkthomps, 1 per
    // minute): asked together, only the category's 4 per minute applies.
    for i in 0..3 {
        let r = svc.check(
            "rl",
            &["-d", "category=account", "-d", "foo=r,bar=bkthomps"],
        );
        assert_eq!(overall(&r), "OK", "request {i}: {r}");
        assert_eq!(status(&r, 0)["current_limit"]["requests_per_unit"], 4);
        assert!(status(&r, 1)["current_limit"].is_null(), "replaced: {r}");
    }
    // Asked alone, the bkthomps limit applies: its first is OK, its second over.
    assert_eq!(
        overall(&svc.check("rl", &["-d", "foo=s,bar=bkthomps"])),
        "OK"
    );
    assert_eq!(
        overall(&svc.check("rl", &["-d", "foo=s,bar=bkthomps"])),
        "OVER_LIMIT"
    );
}

#[test]
fn shadow_mode_is_reported_but_not_enforced() {
    let svc = Service::start(&envoy_configs());
    // `baz: shady` under `foo`: 3 per minute, shadow_mode: true.
    for i in 0..5 {
        let r = svc.check("rl", &["-d", "foo=x,baz=shady"]);
        assert_eq!(overall(&r), "OK", "request {i} is never denied: {r}");
        let s = status(&r, 0);
        assert_eq!(s["code"], "OK");
        assert_eq!(s["current_limit"]["requests_per_unit"], 3);
        let shadow = &r["dynamic_metadata"]["rl_shadow_denied"];
        if i < 3 {
            assert_eq!(remaining(&r, 0), 2 - i as u64, "{r}");
            assert!(shadow.is_null(), "request {i} fits: {r}");
        } else {
            assert_eq!(remaining(&r, 0), 0, "{r}");
            let name = s["current_limit"]["name"].as_str().unwrap();
            assert_eq!(
                shadow[0], name,
                "request {i}: the shadow denial is reported: {r}"
            );
        }
    }
}

#[test]
fn hits_addend_is_the_cost_per_request_and_per_descriptor() {
    let svc = Service::start(&envoy_configs());
    // `bar` (any value) under `foo`: 3 per minute.
    let r = svc.check("rl", &["-hits", "2", "-d", "foo=h,bar=z"]);
    assert_eq!(overall(&r), "OK");
    assert_eq!(remaining(&r, 0), 1, "2 of 3 used: {r}");
    let r = svc.check("rl", &["-hits", "2", "-d", "foo=h,bar=z"]);
    assert_eq!(overall(&r), "OVER_LIMIT", "2 more do not fit: {r}");
    let r = svc.check("rl", &["-hits", "1", "-d", "foo=h,bar=z"]);
    assert_eq!(overall(&r), "OK", "the denied request took nothing: {r}");
    assert_eq!(remaining(&r, 0), 0);

    // hits_addend unset (0) counts 1.
    let r = svc.check("rl", &["-d", "foo=i,bar=z"]);
    assert_eq!(remaining(&r, 0), 2, "{r}");

    // A descriptor's own hits_addend overrides the request's for that descriptor only.
    let r = svc.check("rl", &["-d", "foo=j,bar=z;hits=3", "-d", "foo=k,bar=z"]);
    assert_eq!(overall(&r), "OK", "{r}");
    assert_eq!(remaining(&r, 0), 0, "3 of 3: {r}");
    assert_eq!(remaining(&r, 1), 2, "1 of 3: {r}");
}

#[test]
fn an_empty_domain_descriptor_list_or_descriptor_is_invalid_argument_not_ok() {
    let svc = Service::start(&envoy_configs());
    // As envoyproxy/ratelimit refuses them, with its words, but as INVALID_ARGUMENT.
    let e = svc.check_error("", &["-d", "foo=a"]);
    assert!(e.contains("code = InvalidArgument"), "{e}");
    assert!(e.contains("rate limit domain must not be empty"), "{e}");
    let e = svc.check_error("rl", &[]);
    assert!(e.contains("code = InvalidArgument"), "{e}");
    assert!(
        e.contains("rate limit descriptor list must not be empty"),
        "{e}"
    );
    // A descriptor with no entries (Envoy's proto requires one), named by its index.
    let e = svc.check_error("rl", &["-d", "foo=a", "-d", ""]);
    assert!(e.contains("code = InvalidArgument"), "{e}");
    assert!(e.contains("descriptor 1 has no entries"), "{e}");
    // The refused calls took nothing: a well-formed one still sees the whole limit.
    let r = svc.check("rl", &["-d", "foo=a,bar=z"]);
    assert_eq!((overall(&r), remaining(&r, 0)), ("OK", 2), "{r}");
}

/// Whole seconds from the first send to the last answer, rounded up.
fn span_secs(paced: &[grpc_support::Paced]) -> u64 {
    let first = paced.iter().map(|p| p.send_ns).min().unwrap();
    let last = paced.iter().map(|p| p.recv_ns).max().unwrap();
    ((last - first) as u64).div_ceil(1_000_000_000)
}

/// `basic.yaml`'s `key1`: 50 per second. Paced at 5x the limit for 2.5 s from an arbitrary phase
/// of the second, a fixed window (envoyproxy/ratelimit's) admits up to 100 in one second across
/// a boundary; rl's sliding window admits at most 50 in ANY second, and about 50 per second.
#[test]
fn sliding_window_admits_at_most_the_limit_in_any_window_across_boundaries() {
    // Exactness is Redis's: the local fallback (which decides alone, inexactly, while Redis
    // answers slowly, as it may on a loaded test machine) is off here.
    let svc = Service::start_with(&envoy_configs(), &["-o", "local_fallback=false"]);
    let paced = svc.pace("basic", &["-d", "key1=window"], 250, 625);
    let admitted = paced.iter().filter(|p| p.admitted).count();
    let most = most_admitted_in_window(&paced, Duration::from_secs(1), 1);
    assert!(most <= 50, "{most} admitted within one second (limit 50)");
    assert!(
        paced[..50].iter().all(|p| p.admitted),
        "a fresh key admits its first 50"
    );
    // Any span of whole seconds holds at most 50 per second; a loaded machine may stretch the run.
    let most_possible = 50 * span_secs(&paced);
    assert!(
        (100..=most_possible).contains(&(admitted as u64)),
        "about 50 per second over 2.5 s: {admitted} (at most {most_possible})"
    );

    // The same with a cost of 5 per request: 10 requests per second.
    let paced = svc.pace("basic", &["-hits", "5", "-d", "key1=costly"], 50, 125);
    let admitted = paced.iter().filter(|p| p.admitted).count();
    let most = most_admitted_in_window(&paced, Duration::from_secs(1), 5);
    assert!(
        most <= 50,
        "{most} hits admitted within one second (limit 50)"
    );
    let most_possible = 10 * span_secs(&paced);
    assert!(
        (20..=most_possible).contains(&(admitted as u64)),
        "about 10 requests per second over 2.5 s: {admitted} (at most {most_possible})"
    );
}
