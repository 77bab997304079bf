//! The soak's picture: decisions/s by mode, the slowest p99 round trip, and cumulative
//! transitions to `local`, over time, with each fault's period shaded and lettered.

use super::faults::Fault;
use super::png::Canvas;
use super::sample::Sample;

const W: usize = 1400;
const PANEL_H: i64 = 250;
const LEFT: i64 = 90;
const TOP: i64 = 60;
const GAP: i64 = 60;

/// One series: colour, legend, value per sample.
type Series = (u8, String, Vec<f64>);

pub fn draw(samples: &[Sample], faults: &[Fault], start_ms: u64, title: &str) -> Vec<u8> {
    let h = (TOP + 3 * (PANEL_H + GAP) + 20) as usize;
    let mut c = Canvas::new(W, h);
    c.text(LEFT, 8, title, 1);
    c.text(LEFT, 26, LEGEND, 1);
    let t_end = samples.last().map_or(1.0, |s| s.secs).max(1.0);
    let rate = |f: fn(&super::sample::GroupSample) -> u64| -> Vec<f64> {
        let mut prev = 0u64;
        samples
            .iter()
            .map(|s| {
                let total: u64 = s.groups.iter().map(f).sum();
                let r = total.saturating_sub(prev) as f64;
                prev = total;
                r
            })
            .collect()
    };
    let modes: Vec<Series> = vec![
        (3, "NORMAL".into(), rate(|g| g.normal)),
        (4, "LOCAL".into(), rate(|g| g.local)),
        (5, "LEASE".into(), rate(|g| g.lease)),
        (6, "ERRORS".into(), rate(|g| g.errors)),
    ];
    let per_group = |f: fn(&super::sample::GroupSample) -> f64, name: &str| -> Vec<Series> {
        (0..samples.first().map_or(0, |s| s.groups.len()))
            .map(|g| {
                (
                    [3u8, 7][g % 2],
                    format!("{name} {}", ["STANDALONE", "SENTINEL"][g % 2]),
                    samples.iter().map(|s| f(&s.groups[g])).collect(),
                )
            })
            .collect()
    };
    let rtt = per_group(|g| g.rtt_p99_us as f64 / 1000.0, "P99 RTT MS");
    let trans = per_group(|g| g.to_local as f64, "TO LOCAL");
    let panels = [
        ("DECISIONS/S BY MODE (ALL LIMITERS)", modes),
        ("SLOWEST LIMITER P99 REDIS ROUND TRIP (MS)", rtt),
        ("TRANSITIONS TO LOCAL (CUMULATIVE)", trans),
    ];
    for (i, (name, series)) in panels.iter().enumerate() {
        let top = TOP + i as i64 * (PANEL_H + GAP) + 20;
        panel(&mut c, top, name, series, samples, faults, start_ms, t_end);
    }
    c.png()
}

/// The letter a fault's shading carries (the legend is in the title).
fn letter(kind: &str) -> &'static str {
    match kind {
        "latency" => "L",
        "blackhole" => "B",
        "reset" => "X",
        "restart" => "R",
        _ => "F",
    }
}

/// What the letters mean, for the title.
pub const LEGEND: &str =
    "SHADED: FAULT TO ALL RECOVERED; L LATENCY, B BLACKHOLE, X RESET_PEER, R RESTART, F FAILOVER";

#[allow(clippy::too_many_arguments)]
fn panel(
    c: &mut Canvas,
    top: i64,
    name: &str,
    series: &[Series],
    samples: &[Sample],
    faults: &[Fault],
    start_ms: u64,
    t_end: f64,
) {
    let right = W as i64 - 50;
    let bottom = top + PANEL_H;
    let x_of = |t: f64| LEFT + ((t / t_end) * (right - LEFT) as f64) as i64;
    for f in faults {
        let (a, b) = (
            f.start_ms.saturating_sub(start_ms) as f64 / 1000.0,
            f.end_ms.saturating_sub(start_ms) as f64 / 1000.0,
        );
        c.rect(x_of(a), top, x_of(b).max(x_of(a) + 1), bottom, 2);
        c.text(x_of(a), top + 2, letter(f.kind), 1);
    }
    let y_max = series
        .iter()
        .flat_map(|s| s.2.iter().copied())
        .fold(1.0f64, f64::max)
        * 1.1;
    for k in 0..=4 {
        let y = bottom - (PANEL_H * k) / 4;
        for x in (LEFT..right).step_by(6) {
            c.set(x, y, 8);
        }
        c.text(4, y - 7, &format!("{:.0}", y_max * k as f64 / 4.0), 1);
    }
    let ticks = 8;
    for k in 0..=ticks {
        let t = t_end * k as f64 / ticks as f64;
        c.rect(x_of(t), bottom, x_of(t), bottom + 4, 1);
        c.text(x_of(t) - 12, bottom + 8, &format!("{:.0}S", t), 1);
    }
    c.rect(LEFT, top, LEFT, bottom, 1);
    c.rect(LEFT, bottom, right, bottom, 1);
    c.text(LEFT + 4, top - 18, name, 1);
    let mut lx = LEFT + 12 + name.len() as i64 * 12 + 30;
    for (colour, legend, values) in series {
        c.rect(lx, top - 14, lx + 16, top - 8, *colour);
        c.text(lx + 22, top - 18, legend, 1);
        lx += 22 + legend.len() as i64 * 12 + 24;
        let y_of = |v: f64| bottom - ((v / y_max) * PANEL_H as f64) as i64;
        let points: Vec<(i64, i64)> = samples
            .iter()
            .zip(values)
            .map(|(s, v)| (x_of(s.secs), y_of(*v)))
            .collect();
        for w in points.windows(2) {
            c.line(w[0], w[1], *colour);
        }
    }
}
