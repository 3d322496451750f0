//! The history checker: pure functions from a [`History`] to a [`CheckReport`].
//!
//! (Over 600 lines: the checker itself is under 400, the store audit lives in
//! `checker/audit.rs` and the keep-alive's checks in `checker/keep_alive.rs`; its unit and
//! property tests stay beside it, as they pin down exactly the instants explained below.)
//!
//! # Which instants, and why
//!
//! A holder relies on the lock from the moment its grant was decided ([`Hold::acquired_us`],
//! the guard's `decided_at`) until the earlier of the guard's validity
//! ([`Hold::valid_until_us`]) and the moment it started to release ([`Hold::released_us`]):
//! its [`window`](Hold::window). Two holds of one resource whose windows overlap are a
//! mutual-exclusion violation, also under one token: a token names one acquisition, so two
//! holds under it are two holders the lock let in at once.
//!
//! No false positives when the lock behaves: a second client can only win a quorum of nodes on
//! which the first one's key is gone. Each of those keys was set after the first acquire call
//! started (T1), so it lives until T1 + ttl on the node's clock, which (under the timing
//! assumptions) is later than `valid_until` = T1 + ttl − drift; or it was deleted by the first
//! holder's release, which started at `released_us`. Both happen before the second decision,
//! which is `acquired_us`. So in a correct run every later window starts
//! at or after every earlier one ends; back-to-back windows (`start == end`) do not overlap.
//!
//! No false negatives by construction of the window: it uses exactly what the holder believed
//! (the guard's own validity), so any two holders that both believed they held the lock at one
//! instant are reported.
//!
//! A write is stale when it was invoked before its own hold's window began, or completed after
//! it ended, carries a token no hold has, or carries the token of another client's hold: its
//! writer did not hold the lock for the whole write. (An unacknowledged write's completion is
//! unknown: only its invocation is checked here; where its effect landed is the store audit's
//! business.)
//!
//! The store audit (`checker/audit.rs`) checks the protected store's final state: no write
//! lost ([`LostWrite`]), no two holders' writes interleaved ([`Interleaving`]), and, with
//! fencing, the accepted writes' fences never going down in the order the store applied them
//! ([`FenceRegression`]); and no fence handed to two holds of one resource
//! (`checker/fence_repeats.rs`, [`FenceRepeat`]).
//!
//! A write the fenced store rejected ([`Write::rejected`]) changed nothing: it is counted
//! ([`CheckReport::rejected_writes`]) and is neither stale, nor lost, nor part of an
//! interleaving. A stale write the fenced store accepted is still a stale write.
//!
//! The holds of a semaphore's slots ([`History::semaphores`]) are checked against its permits
//! (`checker/permits.rs`): never more holders at one instant than permits ([`OverPermits`]).
//!
//! The holds of a read-write lock's sides ([`History::read_writes`]) are checked against its
//! promise (`checker/sides.rs`): no writer beside any other holder ([`WriterBeside`]).
//!
//! Holds kept alive ([`Hold::keep_alive`]) are also checked against the keep-alive's promises
//! (`checker/keep_alive.rs`): their lost signal came by the end of their validity
//! ([`LateLoss`]), and no write of theirs was invoked after it ([`WriteAfterLoss`]).
//!
//! An election's leaders ([`Hold::term`]) are checked against its promise (`checker/terms.rs`):
//! each leader's term larger than every earlier leader's ([`TermRegression`]).
//!
//! Calls that waited for the lock are checked against their deadline (`checker/waits.rs`): each
//! returned by it plus the one attempt it may finish ([`LateWaiter`]).

mod audit;
mod fence_repeats;
mod keep_alive;
mod permits;
mod sides;
mod terms;
mod waits;

use std::collections::{BTreeMap, HashMap};

use serde::Serialize;

use super::history::{History, Hold, Outcome, Stall, Write};

pub use audit::{FenceRegression, Interleaving, LostReason, LostWrite, WriteSpan};
pub use fence_repeats::FenceRepeat;
pub use keep_alive::{KeepAliveSummary, LateLoss, WriteAfterLoss};
pub use permits::{OverPermits, PermitUse};
pub use sides::{SideUse, WriterBeside};
pub use terms::{TermRegression, TermUse};
pub use waits::{LateWaiter, WaitSummary};

