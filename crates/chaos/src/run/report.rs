//! The result of one run: [`ScenarioReport`] (what the checker found, and the history), and
//! [`ExpectedVsObserved`], whether it came out as the scenario predicts.

use serde::Serialize;

use crate::checker::CheckReport;
use crate::history::History;
use crate::nemesis::Schedule;
use crate::scenario::Scenario;

/// Whether a run came out as its scenario predicts: the scenario's expected safety against what
/// the checker observed. (Not to be confused with the lock's own vote tally on an acquisition.)
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum ExpectedVsObserved {
    /// Expected safe and safe, or expected unsafe and a violation or stale write was shown.
    AsExpected,
    /// Expected safe, yet a violation or stale write was found: a bug (or broken assumptions).
    UnexpectedViolation,
    /// Expected unsafe, but this run happened to show nothing: the scenario failed to
    /// demonstrate the hazard (run it longer).
    NotDemonstrated,
}

/// The result of one scenario run.
#[derive(Debug, Clone, Serialize)]
#[non_exhaustive]
pub struct ScenarioReport {
    /// The scenario.
    pub scenario: Scenario,
    /// Whether Redlock is expected to stay safe through it, with the restart guard it ran with.
    pub expected_safe: bool,
    /// Whether the clients' locks ran with the restart guard on.
    pub restart_guard: bool,
    /// What it does.
    pub description: String,
    /// Where it ran, e.g. `5 local redis-server processes`.
    pub target: String,
    /// Lock TTL (ms).
    pub ttl_ms: u64,
    /// Client tasks.
    pub clients: usize,
    /// Resources.
    pub resources: usize,
    /// Remarks about how the run was done (e.g. an emulated clock).
    pub notes: Vec<String>,
    /// The nemesis's seed ([`Scenario::Random`] only): `RunOptions::seed` replays the run's
    /// faults.
    pub seed: Option<u64>,
    /// The nemesis's fault schedule, as planned ([`Scenario::Random`] only; what was done, and
    /// when, is in the history's faults).
    pub nemesis: Option<Schedule>,
    /// What the checker found.
    pub check: CheckReport,
    /// The full history.
    pub history: History,
}

impl ScenarioReport {
    /// Whether the run came out as predicted.
    pub fn expected_vs_observed(&self) -> ExpectedVsObserved {
        match (self.expected_safe, self.check.is_safe()) {
            (true, true) | (false, false) => ExpectedVsObserved::AsExpected,
            (true, false) => ExpectedVsObserved::UnexpectedViolation,
            (false, true) => ExpectedVsObserved::NotDemonstrated,
        }
    }
}
