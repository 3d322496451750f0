//! The keep-alive's promises, checked on the holds kept alive (those with a
//! [`KeptLease`](crate::history::KeptLease)), pure:
//!
//! - **the lost signal comes in time** ([`LateLoss`]): a lease promises that
//!   [`Lease::lost`](quorumlock::Lease::lost) completes at the latest when the validity of its
//!   last successful extension ends. That validity ends at the hold's `valid_until_us` (the
//!   lease's trusted deadline, as last read) plus the lease's margin. A hold whose signal was
//!   seen later, or never although the holder still held the lock when the validity ended
//!   (it released later, or never), breaks the promise.
//! - **nothing is written after it** ([`WriteAfterLoss`]): a write of the hold invoked after its
//!   lost signal was seen. The kept holder reads the instant it records as a write's
//!   invocation before it asks [`Lease::is_valid`](quorumlock::Lease::is_valid), and the lease
//!   promises `is_valid()` is false no later than `lost()` completes: so with a correct lease
//!   every write the holder makes is invoked before the signal could be seen, and one invoked
//!   after it means `is_valid()` said true after the lock was lost.
//!
//! Why the signal is judged against the validity and not the lease's deadline: the keep-alive's
//! timer fires at the deadline (never before), and the margin between the deadline and the
//! validity is what absorbs its firing late; the slack left ([`KeepAliveSummary::min_slack_us`])
//! shows how much of the margin a run used.

use serde::Serialize;

use super::HoldRef;
use crate::history::{History, Hold, LossReason, Stall, Write};

/// A hold kept alive whose lost signal did not come by the end of its validity.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct LateLoss {
    /// The hold.
    pub hold: HoldRef,
    /// When the validity of its last successful extension ended (µs).
    pub validity_end_us: u64,
    /// When its lost signal was seen (`None`: never, while the holder held the lock past the
    /// validity).
    pub lost_us: Option<u64>,
}

/// A protected write invoked after its hold's lost signal was seen.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct WriteAfterLoss {
    /// The write.
    pub write: Write,
    /// When its hold's lost signal was seen (µs).
    pub lost_us: u64,
}

/// The holds kept alive, counted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct KeepAliveSummary {
    /// Holds kept alive.
    pub holds: usize,
    /// Of those, the ones extended at least once.
    pub extended: usize,
    /// Of those, the ones whose lease signalled the lock lost.
    pub lost: usize,
    /// Lost because a majority answered that the key was gone.
    pub lost_taken: usize,
    /// Lost because no extension succeeded before the validity ran out.
    pub lost_expired: usize,
    /// Lost at `max_hold`, or for another reason.
    pub lost_other: usize,
    /// The least time between a lost signal and the end of the validity it came under (µs; 0
    /// for a signal that came late); `None` without losses.
    pub min_slack_us: Option<u64>,
}

/// Counts the holds kept alive.
pub(super) fn summary(holds: &[Hold]) -> KeepAliveSummary {
    let mut summary = KeepAliveSummary::default();
    for hold in holds {
        let (Some(lease), Some(validity_end)) = (&hold.keep_alive, hold.validity_end_us()) else {
            continue;
        };
        summary.holds += 1;
        if hold.extensions > 0 {
            summary.extended += 1;
        }
        let Some(lost) = lease.lost else {
            continue;
        };
        summary.lost += 1;
        match lost.reason {
            LossReason::Taken => summary.lost_taken += 1,
            LossReason::Expired => summary.lost_expired += 1,
            _ => summary.lost_other += 1,
        }
        let slack = validity_end.saturating_sub(lost.at_us);
        summary.min_slack_us = Some(summary.min_slack_us.map_or(slack, |min| min.min(slack)));
    }
    summary
}

/// Every hold kept alive whose lost signal came after its validity ended, or never came while
/// the holder held the lock past it: first those no stall of the runtime explains, then those
/// one does ([`stalled`]).
pub(super) fn late_losses(holds: &[Hold], stalls: &[Stall]) -> (Vec<LateLoss>, Vec<LateLoss>) {
    let mut late = Vec::new();
    let mut excused = Vec::new();
    for hold in holds {
        let (Some(lease), Some(validity_end_us)) = (&hold.keep_alive, hold.validity_end_us())
        else {
            continue;
        };
        let lost_us = lease.lost.map(|lost| lost.at_us);
        // When the holder stopped relying on the lock: it saw the signal, or it released.
        let seen_us = lost_us.or(hold.released_us);
        if seen_us.is_some_and(|seen_us| seen_us <= validity_end_us) {
            continue;
        }
        let loss = LateLoss {
            hold: HoldRef::of(hold),
            validity_end_us,
            lost_us,
        };
        // Never seen is late, whatever stalled.
        let excusable = seen_us
            .is_some_and(|seen_us| stalled(validity_end_us, seen_us, lease.margin_us, stalls));
        if excusable {
            excused.push(loss);
        } else {
            late.push(loss);
        }
    }
    (late, excused)
}