/// One side of a [`Violation`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct HoldRef {
    /// The client task.
    pub holder: usize,
    /// The hold's token.
    pub token: String,
    /// Start of the window (µs).
    pub start_us: u64,
    /// End of the window (µs).
    pub end_us: u64,
}

impl HoldRef {
    fn of(hold: &Hold) -> HoldRef {
        let (start_us, end_us) = hold.window();
        HoldRef {
            holder: hold.holder,
            token: hold.token.clone(),
            start_us,
            end_us,
        }
    }
}

/// Two holders that both believed they held one resource at the same time.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct Violation {
    /// The resource.
    pub resource: String,
    /// The hold whose window started first.
    pub first: HoldRef,
    /// The hold that started while the first one was still believed.
    pub second: HoldRef,
    /// How long both were believed at once (µs).
    pub overlap_us: u64,
}

/// Why a write was stale.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum StaleReason {
    /// After the writer's validity had ended.
    AfterValidity,
    /// After the writer had started to release.
    AfterRelease,
    /// Before the writer's hold began.
    BeforeAcquired,
    /// The write's token belongs to no recorded hold.
    UnknownHold,
    /// The write's token belongs to another client's hold.
    NotWritersHold,
}

/// A write made by a holder that did not hold the lock at that moment.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct StaleWrite {
    /// The write.
    pub write: Write,
    /// Why it was stale.
    pub reason: StaleReason,
    /// How long after its hold's window ended it completed (µs; 0 if unknown or before).
    pub late_by_us: u64,
    /// Another holder whose window contained the write, if any: the write clobbered live data.
    pub during_hold_of: Option<usize>,
}

/// Failed attempts by cause.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct Failures {
    /// Held by someone else.
    pub held: usize,
    /// Too few nodes answered.
    pub unavailable: usize,
    /// The round used up the whole validity.
    pub validity_expired: usize,
    /// Anything else.
    pub other: usize,
}

impl Failures {
    /// All failures.
    pub fn total(&self) -> usize {
        self.held + self.unavailable + self.validity_expired + self.other
    }
}

/// The runtime's stalls, counted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct StallSummary {
    /// How many.
    pub count: usize,
    /// The longest (µs; 0 with none).
    pub longest_us: u64,
}

impl StallSummary {
    fn of(stalls: &[Stall]) -> StallSummary {
        StallSummary {
            count: stalls.len(),
            longest_us: stalls
                .iter()
                .map(|stall| stall.to_us.saturating_sub(stall.from_us))
                .max()
                .unwrap_or(0),
        }
    }
}

/// How often clients got the lock.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
#[non_exhaustive]
pub struct Availability {
    /// Acquisition attempts.
    pub attempts: usize,
    /// Successful ones.
    pub acquired: usize,
    /// Successful acquisitions per second of the run.
    pub acquired_per_sec: f64,
    /// Failed attempts by cause.
    pub failures: Failures,
}

/// Latency percentiles of acquisition attempts, in microseconds (nearest rank).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct Latency {
    /// How many attempts were measured.
    pub samples: usize,
    /// Median.
    pub p50_us: u64,
    /// 99th percentile.
    pub p99_us: u64,
    /// Slowest.
    pub max_us: u64,
}

impl Latency {
    /// Percentiles of `samples` (any order).
    pub fn of(mut samples: Vec<u64>) -> Latency {
        samples.sort_unstable();
        Latency {
            samples: samples.len(),
            p50_us: nearest_rank(&samples, 50),
            p99_us: nearest_rank(&samples, 99),
            max_us: samples.last().copied().unwrap_or(0),
        }
    }
}

/// The `percent`th percentile of sorted `samples` by nearest rank (0 if empty).
fn nearest_rank(sorted: &[u64], percent: usize) -> u64 {
    if sorted.is_empty() {
        return 0;
    }
    let rank = (sorted.len() * percent).div_ceil(100).max(1);
    sorted.get(rank - 1).copied().unwrap_or(0)
}

