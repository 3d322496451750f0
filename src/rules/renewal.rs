//! The keep-alive's schedule, as pure arithmetic: when the next extension is due, which TTL it
//! asks for under `max_hold`, how long to pause after a failed one, until when the lease is
//! trusted, and when failed extensions prove the lock lost. No I/O; the task that follows the
//! schedule, and the checks of the user's [`KeepAlive`](crate::KeepAlive), are in `keep_alive.rs`.
//!
//! Times are offsets from the moment the acquisition was decided, so that the rules can be
//! checked for any input.

use std::time::Duration;

use super::clock::Moment;

/// The shortest pause between two extension attempts, so that a node failing at once cannot
/// make the keep-alive spin.
const MIN_PAUSE: Duration = Duration::from_millis(1);

/// The least and the most a lease stops trusting the lock before its validity ends.
const MIN_MARGIN: Duration = Duration::from_millis(5);
const MAX_MARGIN: Duration = Duration::from_millis(50);

/// How long before the validity ends a kept lease stops trusting the lock (and its lost signal
/// fires): 2 % of the TTL, at least 5 ms and at most 50 ms. The signal is a timer, and tokio's
/// timers fire on whole milliseconds, after their deadline, and then the task must be polled:
/// the chaos runs measured it 0.3–6 ms late on a loaded machine (a stall of the whole process
/// is beyond any margin). With a margin of 1 ms, lost signals came after the validity.
pub(crate) fn margin(ttl: Duration) -> Duration {
    (ttl / 50).clamp(MIN_MARGIN, MAX_MARGIN)
}

/// The most the keeper acts ahead of a trusted deadline to make up for its own late timers.
const MAX_LEAD: Duration = Duration::from_millis(100);
/// How fast a late timer is forgotten: the lead halves every this long.
const LEAD_HALF_LIFE: Duration = Duration::from_secs(2);

/// How far ahead of a trusted deadline the keeper marks a lease lost: as late as its own timer
/// fired lately, decaying by half every [`LEAD_HALF_LIFE`], at most [`MAX_LEAD`] (the keeper
/// also keeps it under a quarter of the shortest interval it keeps). When many leases are lost at once, the tasks that
/// the losses wake delay the keeper's next timers past the margin (up to 40 ms measured at
/// 5,000 leases, `docs/chaos.md`); acting that much earlier keeps the signal before the
/// validity. A lease only comes that near its deadline when its extensions fail, so acting
/// early costs nothing to a lease that is being extended.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(crate) struct Lead {
    /// The lateness last noted above the decayed lead, and when.
    late: Duration,
    at: Option<Moment>,
}

impl Lead {
    /// Notes that a timer due at `due` fired at `now`.
    pub(crate) fn note(&mut self, due: Moment, now: Moment) {
        let late = now.saturating_duration_since(due).min(MAX_LEAD);
        if late > self.at(now) {
            self.late = late;
            self.at = Some(now);
        }
    }

    /// The lead at `now`.
    pub(crate) fn at(&self, now: Moment) -> Duration {
        let Some(at) = self.at else {
            return Duration::ZERO;
        };
        let halvings =
            now.saturating_duration_since(at).as_secs_f64() / LEAD_HALF_LIFE.as_secs_f64();
        Duration::try_from_secs_f64(self.late.as_secs_f64() * 0.5f64.powf(halvings))
            .unwrap_or(Duration::ZERO)
            .min(self.late)
    }
}

/// The interval between extensions unless the user sets one: a third of the TTL, so two
/// extensions can fail before the validity runs out.
pub(crate) fn default_interval(ttl: Duration) -> Duration {
    ttl / 3
}

/// A keep-alive schedule (its interval checked against the TTL by `keep_alive.rs`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Schedule {
    /// The lock's TTL, which every extension asks for (less near `max_hold`).
    pub(crate) ttl: Duration,
    /// How long after the last grant or extension the next extension is due.
    pub(crate) every: Duration,
    /// How long after the acquisition the keys may live at most, if bounded.
    pub(crate) max_hold: Option<Duration>,
    /// How long before the validity ends the lease stops being trusted (and the lost signal
    /// fires), so that a timer firing a little late still fires before the validity ends.
    pub(crate) margin: Duration,
}

