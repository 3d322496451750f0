//! The SVG plots of `--plots`: latency CDFs per scenario and throughput bars.

use std::path::Path;

use plotters::prelude::*;

use super::report::Report;
use super::stats::Row;
use super::table::fmt_us;
use crate::svg::{draw_err, finish};

pub(super) fn write_plots(dir: &Path, report: &Report) -> Result<Vec<String>, String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
    let mut written = Vec::new();
    let groups: [(&str, &str, &[&str]); 7] = [
        ("cdf-cycle.svg", "acquire+release, 1 task", &["cycle/"]),
        (
            "cdf-throughput-16.svg",
            "acquire+release, 16 tasks",
            &["tp16/"],
        ),
        (
            "cdf-throughput-64.svg",
            "acquire+release, 64 tasks",
            &["tp64/"],
        ),
        (
            "cdf-handoff.svg",
            "hand-off: release → next holder's acquire",
            &["handoff/"],
        ),
        (
            "cdf-faults-acquire.svg",
            "acquire, 5 proxied nodes: healthy, slow, hung",
            &["fault-acq/"],
        ),
        (
            "cdf-faults-release.svg",
            "release, 5 proxied nodes: healthy, slow, hung",
            &["fault-rel/"],
        ),
        (
            "cdf-network.svg",
            "acquire+release, every node behind a proxy adding 1 ms each way",
            &["net/"],
        ),
    ];
    for (file, title, prefixes) in groups {
        let rows: Vec<&Row> = report
            .rows
            .iter()
            .filter(|r| prefixes.iter().any(|p| r.id.starts_with(p)) && r.samples > 0)
            .collect();
        if rows.is_empty() {
            continue;
        }
        let path = dir.join(file);
        plot_cdf(&path, title, &rows)?;
        written.push(file.to_owned());
    }
    let path = dir.join("throughput.svg");
    if plot_throughput(&path, report)? {
        written.push("throughput.svg".to_owned());
    }
    Ok(written)
}

/// Distinct series colours (Tableau 10): as many as the one-task plot has rows.
fn color(index: usize) -> RGBAColor {
    const TABLEAU10: [(u8, u8, u8); 10] = [
        (31, 119, 180),
        (255, 127, 14),
        (44, 160, 44),
        (214, 39, 40),
        (148, 103, 189),
        (140, 86, 75),
        (227, 119, 194),
        (127, 127, 127),
        (188, 189, 34),
        (23, 190, 207),
    ];
    let (r, g, b) = TABLEAU10[index % TABLEAU10.len()];
    RGBColor(r, g, b).to_rgba()
}

fn plot_cdf(path: &Path, title: &str, rows: &[&Row]) -> Result<(), String> {
    plot_cdf_marked(path, title, rows, &[])
}

/// Tick marks for a log axis over `lo..hi`: 1, 2 and 5 in each decade, or every digit where
/// that leaves fewer than four (a range within one decade, as at the network's limit, would
/// otherwise get no label at all).
fn log_ticks(lo: f64, hi: f64) -> Vec<f64> {
    let in_range = |steps: &[f64]| -> Vec<f64> {
        let mut ticks = Vec::new();
        let mut decade = 10f64.powi(lo.log10().floor() as i32);
        // Bounded: at most 12 decades (1 µs to 10 min and then some).
        for _ in 0..12 {
            if decade > hi {
                break;
            }
            ticks.extend(
                steps
                    .iter()
                    .map(|s| s * decade)
                    .filter(|t| (lo..=hi).contains(t)),
            );
            decade *= 10.0;
        }
        ticks
    };
    let coarse = in_range(&[1.0, 2.0, 5.0]);
    if coarse.len() >= 4 {
        coarse
    } else {
        in_range(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0])
    }
}

/// A dashed vertical line on a CDF plot, in the colour of one of its rows.
pub(super) struct Mark {
    /// Where, in µs.
    pub(super) x_us: f64,
    /// The index of the row whose colour it takes.
    pub(super) row: usize,
    /// Its legend entry.
    pub(super) label: String,
}

