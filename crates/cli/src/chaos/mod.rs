//! `quorumlock chaos`: run the chaos scenarios, check each history for mutual-exclusion
//! violations and stale, lost or interleaved writes, print a table, and optionally write JSON and SVG timelines.
//!
//! Below this file: [`table`] (the results table), [`mutation`] (the mutation score of
//! `--defect`) and [`plots`] (the SVG timelines).

mod evidence;
mod mutation;
mod plots;
mod table;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use clap::{Args, ValueEnum};
use indicatif::{ProgressBar, ProgressStyle};
use quorumlock_chaos::{Defect, ExpectedVsObserved, RunOptions, Scenario, ScenarioReport, run};
use quorumlock_harness::{Backend, ClusterOptions};

use crate::flags::{self, NODES_ENV};
use crate::json::write_json_file;
use evidence::evidence;
use mutation::{score_table, survivors};
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
  quorumlock chaos --scenario client-stall,client-stall-fenced --duration 10s
  quorumlock chaos --scenario keep-alive-loss --duration 10s
  quorumlock chaos --scenario waiters --duration 10s
  quorumlock chaos --scenario many-leases --leases 10000 --duration 30s
  quorumlock chaos --scenario cluster-members --duration 5s
  quorumlock chaos --scenario all --fencing --duration 5s
  quorumlock chaos --scenario random --seed 7 --duration 2m
  quorumlock chaos --defect all --scenario all --duration 5s     (the mutation score)
  quorumlock chaos --scenario client-stall --nodes redis://10.0.0.1:6379,redis://10.0.0.2:6379,redis://10.0.0.3:6379")]