impl Schedule {
    /// When the next extension is due after one that succeeded (or the grant) at `last`.
    pub(crate) fn next_after_success(&self, last: Duration) -> Duration {
        last.saturating_add(self.every)
    }

    /// When to try again after an extension that failed at `now`: a quarter of the interval
    /// later, at least [`MIN_PAUSE`], so several attempts fit in the validity that is left.
    pub(crate) fn next_after_failure(&self, now: Duration) -> Duration {
        now.saturating_add((self.every / 4).max(MIN_PAUSE))
    }

    /// The TTL an extension at `now` asks for: the lock's TTL, cut so that the keys do not
    /// outlive `max_hold`. `None` once less than a millisecond of `max_hold` is left (Redis'
    /// resolution): no more extensions.
    pub(crate) fn extension_ttl(&self, now: Duration) -> Option<Duration> {
        let Some(max_hold) = self.max_hold else {
            return Some(self.ttl);
        };
        let left = max_hold.saturating_sub(now);
        (left >= Duration::from_millis(1)).then(|| left.min(self.ttl))
    }

    /// Whether `now` is in the hold's last stretch: the extensions are cut short by `max_hold`,
    /// so a lease running out now runs out because of it.
    pub(crate) fn ending(&self, now: Duration) -> bool {
        self.max_hold
            .is_some_and(|max_hold| now.saturating_add(self.ttl) > max_hold)
    }

    /// Until when the lease is trusted, given that its validity ends at `valid_until`.
    pub(crate) fn trusted_until(&self, valid_until: Duration) -> Duration {
        valid_until.saturating_sub(self.margin)
    }
}