/// The CDFs of `rows`, and a vertical line at each of `marks`.
pub(super) fn plot_cdf_marked(
    path: &Path,
    title: &str,
    rows: &[&Row],
    marks: &[Mark],
) -> Result<(), String> {
    let err = draw_err(path);
    let root = SVGBackend::new(path, (960, 560)).into_drawing_area();
    root.fill(&WHITE).map_err(&err)?;
    let lo = rows
        .iter()
        .filter_map(|r| r.cdf.first().map(|p| p[0]))
        .fold(f64::INFINITY, f64::min)
        .max(1.0);
    let hi = rows
        .iter()
        .filter_map(|r| r.cdf.last().map(|p| p[0]))
        .fold(lo * 2.0, f64::max);
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 22))
        .margin(16)
        .x_label_area_size(48)
        .y_label_area_size(64)
        .build_cartesian_2d(
            (lo * 0.8..hi * 1.25)
                .log_scale()
                .with_key_points(log_ticks(lo * 0.8, hi * 1.25)),
            0.0..1.0,
        )
        .map_err(&err)?;
    chart
        .configure_mesh()
        .x_desc("latency, µs (log scale)")
        .y_desc("fraction of operations ≤ latency")
        .x_label_formatter(&|v| format!("{v:.0}"))
        .draw()
        .map_err(&err)?;
    for (i, row) in rows.iter().enumerate() {
        let color = color(i);
        let label = format!(
            "{} (p50 {}, p99 {})",
            row.lock,
            fmt_us(row.p50_us),
            fmt_us(row.p99_us)
        );
        chart
            .draw_series(LineSeries::new(
                row.cdf.iter().map(|p| (p[0].max(lo), p[1])),
                color.stroke_width(2),
            ))
            .map_err(&err)?
            .label(label)
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2))
            });
    }
    for mark in marks {
        let (x, style) = (mark.x_us.max(lo), color(mark.row).stroke_width(1));
        chart
            .draw_series(DashedLineSeries::new([(x, 0.0), (x, 1.0)], 6, 4, style))
            .map_err(&err)?
            .label(mark.label.clone())
            .legend(move |(x, y)| {
                plotters::element::DashedPathElement::new(vec![(x, y), (x + 20, y)], 4, 3, style)
            });
    }
    finish(&mut chart, &root, SeriesLabelPosition::LowerRight, path)?;
    Ok(())
}

fn plot_throughput(path: &Path, report: &Report) -> Result<bool, String> {
    let tasks = &report.plan.tasks;
    let bars: Vec<(usize, Vec<&Row>)> = tasks
        .iter()
        .map(|t| {
            let prefix = format!("tp{t}/");
            (
                *t,
                report
                    .rows
                    .iter()
                    .filter(|r| r.id.starts_with(&prefix))
                    .collect(),
            )
        })
        .collect();
    let top = bars
        .iter()
        .flat_map(|(_, rows)| rows.iter().map(|r| r.ops_per_s))
        .fold(0.0, f64::max);
    if top <= 0.0 {
        return Ok(false);
    }
    let err = draw_err(path);
    let root = SVGBackend::new(path, (960, 560)).into_drawing_area();
    root.fill(&WHITE).map_err(&err)?;
    let groups = tasks.len() as f64;
    let mut chart = ChartBuilder::on(&root)
        .caption(
            "throughput: acquire+release cycles per second, distinct keys",
            ("sans-serif", 22),
        )
        .margin(16)
        .x_label_area_size(48)
        .y_label_area_size(72)
        .build_cartesian_2d(-0.5..groups - 0.5, 0.0..top * 1.2)
        .map_err(&err)?;
    let labels: Vec<usize> = tasks.clone();
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(2 * tasks.len() + 1)
        .x_label_formatter(&|x| {
            let r = x.round();
            if (x - r).abs() < 1e-6 && r >= 0.0 {
                labels.get(r as usize).map_or_else(String::new, |t| {
                    format!("{t} task{}", if *t == 1 { "" } else { "s" })
                })
            } else {
                String::new()
            }
        })
        .y_desc("cycles / s")
        .y_label_formatter(&|v| format!("{v:.0}"))
        .draw()
        .map_err(&err)?;
    let width = 0.8 / 2.0;
    let mut legend_done = [false, false];
    for (g, (_, rows)) in bars.iter().enumerate() {
        for (b, row) in rows.iter().enumerate() {
            let x0 = g as f64 - 0.4 + b as f64 * width;
            let color = color(b);
            let series = chart
                .draw_series(std::iter::once(Rectangle::new(
                    [(x0 + 0.02, 0.0), (x0 + width - 0.02, row.ops_per_s)],
                    color.filled(),
                )))
                .map_err(&err)?;
            if let Some(done) = legend_done.get_mut(b)
                && !*done
            {
                *done = true;
                series.label(row.lock.clone()).legend(move |(x, y)| {
                    Rectangle::new([(x, y - 6), (x + 14, y + 6)], color.filled())
                });
            }
            let text = match row.vs_single {
                Some(r) if row.lock != "single" => {
                    format!("{:.0}/s ({:.2}×)", row.ops_per_s, r.ops_per_s)
                }
                _ => format!("{:.0}/s", row.ops_per_s),
            };
            chart
                .draw_series(std::iter::once(Text::new(
                    text,
                    (x0 + 0.03, row.ops_per_s + top * 0.04),
                    ("sans-serif", 14),
                )))
                .map_err(&err)?;
        }
    }
    finish(&mut chart, &root, SeriesLabelPosition::UpperLeft, path)?;
    Ok(true)
}
