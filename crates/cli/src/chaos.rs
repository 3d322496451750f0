//! `quorumlock chaos`: run the chaos scenarios, check each history for mutual-exclusion
//! violations and stale writes, print a table, and optionally write JSON and SVG timelines.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use clap::{Args, ValueEnum};
use indicatif::{ProgressBar, ProgressStyle};
use plotters::prelude::*;
use quorumlock_chaos::history::Hold;
use quorumlock_chaos::{ExpectedVsObserved, RunOptions, Scenario, ScenarioReport, run};
use quorumlock_harness::{Backend, ClusterOptions};

/// Arguments of `quorumlock chaos`.
#[derive(Args, Debug)]
pub struct ChaosArgs {
    /// A scenario name, several separated by commas, or `all`. Scenarios: baseline, minority-crash, minority-freeze,
    /// minority-latency, majority-latency, partition-minority, partition-majority,
    /// restart-no-persistence, restart-delayed, restart-aof, clock-fast, client-stall.
    #[arg(long, default_value = "all")]
    scenario: String,
    /// How long each scenario runs, e.g. `10s`, `1500ms`, `2m`.
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    duration: Duration,
    /// Where local nodes run (default: $QUORUMLOCK_BACKEND, else `process`).
    #[arg(long, value_enum)]
    backend: Option<BackendArg>,
    /// Comma-separated URLs of your own Redis masters. Then only the scenarios that need no
    /// control over the nodes run (baseline, client-stall).
    #[arg(long, value_delimiter = ',')]
    nodes: Vec<String>,
    /// Write every report, with its full history, as JSON to this file.
    #[arg(long)]
    json: Option<PathBuf>,
    /// Write an SVG timeline per scenario into this directory.
    #[arg(long)]
    plots: Option<PathBuf>,
    /// Lock TTL in milliseconds (short, so that expiry matters).
    #[arg(long, default_value_t = 400)]
    ttl_ms: u64,
    /// Contending client tasks.
    #[arg(long, default_value_t = 12)]
    clients: usize,
    /// Resources they contend for.
    #[arg(long, default_value_t = 3)]
    resources: usize,
}

/// Where the local test nodes run.
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
enum BackendArg {
    /// `redis-server` processes on this machine.
    Process,
    /// Docker containers (needs the `docker` cargo feature and a local image, see
    /// `scripts/redis-image.sh`).
    Docker,
}

/// Parses `10s`, `1500ms`, `2m`, or a plain number of seconds.
fn parse_duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let (number, unit) = match text.find(|c: char| !(c.is_ascii_digit() || c == '.')) {
        Some(at) => text.split_at(at),
        None => (text, "s"),
    };
    let value: f64 = number
        .parse()
        .map_err(|_| format!("invalid duration {text:?} (try 10s, 1500ms, 2m)"))?;
    let seconds = match unit.trim() {
        "ms" => value / 1000.0,
        "s" => value,
        "m" => value * 60.0,
        other => return Err(format!("unknown unit {other:?} in {text:?} (ms, s, m)")),
    };
    Duration::try_from_secs_f64(seconds).map_err(|e| format!("invalid duration {text:?}: {e}"))
}

/// The backend from `--backend`, else from `QUORUMLOCK_BACKEND`, else processes.
fn backend(arg: Option<BackendArg>) -> Result<Backend, String> {
    match arg {
        Some(BackendArg::Process) => Ok(Backend::Process),
        Some(BackendArg::Docker) => Ok(Backend::Docker),
        None => Backend::from_env().map_err(|e| e.to_string()),
    }
}

