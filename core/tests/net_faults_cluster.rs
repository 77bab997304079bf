//! An asymmetric fault on Cluster through a real fault proxy: one master slow, the other two
//! fine. Every node announces its own Toxiproxy port (`Cluster::announce_ports`), so the client
//! reaches each master through that master's proxy, and only master 0's is made slow.
//!
//! What the design does: the degradation state machine is one per limiter (`health.rs`), fed by
//! the round trips of all its calls whichever master served them, and a fast call ends a slow
//! spell. So with traffic on the healthy masters, a master that is slow but answers within
//! `degrade_after` never sends the limiter local: every key stays `normal`, and the slow
//! master's keys are decided on it, slowly. A master slower than `degrade_after` sends the whole
//! limiter local (a call in flight for that long does, whatever other calls see), keys on the
//! healthy masters included, until the probes are fast again. The tests assert both, and measure
//! what each costs (their REPORT lines).

mod common;

use std::time::{Duration, Instant};

use common::*;
use rl_core::{Limiter, Mode, Options};
use rl_harness::{key_slot, Cluster, Proxy, Stream, Toxiproxy};
use serde_json::json;

/// Master `i` of a fresh three-master cluster holds slots in `RANGES[i]` (the harness's split).
const RANGES: [(u16, u16); 3] = [(0, 5460), (5461, 10922), (10923, 16383)];

/// A user key whose Redis key lands on master `master`.
fn key_on(l: &Limiter, master: usize, tag: &str) -> String {
    let (first, last) = RANGES[master];
    (0..)
        .map(|i| format!("{tag}-{i}"))
        .find(|k| (first..=last).contains(&key_slot(&l.redis_key(k))))
        .unwrap()
}

/// The runtime lives as long as the test: the limiter's background task (heartbeats, recovery
/// probes) runs on the runtime of its first call, and ends with it.
struct ClusterRig {
    rt: tokio::runtime::Runtime,
    limiter: Limiter,
    proxies: Vec<Proxy>,
    /// The master holding the fleet key, which the recovery probes (heartbeats) go to.
    probed: usize,
    _toxiproxy: Toxiproxy,
    _cluster: Cluster,
}

fn cluster_rig(options: &Options) -> ClusterRig {
    let cluster = Cluster::start().expect("start a 3-master cluster");
    let toxiproxy = Toxiproxy::start().expect("toxiproxy-server (scripts/toxiproxy.sh)");
    let proxies: Vec<Proxy> = cluster
        .nodes()
        .iter()
        .enumerate()
        .map(|(i, node)| toxiproxy.proxy(&format!("node{i}"), node.addr()).unwrap())
        .collect();
    let ports: Vec<u16> = proxies.iter().map(Proxy::port).collect();
    cluster.announce_ports(&ports).unwrap();
    let seeds: Vec<String> = ports.iter().map(|p| format!("127.0.0.1:{p}")).collect();
    let url = format!("redis+cluster://{}", seeds.join(","));
    let limiter = Limiter::open(Some(&url), options.clone()).unwrap();
    let fleet_key = format!("{}instances", options.key_prefix);
    let slot = key_slot(fleet_key.as_bytes());
    let probed = RANGES
        .iter()
        .position(|(a, b)| (*a..=*b).contains(&slot))
        .unwrap();
    ClusterRig {
        rt: runtime(),
        limiter,
        proxies,
        probed,
        _toxiproxy: toxiproxy,
        _cluster: cluster,
    }
}

/// What one run measured: decisions on a key of the slow master and on one of a healthy master.
struct Run {
    on_slow: Vec<Record>,
    on_healthy: Vec<Record>,
    added: Instant,
    removed: Instant,
    /// Transitions (to local, to normal) while the fault was on.
    in_fault: (u64, u64),
}

