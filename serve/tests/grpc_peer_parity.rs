//! rl serve and envoyproxy/ratelimit itself (built from the Go module proxy), each on its own
//! redis-server with envoyproxy/ratelimit's `example.yaml` unchanged, asked the same sequence of
//! `ShouldRateLimit` calls by the same client: every answer agrees — codes, limits, names the
//! config gives, and what remains. The sequence stays inside one calendar minute (the peer's
//! fixed window) and away from where the two differ on purpose (a request one limit denies
//! takes nothing from its others in rl; ratelimit counts them all), so any difference is a
//! compatibility bug.

mod grpc_support;

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use grpc_support::{envoy_configs, Peer, Service};
use serde_json::Value;

/// (descriptor flags, times asked) in order; `-d` is added before each descriptor.
const SEQUENCE: &[(&[&str], usize)] = &[
    (&["source_cluster=proxy,destination_cluster=mock"], 3),
    (&["source_cluster=proxy,destination_cluster=bkthomps"], 3),
    (&["source_cluster=proxy,destination_cluster=fake"], 3),
    (&["source_cluster=proxy,destination_cluster=override"], 3),
    (&["foo=a"], 3),
    (&["foo=a,bar=z"], 4),
    (&["foo=x,bay=y"], 2),
    (&["foo=x,bar=banned"], 2),
    (&["foo=x,bar=bkthomps"], 2),
    (&["foo=x,baz=shady"], 5),
    (&["foo=x,baz=not-so-shady"], 4),
    (&["unspec=u"], 3),
    (&["qux=q"], 2),
    (&["nothing=here"], 1),
    (&["category=account", "foo=r,bar=bkthomps"], 2),
    (&["category=account"], 3),
    (&["foo=h,bar=z;hits=2"], 1),
    (&["foo=h,bar=z"], 1),
    (&["foo=j,bar=z;hits=3", "foo=k,bar=z"], 1),
];

/// What both must agree on for one status: the code, the limit (with its name when the config
/// names it; rl names unnamed limits itself, ratelimit leaves them empty) and what remains.
fn comparable(status: &Value, peer_name: &str) -> Value {
    let limit = &status["current_limit"];
    serde_json::json!({
        "code": status["code"],
        "limit_remaining": status["limit_remaining"],
        "requests_per_unit": limit["requests_per_unit"],
        "unit": limit["unit"],
        "name": if peer_name.is_empty() { Value::Null } else { limit["name"].clone() },
    })
}

fn minute_now() -> (u64, f64) {
    let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap();
    (now.as_secs() / 60, now.as_secs_f64() % 60.0)
}

/// Asks both servers the whole sequence; the first disagreement, if any.
fn ask_both(rl: &Service, peer: &Peer) -> Result<usize, String> {
    let mut asked = 0;
    for (descriptors, times) in SEQUENCE {
        let mut args = Vec::new();
        for d in *descriptors {
            args.extend(["-d", d]);
        }
        for i in 0..*times {
            let ours = rl.check("rl", &args);
            let theirs = peer.check("rl", &args);
            let what = format!("{descriptors:?} #{i}:\n  rl:    {ours}\n  peer:  {theirs}");
            let (o, t) = (
                ours["statuses"].as_array().unwrap(),
                theirs["statuses"].as_array().unwrap(),
            );
            if ours["overall_code"] != theirs["overall_code"] || o.len() != t.len() {
                return Err(what);
            }
            for (os, ts) in o.iter().zip(t) {
                let name = ts["current_limit"]["name"].as_str().unwrap_or("");
                if comparable(os, name) != comparable(ts, name) {
                    return Err(what);
                }
            }
            asked += 1;
        }
    }
    Ok(asked)
}

#[test]
fn rl_answers_envoyproxy_ratelimit_example_config_as_envoyproxy_ratelimit_does() {
    let config = envoy_configs().join("example.yaml");
    // The peer's window is the calendar minute: a sequence that crosses one is started again on
    // fresh servers (its answers then mean nothing); one that does not must agree throughout.
    for attempt in 0..2 {
        let rl = Service::start(&config);
        let peer = Peer::start(&config);
        let (_, into) = minute_now();
        if into > 45.0 {
            std::thread::sleep(Duration::from_secs_f64(60.2 - into));
        }
        let (started, _) = minute_now();
        let outcome = ask_both(&rl, &peer);
        if minute_now().0 != started {
            eprintln!("attempt {attempt} crossed a minute boundary; starting again");
            continue;
        }
        match outcome {
            Ok(asked) => {
                assert_eq!(asked, 48, "every call compared");
                return;
            }
            Err(what) => panic!("rl and envoyproxy/ratelimit disagree on {what}"),
        }
    }
    panic!("two attempts crossed a minute boundary: the machine is too slow for this test");
}
