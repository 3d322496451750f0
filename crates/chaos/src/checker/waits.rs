//! The waiting calls' promise, checked on the attempts that waited (those with a
//! [`wait_us`](crate::history::Attempt::wait_us)), pure: a call of
//! waiting [`Lock::acquire`](quorumlock::Lock::acquire) gets the lock or gives up by its
//! deadline, plus the one attempt it may finish after it ([`History::wait_slack_us`]). A call
//! that returned later is a [`LateWaiter`], whatever its outcome.
//!
//! The summary also says whether the waiting was put to the test: how many calls got the lock
//! after waiting behind another holder (the call started while another hold of the resource was
//! believed), and how many got it while a node fault was in effect.

use serde::Serialize;

use crate::history::{Attempt, FaultWindow, History, Hold, Outcome};

/// A waiting call that returned after its deadline plus the slack.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct LateWaiter {
    /// The call.
    pub attempt: Attempt,
    /// How long after its deadline it returned (µs).
    pub past_deadline_us: u64,
    /// How far past it was allowed (µs).
    pub slack_us: u64,
}

impl LateWaiter {
    /// When the call should have returned by (µs): its deadline plus the slack.
    pub fn due_us(&self) -> u64 {
        deadline_us(&self.attempt).saturating_add(self.slack_us)
    }
}

/// The waiting calls, counted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct WaitSummary {
    /// Calls that waited.
    pub calls: usize,
    /// Of those, the ones that got the lock.
    pub acquired: usize,
    /// Of those that got it, the ones that started while another hold of the resource was
    /// believed: they waited behind a holder and were woken.
    pub acquired_after_waiting: usize,
    /// Of those that got it, the ones that got it while a node fault was in effect.
    pub acquired_during_fault: usize,
    /// Of those that got it, the ones whose wait saw another holder release the resource, with
    /// no node fault in effect when they got it: a wake-up should have brought them.
    pub acquired_after_release: usize,
    /// For those, the median time from the last such release to the call's return (µs), less
    /// the runtime's stalls in between ([`History::running_us`]): a round trip or two when the
    /// release woke the waiter, most of a TTL when only the keys' expiry did.
    pub after_release_p50_us: Option<u64>,
    /// Calls that gave up (any error) by their deadline plus the slack.
    pub gave_up_in_time: usize,
    /// Calls that returned later than that ([`LateWaiter`]), whatever their outcome.
    pub late: usize,
    /// The slack allowed past each deadline (µs), if anyone waited.
    pub slack_us: Option<u64>,
    /// The latest any call returned past its deadline (µs; 0 if none did).
    pub max_past_deadline_us: u64,
}

/// When a waiting call's wait ran out (µs).
fn deadline_us(attempt: &Attempt) -> u64 {
    attempt
        .started_us
        .saturating_add(attempt.wait_us.unwrap_or(0))
}

/// How long after its deadline a waiting call returned (µs; 0 if by it).
fn past_deadline_us(attempt: &Attempt) -> u64 {
    attempt.finished_us.saturating_sub(deadline_us(attempt))
}

/// The attempts that waited.
fn waiting(history: &History) -> impl Iterator<Item = &Attempt> {
    history
        .attempts
        .iter()
        .filter(|attempt| attempt.wait_us.is_some())
}

/// Every waiting call that returned after its deadline plus [`History::wait_slack_us`].
pub(super) fn late_waiters(history: &History) -> Vec<LateWaiter> {
    let Some(slack_us) = history.wait_slack_us else {
        return Vec::new();
    };
    waiting(history)
        .filter(|attempt| past_deadline_us(attempt) > slack_us)
        .map(|attempt| LateWaiter {
            attempt: attempt.clone(),
            past_deadline_us: past_deadline_us(attempt),
            slack_us,
        })
        .collect()
}

/// Counts the waiting calls by how they ended (`late`: the number of [`late_waiters`]).
pub(super) fn summary(history: &History, late: usize) -> WaitSummary {
    let mut summary = WaitSummary {
        late,
        slack_us: history.wait_slack_us,
        ..WaitSummary::default()
    };
    let mut after_release = Vec::new();
    for attempt in waiting(history) {
        summary.calls += 1;
        let past = past_deadline_us(attempt);
        summary.max_past_deadline_us = summary.max_past_deadline_us.max(past);
        if attempt.outcome != Outcome::Acquired {
            if history.wait_slack_us.is_none_or(|slack| past <= slack) {
                summary.gave_up_in_time += 1;
            }
            continue;
        }
        summary.acquired += 1;
        if history.holds.iter().any(|hold| behind(attempt, hold)) {
            summary.acquired_after_waiting += 1;
        }
        if history
            .faults
            .iter()
            .any(|fault| during(attempt.finished_us, fault))
        {
            summary.acquired_during_fault += 1;
        } else if let Some(released) = last_release_during(history, attempt) {
            after_release.push(history.running_us(released, attempt.finished_us));
        }
    }
    after_release.sort_unstable();
    summary.acquired_after_release = after_release.len();
    summary.after_release_p50_us = after_release.get(after_release.len() / 2).copied();
    summary
}

