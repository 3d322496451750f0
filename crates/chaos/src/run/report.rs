//! The result of one run: [`ScenarioReport`] (what the checker found, and the history), and
//! [`ExpectedVsObserved`], whether it came out as the scenario predicts.

use quorumlock::Defect;
use serde::{Serialize, Serializer};

use crate::checker::{CheckReport, LateWaiter};
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
    /// Expected unsafe, but this run showed nothing although it was long enough for the
    /// scenario to show its hazard every time
    /// ([`Scenario::demonstrated_from_ttls`]): the scenario failed to demonstrate it, so the run
    /// proved nothing.
    NotDemonstrated,
    /// Expected unsafe, and this run showed nothing, but it was shorter than the scenario needs
    /// to show its hazard every time ([`Scenario::demonstrated_from_ttls`]): no verdict either
    /// way.
    TooShort,
}

/// The result of one scenario run.
#[derive(Debug, Clone, Serialize)]
#[non_exhaustive]
pub struct ScenarioReport {
    /// The scenario.
    pub scenario: Scenario,
    /// Whether Redlock is expected to stay safe through it, with the restart guard and fencing it
    /// ran with.
    pub expected_safe: bool,
    /// Whether the clients' locks ran with the restart guard on.
    pub restart_guard: bool,
    /// Whether the clients' locks handed out fences and the protected store checked them
    /// ([`RunOptions::fencing`](crate::RunOptions::fencing)).
    pub fencing: bool,
    /// The deliberate defect the clients' locks ran with, if any
    /// ([`RunOptions::defect`](crate::RunOptions::defect)).
    #[serde(serialize_with = "defect_name")]
    pub defect: Option<Defect>,
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
            (false, true) if self.history.duration_us < self.demonstrated_from_us() => {
                ExpectedVsObserved::TooShort
            }
            (false, true) => ExpectedVsObserved::NotDemonstrated,
        }
    }

    /// How long a run of this scenario must be, in µs at the TTL it ran with, to show its
    /// hazard every time ([`Scenario::demonstrated_from_ttls`]); 0 when it makes no such claim
    /// (a scenario expected to be safe, or one run with options that make it so).
    pub fn demonstrated_from_us(&self) -> u64 {
        match (self.expected_safe, self.scenario.demonstrated_from_ttls()) {
            (false, Some(ttls)) => self.ttl_ms.saturating_mul(1000).saturating_mul(ttls.into()),
            _ => 0,
        }
    }

    /// When the checker's first finding became visible, in µs since the run started: the
    /// earliest instant at which two holders' windows overlapped (the later of the two grants),
    /// a semaphore had one holder too many, a writer held beside another holder, a stale write was invoked, two holders' writes interleaved (the later span's start), a
    /// kept hold's validity ended before its lost signal came, a write was invoked after
    /// one, or a waiter's deadline plus its slack passed before it returned. Lost writes and fence regressions have no instant of their own: the interleaving
    /// that lost them, or the stale write the store accepted, has one. `None` for a safe run.
    pub fn first_violation_us(&self) -> Option<u64> {
        let overlaps = self
            .check
            .violations
            .iter()
            .map(|violation| violation.first.start_us.max(violation.second.start_us));
        let stale = self
            .check
            .stale_writes
            .iter()
            .map(|stale| stale.write.invoked_us);
        let interleaved = self
            .check
            .interleaved
            .iter()
            .map(|pair| pair.first.start_us.max(pair.second.start_us));
        let late_losses = self
            .check
            .late_losses
            .iter()
            .map(|late| late.validity_end_us);
        let after_loss = self
            .check
            .writes_after_loss
            .iter()
            .map(|found| found.write.invoked_us);
        let late_waiters = self.check.late_waiters.iter().map(LateWaiter::due_us);
        let over_permits = self.check.over_permits.iter().map(|over| over.at_us);
        let writers_beside = self.check.writers_beside.iter().map(|beside| beside.at_us);
        let terms = self.check.term_regressions.iter().map(|back| back.at_us);
        overlaps
            .chain(over_permits)
            .chain(writers_beside)
            .chain(terms)
            .chain(stale)
            .chain(interleaved)
            .chain(late_losses)
            .chain(after_loss)
            .chain(late_waiters)
            .min()
    }
}

/// A defect as its name, for the JSON.
fn defect_name<S: Serializer>(defect: &Option<Defect>, serializer: S) -> Result<S::Ok, S::Error> {
    serializer.serialize_some(&defect.map(Defect::name))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checker::check;
    use crate::history::{Hold, Write};

    fn report(history: History) -> ScenarioReport {
        ScenarioReport {
            scenario: Scenario::Baseline,
            expected_safe: true,
            restart_guard: true,
            fencing: false,
            defect: Some(Defect::QuorumHalf),
            description: String::new(),
            target: String::new(),
            ttl_ms: 400,
            clients: 2,
            resources: 1,
            seed: None,
            nemesis: None,
            notes: Vec::new(),
            check: check(&history),
            history,
        }
    }

    /// An unsafe scenario that shows nothing fails only when it ran long enough to show it.
    #[test]
    fn an_undemonstrated_hazard_fails_only_a_run_long_enough_to_show_it() {
        let mut short = report(History::new());
        short.scenario = Scenario::ClockJumpMinority;
        short.expected_safe = false;
        short.history.duration_us = 1_999_999;
        assert_eq!(short.demonstrated_from_us(), 2_000_000);
        assert_eq!(short.expected_vs_observed(), ExpectedVsObserved::TooShort);
        short.history.duration_us = 2_000_000;
        assert_eq!(
            short.expected_vs_observed(),
            ExpectedVsObserved::NotDemonstrated
        );
        // A safe run makes no claim about its length.
        assert_eq!(report(History::new()).demonstrated_from_us(), 0);
    }

    /// Overlapping windows become visible at the later grant; a stale write at its instant; the
    /// earliest of all counts.
    #[test]
    fn the_first_violation_is_the_earliest_overlap_or_stale_write() {
        let mut history = History::new();
        assert_eq!(report(history.clone()).first_violation_us(), None);
        history.holds = vec![
            Hold::new("r", 0, "a", 100, 500),
            Hold::new("r", 1, "b", 300, 700),
            Hold::new("r", 2, "c", 650, 900),
        ];
        assert_eq!(report(history.clone()).first_violation_us(), Some(300));
        // Under a token no hold has: stale when it is made.
        history.writes = vec![Write::new("r", 3, "nobody", 200, 210)];
        assert_eq!(report(history).first_violation_us(), Some(200));
    }
}
