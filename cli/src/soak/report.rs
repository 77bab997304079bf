//! The soak's verdict: the summary table and the assertions (resources flat, windows exact
//! outside fault periods and within the documented bound inside them, every fault recovered).

use super::exact::Checker;
use super::faults::{Fault, KINDS};
use super::sample::{GroupSample, Sample};
use super::{SoakArgs, GROUP_INSTANCES};

const GROUP_NAMES: [&str; 2] = ["standalone via Toxiproxy", "Sentinel"];
/// Slack around a period for the sampler's and the machine's timing (ms).
const SLACK_MS: u64 = 1_000;

pub fn progress(s: &Sample, faults: usize) {
    let g = |i: usize| &s.groups[i];
    println!(
        "{:>6.0}s  rss {} MB  fds {}  faults {faults}  | standalone: normal {} local {} to-local {} p99 {} us keys {:?} | sentinel: normal {} local {} to-local {} p99 {} us keys {:?}",
        s.secs,
        s.rss_kb / 1024,
        s.fds,
        g(0).normal,
        g(0).local,
        g(0).to_local,
        g(0).rtt_p99_us,
        g(0).redis_keys,
        g(1).normal,
        g(1).local,
        g(1).to_local,
        g(1).rtt_p99_us,
        g(1).redis_keys,
    );
}

/// A period in which windows are held to the documented bound, not the limit: an injected fault
/// (start to every limiter back to `normal`) or a spell of `local` the sampler saw (a busy
/// machine's slow round trips do that too, as the README says).
#[derive(Debug, Clone, Copy)]
struct Period {
    group: usize,
    from_ms: u64,
    to_ms: u64,
}

fn periods(samples: &[Sample], faults: &[Fault], start_ms: u64) -> (Vec<Period>, usize) {
    let mut out: Vec<Period> = faults
        .iter()
        .map(|f| Period {
            group: f.group,
            from_ms: f.start_ms,
            to_ms: f.end_ms,
        })
        .collect();
    let at = |s: &Sample| start_ms + (s.secs * 1000.0) as u64;
    let mut spells = 0;
    for w in samples.windows(2) {
        for g in 0..w[1].groups.len() {
            let (a, b) = (&w[0].groups[g], &w[1].groups[g]);
            if b.to_local > a.to_local || a.local_now > 0 || b.local_now > 0 {
                let p = Period {
                    group: g,
                    from_ms: at(&w[0]),
                    to_ms: at(&w[1]),
                };
                if !out
                    .iter()
                    .any(|f| f.group == g && f.from_ms <= p.to_ms && p.from_ms <= f.to_ms)
                {
                    spells += 1;
                }
                out.push(p);
            }
        }
    }
    (out, spells)
}

/// Milliseconds of the run whose windows are held to the bound in group `g`: the union of its
/// periods, each widened by the slack and the window that touches it.
fn covered(periods: &[Period], g: usize, window_ms: u64) -> u64 {
    let mut spans: Vec<(u64, u64)> = periods
        .iter()
        .filter(|p| p.group == g)
        .map(|p| {
            (
                p.from_ms.saturating_sub(SLACK_MS),
                p.to_ms + SLACK_MS + window_ms,
            )
        })
        .collect();
    spans.sort_unstable();
    let (mut total, mut end) = (0u64, 0u64);
    for (a, b) in spans {
        let a = a.max(end);
        if b > a {
            total += b - a;
            end = b;
        }
    }
    total
}

fn median(mut v: Vec<u64>) -> u64 {
    v.sort_unstable();
    v.get(v.len() / 2).copied().unwrap_or(0)
}

/// First third and last third after warm-up: (first, last) of `f`'s medians, and of its maxima.
fn thirds(samples: &[Sample], f: impl Fn(&Sample) -> Option<u64>) -> ((u64, u64), (u64, u64)) {
    let warm = (samples.len() / 10).max(10).min(samples.len() / 2);
    let rest = &samples[warm..];
    let third = (rest.len() / 3).max(1);
    let part = |s: &[Sample]| s.iter().filter_map(&f).collect::<Vec<u64>>();
    let (a, b) = (
        part(&rest[..third.min(rest.len())]),
        part(&rest[rest.len().saturating_sub(third)..]),
    );
    let max = |v: &Vec<u64>| v.iter().copied().max().unwrap_or(0);
    ((median(a.clone()), median(b.clone())), (max(&a), max(&b)))
}