/// What the checker found in a [`History`].
#[derive(Debug, Clone, PartialEq, Serialize)]
#[non_exhaustive]
pub struct CheckReport {
    /// Holds checked.
    pub holds: usize,
    /// Holds whose holder started to release before the validity ended.
    pub ended_by_release: usize,
    /// Holds that ran to the end of their validity (the keys expire).
    pub ended_by_expiry: usize,
    /// Writes checked.
    pub writes: usize,
    /// Writes the store acknowledged (accepted or rejected) in time.
    pub acked_writes: usize,
    /// Writes the fenced store rejected (they changed nothing): a stale holder's writes that
    /// fencing stopped.
    pub rejected_writes: usize,
    /// Every pair of overlapping holds, by resource and start.
    pub violations: Vec<Violation>,
    /// Every stale write, in time order.
    pub stale_writes: Vec<StaleWrite>,
    /// Every write whose effect the protected store lost.
    pub lost_writes: Vec<LostWrite>,
    /// Every pair of holders whose writes to one resource overlapped in time.
    pub interleaved: Vec<Interleaving>,
    /// Every place where the fenced store accepted a write with a lower fence than the one
    /// before it: a later holder's write, then an earlier holder's.
    pub fence_regressions: Vec<FenceRegression>,
    /// Every fence carried by two holds of one resource: a fence handed out twice.
    pub fence_repeats: Vec<FenceRepeat>,
    /// Every time a semaphore had more holders than permits ([`History::semaphores`]).
    pub over_permits: Vec<OverPermits>,
    /// Each semaphore's holds and the most held at once.
    pub permits: Vec<PermitUse>,
    /// Every writer of a read-write lock that held beside another holder of it
    /// ([`History::read_writes`]).
    pub writers_beside: Vec<WriterBeside>,
    /// Each read-write lock's holds by side and the most readers at once.
    pub sides: Vec<SideUse>,
    /// Every election leader whose term was not larger than an earlier leader's.
    pub term_regressions: Vec<TermRegression>,
    /// Each election's leaders and terms.
    pub terms: Vec<TermUse>,
    /// The holds kept alive: how many were extended, and lost (by reason).
    pub keep_alive: KeepAliveSummary,
    /// Every hold kept alive whose lost signal came after its validity ended, or never came
    /// while its holder held on past it, with no stall of the runtime to explain it: the
    /// keep-alive broke its promise.
    pub late_losses: Vec<LateLoss>,
    /// The holds whose lost signal came late while the runtime stalled over the end of their
    /// validity (seen within the lease's margin after it ran again): the documented caveat,
    /// not a broken promise, but no protection either; a holder that wrote in that stretch is
    /// still caught by the window and store checks.
    pub stalled_losses: Vec<LateLoss>,
    /// The runtime's stalls during the run ([`History::stalls`]).
    pub stalls: StallSummary,
    /// Every write invoked after its hold's lost signal.
    pub writes_after_loss: Vec<WriteAfterLoss>,
    /// The calls that waited for the lock: how many got it, gave up in time, or were late.
    pub waits: WaitSummary,
    /// Every call that waited and returned after its deadline plus one attempt.
    pub late_waiters: Vec<LateWaiter>,
    /// Availability of the lock.
    pub availability: Availability,
    /// Latency of successful attempts.
    pub acquire_latency: Latency,
    /// Latency of all attempts, successful or not.
    pub attempt_latency: Latency,
}

impl CheckReport {
    /// No violation, no stale write, no lost write, no interleaving, no fence regression or
    /// repeat, no semaphore over its permits, no writer beside another holder, no late lost signal, no write after one and no
    /// late waiter: mutual exclusion (and every permit bound) held throughout, every lease kept
    /// its promises, and every waiter its deadline.
    pub fn is_safe(&self) -> bool {
        self.violations.is_empty()
            && self.over_permits.is_empty()
            && self.writers_beside.is_empty()
            && self.term_regressions.is_empty()
            && self.stale_writes.is_empty()
            && self.lost_writes.is_empty()
            && self.interleaved.is_empty()
            && self.fence_regressions.is_empty()
            && self.fence_repeats.is_empty()
            && self.late_losses.is_empty()
            && self.writes_after_loss.is_empty()
            && self.late_waiters.is_empty()
    }
}