/// Whether the runtime's stalls explain a signal seen at `seen_us` for a validity ending at
/// `validity_end_us`: a stall spanned the end of the validity, and the holder saw the signal
/// within the lease's margin after the runtime ran again. Stalls less than a margin apart count
/// as one, on both sides of the end: in between, the keeper may have fired and its holders not
/// yet been polled, and an end that falls in the probe's one tick between two stalls (a run of
/// the chaos tests: stalled 42 ms until 0.6 ms before the end, again from 0.4 ms after it) is no
/// sign that the runtime ran.
///
/// The margin is what the keeper keeps for firing late when the runtime runs; a keeper that
/// fires late for a reason of its own is caught outside stalls, and inside one if it is later
/// than that.
fn stalled(validity_end_us: u64, seen_us: u64, margin_us: u64, stalls: &[Stall]) -> bool {
    // The chain of stalls (in time order) that reaches the end of the validity, if one does.
    let mut chain: Option<(u64, u64)> = None;
    for stall in stalls {
        match &mut chain {
            Some((_, to)) if stall.from_us <= to.saturating_add(margin_us) => {
                *to = (*to).max(stall.to_us);
            }
            Some((_, to)) if *to >= validity_end_us => break,
            _ => chain = Some((stall.from_us, stall.to_us)),
        }
    }
    chain.is_some_and(|(from_us, ran_again_us)| {
        from_us < validity_end_us
            && validity_end_us <= ran_again_us
            && seen_us <= ran_again_us.saturating_add(margin_us)
    })
}