pub struct ChaosArgs {
    /// A scenario name, several separated by commas, or `all`. Scenarios: baseline,
    /// minority-crash, minority-freeze, minority-latency, majority-latency, partition-minority,
    /// partition-majority, partition-one-way, partition-asymmetric, restart-no-persistence,
    /// restart-guarded, restart-delayed, restart-aof, failover, clock-drift, clock-fast,
    /// clock-jump-minority, clock-jump-majority, client-stall, client-stall-fenced,
    /// keep-alive-loss, waiters, sets, semaphore, many-leases, no-lock, random; and, not in `all`, cluster-members (3 Redis
    /// Cluster members of 3 shards each: a shard killed and restarted, slots migrated).
    ///
    /// With --defect, only the scenarios expected to be safe run (an unsafe one says nothing
    /// about a defect).
    #[arg(long, default_value = "all")]
    scenario: String,
    /// How long each scenario runs, e.g. `10s`, `1500ms`, `2m`.
    #[arg(long, default_value = "10s", value_parser = flags::duration)]
    duration: Duration,
    /// Where local nodes run (default: $QUORUMLOCK_BACKEND, else `process`).
    #[arg(long, value_enum)]
    backend: Option<BackendArg>,
    /// Comma-separated URLs of your own Redis masters. Then only the scenarios that need no
    /// control over the nodes run (baseline, client-stall, client-stall-fenced, no-lock).
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
    /// The bulk leases many-leases keeps alive at most, over all clients (each client's block
    /// is this over --clients; each client contends for its block and its neighbour's).
    #[arg(long, default_value_t = 1_200)]
    leases: usize,
    /// The clients' restart guard (LockOptions::restart_guard), for every scenario. Default:
    /// on, except in restart-no-persistence, which runs without it to show the hazard it
    /// prevents (restart-guarded runs the same faults with it on).
    #[arg(long, value_enum)]
    restart_guard: Option<Switch>,
    /// Fencing tokens in every scenario (client-stall-fenced always has them): the clients'
    /// locks hand out fences (LockOptions::fencing; with fence_volatile_nodes where the nodes
    /// do not persist every write), every protected write carries its holder's fence, and the
    /// store rejects a fence below the last one it accepted. client-stall is then expected safe.
    #[arg(long)]
    fencing: bool,
    /// The seed of the `random` scenario's fault schedule: the same seed (with the same
    /// --duration and --ttl) replays the same faults. Default: a fresh seed, printed.
    #[arg(long)]
    seed: Option<u64>,
    /// The mutation score: run every chosen safe scenario with the clients' locks broken on
    /// purpose, one defect at a time (a name, several separated by commas, or `all`), and
    /// print which scenarios caught each defect. Defects: validity-plus-5pct, drift-ignored,
    /// quorum-half, no-release-on-failure, extend-minority, restart-guard-ignored,
    /// replacement-ignored. Exits non-zero when a defect that
    /// can break mutual exclusion survives every scenario.
    #[arg(long)]
    defect: Option<String>,
    /// Exit 0 even when a scenario known to be unsafe shows no violation in a run long enough
    /// to show it (by default that fails the run: the scenario did not demonstrate its hazard,
    /// so it proved nothing). A run shorter than its scenario needs never fails for this.
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

/// The defects named by `--defect`: none, a list, or `all`.
fn defects(arg: Option<&str>) -> Result<Vec<Defect>, String> {
    match arg {
        None => Ok(Vec::new()),
        Some("all") => Ok(Defect::ALL.to_vec()),
        Some(names) => names
            .split(',')
            .map(|name| name.trim().parse().map_err(|e| format!("{e}")))
            .collect(),
    }
}

/// Runs the chosen scenarios; fails when a scenario expected safe showed a violation, or (with
/// `--defect`) when a defect that can break mutual exclusion survived every scenario.
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
        .resources(args.resources)
        .leases(args.leases);
    if let Some(switch) = args.restart_guard {
        options = options.restart_guard(switch == Switch::On);
    }
    if args.fencing {
        options = options.fencing(true);
    }
    if let Some(seed) = args.seed {
        options = options.seed(seed);
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
    let defects = defects(args.defect.as_deref())?;
    if !defects.is_empty() {
        let (safe, unsafe_): (Vec<_>, Vec<_>) = scenarios
            .iter()
            .partition(|scenario| options.expected_safe(**scenario));
        if !unsafe_.is_empty() {
            eprintln!(
                "--defect given: skipping {} (expected unsafe: they say nothing about a defect)",
                names(&unsafe_)
            );
        }
        scenarios = safe.into_iter().copied().collect();
        if scenarios.is_empty() {
            return Err("no scenario expected to be safe left to run with --defect".into());
        }
    }
    if let Some(dir) = &args.plots {
        std::fs::create_dir_all(dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
    }

    // Every scenario once, or (with --defect) every scenario under each defect.
    let jobs: Vec<(Scenario, Option<Defect>)> = if defects.is_empty() {
        scenarios.iter().map(|&scenario| (scenario, None)).collect()
    } else {
        defects
            .iter()
            .flat_map(|&defect| {
                scenarios
                    .iter()
                    .map(move |&scenario| (scenario, Some(defect)))
            })
            .collect()
    };
    let progress = progress_bar(jobs.len(), args.duration);
    let mut reports = Vec::new();
    let mut errors = Vec::new();
    for (index, &(scenario, defect)) in jobs.iter().enumerate() {
        let label = match defect {
            Some(defect) => format!("{scenario}+{defect}"),
            None => scenario.name().to_owned(),
        };
        progress.set_message(format!("{label} ({}/{})", index + 1, jobs.len()));
        let base = progress_ms(args.duration) * index as u64;
        let started = Instant::now();
        let job_options = match defect {
            Some(defect) => options.clone().defect(defect),
            None => options.clone(),
        };
        let running = run(scenario, &job_options);
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
                    return Err(format!("interrupted during {label}"));
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
                    let path = dir.join(format!("{label}.svg"));
                    if let Err(e) = plot(&report, &path) {
                        progress.suspend(|| eprintln!("{e}"));
                    }
                }
                reports.push(report);
            }
            Err(e) => {
                progress.suspend(|| eprintln!("{label}: {e}"));
                errors.push((label, e.to_string()));
            }
        }
    }
    progress.finish_and_clear();

    print!("{}", table(&reports));
    for report in &reports {
        for note in &report.notes {
            match report.defect {
                Some(defect) => println!("note ({}+{defect}): {note}", report.scenario),
                None => println!("note ({}): {note}", report.scenario),
            }
        }
    }
    if !defects.is_empty() {
        println!("\nmutation score:\n{}", score_table(&defects, &reports));
    }
    if let Some(path) = &args.json {
        write_json(path, &reports, &errors)?;
        println!("JSON written to {}", path.display());
    }
    if let Some(dir) = &args.plots {
        println!("timelines written to {}/<scenario>.svg", dir.display());
    }
    summarize(&reports, &errors, args.allow_undemonstrated)?;
    let survived = survivors(&defects, &reports);
    if !survived.is_empty() {
        return Err(format!(
            "defect(s) that can break mutual exclusion survived every scenario: {}",
            survived
                .iter()
                .map(|defect| defect.name())
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    Ok(())
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
/// be unsafe showed nothing in a run long enough to show it (a shorter run gets a line, not a
/// failure: `Scenario::demonstrated_from_ttls`). A run with a deliberate defect that shows violations is not a
/// failure: it caught the defect (see [`mutation`]).
fn summarize(
    reports: &[ScenarioReport],
    errors: &[(String, String)],
    allow_undemonstrated: bool,
) -> Result<(), String> {
    let mut failed = Vec::new();
    let mut undemonstrated = Vec::new();
    for report in reports.iter().filter(|report| report.defect.is_none()) {
        match report.expected_vs_observed() {
            ExpectedVsObserved::AsExpected => {}
            ExpectedVsObserved::UnexpectedViolation => {
                println!(
                    "FAIL {}: expected safe, but {} violation(s), {} time(s) over a semaphore's \
                     permits, {} writer(s) beside another holder, {} term(s) not above an \
                     earlier leader's, {} stale write(s), {} lost \
                     write(s), {} interleaving(s), {} fence regression(s), {} fence \
                     repeat(s), {} late lost signal(s), {} write(s) after a lost signal and {} \
                     late waiter(s){}",
                    report.scenario,
                    report.check.violations.len(),
                    report.check.over_permits.len(),
                    report.check.writers_beside.len(),
                    report.check.term_regressions.len(),
                    report.check.stale_writes.len(),
                    report.check.lost_writes.len(),
                    report.check.interleaved.len(),
                    report.check.fence_regressions.len(),
                    report.check.fence_repeats.len(),
                    report.check.late_losses.len(),
                    report.check.writes_after_loss.len(),
                    report.check.late_waiters.len(),
                    report
                        .seed
                        .map(|seed| format!(" (replay with --seed {seed})"))
                        .unwrap_or_default()
                );
                for line in evidence(report) {
                    println!("{line}");
                }
                failed.push(report.scenario.name());
            }
            ExpectedVsObserved::NotDemonstrated => {
                println!(
                    "{} {}: known to be unsafe, but this run showed no violation, no stale, lost \
                     or interleaved write, so it did not demonstrate its hazard (run it longer{})",
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
            ExpectedVsObserved::TooShort => {
                println!(
                    "too short {}: known to be unsafe; this run showed nothing, but it shows its \
                     hazard every time only from {:.1} s at its TTL of {} ms (no verdict)",
                    report.scenario,
                    report.demonstrated_from_us() as f64 / 1e6,
                    report.ttl_ms
                );
            }
            _ => {}
        }
    }
    for (label, error) in errors {
        println!("ERROR {label}: {error}");
    }
    if !failed.is_empty() {
        return Err(format!(
            "mutual exclusion (or a waiter's deadline) violated in scenario(s) expected safe: {}",
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
    errors: &[(String, String)],
) -> Result<(), String> {
    /// The file's top level, borrowed: `serde_json::json!` would first copy every history into
    /// a `Value` tree, several times the history's own size on a long run.
    #[derive(serde::Serialize)]
    struct ChaosJson<'a> {
        reports: &'a [ScenarioReport],
        errors: BTreeMap<&'a str, &'a str>,
    }
    let errors = errors
        .iter()
        .map(|(label, error)| (label.as_str(), error.as_str()))
        .collect();
    write_json_file(path, &ChaosJson { reports, errors })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defects_are_none_a_list_or_all() {
        assert_eq!(defects(None), Ok(Vec::new()));
        assert_eq!(defects(Some("all")), Ok(Defect::ALL.to_vec()));
        assert_eq!(
            defects(Some("quorum-half, drift-ignored")),
            Ok(vec![Defect::QuorumHalf, Defect::DriftIgnored])
        );
        assert!(defects(Some("quorum-half,nope")).is_err());
    }
}