/// 100/s on a key of master `slow` and 200/s on a key of master `healthy` (limit 300 per second
/// each) for 5.5 s; master `slow`'s proxy adds `latency_ms` ± 10% to every reply from 0.7 s to
/// 3.2 s.
fn run(rig: &ClusterRig, slow: usize, healthy: usize, latency_ms: u64) -> Run {
    let l = &rig.limiter;
    let (slow_key, healthy_key) = (key_on(l, slow, "slow"), key_on(l, healthy, "healthy"));
    let rt = &rig.rt;
    rt.block_on(async {
        for k in [&slow_key, &healthy_key] {
            let d = l.acquire(k, 1_000_000, 1000, 1).await.unwrap();
            assert_eq!(d.mode, Mode::Normal);
        }
    });
    let proxy = rig.proxies[slow].clone();
    let watched = l.clone();
    let events = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(700));
        // The fault starts from `normal`: a stall of the busy machine may have sent the limiter
        // local just before (waits at most 1 s).
        let deadline = Instant::now() + Duration::from_secs(1);
        while watched.stats().mode != Mode::Normal && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(2));
        }
        let count = || {
            let s = watched.stats();
            (s.transitions_to_local, s.transitions_to_normal)
        };
        let before = count();
        let added = Instant::now();
        let toxic = json!({"latency": latency_ms, "jitter": latency_ms / 10});
        proxy
            .add("latency", "latency", Stream::Downstream, toxic)
            .unwrap();
        std::thread::sleep(Duration::from_millis(2500));
        let during = count();
        let removed = Instant::now();
        proxy.remove("latency").unwrap();
        let in_fault = (during.0 - before.0, during.1 - before.1);
        (added, removed, in_fault)
    });
    let (limit, window, duration) = (300, 1000, Duration::from_millis(5500));
    let (on_slow, on_healthy) = rt.block_on(async {
        tokio::join!(
            drive(
                std::slice::from_ref(l),
                &slow_key,
                limit,
                window,
                100,
                duration
            ),
            drive(
                std::slice::from_ref(l),
                &healthy_key,
                limit,
                window,
                200,
                duration
            ),
        )
    });
    let (added, removed, in_fault) = events.join().unwrap();
    Run {
        on_slow,
        on_healthy,
        added,
        removed,
        in_fault,
    }
}

impl Run {
    fn in_fault<'a>(&self, records: &'a [Record]) -> Vec<&'a Record> {
        records
            .iter()
            .filter(|r| r.started > self.added && r.started <= self.removed)
            .collect()
    }

    fn all(&self) -> impl Iterator<Item = &Record> {
        self.on_slow.iter().chain(&self.on_healthy)
    }

    fn slowest(&self) -> Duration {
        self.all().map(|r| r.latency).max().unwrap()
    }

    fn local(records: &[&Record]) -> usize {
        records
            .iter()
            .filter(|r| r.mode() == Some(Mode::Local))
            .count()
    }

    fn median_latency(records: &[&Record]) -> Duration {
        let mut v: Vec<Duration> = records.iter().map(|r| r.latency).collect();
        v.sort();
        v.get(v.len() / 2).copied().unwrap_or_default()
    }
}

/// A master at 20 ms a reply (above `degrade_rtt`, well within `degrade_after`) while another
/// master is fast. The healthy master's fast calls end every slow spell the slow master's calls
/// begin, so the slow-RTT rule seldom fires; when the busy machine stalls the fast calls long
/// enough it does, and then the probes (every master) keep the limiter local until the fault
/// ends. Asserted: every call answered, at most one spell of local, back after the fault.
#[test]
fn a_master_slower_than_degrade_rtt_within_degrade_after_makes_at_most_one_spell_of_local() {
    let _heavy = heavy();
    let options = Options {
        instances: Some(1),
        ..Options::default()
    };
    let rig = cluster_rig(&options);
    let (slow, healthy) = (0, 1);
    let r = run(&rig, slow, healthy, 20);
    let (slow_fault, healthy_fault) = (r.in_fault(&r.on_slow), r.in_fault(&r.on_healthy));
    println!(
        "REPORT Cluster, master {slow} of 3 slow (20±2 ms, degrade_rtt {} ms) for 2.5 s, traffic on master {healthy} too: \
         transitions while it was on: to local {}, to normal {}; slow master's key: {} of {} local, median call {} ms; \
         healthy master's key: {} of {} local, median call {} ms; slowest call {} ms",
        options.degrade_rtt.as_millis(),
        r.in_fault.0,
        r.in_fault.1,
        Run::local(&slow_fault),
        slow_fault.len(),
        Run::median_latency(&slow_fault).as_millis(),
        Run::local(&healthy_fault),
        healthy_fault.len(),
        Run::median_latency(&healthy_fault).as_millis(),
        r.slowest().as_millis()
    );
    assert!(r.all().all(|r| r.result.is_ok()), "every call is answered");
    assert!(r.slowest() <= options.request_timeout);
    assert!(
        slow_fault
            .iter()
            .any(|r| r.latency >= Duration::from_millis(18)),
        "the slow master's calls went through the toxic"
    );
    // At most one spell while the fault is on, and no return while it is (the probes PING
    // every master, the slow one included).
    assert!(
        r.in_fault.0 <= 1 && r.in_fault.1 == 0,
        "flapped: (to local, to normal) = {:?} in one fault",
        r.in_fault
    );
    wait_until("normal after the fault", Duration::from_secs(10), || {
        rig.limiter.stats().mode == Mode::Normal
    });
}