/// Every write invoked after the lost signal of its hold (the hold of its resource and token)
/// was seen, in time order.
pub(super) fn writes_after_loss(history: &History) -> Vec<WriteAfterLoss> {
    let lost: std::collections::HashMap<(&str, &str), u64> = history
        .holds
        .iter()
        .filter_map(|hold| {
            let lost = hold.keep_alive.as_ref()?.lost?;
            Some(((hold.resource.as_str(), hold.token.as_str()), lost.at_us))
        })
        .collect();
    let mut found: Vec<WriteAfterLoss> = history
        .writes
        .iter()
        .filter_map(|write| {
            let &lost_us = lost.get(&(write.resource.as_str(), write.token.as_str()))?;
            (write.invoked_us > lost_us).then(|| WriteAfterLoss {
                write: write.clone(),
                lost_us,
            })
        })
        .collect();
    found.sort_by_key(|found| found.write.invoked_us);
    found
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checker::check;
    use crate::checker::tests::history;

    /// A signal by the validity's end (the deadline plus the margin) keeps the promise, one
    /// after it does not; so does a release before the end without a signal, and not a hold
    /// kept past it without one.
    #[test]
    fn the_lost_signal_must_come_by_the_end_of_the_validity() {
        let holds = vec![
            // Deadline 100, margin 4: the validity ends at 104.
            Hold::new("r", 1, "in-time", 0, 100)
                .kept(4)
                .lost(103, LossReason::Expired),
            Hold::new("r", 1, "at-the-end", 0, 100)
                .kept(4)
                .lost(104, LossReason::Taken),
            Hold::new("r", 1, "late", 0, 100)
                .kept(4)
                .lost(105, LossReason::Expired),
            Hold::new("r", 1, "released", 0, 100).kept(4).released(90),
            Hold::new("r", 1, "never", 0, 100).kept(4).released(150),
            Hold::new("r", 1, "never-released", 0, 100).kept(4),
            // Not kept alive: none of this applies.
            Hold::new("r", 1, "guard", 0, 100),
        ];
        let (late, stalled) = late_losses(&holds, &[]);
        assert!(stalled.is_empty(), "no stall, nothing explained by one");
        let late: Vec<_> = late
            .into_iter()
            .map(|late| (late.hold.token, late.validity_end_us, late.lost_us))
            .collect();
        assert_eq!(
            late,
            vec![
                ("late".to_owned(), 104, Some(105)),
                ("never".to_owned(), 104, None),
                ("never-released".to_owned(), 104, None),
            ]
        );
        let summary = summary(&holds);
        assert_eq!(
            (
                summary.holds,
                summary.lost,
                summary.lost_taken,
                summary.lost_expired
            ),
            (6, 3, 1, 2)
        );
        assert_eq!(summary.min_slack_us, Some(0));
        assert_eq!(check(&history(holds, vec![])).late_losses.len(), 3);
    }

    /// A signal late while the runtime stalled over the end of the validity is the runtime's
    /// doing (a timer cannot fire while no timer fires): it is set apart, when seen within the
    /// margin after the runtime ran again (a chain of stalls less than a margin apart counts as
    /// one, also where the end falls between two of them). A stall that ended before the
    /// validity did, or one after which the signal took longer than the margin, explains nothing.
    #[test]
    fn a_signal_late_over_a_stall_of_the_runtime_is_set_apart() {
        // Deadline 100, margin 4: every validity ends at 104.
        let lost_at = |token: &str, at: u64| {
            Hold::new("r", 1, token, 0, 100)
                .kept(4)
                .lost(at, LossReason::Expired)
        };
        let holds = vec![
            lost_at("within-the-margin", 124),
            lost_at("after-the-chain", 131),
            lost_at("past-the-margin", 136),
            Hold::new("r", 1, "released-late", 0, 100)
                .kept(4)
                .released(122),
        ];
        // The runtime ran at 99, stalled over 104 until 120, ran, stalled 123 to 127.
        let stalls = [
            Stall::new(90, 99),
            Stall::new(101, 120),
            Stall::new(123, 127),
        ];
        let (late, stalled) = late_losses(&holds, &stalls);
        let tokens = |losses: Vec<LateLoss>| -> Vec<String> {
            losses.into_iter().map(|loss| loss.hold.token).collect()
        };
        assert_eq!(tokens(late), vec!["past-the-margin"]);
        assert_eq!(
            tokens(stalled),
            vec!["within-the-margin", "after-the-chain", "released-late"]
        );
        // A stall that ended before the validity did explains nothing.
        let (late, stalled) = late_losses(&holds, &[Stall::new(50, 103)]);
        assert_eq!((late.len(), stalled.len()), (4, 0));
        // Nor does one that began after it ended.
        let (late, stalled) = late_losses(&holds, &[Stall::new(105, 130)]);
        assert_eq!((late.len(), stalled.len()), (4, 0));
        // The two of them less than a margin apart are one chain, which spans the end.
        let (late, stalled) = late_losses(&holds, &[Stall::new(50, 103), Stall::new(105, 130)]);
        assert_eq!(tokens(late), vec!["past-the-margin"]);
        assert_eq!(stalled.len(), 3);
        // Apart by more than a margin, neither reaches across the end.
        let (late, stalled) = late_losses(&holds, &[Stall::new(50, 100), Stall::new(105, 130)]);
        assert_eq!((late.len(), stalled.len()), (4, 0));
        let mut history = history(holds, vec![]);
        history.stalls = stalls.to_vec();
        let report = check(&history);
        assert_eq!(
            (report.late_losses.len(), report.stalled_losses.len()),
            (1, 3)
        );
        assert_eq!(
            (report.stalls.count, report.stalls.longest_us),
            (3, 19),
            "{:#?}",
            report.stalls
        );
    }

    /// Extended holds are counted; the slack is the least time a signal left before the end.
    #[test]
    fn extended_holds_and_the_slack_are_counted() {
        let holds = vec![
            Hold::new("r", 1, "a", 0, 100)
                .kept(4)
                .extended(200)
                .lost(190, LossReason::Expired),
            Hold::new("r", 2, "b", 300, 400)
                .kept(4)
                .lost(399, LossReason::Expired),
            Hold::new("r", 3, "c", 500, 600).kept(4).released(550),
        ];
        let summary = summary(&holds);
        assert_eq!((summary.holds, summary.extended, summary.lost), (3, 1, 2));
        assert_eq!(summary.min_slack_us, Some(5));
        let report = check(&history(holds, vec![]));
        assert!(report.is_safe(), "{report:#?}");
        assert_eq!(report.keep_alive, summary);
    }

    /// A write invoked after its own hold's signal is found; one invoked before it (also one
    /// still in flight when the signal came), or another hold's, is not.
    #[test]
    fn a_write_invoked_after_the_lost_signal_is_found() {
        let holds = vec![
            Hold::new("r", 1, "a", 0, 100)
                .kept(4)
                .lost(100, LossReason::Expired)
                .released(101),
            Hold::new("r", 2, "b", 200, 300).released(250),
        ];
        let writes = vec![
            Write::new("r", 1, "a", 50, 60),
            Write::new("r", 1, "a", 99, 102).unacked(),
            Write::new("r", 1, "a", 100, 100),
            Write::new("r", 1, "a", 101, 101),
            Write::new("r", 2, "b", 210, 220),
        ];
        let found: Vec<_> = writes_after_loss(&history(holds.clone(), writes.clone()))
            .into_iter()
            .map(|found| (found.write.invoked_us, found.lost_us))
            .collect();
        assert_eq!(found, vec![(101, 100)]);
        let report = check(&history(holds, writes));
        assert_eq!(report.writes_after_loss.len(), 1);
        assert!(!report.is_safe());
    }
}
