//! The soak's picture: decisions/s by mode, the slowest p99 round trip, and cumulative
//! transitions to `local`, over time, with each fault's period shaded and lettered. Drawn with
//! plotters into an RGB buffer and encoded as PNG; the text is DejaVu Sans, read at run time.

use std::sync::OnceLock;

use image::ImageEncoder as _;
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::{register_font, FontStyle};

use super::faults::Fault;
use super::sample::{GroupSample, Sample};

const W: u32 = 1400;
const HEADER_H: u32 = 70;
const PANEL_H: u32 = 310;
const H: u32 = HEADER_H + 3 * PANEL_H;
/// The right margin of each panel, where its legend is.
const LEGEND_W: i32 = 140;

/// The font every text is drawn in, and the Debian package it comes from.
pub const FONT_PATH: &str = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf";
pub const FONT_PACKAGE: &str = "fonts-dejavu-core";
const FAMILY: &str = "sans-serif";

/// A fault's period; not a colour any line, grid or text is drawn in.
pub const SHADE: RGBColor = RGBColor(222, 222, 238);
const COLOURS: [RGBColor; 5] = [
    RGBColor(31, 119, 180),  // blue
    RGBColor(255, 127, 14),  // orange
    RGBColor(44, 160, 44),   // green
    RGBColor(214, 39, 40),   // red
    RGBColor(148, 103, 189), // purple
];

/// One series: colour, legend, value per sample.
type Series = (RGBColor, String, Vec<f64>);

/// The PNG of the run, or why it could not be drawn (the font file missing, for one).
pub fn draw(
    samples: &[Sample],
    faults: &[Fault],
    start_ms: u64,
    title: &str,
) -> Result<Vec<u8>, String> {
    register(FONT_PATH)?;
    let mut rgb = vec![0u8; (W * H * 3) as usize];
    render(&mut rgb, samples, faults, start_ms, title)
        .map_err(|e| format!("drawing the plot: {e}"))?;
    let mut png = Vec::new();
    image::codecs::png::PngEncoder::new(&mut png)
        .write_image(&rgb, W, H, image::ColorType::Rgb8)
        .map_err(|e| format!("encoding the plot as PNG: {e}"))?;
    Ok(png)
}

/// Reads the font once and registers it with plotters for the rest of the process.
fn register(path: &str) -> Result<(), String> {
    static DONE: OnceLock<Result<(), String>> = OnceLock::new();
    DONE.get_or_init(|| {
        let bytes: &'static [u8] = Box::leak(load_font(path)?.into_boxed_slice());
        register_font(FAMILY, FontStyle::Normal, bytes)
            .map_err(|_| format!("{path} is not a font plotters can read"))
    })
    .clone()
}

fn load_font(path: &str) -> Result<Vec<u8>, String> {
    std::fs::read(path).map_err(|e| {
        format!(
            "the plot's font {path} cannot be read ({e}); install Debian's package \
             {FONT_PACKAGE} (scripts/ensure-deps.sh does)"
        )
    })
}

type DrawResult = Result<(), Box<dyn std::error::Error>>;

fn render(
    rgb: &mut [u8],
    samples: &[Sample],
    faults: &[Fault],
    start_ms: u64,
    title: &str,
) -> DrawResult {
    let root = BitMapBackend::with_buffer(rgb, (W, H)).into_drawing_area();
    root.fill(&WHITE)?;
    let (header, body) = root.split_vertically(HEADER_H);
    header.draw(&Text::new(title, (90, 10), (FAMILY, 26).into_font()))?;
    header.draw(&Text::new(LEGEND, (90, 44), (FAMILY, 16).into_font()))?;

    let t_end = samples.last().map_or(1.0, |s| s.secs).max(1.0);
    let rate = |f: fn(&GroupSample) -> u64| -> Vec<f64> {
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
        (COLOURS[0], "normal".into(), rate(|g| g.normal)),
        (COLOURS[1], "local".into(), rate(|g| g.local)),
        (COLOURS[2], "lease".into(), rate(|g| g.lease)),
        (COLOURS[3], "errors".into(), rate(|g| g.errors)),
    ];
    let per_group = |f: fn(&GroupSample) -> f64| -> Vec<Series> {
        (0..samples.first().map_or(0, |s| s.groups.len()))
            .map(|g| {
                (
                    [COLOURS[0], COLOURS[4]][g % 2],
                    ["standalone", "sentinel"][g % 2].to_string(),
                    samples.iter().map(|s| f(&s.groups[g])).collect(),
                )
            })
            .collect()
    };
    let rtt = per_group(|g| g.rtt_p99_us as f64 / 1000.0);
    let trans = per_group(|g| g.to_local as f64);
    let panels = [
        ("Decisions/s by mode (all limiters)", "decisions/s", modes),
        (
            "Slowest limiter's p99 Redis round trip",
            "p99 RTT (ms)",
            rtt,
        ),
        ("Transitions to local (cumulative)", "transitions", trans),
    ];
    for (area, (name, y_desc, series)) in body.split_evenly((3, 1)).iter().zip(&panels) {
        panel(area, name, y_desc, series, samples, faults, start_ms, t_end)?;
    }
    root.present()?;
    Ok(())
}

/// The letter a fault's shading carries (the legend is under the title).
fn letter(kind: &str) -> &'static str {
    match kind {
        "latency" => "L",
        "blackhole" => "B",
        "reset" => "X",
        "restart" => "R",
        _ => "F",
    }
}

/// What the letters mean, under the title.
pub const LEGEND: &str = "Shaded: from a fault until every limiter recovered.   \
     L latency,  B blackhole,  X reset_peer,  R restart,  F failover";

