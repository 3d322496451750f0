//! The results table of `quorumlock chaos`: one row per scenario run.

use crate::units::fmt_us;
use quorumlock_chaos::{ExpectedVsObserved, ScenarioReport};

use crate::text_table::aligned;

/// `safe` or `unsafe`: what the scenario expects of Redlock.
pub(super) fn expected(report: &ScenarioReport) -> &'static str {
    if report.expected_safe {
        "safe"
    } else {
        "unsafe"
    }
}

/// Where the fence regressions' column goes when a run had fencing: right after
/// `interleaved` (counted before the `defect` column is inserted).
const FENCE_DROPS_COLUMN: usize = 8;

/// Where the keep-alive's columns go when a run kept holds alive: right after `interleaved`
/// (counted before the fence drops' and the `defect` columns are inserted).
const KEPT_COLUMNS: usize = 8;

/// Where the waits' column goes when a run had waiting calls: right after `interleaved`
/// (counted after the keep-alive's columns are inserted, before the fence drops' and the
/// `defect` columns are).
const WAITS_COLUMN: usize = 8;

/// The results table, one row per scenario; with a `defect` column when a run had one, a
/// `fence drops` column (the fence regressions; `-` for a run without fencing) when a run had
/// fencing, and two keep-alive columns when a run kept holds alive: `kept ext/lost` (of the
/// holds kept alive, those extended at least once / those whose lease signalled the lock lost)
/// and `late/after loss` (lost signals that came after the validity ended or never / writes
/// invoked after a lost signal); `-` for a run without kept holds; and a waits column when a run
/// had calls that waited for the lock: `waits got/gave up/late` (those that got the lock / gave
/// up by their deadline plus one attempt / returned later); `-` for a run without them.
pub(super) fn table(reports: &[ScenarioReport]) -> String {
    let defects = reports.iter().any(|report| report.defect.is_some());
    let fencing = reports.iter().any(|report| report.fencing);
    let kept = reports
        .iter()
        .any(|report| report.check.keep_alive.holds > 0);
    let waited = reports.iter().any(|report| report.check.waits.calls > 0);
    let header = [
        "scenario",
        "expected",
        "verdict",
        "violations",
        "stale writes",
        "rejected",
        "lost",
        "interleaved",
        "rel/exp",
        "acq/s",
        "held",
        "unavail",
        "expired",
        "other",
        "p50",
        "p99",
    ];
    let mut rows = vec![header.map(String::from).to_vec()];
    if kept {
        rows[0].splice(
            KEPT_COLUMNS..KEPT_COLUMNS,
            ["kept ext/lost", "late/after loss"].map(String::from),
        );
    }
    if waited {
        rows[0].insert(WAITS_COLUMN, "waits got/gave up/late".to_owned());
    }
    if fencing {
        rows[0].insert(FENCE_DROPS_COLUMN, "fence drops".to_owned());
    }
    if defects {
        rows[0].insert(1, "defect".to_owned());
    }
    for report in reports {
        let check = &report.check;
        let failures = check.availability.failures;
        let observed = match (report.expected_vs_observed(), check.is_safe()) {
            // A safe scenario showing violations with a broken lock has caught the defect.
            (ExpectedVsObserved::UnexpectedViolation, _) if report.defect.is_some() => "caught",
            (ExpectedVsObserved::UnexpectedViolation, _) => "VIOLATED",
            (ExpectedVsObserved::NotDemonstrated, _) => "not shown",
            (ExpectedVsObserved::TooShort, _) => "too short",
            (_, true) => "safe",
            (_, false) => "unsafe, shown",
        };
        let mut row = vec![
            report.scenario.name().to_owned(),
            expected(report).to_owned(),
            observed.to_owned(),
            // A semaphore over its permits, a writer beside another holder, a term led twice or
            // going back: violations of their bounds.
            (check.violations.len()
                + check.over_permits.len()
                + check.writers_beside.len()
                + check.term_regressions.len())
            .to_string(),
            check.stale_writes.len().to_string(),
            check.rejected_writes.to_string(),
            check.lost_writes.len().to_string(),
            check.interleaved.len().to_string(),
            format!("{}/{}", check.ended_by_release, check.ended_by_expiry),
            format!("{:.1}", check.availability.acquired_per_sec),
            failures.held.to_string(),
            failures.unavailable.to_string(),
            failures.validity_expired.to_string(),
            failures.other.to_string(),
            fmt_us(check.acquire_latency.p50_us as f64),
            fmt_us(check.acquire_latency.p99_us as f64),
        ];
        if kept {
            let summary = check.keep_alive;
            let columns = if summary.holds > 0 {
                [
                    format!("{}/{}", summary.extended, summary.lost),
                    format!(
                        "{}/{}",
                        check.late_losses.len(),
                        check.writes_after_loss.len()
                    ),
                ]
            } else {
                ["-".to_owned(), "-".to_owned()]
            };
            row.splice(KEPT_COLUMNS..KEPT_COLUMNS, columns);
        }
        if waited {
            let waits = check.waits;
            let column = if waits.calls > 0 {
                format!(
                    "{}/{}/{}",
                    waits.acquired, waits.gave_up_in_time, waits.late
                )
            } else {
                "-".to_owned()
            };
            row.insert(WAITS_COLUMN, column);
        }
        if fencing {
            let drops = if report.fencing {
                (check.fence_regressions.len() + check.fence_repeats.len()).to_string()
            } else {
                "-".to_owned()
            };
            row.insert(FENCE_DROPS_COLUMN, drops);
        }
        if defects {
            row.insert(
                1,
                report.defect.map_or("-", |defect| defect.name()).to_owned(),
            );
        }
        rows.push(row);
    }
    aligned(&rows, if defects { 4 } else { 3 })
}