/// Whether a failed extension proves the lock lost, whatever the nodes that failed would have
/// said: more nodes answered that our key is gone than may be missing from a quorum.
pub(crate) fn taken(nodes: usize, quorum: usize, not_ours: usize) -> bool {
    not_ours > nodes.saturating_sub(quorum)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn ms(millis: u64) -> Duration {
        Duration::from_millis(millis)
    }

    const MS: Duration = Duration::from_millis(1);

    /// `now`, `offset` later.
    fn later(now: Moment, offset: Duration) -> Moment {
        now.checked_add(offset).unwrap_or(now)
    }

    #[test]
    fn the_lead_follows_a_late_timer_and_halves_every_half_life() {
        let start = Moment::now();
        let mut lead = Lead::default();
        assert_eq!(lead.at(start), Duration::ZERO);
        // A timer due at `start` fired 30 ms late.
        lead.note(start, later(start, ms(30)));
        assert_eq!(lead.at(later(start, ms(30))), ms(30));
        let halved = lead.at(later(start, ms(30) + LEAD_HALF_LIFE));
        assert!(halved.abs_diff(ms(15)) < ms(1), "{halved:?}");
        // A timer on time changes nothing; a later one than the lead raises it.
        let before = lead.at(later(start, ms(40)));
        lead.note(later(start, ms(40)), later(start, ms(40)));
        assert_eq!(lead.at(later(start, ms(40))), before);
        lead.note(later(start, ms(50)), later(start, ms(50) + ms(45)));
        assert_eq!(lead.at(later(start, ms(95))), ms(45));
        // Never more than the most it may be.
        lead.note(start, later(start, Duration::from_secs(10)));
        assert_eq!(lead.at(later(start, Duration::from_secs(10))), MAX_LEAD);
    }

    proptest! {
        #[test]
        fn the_lead_never_exceeds_its_bound_nor_grows_by_itself(
            due in 0u64..10_000_000,
            late in 0u64..10_000_000,
            after in 0u64..u64::MAX / 4,
        ) {
            let start = Moment::now();
            let mut lead = Lead::default();
            let fired = later(start, Duration::from_micros(due + late));
            lead.note(later(start, Duration::from_micros(due)), fired);
            let at_fire = lead.at(fired);
            prop_assert!(at_fire <= MAX_LEAD);
            prop_assert_eq!(at_fire, Duration::from_micros(late).min(MAX_LEAD));
            prop_assert!(lead.at(later(fired, Duration::from_micros(after))) <= at_fire);
        }
    }

    fn schedule(ttl_ms: u64, max_hold_ms: Option<u64>) -> Schedule {
        Schedule {
            ttl: ms(ttl_ms),
            every: default_interval(ms(ttl_ms)),
            max_hold: max_hold_ms.map(ms),
            margin: Duration::from_millis(5),
        }
    }

    #[test]
    fn the_margin_is_two_percent_of_the_ttl_within_five_and_fifty_milliseconds() {
        assert_eq!(margin(ms(100)), ms(5));
        assert_eq!(margin(ms(1_000)), ms(20));
        assert_eq!(margin(Duration::from_secs(30)), ms(50));
    }

    #[test]
    fn trust_ends_the_margin_before_the_validity() {
        let schedule = schedule(3_000, None);
        assert_eq!(schedule.trusted_until(ms(2_000)), ms(1_995));
        assert_eq!(schedule.trusted_until(ms(3)), Duration::ZERO);
    }

    #[test]
    fn the_default_interval_is_a_third_of_the_ttl() {
        assert_eq!(schedule(30_000, None).every, Duration::from_secs(10));
    }

    #[test]
    fn max_hold_cuts_the_last_extensions_and_then_ends_them() {
        let schedule = schedule(3_000, Some(10_000));
        assert_eq!(schedule.extension_ttl(ms(1_000)), Some(ms(3_000)));
        assert_eq!(schedule.extension_ttl(ms(8_500)), Some(ms(1_500)));
        assert_eq!(schedule.extension_ttl(ms(9_999)), Some(MS));
        assert_eq!(schedule.extension_ttl(ms(10_000)), None);
        assert!(!schedule.ending(ms(7_000)));
        assert!(schedule.ending(ms(7_001)));
        assert!(!self::schedule(3_000, None).ending(Duration::MAX));
        assert_eq!(
            self::schedule(3_000, None).extension_ttl(Duration::MAX),
            Some(ms(3_000))
        );
    }

    #[test]
    fn a_majority_answering_not_ours_is_a_loss_failures_are_not() {
        assert!(
            !taken(5, 3, 2),
            "two missing: a quorum of three may still hold"
        );
        assert!(taken(5, 3, 3));
        assert!(taken(1, 1, 1));
        assert!(!taken(3, 2, 1));
    }

    proptest! {
        /// Every extension is due before the lease stops being trusted, with room for retries:
        /// a validity of at least the TTL less a third leaves two thirds minus the margin.
        #[test]
        fn extensions_come_before_the_trust_ends(ttl_ms in 3u64..10_000_000, last_ms in 0u64..u64::MAX / 2) {
            let schedule = schedule(ttl_ms, None);
            let last = ms(last_ms);
            let due = schedule.next_after_success(last);
            prop_assert!(due > last);
            prop_assert!(due < last.saturating_add(schedule.ttl));
            let retry = schedule.next_after_failure(last);
            prop_assert!(retry > last && retry <= due);
        }

        #[test]
        fn the_keys_never_outlive_max_hold(ttl_ms in 3u64..100_000, hold_ms in 1u64..1_000_000, now_ms in 0u64..2_000_000) {
            let schedule = schedule(ttl_ms, Some(hold_ms));
            if let Some(ttl) = schedule.extension_ttl(ms(now_ms)) {
                prop_assert!(ms(now_ms) + ttl <= ms(hold_ms));
                prop_assert!(ttl <= schedule.ttl && ttl >= MS);
            }
        }

        #[test]
        fn trust_ends_no_later_than_the_validity(valid_ms in 0u64..u64::MAX / 2, margin_ms in 0u64..1_000) {
            let schedule = Schedule { margin: ms(margin_ms), ..schedule(3_000, None) };
            prop_assert!(schedule.trusted_until(ms(valid_ms)) <= ms(valid_ms));
        }
    }
}