#[allow(clippy::too_many_arguments)]
fn panel(
    area: &DrawingArea<BitMapBackend<'_>, Shift>,
    name: &str,
    y_desc: &str,
    series: &[Series],
    samples: &[Sample],
    faults: &[Fault],
    start_ms: u64,
    t_end: f64,
) -> DrawResult {
    let y_max = series
        .iter()
        .flat_map(|s| s.2.iter().copied())
        .fold(1.0f64, f64::max)
        * 1.1;
    let mut chart = ChartBuilder::on(area)
        .caption(name, (FAMILY, 20))
        .margin_left(10)
        .margin_right(LEGEND_W as u32)
        .margin_bottom(6)
        .x_label_area_size(42)
        .y_label_area_size(80)
        .build_cartesian_2d(0f64..t_end, 0f64..y_max)?;
    let y_label = |v: &f64| {
        if y_max >= 10.0 {
            format!("{v:.0}")
        } else {
            format!("{v:.1}")
        }
    };
    let secs = |ms: u64| ms.saturating_sub(start_ms) as f64 / 1000.0;
    chart.draw_series(faults.iter().map(|f| {
        let (a, b) = (secs(f.start_ms).min(t_end), secs(f.end_ms).min(t_end));
        Rectangle::new([(a, 0.0), (b.max(a), y_max)], SHADE.filled())
    }))?;
    chart
        .configure_mesh()
        .x_desc("time (s)")
        .y_desc(y_desc)
        .x_labels(16)
        .y_labels(6)
        .x_label_formatter(&|v| format!("{v:.0}"))
        .y_label_formatter(&y_label)
        .label_style((FAMILY, 14))
        .axis_desc_style((FAMILY, 15))
        .light_line_style(WHITE.mix(0.0))
        .bold_line_style(BLACK.mix(0.12))
        .draw()?;
    chart.draw_series(faults.iter().filter(|f| secs(f.start_ms) < t_end).map(|f| {
        EmptyElement::at((secs(f.start_ms), y_max))
            + Text::new(letter(f.kind), (2, 2), (FAMILY, 14).into_font())
    }))?;
    for (colour, _, values) in series {
        chart.draw_series(LineSeries::new(
            samples.iter().zip(values).map(|(s, v)| (s.secs, *v)),
            colour.stroke_width(2),
        ))?;
    }
    // The legend goes in the right margin, where it hides no line and no fault's letter.
    let x = W as i32 - LEGEND_W + 12;
    for (i, (colour, legend, _)) in series.iter().enumerate() {
        let y = 50 + 22 * i as i32;
        area.draw(&PathElement::new(
            [(x, y), (x + 22, y)],
            colour.stroke_width(3),
        ))?;
        area.draw(&Text::new(
            legend.as_str(),
            (x + 30, y - 8),
            (FAMILY, 15).into_font(),
        ))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(faults: &[Fault]) -> image::RgbImage {
        let samples: Vec<Sample> = (1..=40)
            .map(|i| Sample {
                secs: i as f64,
                groups: (0..2)
                    .map(|g| GroupSample {
                        normal: 500 * i,
                        local: 20 * i * g,
                        rtt_p99_us: 900 + 100 * g,
                        to_local: i / 10,
                        ..GroupSample::default()
                    })
                    .collect(),
                ..Sample::default()
            })
            .collect();
        let png = draw(&samples, faults, 1_000_000, "test").expect("the plot draws");
        assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
        let img = image::load_from_memory_with_format(&png, image::ImageFormat::Png)
            .expect("the PNG decodes")
            .to_rgb8();
        assert_eq!(img.dimensions(), (W, H));
        img
    }

    #[test]
    fn faults_are_shaded_where_the_plain_run_is_white() {
        // A fault from 10 s to 20 s of a 40 s run.
        let fault = Fault {
            group: 0,
            kind: "blackhole",
            start_ms: 1_010_000,
            done_ms: 1_012_000,
            end_ms: 1_020_000,
            recovered: true,
        };
        let shaded = run(&[fault]);
        let plain = run(&[]);
        let shade = image::Rgb([SHADE.0, SHADE.1, SHADE.2]);
        assert!(!plain.pixels().any(|p| *p == shade));
        let at: Vec<(u32, u32)> = shaded
            .enumerate_pixels()
            .filter(|(_, _, p)| **p == shade)
            .map(|(x, y, _)| (x, y))
            .collect();
        // In all three panels: a quarter of each plot's width (about 1250 px), most of its height.
        assert!(at.len() > 3 * 250 * 150, "{} shaded pixels", at.len());
        for &(x, y) in &at {
            assert_eq!(*plain.get_pixel(x, y), image::Rgb([255, 255, 255]));
        }
        let (min_x, max_x) = (
            at.iter().map(|p| p.0).min().unwrap(),
            at.iter().map(|p| p.0).max().unwrap(),
        );
        // 10 s..20 s of 0..40 s, in a plot area from about x = 90 to x = 1360.
        assert!((350..450).contains(&min_x), "{min_x}");
        assert!((650..750).contains(&max_x), "{max_x}");
        let panels_hit = (0..3)
            .filter(|k| {
                let top = HEADER_H + k * PANEL_H;
                at.iter().any(|p| (top..top + PANEL_H).contains(&p.1))
            })
            .count();
        assert_eq!(panels_hit, 3);
    }

    #[test]
    fn a_missing_font_names_the_file_and_the_package() {
        let e = load_font("/nonexistent/DejaVuSans.ttf").unwrap_err();
        assert!(e.contains("/nonexistent/DejaVuSans.ttf"), "{e}");
        assert!(e.contains(FONT_PACKAGE), "{e}");
    }
}