/// Checks a history for mutual-exclusion violations, stale writes, lost writes, interleaved
/// writes, fence regressions, semaphores over their permits, late lost signals and writes after them, late waiters, counts
/// rejected writes, the holds kept alive and the waiting calls, and measures availability and
/// latency. Pure: the same history
/// always gives the same report.
pub fn check(history: &History) -> CheckReport {
    let by_resource = holds_by_resource(&history.holds);
    let late_waiters = waits::late_waiters(history);
    let (late_losses, stalled_losses) = keep_alive::late_losses(&history.holds, &history.stalls);
    let (permits, over_permits) = permits::permits(history);
    let (sides, writers_beside) = sides::sides(history);
    let (terms, term_regressions) = terms::terms(&history.holds);
    let ended_by_release = history
        .holds
        .iter()
        .filter(|hold| hold.ended_by_release())
        .count();
    CheckReport {
        holds: history.holds.len(),
        ended_by_release,
        ended_by_expiry: history.holds.len() - ended_by_release,
        writes: history.writes.len(),
        acked_writes: history.writes.iter().filter(|write| write.acked).count(),
        rejected_writes: history
            .writes
            .iter()
            .filter(|write| write.rejected.is_some())
            .count(),
        violations: violations(&by_resource),
        stale_writes: stale_writes(history, &by_resource),
        lost_writes: audit::lost_writes(history),
        interleaved: audit::interleavings(&history.writes),
        fence_regressions: audit::fence_regressions(history),
        fence_repeats: fence_repeats::fence_repeats(&history.writes),
        keep_alive: keep_alive::summary(&history.holds),
        over_permits,
        permits,
        writers_beside,
        sides,
        term_regressions,
        terms,
        late_losses,
        stalled_losses,
        stalls: StallSummary::of(&history.stalls),
        writes_after_loss: keep_alive::writes_after_loss(history),
        waits: waits::summary(history, late_waiters.len()),
        late_waiters,
        availability: availability(history),
        acquire_latency: Latency::of(
            history
                .attempts
                .iter()
                .filter(|attempt| attempt.outcome == Outcome::Acquired)
                .map(|attempt| attempt.latency_us())
                .collect(),
        ),
        attempt_latency: Latency::of(history.attempts.iter().map(|a| a.latency_us()).collect()),
    }
}

/// Holds grouped by resource, each group sorted by window start (then end, then token).
fn holds_by_resource(holds: &[Hold]) -> BTreeMap<&str, Vec<&Hold>> {
    let mut groups: BTreeMap<&str, Vec<&Hold>> = BTreeMap::new();
    for hold in holds {
        groups.entry(hold.resource.as_str()).or_default().push(hold);
    }
    for group in groups.values_mut() {
        group.sort_by(|a, b| {
            (a.acquired_us, a.end_us(), &a.token).cmp(&(b.acquired_us, b.end_us(), &b.token))
        });
    }
    groups
}

/// Every pair of holds of one resource whose windows overlap (under one token or two).
fn violations(by_resource: &BTreeMap<&str, Vec<&Hold>>) -> Vec<Violation> {
    let mut found = Vec::new();
    for (resource, holds) in by_resource {
        for (i, first) in holds.iter().enumerate() {
            let (_, first_end) = first.window();
            // Sorted by start: once a later hold starts at or after this one's end, so do all
            // that follow it.
            for second in holds.iter().skip(i + 1) {
                let (second_start, second_end) = second.window();
                if second_start >= first_end {
                    break;
                }
                if second_start >= second_end {
                    continue;
                }
                found.push(Violation {
                    resource: (*resource).to_owned(),
                    first: HoldRef::of(first),
                    second: HoldRef::of(second),
                    overlap_us: first_end.min(second_end) - second_start,
                });
            }
        }
    }
    found
}

