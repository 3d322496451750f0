//! `quorumlock chaos`: run the chaos scenarios, check each history for mutual-exclusion
//! violations and stale writes, print a table, and optionally write JSON and SVG timelines.
//!
//! Below this file: [`table`] (the results table) and [`plots`] (the SVG timelines).

mod plots;
mod table;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use clap::{Args, ValueEnum};
use indicatif::{ProgressBar, ProgressStyle};
use quorumlock_chaos::{ExpectedVsObserved, RunOptions, Scenario, ScenarioReport, run};
use quorumlock_harness::{Backend, ClusterOptions};

use crate::flags::{self, NODES_ENV};
use crate::json::write_json_file;
use plots::plot;
use table::table;

/// Arguments of `quorumlock chaos`.
#[derive(Args, Debug)]
#[command(after_help = "\
Examples:
  quorumlock chaos --scenario all --duration 2s
  quorumlock chaos --scenario minority-crash,clock-fast --plots timelines/ --json chaos.json
  quorumlock chaos --scenario restart-no-persistence --ttl 2s --duration 20s --backend docker
  quorumlock chaos --scenario restart-no-persistence,restart-guarded --duration 5s
  quorumlock chaos --scenario client-stall --nodes redis://10.0.0.1:6379,redis://10.0.0.2:6379,redis://10.0.0.3:6379")]
pub struct ChaosArgs {
    /// A scenario name, several separated by commas, or `all`. Scenarios: baseline,
    /// minority-crash, minority-freeze, minority-latency, majority-latency, partition-minority,
    /// partition-majority, partition-one-way, partition-asymmetric, restart-no-persistence,
    /// restart-guarded, restart-delayed, restart-aof, clock-fast, clock-jump-minority,
    /// clock-jump-majority, client-stall.
    #[arg(long, default_value = "all")]
    scenario: String,
    /// How long each scenario runs, e.g. `10s`, `1500ms`, `2m`.
    #[arg(long, default_value = "10s", value_parser = flags::duration)]
    duration: Duration,
    /// Where local nodes run (default: $QUORUMLOCK_BACKEND, else `process`).
    #[arg(long, value_enum)]
    backend: Option<BackendArg>,
    /// Comma-separated URLs of your own Redis masters. Then only the scenarios that need no
    /// control over the nodes run (baseline, client-stall).
    #[arg(long, value_delimiter = ',', env = NODES_ENV)]
    nodes: Vec<String>,
    /// Write every report, with its full history, as JSON to this file.
    #[arg(long)]
    json: Option<PathBuf>,
    /// Write an SVG timeline per scenario into this directory.
    #[arg(long)]
    plots: Option<PathBuf>,
    /// Lock TTL, e.g. `400ms`, `2s` (short, so that expiry matters).
    #[arg(long, default_value = "400ms", value_parser = flags::duration)]
    ttl: Duration,
    /// Contending client tasks.
    #[arg(long, default_value_t = 12)]
    clients: usize,
    /// Resources they contend for.
    #[arg(long, default_value_t = 3)]
    resources: usize,
    /// The clients' restart guard (LockOptions::restart_guard), for every scenario. Default:
    /// on, except in restart-no-persistence, which runs without it to show the hazard it
    /// prevents (restart-guarded runs the same faults with it on).
    #[arg(long, value_enum)]
    restart_guard: Option<Switch>,
    /// Exit 0 even when a scenario known to be unsafe shows no violation (by default that
    /// fails the run: the scenario did not demonstrate its hazard, so it proved nothing).
    #[arg(long)]
    allow_undemonstrated: bool,
}

/// `on` or `off`.
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
enum Switch {
    /// On.
    On,
    /// Off.
    Off,
}

/// Where the local test nodes run.
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
enum BackendArg {
    /// `redis-server` processes on this machine.
    Process,
    /// Docker containers (needs a local image, see `scripts/redis-image.sh`).
    Docker,
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
        .ttl(args.ttl)
        .clients(args.clients)
        .resources(args.resources);
    if let Some(switch) = args.restart_guard {
        options = options.restart_guard(switch == Switch::On);
    }
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
                        progress.suspend(|| eprintln!("{e}"));
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
    summarize(&reports, &errors, args.allow_undemonstrated)
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

/// The verdict line per scenario, and the overall result: a failure if a scenario expected
/// safe showed a violation, one could not run, or (unless `allow_undemonstrated`) one known to
/// be unsafe showed nothing.
fn summarize(
    reports: &[ScenarioReport],
    errors: &[(Scenario, String)],
    allow_undemonstrated: bool,
) -> Result<(), String> {
    let mut failed = Vec::new();
    let mut undemonstrated = Vec::new();
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
            ExpectedVsObserved::NotDemonstrated => {
                println!(
                    "{} {}: known to be unsafe, but this run showed no violation and no stale \
                     write, so it did not demonstrate its hazard (run it longer{})",
                    if allow_undemonstrated {
                        "self-check"
                    } else {
                        "FAIL"
                    },
                    report.scenario,
                    if allow_undemonstrated {
                        ""
                    } else {
                        "; --allow-undemonstrated accepts this"
                    }
                );
                undemonstrated.push(report.scenario.name());
            }
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
    if !undemonstrated.is_empty() && !allow_undemonstrated {
        return Err(format!(
            "known-unsafe scenario(s) showed nothing: {}",
            undemonstrated.join(", ")
        ));
    }
    Ok(())
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
    write_json_file(
        path,
        &serde_json::json!({ "reports": reports, "errors": errors }),
    )
}