pub fn evaluate(
    a: &SoakArgs,
    samples: &[Sample],
    faults: &[Fault],
    checker: &Checker,
    start_ms: u64,
) -> Result<(), String> {
    let mut failures: Vec<String> = Vec::new();
    // A run that sampled nothing measured nothing: it must not pass on zeros.
    let Some(last) = samples.last().cloned() else {
        return Err("the soak took no sample: nothing was measured".into());
    };
    let secs = last.secs;
    let (periods, spells) = periods(samples, faults, start_ms);
    let in_period = |g: usize, t: u64| {
        periods.iter().any(|p| {
            p.group == g
                && t + SLACK_MS > p.from_ms
                && t.saturating_sub(a.window) < p.to_ms + SLACK_MS
        })
    };

    println!();
    println!("== soak summary: {secs:.0} s, {} keys x {} groups, {}/s offered, limit {} per {} ms, fault every {} ms",
        a.keys, GROUP_INSTANCES.len(), a.rate, a.limit, a.window, a.fault_every);
    println!();
    println!("| | {} | {} |", GROUP_NAMES[0], GROUP_NAMES[1]);
    println!("|---|---|---|");
    let row = |name: &str, f: &dyn Fn(usize, &GroupSample) -> String| {
        println!(
            "| {name} | {} | {} |",
            f(0, &last.groups[0]),
            f(1, &last.groups[1])
        );
    };
    row("limiters (instances)", &|g, _| {
        GROUP_INSTANCES[g].to_string()
    });
    row("decisions normal / local / lease", &|_, s| {
        format!("{} / {} / {}", s.normal, s.local, s.lease)
    });
    row("denied", &|_, s| s.denied.to_string());
    row("errors returned", &|_, s| s.errors.to_string());
    row("transitions to local / to normal", &|_, s| {
        format!("{} / {}", s.to_local, s.to_normal)
    });
    row("repairs (permits)", &|_, s| {
        format!("{} ({})", s.repairs, s.repaired_permits)
    });
    row("failovers seen", &|_, s| s.failovers.to_string());
    row("faults injected", &|g, _| {
        KINDS
            .iter()
            .map(|k| {
                (
                    k,
                    faults
                        .iter()
                        .filter(|f| f.group == g && f.kind == *k)
                        .count(),
                )
            })
            .filter(|(_, n)| *n > 0)
            .map(|(k, n)| format!("{k} {n}"))
            .collect::<Vec<_>>()
            .join(", ")
    });
    row(
        "slowest fault: start to injection done / to every limiter recovered",
        &|g, _| {
            let worst = faults
                .iter()
                .filter(|f| f.group == g)
                .max_by_key(|f| f.end_ms - f.start_ms);
            worst.map_or("-".into(), |f| {
                format!(
                    "{}: {} ms / {} ms",
                    f.kind,
                    f.done_ms - f.start_ms,
                    f.end_ms - f.start_ms
                )
            })
        },
    );
    row(
        "share of the run inside fault periods or local spells",
        &|g, _| {
            format!(
                "{:.0} %",
                100.0 * covered(&periods, g, a.window) as f64 / (secs * 1000.0).max(1.0)
            )
        },
    );
    let bound = |g: usize| {
        let n = GROUP_INSTANCES[g];
        a.limit * (2 * n - 1) / n
    };
    let over = |g: usize, inside: bool| {
        checker
            .over
            .iter()
            .filter(move |o| o.group == g && in_period(g, o.at_ms) == inside)
    };
    row("most admitted in any window", &|g, _| {
        format!("{} (limit {})", checker.most[g], a.limit)
    });
    row("windows over the limit outside fault periods", &|g, _| {
        over(g, false).count().to_string()
    });
    row(
        "windows over the limit inside fault periods (worst)",
        &|g, _| {
            format!(
                "{} ({})",
                over(g, true).count(),
                over(g, true).map(|o| o.sum).max().unwrap_or(0)
            )
        },
    );
    row("bound inside fault periods: limit*(2-1/n)", &|g, _| {
        bound(g).to_string()
    });
    let local_max = |g: usize| {
        samples
            .iter()
            .map(|s| s.groups[g].local_keys)
            .max()
            .unwrap_or(0)
    };
    row("local-record keys, most (bound)", &|g, _| {
        format!("{} ({})", local_max(g), a.local_max_keys)
    });
    // Redis is measured outside fault periods only: a restart empties it, and during a Sentinel
    // failover the server the sampler asks is not yet (or no longer) the one written to.
    let calm = |g: usize, s: &Sample| {
        let t = start_ms + (s.secs * 1000.0) as u64;
        !periods
            .iter()
            .any(|p| p.group == g && t + SLACK_MS > p.from_ms && t < p.to_ms + SLACK_MS)
    };
    let mem = |g: usize| thirds(samples, |s| s.groups[g].redis_memory.filter(|_| calm(g, s)));
    let keys = |g: usize| thirds(samples, |s| s.groups[g].redis_keys.filter(|_| calm(g, s)));
    row(
        "Redis used_memory median outside faults, first/last third (KB)",
        &|g, _| {
            let ((f, l), _) = mem(g);
            format!("{} / {}", f / 1024, l / 1024)
        },
    );
    row(
        "Redis DBSIZE median outside faults, first/last third",
        &|g, _| {
            let ((f, l), _) = keys(g);
            format!("{f} / {l}")
        },
    );
    let ((rss_f, rss_l), _) = thirds(samples, |s| Some(s.rss_kb));
    let (_, (fd_f, fd_l)) = thirds(samples, |s| Some(s.fds));
    println!(
        "| process RSS median, first/last third (MB) | {:.1} / {:.1} | |",
        rss_f as f64 / 1024.0,
        rss_l as f64 / 1024.0
    );
    println!("| process open fds most, first/last third | {fd_f} / {fd_l} | |");
    println!(
        "| windows checked (late decisions) | {} ({}) | |",
        checker.windows, checker.late
    );
    println!("| local spells outside injected faults | {spells} | |");
    println!();
    let list: Vec<String> = faults
        .iter()
        .map(|f| {
            format!(
                "{} {:.1}/{:.1}/{:.1}s",
                f.kind,
                f.start_ms.saturating_sub(start_ms) as f64 / 1000.0,
                f.done_ms.saturating_sub(start_ms) as f64 / 1000.0,
                f.end_ms.saturating_sub(start_ms) as f64 / 1000.0
            )
        })
        .collect();
    println!(
        "faults (start/injection done/every limiter recovered): {}",
        list.join(", ")
    );
    println!();

    // Flat resources, after warm-up: the last third against the first.
    if rss_l > rss_f + rss_f / 5 + 10 * 1024 {
        failures.push(format!(
            "RSS grew: median {rss_f} kB in the first third, {rss_l} kB in the last"
        ));
    }
    if fd_l > fd_f + 8 {
        failures.push(format!(
            "open fds grew: {fd_f} in the first third, {fd_l} in the last"
        ));
    }
    for (g, name) in GROUP_NAMES.iter().enumerate() {
        // (0: no sample of that third was outside a fault period; nothing to compare.)
        let ((f, l), _) = mem(g);
        if f > 0 && l > f + f * 3 / 10 + 1024 * 1024 {
            failures.push(format!("{}: Redis used_memory grew: {f} -> {l}", name));
        }
        let ((f, l), _) = keys(g);
        if f > 0 && l > f + f * 3 / 10 + 100 {
            failures.push(format!("{}: Redis DBSIZE grew: {f} -> {l}", name));
        }
        if local_max(g) > a.local_max_keys as u64 {
            failures.push(format!(
                "{}: local record held {} keys, bound {}",
                name,
                local_max(g),
                a.local_max_keys
            ));
        }
        // Exactness: the limit outside fault periods, the documented bound inside them.
        if let Some(o) = over(g, false).next() {
            failures.push(format!(
                "{}: {} windows over the limit outside any fault period, e.g. key soak:{} held {} \
                 in the window ending {} ms into the run",
                name,
                over(g, false).count(),
                o.key,
                o.sum,
                o.at_ms.saturating_sub(start_ms)
            ));
        }
        if let Some(o) = over(g, true).find(|o| o.sum > bound(g)) {
            failures.push(format!(
                "{}: a window inside a fault period over limit*(2-1/n) = {}: key soak:{} held {} \
                 in the window ending {} ms into the run",
                name,
                bound(g),
                o.key,
                o.sum,
                o.at_ms.saturating_sub(start_ms)
            ));
        }
        if last.groups[g].normal == 0 || checker.most[g] < a.limit {
            failures.push(format!(
                "{}: the load never reached the limit (most {})",
                name, checker.most[g]
            ));
        }
    }
    for f in faults.iter().filter(|f| !f.recovered) {
        failures.push(format!(
            "not every limiter was normal again 30 s after {f:?}"
        ));
    }
    for k in KINDS {
        if !faults.iter().any(|f| f.kind == k) {
            failures.push(format!(
                "no {k} fault ran (run longer or lower --fault-every)"
            ));
        }
    }
    if failures.is_empty() {
        println!("soak passed: resources flat, every window exact outside fault periods and within the bound inside them");
        Ok(())
    } else {
        for f in &failures {
            println!("FAIL: {f}");
        }
        Err(failures.join("; "))
    }
}