/// Every write whose writer did not hold the lock when it wrote, but for those the fenced store
/// rejected.
fn stale_writes(history: &History, by_resource: &BTreeMap<&str, Vec<&Hold>>) -> Vec<StaleWrite> {
    let by_token: HashMap<(&str, &str), &Hold> = history
        .holds
        .iter()
        .map(|hold| ((hold.resource.as_str(), hold.token.as_str()), hold))
        .collect();
    let reach: BTreeMap<&str, Vec<u64>> = by_resource
        .iter()
        .map(|(resource, holds)| (*resource, reach(holds)))
        .collect();
    let mut found = Vec::new();
    for write in history
        .writes
        .iter()
        .filter(|write| write.rejected.is_none())
    {
        let own = by_token.get(&(write.resource.as_str(), write.token.as_str()));
        let (reason, late_by_us) = match own {
            None => (StaleReason::UnknownHold, 0),
            Some(hold) if hold.holder != write.holder => (StaleReason::NotWritersHold, 0),
            Some(hold) => {
                let (start, end) = hold.window();
                // An acknowledged write must complete inside the window; an unacknowledged
                // one's completion is unknown, so only its invocation can be checked.
                let last = if write.acked {
                    write.completed_us
                } else {
                    write.invoked_us
                };
                let clean = if write.acked { last <= end } else { last < end };
                if write.invoked_us < start {
                    (StaleReason::BeforeAcquired, 0)
                } else if clean {
                    continue;
                } else if hold.ended_by_release()
                    && hold.released_us.is_some_and(|released| released <= last)
                {
                    (StaleReason::AfterRelease, last - end)
                } else {
                    (StaleReason::AfterValidity, last - end)
                }
            }
        };
        let during_hold_of = by_resource
            .get(write.resource.as_str())
            .zip(reach.get(write.resource.as_str()))
            .and_then(|(holds, reach)| {
                other_holder_during(
                    holds,
                    reach,
                    write.invoked_us,
                    write.completed_us,
                    &write.token,
                )
            });
        found.push(StaleWrite {
            write: write.clone(),
            reason,
            late_by_us,
            during_hold_of,
        });
    }
    found.sort_by_key(|stale| stale.write.invoked_us);
    found
}

/// For holds sorted by window start: at each index, the latest window end up to it.
fn reach(holds: &[&Hold]) -> Vec<u64> {
    holds
        .iter()
        .scan(0, |latest, hold| {
            *latest = hold.end_us().max(*latest);
            Some(*latest)
        })
        .collect()
}

/// The holder of the earliest-starting hold not under `token` whose window touches
/// `[from_us, to_us]` (it starts by `to_us` and ends after `from_us`), among `holds` sorted by
/// window start, with their [`reach`].
///
/// A binary search for the last window that started by `to_us`, then back from there only
/// while some window that far back still reaches past `from_us`: in a history without
/// overlapping holds that is a step or two, so checking a long run's stale writes stays
/// O(writes × log holds).
fn other_holder_during(
    holds: &[&Hold],
    reach: &[u64],
    from_us: u64,
    to_us: u64,
    token: &str,
) -> Option<usize> {
    let started = holds.partition_point(|hold| hold.acquired_us <= to_us);
    (0..started)
        .rev()
        .take_while(|&i| reach.get(i).is_some_and(|&end| end > from_us))
        .filter_map(|i| holds.get(i))
        .filter(|hold| hold.token != token && from_us < hold.end_us())
        .last()
        .map(|hold| hold.holder)
}

