//! Latency CDFs as SVG: one curve per row on a log scale, with marked quantiles; and the colour
//! each row is drawn in. A leaf: the report's plots (`plots.rs`) and the sections that draw
//! their own (contended, network) use it, and it knows nothing of them.

use std::path::Path;

use plotters::prelude::*;

use super::stats::Row;
use crate::svg::{draw_err, finish};
use crate::units::fmt_us;

/// Distinct series colours (Tableau 10): as many as the one-task plot has rows.
pub(super) fn color(index: usize) -> RGBAColor {
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

pub(super) fn plot_cdf(path: &Path, title: &str, rows: &[&Row]) -> Result<(), String> {
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
