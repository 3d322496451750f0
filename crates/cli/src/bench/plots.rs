//! The SVG plots of `--plots`: latency CDFs per scenario and throughput bars.

use std::path::Path;

use plotters::prelude::*;

use super::cdf::{color, plot_cdf};
use super::report::Report;
use super::stats::Row;
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