/// A master at 300 ms a reply (above `degrade_after`, within `request_timeout`) while another
/// master is fine. The master with the fleet key is kept healthy, so the recovery probes are fast
/// all along: the worst case for flapping.
#[test]
fn a_master_slower_than_degrade_after_sends_the_whole_limiter_local() {
    let _heavy = heavy();
    let options = Options {
        instances: Some(1),
        ..Options::default()
    };
    let rig = cluster_rig(&options);
    let slow = (rig.probed + 1) % 3;
    let healthy = rig.probed;
    let r = run(&rig, slow, healthy, 300);
    let (slow_fault, healthy_fault) = (r.in_fault(&r.on_slow), r.in_fault(&r.on_healthy));
    let first_local = r
        .all()
        .filter(|x| x.mode() == Some(Mode::Local))
        .map(Record::done)
        .min()
        .expect("never went local");
    let to_local = first_local.saturating_duration_since(r.added);
    let admitted_healthy = healthy_fault
        .iter()
        .filter(|x| x.admitted().is_some())
        .count();
    println!(
        "REPORT Cluster, master {slow} of 3 at 300±30 ms for 2.5 s (probes on healthy master {healthy}): \
         first local decision {} ms after the fault; transitions while it was on: to local {}, to normal {}; \
         slow master's key: {} of {} local; healthy master's key: {} of {} local, {} admitted; slowest call {} ms; \
         decisions slow key: {}; healthy key: {}",
        to_local.as_millis(),
        r.in_fault.0,
        r.in_fault.1,
        Run::local(&slow_fault),
        slow_fault.len(),
        Run::local(&healthy_fault),
        healthy_fault.len(),
        admitted_healthy,
        r.slowest().as_millis(),
        per_mode(&r.on_slow),
        per_mode(&r.on_healthy),
    );
    assert!(r.all().all(|r| r.result.is_ok()), "every call is answered");
    assert!(
        r.slowest() <= options.request_timeout,
        "a call took {:?}",
        r.slowest()
    );
    assert!(
        to_local < options.request_timeout,
        "local {to_local:?} after the fault"
    );
    // One state machine per limiter: the healthy master's key goes local with the slow one's.
    assert!(
        Run::local(&healthy_fault) > 0,
        "the healthy master's key was decided locally too"
    );
    // The probes PING every master, so the fast one holding the fleet key cannot bring the
    // limiter back while the slow one is still slow: one spell of local, ended only after the
    // fault (checked below: the one return is recover_after past the removal, or later).
    wait_until("back to normal", Duration::from_secs(10), || {
        rig.limiter.stats().mode == Mode::Normal
    });
    assert_eq!(
        r.in_fault,
        (1, 0),
        "one spell of local for the whole fault, with no return while it is on"
    );
    // The latest return (a later machine stall would only make it later) is recover_after past
    // the removal, or more.
    let end = rig.limiter.stats();
    let back = Instant::now() - Duration::from_millis(end.state_ms);
    assert!(
        back >= r.removed + options.recover_after,
        "back {:?} after the fault ended, before recover_after",
        back.saturating_duration_since(r.removed)
    );
    println!(
        "REPORT Cluster, master at 300 ms: back to normal {} ms after the fault ended (recover_after {} ms)",
        back.saturating_duration_since(r.removed).as_millis(),
        options.recover_after.as_millis()
    );
}
