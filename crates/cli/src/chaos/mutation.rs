//! The mutation score of `quorumlock chaos --defect …`: for each deliberate defect in the lock
//! ([`Defect`]), which safe scenarios caught it (showed violations or stale writes), when the
//! first violation became visible, and which defects that can break mutual exclusion survived
//! every scenario.

use crate::units::fmt_us;
use quorumlock_chaos::{Defect, ScenarioReport};

use crate::text_table::aligned;

/// The `cargo test` that catches a defect no chaos run can, because it cannot break mutual
/// exclusion (it costs availability only).
fn catching_test(defect: Defect) -> Option<&'static str> {
    match defect {
        Defect::NoReleaseOnFailure => {
            Some("node_faults::a_failed_acquisition_leaves_no_key_on_the_nodes_it_won")
        }
        _ => None,
    }
}

/// How many catching scenarios the table names before it says how many more there were.
const NAMED_CATCHERS: usize = 3;

/// The runs of `defect` among `reports`.
fn runs_of(defect: Defect, reports: &[ScenarioReport]) -> impl Iterator<Item = &ScenarioReport> {
    reports
        .iter()
        .filter(move |report| report.defect == Some(defect))
}

/// Whether a safe scenario caught `defect`.
fn caught(defect: Defect, reports: &[ScenarioReport]) -> bool {
    runs_of(defect, reports).any(|report| !report.check.is_safe())
}

/// The defects that can break mutual exclusion but no run caught.
pub(super) fn survivors(defects: &[Defect], reports: &[ScenarioReport]) -> Vec<Defect> {
    defects
        .iter()
        .copied()
        .filter(|&defect| defect.breaks_exclusion() && !caught(defect, reports))
        .collect()
}

/// One row per defect: whether it was caught, by which scenarios (with their violations, times
/// over a semaphore's permits, writers beside another holder and stale writes; the earliest first), the earliest first violation (since its run started), and
/// the runs.
pub(super) fn score_table(defects: &[Defect], reports: &[ScenarioReport]) -> String {
    let header = ["defect", "verdict", "caught by", "first violation", "runs"];
    let mut rows = vec![header.map(String::from).to_vec()];
    for &defect in defects {
        let runs: Vec<&ScenarioReport> = runs_of(defect, reports).collect();
        let mut catchers: Vec<(u64, &ScenarioReport)> = runs
            .iter()
            .filter_map(|report| Some((report.first_violation_us()?, *report)))
            .collect();
        catchers.sort_by_key(|&(us, _)| us);
        let verdict = match (defect.breaks_exclusion(), catchers.is_empty()) {
            (true, false) => "caught",
            (true, true) => "SURVIVED",
            (false, _) => "availability only",
        };
        let mut caught_by: Vec<String> = catchers
            .iter()
            .take(NAMED_CATCHERS)
            .map(|(_, report)| {
                let findings = report.check.violations.len()
                    + report.check.over_permits.len()
                    + report.check.writers_beside.len()
                    + report.check.term_regressions.len()
                    + report.check.stale_writes.len();
                format!("{} ({findings})", report.scenario)
            })
            .collect();
        if catchers.len() > NAMED_CATCHERS {
            caught_by.push(format!("{} more", catchers.len() - NAMED_CATCHERS));
        }
        if let Some(test) = catching_test(defect).filter(|_| catchers.is_empty()) {
            caught_by.push(format!("cargo test: {test}"));
        }
        let first = catchers
            .first()
            .map(|(us, report)| format!("{} ({})", fmt_us(*us as f64), report.scenario))
            .unwrap_or_else(|| "-".to_owned());
        let duration = runs
            .iter()
            .map(|report| report.history.duration_us)
            .max()
            .unwrap_or_default();
        rows.push(vec![
            defect.name().to_owned(),
            verdict.to_owned(),
            if caught_by.is_empty() {
                "-".to_owned()
            } else {
                caught_by.join(", ")
            },
            first,
            format!("{} × {}", runs.len(), fmt_us(duration as f64)),
        ]);
    }
    aligned(&rows, 3)
}