fn availability(history: &History) -> Availability {
    let mut failures = Failures::default();
    let mut acquired = 0;
    for attempt in &history.attempts {
        match attempt.outcome {
            Outcome::Acquired => acquired += 1,
            Outcome::Held => failures.held += 1,
            Outcome::Unavailable => failures.unavailable += 1,
            Outcome::ValidityExpired => failures.validity_expired += 1,
            Outcome::Other => failures.other += 1,
        }
    }
    let seconds = history.duration_us as f64 / 1e6;
    Availability {
        attempts: history.attempts.len(),
        acquired,
        acquired_per_sec: if seconds > 0.0 {
            acquired as f64 / seconds
        } else {
            0.0
        },
        failures,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::{Attempt, Rejection};
    use proptest::prelude::*;

    /// A history of just these holds and writes; the checker's submodules test with it too.
    pub(super) fn history(holds: Vec<Hold>, writes: Vec<Write>) -> History {
        History {
            holds,
            writes,
            ..History::default()
        }
    }

    #[test]
    fn overlapping_holds_are_a_violation() {
        let report = check(&history(
            vec![
                Hold::new("r", 1, "a", 0, 100),
                Hold::new("r", 2, "b", 60, 200),
            ],
            vec![],
        ));
        assert_eq!(report.violations.len(), 1);
        let violation = &report.violations[0];
        assert_eq!((violation.first.holder, violation.second.holder), (1, 2));
        assert_eq!(violation.overlap_us, 40);
        assert!(!report.is_safe());
    }

    /// A token names one acquisition: two holds under it that overlap are two holders at once
    /// (a lock that handed one grant to two clients), not one.
    /// A set is recorded as one hold per resource with the set's token and window: two sets
    /// that share a resource and overlap in time are a violation on that resource only, and a
    /// set beside a disjoint one is none.
    #[test]
    fn overlapping_sets_are_a_violation_on_the_resource_they_share() {
        let set = |resources: &[&str], holder, token, from, to| {
            resources
                .iter()
                .map(move |&resource| Hold::new(resource, holder, token, from, to))
                .collect::<Vec<_>>()
        };
        let holds = [
            set(&["a", "b"], 1, "s1", 0, 100),
            set(&["b", "c"], 2, "s2", 60, 200),
            set(&["d", "e"], 3, "s3", 0, 200),
        ]
        .concat();
        let report = check(&history(holds, vec![]));
        assert_eq!(report.violations.len(), 1, "{report:#?}");
        assert_eq!(report.violations[0].resource, "b");
        assert_eq!(report.violations[0].overlap_us, 40);
    }

    #[test]
    fn overlapping_holds_under_one_token_are_a_violation() {
        let report = check(&history(
            vec![
                Hold::new("r", 1, "a", 0, 100),
                Hold::new("r", 2, "a", 50, 150),
            ],
            vec![],
        ));
        assert_eq!(report.violations.len(), 1, "{report:#?}");
        assert_eq!(report.violations[0].overlap_us, 50);
    }

    /// A write under another client's token is stale even inside that hold's window: the writer
    /// held nothing.
    #[test]
    fn a_write_under_another_clients_token_is_stale() {
        let report = check(&history(
            vec![Hold::new("r", 1, "a", 0, 100)],
            vec![
                Write::new("r", 1, "a", 10, 10),
                Write::new("r", 2, "a", 20, 20),
            ],
        ));
        let stale: Vec<_> = report
            .stale_writes
            .iter()
            .map(|s| (s.write.holder, s.reason))
            .collect();
        assert_eq!(stale, vec![(2, StaleReason::NotWritersHold)]);
    }

    #[test]
    fn back_to_back_and_released_holds_are_fine() {
        let report = check(&history(
            vec![
                Hold::new("r", 1, "a", 0, 100),
                Hold::new("r", 2, "b", 100, 200),
                // Valid until 400, but released at 250: the next may start at 250.
                Hold::new("r", 3, "c", 200, 400).released(250),
                Hold::new("r", 4, "d", 250, 300).started(120),
                // Another resource may overlap freely.
                Hold::new("s", 5, "e", 0, 400),
            ],
            vec![
                Write::new("r", 1, "a", 99, 99),
                Write::new("r", 3, "c", 249, 249),
            ],
        ));
        assert!(report.is_safe(), "{report:#?}");
    }

    #[test]
    fn a_hold_inside_another_is_found() {
        let report = check(&history(
            vec![
                Hold::new("r", 1, "a", 0, 1000),
                Hold::new("r", 2, "b", 100, 200),
                Hold::new("r", 3, "c", 300, 400),
            ],
            vec![],
        ));
        assert_eq!(report.violations.len(), 2);
    }

    #[test]
    fn late_writes_are_stale() {
        let report = check(&history(
            vec![
                Hold::new("r", 1, "a", 0, 100),
                Hold::new("r", 2, "b", 120, 300).released(200),
                Hold::new("r", 3, "c", 200, 300),
            ],
            vec![
                Write::new("r", 1, "a", 50, 50),
                Write::new("r", 1, "a", 150, 150),
                Write::new("r", 2, "b", 210, 210),
                Write::new("r", 9, "zz", 5, 5),
            ],
        ));
        let reasons: Vec<_> = report
            .stale_writes
            .iter()
            .map(|s| (s.write.invoked_us, s.reason, s.late_by_us, s.during_hold_of))
            .collect();
        assert_eq!(
            reasons,
            vec![
                (5, StaleReason::UnknownHold, 0, Some(1)),
                (150, StaleReason::AfterValidity, 50, Some(2)),
                (210, StaleReason::AfterRelease, 10, Some(3)),
            ]
        );
        assert!(report.violations.is_empty());
    }

    /// A write is clean only if it was invoked and acknowledged inside its hold's window; an
    /// unacknowledged one is judged by its invocation alone.
    #[test]
    fn writes_are_judged_by_invocation_and_completion() {
        let report = check(&history(
            vec![
                Hold::new("r", 1, "a", 100, 200),
                Hold::new("r", 2, "b", 300, 400).extended(500),
            ],
            vec![
                Write::new("r", 1, "a", 150, 200),
                Write::new("r", 1, "a", 190, 210),
                Write::new("r", 1, "a", 90, 110),
                Write::new("r", 1, "a", 195, 260).unacked(),
                Write::new("r", 1, "a", 200, 201).unacked(),
                // Inside the extended window.
                Write::new("r", 2, "b", 450, 499),
            ],
        ));
        let stale: Vec<_> = report
            .stale_writes
            .iter()
            .map(|s| (s.write.invoked_us, s.reason, s.late_by_us))
            .collect();
        assert_eq!(
            stale,
            vec![
                (90, StaleReason::BeforeAcquired, 0),
                (190, StaleReason::AfterValidity, 10),
                (200, StaleReason::AfterValidity, 0),
            ]
        );
    }

    /// A write the fenced store rejected changed nothing: counted, but not stale; the same
    /// write accepted is stale.
    #[test]
    fn a_rejected_late_write_is_counted_not_stale() {
        let holds = vec![
            Hold::new("r", 1, "a", 0, 100),
            Hold::new("r", 2, "b", 120, 300),
        ];
        let late = Write::new("r", 1, "a", 150, 151).fenced(1);
        let report = check(&history(
            holds.clone(),
            vec![late.clone().rejected(Rejection::OlderFence)],
        ));
        assert!(report.is_safe(), "{report:#?}");
        assert_eq!(report.rejected_writes, 1);
        let report = check(&history(holds, vec![late]));
        assert_eq!(report.rejected_writes, 0);
        assert_eq!(report.stale_writes.len(), 1);
        assert!(!report.is_safe());
    }

    #[test]
    fn holds_end_by_release_or_expiry() {
        let report = check(&history(
            vec![
                Hold::new("r", 1, "a", 0, 100).released(50),
                Hold::new("r", 2, "b", 100, 200).released(200),
                Hold::new("r", 3, "c", 200, 300),
            ],
            vec![],
        ));
        assert_eq!((report.ended_by_release, report.ended_by_expiry), (1, 2));
    }

    #[test]
    fn availability_and_latency() {
        let mut h = history(vec![], vec![]);
        h.duration_us = 2_000_000;
        for (i, outcome) in [
            Outcome::Acquired,
            Outcome::Acquired,
            Outcome::Held,
            Outcome::Unavailable,
            Outcome::ValidityExpired,
            Outcome::Other,
        ]
        .into_iter()
        .enumerate()
        {
            h.attempts
                .push(Attempt::new("r", 0, 0, (i as u64 + 1) * 10, outcome));
        }
        let report = check(&h);
        assert_eq!(report.availability.acquired, 2);
        assert!((report.availability.acquired_per_sec - 1.0).abs() < 1e-9);
        assert_eq!(report.availability.failures.total(), 4);
        assert_eq!(report.acquire_latency.p50_us, 10);
        assert_eq!(report.acquire_latency.p99_us, 20);
        assert_eq!(report.attempt_latency.max_us, 60);
    }

    #[test]
    fn percentiles_by_nearest_rank() {
        let l = Latency::of((1..=100).rev().collect());
        assert_eq!((l.p50_us, l.p99_us, l.max_us), (50, 99, 100));
        assert_eq!(Latency::of(vec![]).p99_us, 0);
        assert_eq!(Latency::of(vec![7]).p50_us, 7);
    }

    /// Sequential holds of one resource: each starts at or after the previous one's end.
    fn sequential_holds() -> impl Strategy<Value = Vec<Hold>> {
        prop::collection::vec((0u64..50, 1u64..100, prop::option::of(0u64..120)), 1..40).prop_map(
            |specs| {
                let mut t = 0;
                let mut holds = Vec::new();
                for (i, (gap, validity, release_after)) in specs.into_iter().enumerate() {
                    let start = t + gap;
                    let mut hold = Hold::new("r", i % 4, format!("t{i}"), start, start + validity)
                        .started(start.saturating_sub(gap));
                    if let Some(after) = release_after {
                        hold = hold.released(start + after);
                    }
                    t = hold.end_us();
                    holds.push(hold);
                }
                holds
            },
        )
    }

    /// Holds of one resource that may overlap, and an instant among them.
    fn any_holds() -> impl Strategy<Value = (Vec<Hold>, u64)> {
        let hold = (
            0u64..1_000,
            0u64..300,
            prop::option::of(0u64..300),
            0usize..4,
        );
        (prop::collection::vec(hold, 0..40), 0u64..1_400).prop_map(|(specs, at)| {
            let holds = specs
                .into_iter()
                .enumerate()
                .map(|(i, (start, validity, release_after, holder))| {
                    let hold =
                        Hold::new("r", holder, format!("t{}", i % 5), start, start + validity);
                    match release_after {
                        Some(after) => hold.released(start + after),
                        None => hold,
                    }
                })
                .collect();
            (holds, at)
        })
    }

    proptest! {
        /// The binary search finds what a scan of every hold finds.
        #[test]
        fn the_holder_during_an_interval_is_the_first_one_a_scan_finds(
            (holds, from) in any_holds(),
            length in 0u64..50,
        ) {
            let to = from + length;
            let by_resource = holds_by_resource(&holds);
            let sorted = by_resource.get("r").cloned().unwrap_or_default();
            let scan = sorted
                .iter()
                .find(|hold| {
                    let (start, end) = hold.window();
                    hold.token != "t0" && start <= to && from < end
                })
                .map(|hold| hold.holder);
            prop_assert_eq!(other_holder_during(&sorted, &reach(&sorted), from, to, "t0"), scan);
        }

        #[test]
        fn sequential_holds_never_violate(holds in sequential_holds(), seed in any::<u64>()) {
            // Writes strictly inside each window are never stale.
            let writes = holds
                .iter()
                .filter(|h| h.end_us() > h.acquired_us)
                .map(|h| {
                    let invoked = h.acquired_us + seed % (h.end_us() - h.acquired_us);
                    let completed = invoked + seed % (h.end_us() - invoked + 1);
                    Write::new("r", h.holder, h.token.clone(), invoked, completed)
                })
                .collect();
            let report = check(&history(holds, writes));
            prop_assert!(report.is_safe(), "{:#?}", report);
        }

        // promise: chaos-verdicts
        #[test]
        fn one_shifted_hold_is_caught(holds in sequential_holds(), pick in any::<prop::sample::Index>(), back in 1u64..50) {
            prop_assume!(holds.len() >= 2);
            let mut holds = holds;
            let i = pick.index(holds.len() - 1) + 1;
            let previous_end = holds[i - 1].end_us();
            let previous_start = holds[i - 1].acquired_us;
            prop_assume!(previous_end > previous_start);
            // Move hold i to start strictly inside hold i−1's window.
            let start = previous_end - back.min(previous_end - previous_start);
            let hold = &mut holds[i];
            let length = hold.valid_until_us - hold.acquired_us;
            hold.acquired_us = start;
            hold.valid_until_us = start + length;
            hold.released_us = None;
            let report = check(&history(holds, vec![]));
            prop_assert!(!report.violations.is_empty());
        }
    }
}