/// Runs the chosen scenarios; fails when a scenario expected safe showed a violation.
pub async fn run_chaos(args: ChaosArgs) -> Result<(), String> {
    let mut scenarios: Vec<Scenario> = if args.scenario == "all" {
        Scenario::ALL.to_vec()
    } else {
        args.scenario
            .split(',')
            .map(|name| name.trim().parse().map_err(|e| format!("{e}")))
            .collect::<Result<_, String>>()?
    };
    let mut options = RunOptions::new()
        .duration(args.duration)
        .ttl(Duration::from_millis(args.ttl_ms))
        .clients(args.clients)
        .resources(args.resources);
    if args.nodes.is_empty() {
        options = options.cluster(ClusterOptions::default().backend(backend(args.backend)?));
    } else {
        let (runnable, skipped): (Vec<_>, Vec<_>) = scenarios
            .iter()
            .partition(|scenario| !scenario.needs_node_control());
        if !skipped.is_empty() {
            eprintln!(
                "--nodes given: skipping {} (they kill, pause, isolate or skew nodes, which \
                 needs a cluster this tool starts itself); running {}",
                names(&skipped),
                if runnable.is_empty() {
                    "nothing".to_owned()
                } else {
                    names(&runnable)
                }
            );
        }
        if runnable.is_empty() {
            return Err("no scenario left to run against --nodes".into());
        }
        scenarios = runnable.into_iter().copied().collect();
        options = options.nodes(args.nodes.clone());
    }
    if let Some(dir) = &args.plots {
        std::fs::create_dir_all(dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
    }

    let progress = progress_bar(scenarios.len(), args.duration);
    let mut reports = Vec::new();
    let mut errors = Vec::new();
    for (index, &scenario) in scenarios.iter().enumerate() {
        progress.set_message(format!("{scenario} ({}/{})", index + 1, scenarios.len()));
        let base = progress_ms(args.duration) * index as u64;
        let started = Instant::now();
        let running = run(scenario, &options);
        tokio::pin!(running);
        let mut tick = tokio::time::interval(Duration::from_millis(100));
        let mut interrupted = std::pin::pin!(tokio::signal::ctrl_c());
        let result = loop {
            tokio::select! {
                result = &mut running => break result,
                _ = &mut interrupted => {
                    // Returning drops the running scenario, which stops every node, proxy and
                    // client it started.
                    progress.finish_and_clear();
                    return Err(format!("interrupted during {scenario}"));
                }
                _ = tick.tick() => {
                    let done = progress_ms(started.elapsed().min(args.duration));
                    progress.set_position(base + done);
                }
            }
        };
        progress.set_position(base + progress_ms(args.duration));
        match result {
            Ok(report) => {
                if let Some(dir) = &args.plots {
                    let path = dir.join(format!("{scenario}.svg"));
                    if let Err(e) = plot(&report, &path) {
                        progress.suspend(|| eprintln!("plot {}: {e}", path.display()));
                    }
                }
                reports.push(report);
            }
            Err(e) => {
                progress.suspend(|| eprintln!("{scenario}: {e}"));
                errors.push((scenario, e.to_string()));
            }
        }
    }
    progress.finish_and_clear();

    print!("{}", table(&reports));
    for report in &reports {
        for note in &report.notes {
            println!("note ({}): {note}", report.scenario);
        }
    }
    if let Some(path) = &args.json {
        write_json(path, &reports, &errors)?;
        println!("JSON written to {}", path.display());
    }
    if let Some(dir) = &args.plots {
        println!("timelines written to {}/<scenario>.svg", dir.display());
    }
    summarize(&reports, &errors)
}

fn names(scenarios: &[&Scenario]) -> String {
    scenarios
        .iter()
        .map(|s| s.name())
        .collect::<Vec<_>>()
        .join(", ")
}

fn progress_ms(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

fn progress_bar(scenarios: usize, duration: Duration) -> ProgressBar {
    let bar = ProgressBar::new(progress_ms(duration) * scenarios as u64);
    let style = ProgressStyle::with_template("[{elapsed_precise}] {bar:30} {wide_msg}")
        .unwrap_or_else(|_| ProgressStyle::default_bar());
    bar.set_style(style);
    bar
}

/// The verdict line per scenario, and the overall result.
fn summarize(reports: &[ScenarioReport], errors: &[(Scenario, String)]) -> Result<(), String> {
    let mut failed = Vec::new();
    for report in reports {
        match report.expected_vs_observed() {
            ExpectedVsObserved::AsExpected => {}
            ExpectedVsObserved::UnexpectedViolation => {
                println!(
                    "FAIL {}: expected safe, but {} violation(s) and {} stale write(s)",
                    report.scenario,
                    report.check.violations.len(),
                    report.check.stale_writes.len()
                );
                failed.push(report.scenario.name());
            }
            ExpectedVsObserved::NotDemonstrated => println!(
                "self-check: {} is known to be unsafe, but this run showed no violation and no \
                 stale write (run it longer to demonstrate the hazard{})",
                report.scenario,
                if report.scenario == Scenario::RestartNoPersistence {
                    "; the TTL must exceed a node's restart time, e.g. --ttl-ms 2000 on docker"
                } else {
                    ""
                }
            ),
            _ => {}
        }
    }
    for (scenario, error) in errors {
        println!("ERROR {scenario}: {error}");
    }
    if !failed.is_empty() {
        return Err(format!(
            "mutual exclusion violated in scenario(s) expected safe: {}",
            failed.join(", ")
        ));
    }
    if !errors.is_empty() {
        return Err(format!("{} scenario(s) could not run", errors.len()));
    }
    Ok(())
}

fn ms(us: u64) -> String {
    format!("{:.1}", us as f64 / 1000.0)
}

/// The results table, one row per scenario.
fn table(reports: &[ScenarioReport]) -> String {
    let header = [
        "scenario",
        "expected",
        "verdict",
        "violations",
        "stale writes",
        "acq/s",
        "held",
        "unavail",
        "expired",
        "other",
        "p50 ms",
        "p99 ms",
    ];
    let mut rows = vec![header.map(String::from).to_vec()];
    for report in reports {
        let check = &report.check;
        let failures = check.availability.failures;
        let observed = match (report.expected_vs_observed(), check.is_safe()) {
            (ExpectedVsObserved::UnexpectedViolation, _) => "VIOLATED",
            (ExpectedVsObserved::NotDemonstrated, _) => "not shown",
            (_, true) => "safe",
            (_, false) => "unsafe, shown",
        };
        rows.push(vec![
            report.scenario.name().to_owned(),
            if report.expected_safe {
                "safe"
            } else {
                "unsafe"
            }
            .to_owned(),
            observed.to_owned(),
            check.violations.len().to_string(),
            check.stale_writes.len().to_string(),
            format!("{:.1}", check.availability.acquired_per_sec),
            failures.held.to_string(),
            failures.unavailable.to_string(),
            failures.validity_expired.to_string(),
            failures.other.to_string(),
            ms(check.acquire_latency.p50_us),
            ms(check.acquire_latency.p99_us),
        ]);
    }
    let widths: Vec<usize> = (0..header.len())
        .map(|c| rows.iter().map(|r| r[c].len()).max().unwrap_or(0))
        .collect();
    let mut out = String::new();
    for (i, row) in rows.iter().enumerate() {
        let cells: Vec<String> = row
            .iter()
            .zip(&widths)
            .enumerate()
            .map(|(c, (cell, &w))| {
                if c < 3 {
                    format!("{cell:<w$}")
                } else {
                    format!("{cell:>w$}")
                }
            })
            .collect();
        let _ = writeln!(out, "{}", cells.join("  ").trim_end());
        if i == 0 {
            let total = widths.iter().sum::<usize>() + 2 * (widths.len() - 1);
            let _ = writeln!(out, "{}", "-".repeat(total));
        }
    }
    out
}

fn write_json(
    path: &Path,
    reports: &[ScenarioReport],
    errors: &[(Scenario, String)],
) -> Result<(), String> {
    let errors: BTreeMap<&str, &str> = errors
        .iter()
        .map(|(scenario, error)| (scenario.name(), error.as_str()))
        .collect();
    crate::json::write_json_file(
        path,
        &serde_json::json!({ "reports": reports, "errors": errors }),
    )
}

/// Lanes within each resource's band: overlapping holds go to different lanes, so a double
/// grant shows as two bars stacked.
fn lanes(holds: &[&Hold]) -> (Vec<usize>, usize) {
    let mut order: Vec<usize> = (0..holds.len()).collect();
    order.sort_by_key(|&i| holds[i].window());
    let mut lane_end: Vec<u64> = Vec::new();
    let mut lane_of = vec![0; holds.len()];
    for i in order {
        let (start, end) = holds[i].window();
        let lane = match lane_end.iter().position(|&e| e <= start) {
            Some(lane) => lane,
            None => {
                lane_end.push(0);
                lane_end.len() - 1
            }
        };
        lane_end[lane] = end.max(start);
        lane_of[i] = lane;
    }
    (lane_of, lane_end.len().max(1))
}

const FAULT_COLORS: [RGBColor; 4] = [
    RGBColor(255, 165, 0),
    RGBColor(128, 128, 128),
    RGBColor(148, 103, 189),
    RGBColor(44, 160, 44),
];

/// An SVG timeline: per resource, each hold as a bar over its window (red when it overlaps
/// another holder), stale writes as red crosses, fault windows shaded.
fn plot(report: &ScenarioReport, path: &Path) -> Result<(), String> {
    let err = |e: &dyn std::fmt::Display| format!("{e}");
    let history = &report.history;
    let mut by_resource: BTreeMap<&str, Vec<&Hold>> = BTreeMap::new();
    for hold in &history.holds {
        by_resource.entry(&hold.resource).or_default().push(hold);
    }
    let resources: Vec<&str> = by_resource.keys().copied().collect();
    let end_us = history
        .holds
        .iter()
        .map(Hold::end_us)
        .chain(history.faults.iter().filter_map(|f| f.end_us))
        .chain([history.duration_us])
        .max()
        .unwrap_or(1);
    let x_max = end_us as f64 / 1e6;
    // Headroom above the bands for the legend.
    let y_max = resources.len().max(1) as f64 + 0.9;
    let violating: std::collections::HashSet<&str> = report
        .check
        .violations
        .iter()
        .flat_map(|v| [v.first.token.as_str(), v.second.token.as_str()])
        .collect();

    let height = 260 + 90 * resources.len().max(1) as u32;
    let root = SVGBackend::new(path, (1200, height)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| err(&e))?;
    let title = format!(
        "{} (expected {}): {} violation(s), {} stale write(s)",
        report.scenario,
        if report.expected_safe {
            "safe"
        } else {
            "unsafe"
        },
        report.check.violations.len(),
        report.check.stale_writes.len()
    );
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 20))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(10)
        .build_cartesian_2d(0f64..x_max, 0f64..y_max)
        .map_err(|e| err(&e))?;
    chart
        .configure_mesh()
        .disable_y_mesh()
        .disable_y_axis()
        .x_labels(12)
        .x_desc("time (s)")
        .draw()
        .map_err(|e| err(&e))?;

    // Fault windows, one colour per kind of fault: node faults across the whole height,
    // client faults within their resource's band.
    let mut kinds: Vec<&str> = Vec::new();
    for fault in &history.faults {
        if !kinds.contains(&fault.label.as_str()) {
            kinds.push(&fault.label);
        }
    }
    let band_of = |resource: &str| resources.iter().position(|r| *r == resource);
    for (k, kind) in kinds.iter().enumerate() {
        let color = FAULT_COLORS[k % FAULT_COLORS.len()];
        let windows: Vec<_> = history.faults.iter().filter(|f| f.label == *kind).collect();
        let mut nodes: Vec<usize> = windows.iter().flat_map(|f| f.nodes.clone()).collect();
        nodes.sort_unstable();
        nodes.dedup();
        let label = if nodes.is_empty() {
            (*kind).to_owned()
        } else {
            let nodes: Vec<String> = nodes.iter().map(usize::to_string).collect();
            format!("{kind} (nodes {})", nodes.join(","))
        };
        chart
            .draw_series(windows.iter().map(|f| {
                let x0 = f.start_us as f64 / 1e6;
                let x1 = f.end_us.unwrap_or(end_us) as f64 / 1e6;
                let (y0, y1) = match f.resource.as_deref().and_then(band_of) {
                    Some(r) => (r as f64 + 0.05, r as f64 + 0.95),
                    None => (0.0, y_max),
                };
                Rectangle::new([(x0, y0), (x1, y1)], color.mix(0.25).filled())
            }))
            .map_err(|e| err(&e))?
            .label(label)
            .legend(move |(x, y)| {
                Rectangle::new([(x, y - 6), (x + 14, y + 6)], color.mix(0.5).filled())
            });
    }

    // Holds: bars within each resource's band.
    let hold_color = RGBColor(31, 119, 180);
    let bad_color = RGBColor(214, 39, 40);
    let mut bars = Vec::new();
    let mut bad_bars = Vec::new();
    for (r, resource) in resources.iter().enumerate() {
        let holds = &by_resource[resource];
        let (lane_of, lanes) = lanes(holds);
        let lane_height = 0.8 / lanes as f64;
        for (hold, lane) in holds.iter().zip(lane_of) {
            let (start, end) = hold.window();
            let y0 = r as f64 + 0.1 + lane as f64 * lane_height;
            let rect = [
                (start as f64 / 1e6, y0 + lane_height * 0.1),
                (end.max(start) as f64 / 1e6, y0 + lane_height * 0.9),
            ];
            if violating.contains(hold.token.as_str()) {
                bad_bars.push(rect);
            } else {
                bars.push(rect);
            }
        }
    }
    chart
        .draw_series(
            bars.into_iter()
                .map(|rect| Rectangle::new(rect, hold_color.mix(0.75).filled())),
        )
        .map_err(|e| err(&e))?
        .label("hold (acquired → min(valid until, release))")
        .legend(move |(x, y)| Rectangle::new([(x, y - 6), (x + 14, y + 6)], hold_color.filled()));
    if !bad_bars.is_empty() {
        chart
            .draw_series(
                bad_bars
                    .into_iter()
                    .map(|rect| Rectangle::new(rect, bad_color.mix(0.85).filled())),
            )
            .map_err(|e| err(&e))?
            .label("hold overlapping another holder's (violation)")
            .legend(move |(x, y)| {
                Rectangle::new([(x, y - 6), (x + 14, y + 6)], bad_color.filled())
            });
    }
    chart
        .draw_series(resources.iter().enumerate().map(|(r, name)| {
            Text::new(
                (*name).to_owned(),
                (x_max * 0.003, r as f64 + 0.97),
                ("sans-serif", 14).into_font().color(&BLACK),
            )
        }))
        .map_err(|e| err(&e))?;
    let band = |resource: &str| {
        resources
            .iter()
            .position(|r| *r == resource)
            .map_or(0.5, |r| r as f64 + 0.5)
    };
    if !report.check.stale_writes.is_empty() {
        chart
            .draw_series(report.check.stale_writes.iter().map(|stale| {
                Cross::new(
                    (stale.write.at_us as f64 / 1e6, band(&stale.write.resource)),
                    7,
                    bad_color.stroke_width(3),
                )
            }))
            .map_err(|e| err(&e))?
            .label("stale write")
            .legend(move |(x, y)| Cross::new((x + 7, y), 5, bad_color.stroke_width(3)));
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .background_style(WHITE.mix(0.9))
        .border_style(BLACK)
        .draw()
        .map_err(|e| err(&e))?;
    root.present().map_err(|e| err(&e))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_parse() {
        assert_eq!(parse_duration("10s"), Ok(Duration::from_secs(10)));
        assert_eq!(parse_duration("1500ms"), Ok(Duration::from_millis(1500)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_duration("3"), Ok(Duration::from_secs(3)));
        assert!(parse_duration("3h").is_err());
        assert!(parse_duration("x").is_err());
    }

    #[test]
    fn overlapping_holds_get_separate_lanes() {
        let a = Hold::new("r", 0, "a", 0, 100);
        let b = Hold::new("r", 1, "b", 50, 150);
        let c = Hold::new("r", 2, "c", 150, 200);
        let (lane_of, lanes) = lanes(&[&a, &b, &c]);
        assert_eq!(lanes, 2);
        assert_eq!(lane_of, vec![0, 1, 0]);
    }
}
