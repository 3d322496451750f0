//! The first few findings behind a failed verdict, printed under its FAIL line, so that a run
//! whose history was not kept (a CI log) still says what the checker saw.

use quorumlock_chaos::ScenarioReport;

/// How many findings of each kind are printed; the JSON report has them all.
const SHOWN: usize = 3;

/// Lines describing the first violations and stale writes of `report`, times in µs since the
/// run's epoch.
pub(super) fn evidence(report: &ScenarioReport) -> Vec<String> {
    let check = &report.check;
    let violations = check.violations.iter().take(SHOWN).map(|violation| {
        format!(
            "  violation on {}: client {} [{}, {}) and client {} [{}, {}), {} µs at once",
            violation.resource,
            violation.first.holder,
            violation.first.start_us,
            violation.first.end_us,
            violation.second.holder,
            violation.second.start_us,
            violation.second.end_us,
            violation.overlap_us
        )
    });
    let stale = check.stale_writes.iter().take(SHOWN).map(|stale| {
        let write = &stale.write;
        format!(
            "  stale write on {} by client {} ({:?}): invoked {}, completed {}, {}, {} µs late{}",
            write.resource,
            write.holder,
            stale.reason,
            write.invoked_us,
            write.completed_us,
            if write.acked {
                "acknowledged"
            } else {
                "unacknowledged"
            },
            stale.late_by_us,
            stale
                .during_hold_of
                .map(|other| format!(", during client {other}'s hold"))
                .unwrap_or_default()
        )
    });
    let over_permits = check.over_permits.iter().take(SHOWN).map(|over| {
        let holders: Vec<String> = over
            .holds
            .iter()
            .map(|hold| {
                format!(
                    "client {} [{}, {})",
                    hold.holder, hold.start_us, hold.end_us
                )
            })
            .collect();
        format!(
            "  semaphore {} of {} permit(s) held {} times at once at {} µs: {}",
            over.semaphore,
            over.permits,
            over.holds.len(),
            over.at_us,
            holders.join(", ")
        )
    });
    let writers_beside = check.writers_beside.iter().take(SHOWN).map(|beside| {
        format!(
            "  read-write lock {}: client {}'s write [{}, {}) beside client {}'s {} [{}, {}) at {} µs",
            beside.lock,
            beside.writer.holder,
            beside.writer.start_us,
            beside.writer.end_us,
            beside.other.holder,
            if beside.other_reads { "read" } else { "write" },
            beside.other.start_us,
            beside.other.end_us,
            beside.at_us
        )
    });
    let terms = check.term_regressions.iter().take(SHOWN).map(|back| {
        format!(
            "  election {}: leader {} of term {} elected at {} µs after leader {} of term {}",
            back.election, back.later.0, back.later.1, back.at_us, back.earlier.0, back.earlier.1
        )
    });
    violations
        .chain(over_permits)
        .chain(writers_beside)
        .chain(terms)
        .chain(stale)
        .collect()
}