/// The latest moment, while `attempt` waited, at which another holder started to release its
/// resource (before its validity ended: a release, not an expiry).
fn last_release_during(history: &History, attempt: &Attempt) -> Option<u64> {
    history
        .holds
        .iter()
        .filter(|hold| hold.resource == attempt.resource && hold.holder != attempt.holder)
        .filter_map(|hold| hold.released_us.filter(|&at| at < hold.valid_until_us))
        .filter(|&at| attempt.started_us <= at && at <= attempt.finished_us)
        .max()
}

/// Whether `attempt` started while `hold`, another holder's hold of its resource, was believed.
fn behind(attempt: &Attempt, hold: &Hold) -> bool {
    let (start, end) = hold.window();
    hold.resource == attempt.resource
        && hold.holder != attempt.holder
        && start <= attempt.started_us
        && attempt.started_us < end
}

/// Whether node fault `fault` was in effect at `at_us` (one never lifted lasts to the end).
fn during(at_us: u64, fault: &FaultWindow) -> bool {
    !fault.nodes.is_empty() && fault.start_us <= at_us && fault.end_us.is_none_or(|end| at_us < end)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checker::check;
    use crate::checker::tests::history;
    use crate::history::Stall;

    fn waited(holder: usize, started: u64, finished: u64, wait: u64, outcome: Outcome) -> Attempt {
        Attempt::new("r", holder, started, finished, outcome).waited(wait)
    }

    #[test]
    fn a_call_past_its_deadline_plus_the_slack_is_late_whatever_its_outcome() {
        let mut history = history(vec![Hold::new("r", 0, "a", 100, 600)], Vec::new());
        history.wait_slack_us = Some(50);
        history.attempts = vec![
            // Gave up at its deadline, and 50 µs after it: in time.
            waited(1, 0, 1_000, 1_000, Outcome::Held),
            waited(2, 0, 1_050, 1_000, Outcome::Unavailable),
            // 51 µs after it: late, once held and once acquired.
            waited(3, 0, 1_051, 1_000, Outcome::Held),
            waited(4, 200, 1_251, 1_000, Outcome::Acquired),
            // A single round is not judged.
            Attempt::new("r", 5, 0, 9_999, Outcome::Held),
        ];
        let report = check(&history);
        let late: Vec<usize> = report
            .late_waiters
            .iter()
            .map(|late| late.attempt.holder)
            .collect();
        assert_eq!(late, [3, 4]);
        assert_eq!(report.late_waiters[0].due_us(), 1_050);
        assert_eq!(report.late_waiters[1].past_deadline_us, 51);
        assert!(!report.is_safe());
        let summary = report.waits;
        assert_eq!(
            (
                summary.calls,
                summary.acquired,
                summary.gave_up_in_time,
                summary.late
            ),
            (4, 1, 2, 2)
        );
        // Holder 4 started inside holder 0's hold: it got the lock after waiting.
        assert_eq!(summary.acquired_after_waiting, 1);
        assert_eq!(summary.max_past_deadline_us, 51);

        history.wait_slack_us = Some(51);
        assert!(check(&history).is_safe());
    }

    #[test]
    fn a_grant_is_timed_from_the_last_release_during_its_wait() {
        let mut history = history(
            vec![
                // Released at 300 and at 700 while holder 9 waited; one left to expire.
                Hold::new("r", 0, "a", 100, 5_000).released(300),
                Hold::new("r", 1, "b", 400, 5_000).released(700),
                Hold::new("r", 2, "c", 800, 1_000),
                // Its own hold, and another resource's release: not counted.
                Hold::new("r", 9, "d", 750, 5_000).released(900),
                Hold::new("s", 3, "e", 100, 5_000).released(740),
            ],
            Vec::new(),
        );
        history.attempts = vec![
            waited(9, 200, 750, 10_000, Outcome::Acquired),
            // Waited through no release: only an expiry freed the lock.
            waited(8, 1_000, 1_100, 10_000, Outcome::Acquired),
        ];
        let summary = check(&history).waits;
        assert_eq!(summary.acquired_after_release, 1);
        assert_eq!(summary.after_release_p50_us, Some(50));
        // A stall of the runtime from 690 to 720 does not count against the wake-up; one
        // before the release or after the grant changes nothing.
        history.stalls = vec![
            Stall::new(600, 690),
            Stall::new(690, 720),
            Stall::new(760, 790),
        ];
        assert_eq!(check(&history).waits.after_release_p50_us, Some(30));
    }

    #[test]
    fn only_a_grant_behind_another_holder_or_inside_a_node_fault_counts_as_tested() {
        let mut history = history(vec![Hold::new("r", 0, "a", 100, 600)], Vec::new());
        history.wait_slack_us = Some(0);
        history.faults = vec![
            FaultWindow::new("SIGSTOP", vec![3], 700),
            FaultWindow::new("client paused", Vec::new(), 0).on_resource("r"),
        ];
        history.faults[0].end_us = Some(800);
        history.attempts = vec![
            // Its own hold, and one started after the other holder's: not behind anyone.
            waited(0, 100, 100, 1_000, Outcome::Acquired),
            waited(1, 600, 650, 1_000, Outcome::Acquired),
            // Granted inside the node fault (the client-side fault does not count).
            waited(2, 650, 750, 1_000, Outcome::Acquired),
        ];
        let summary = check(&history).waits;
        assert_eq!(summary.acquired, 3);
        assert_eq!(summary.acquired_after_waiting, 0);
        assert_eq!(summary.acquired_during_fault, 1);
        assert_eq!(summary.late, 0);
    }
}
