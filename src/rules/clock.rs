//! The clock a lease is measured on: one that keeps counting while the machine is suspended.
//!
//! Redis expires keys by the node's wall clock, which runs on while a laptop sleeps or a VM is
//! suspended. `std::time::Instant` does not (CLOCK_MONOTONIC stops during suspend on Linux), so
//! a client that slept past its TTL would wake up believing it still held the lock. On Linux and
//! Android a [`Moment`] reads CLOCK_BOOTTIME, which counts suspended time; elsewhere it falls back
//! to `Instant`, and the docs of [`Guard`](crate::Guard) say so.
//!
//! A moment is a count of nanoseconds in a `u64` (584 years from the origin), half the size of a
//! `Duration`: every kept lease stores several, in its hold and in its keeper's queues.

use std::time::{Duration, Instant};

/// A point on the lease clock: nanoseconds since its origin. Only differences between moments
/// mean anything.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Moment(u64);

/// `duration` in whole nanoseconds, if a `u64` holds it.
fn nanos(duration: Duration) -> Option<u64> {
    u64::try_from(duration.as_nanos()).ok()
}

impl Moment {
    /// Now, on the lease clock.
    pub(crate) fn now() -> Moment {
        Moment(nanos(since_origin()).unwrap_or(u64::MAX))
    }

    /// How long after `earlier` this moment is; zero if it is not later.
    pub(crate) fn saturating_duration_since(self, earlier: Moment) -> Duration {
        Duration::from_nanos(self.0.saturating_sub(earlier.0))
    }

    /// This moment less `duration`, or the clock's origin if it is further back.
    pub(crate) fn saturating_sub(self, duration: Duration) -> Moment {
        Moment(self.0.saturating_sub(nanos(duration).unwrap_or(u64::MAX)))
    }

    /// This moment plus `duration`, or `None` if that cannot be represented.
    pub(crate) fn checked_add(self, duration: Duration) -> Option<Moment> {
        self.0.checked_add(nanos(duration)?).map(Moment)
    }

    /// This moment plus `duration`, or the clock's last moment (584 years after its origin) if
    /// that is further. For the end of a validity, which this never overstates: a TTL of
    /// [`MAX_TTL`](crate::MAX_TTL) gives a lock valid for some five centuries.
    pub(crate) fn saturating_add(self, duration: Duration) -> Moment {
        self.checked_add(duration).unwrap_or(Moment(u64::MAX))
    }

    /// The `Instant` that corresponds to this moment, read now: the moment's offset from now on
    /// the lease clock, applied to `Instant::now()`. A moment too far off for an `Instant` gives
    /// the nearest one that exists (now).
    ///
    /// The two clocks cannot be read at once, and the thread may be preempted between the
    /// reads, so the lease clock is read between two `Instant` readings and the mapping errs
    /// towards the call ([`Moment::to_instant_between`]): a validity is never overstated.
    pub(crate) fn to_instant(self) -> Instant {
        let before = Instant::now();
        let now = Moment::now();
        let after = Instant::now();
        self.to_instant_between(before, now, after)
    }

    /// The mapping of [`Moment::to_instant`], given `now` read at some instant in
    /// `[before, after]`: a later moment is placed its offset after `before`, an earlier one its
    /// offset before `after`. So a deadline is never mapped later than it is, and a past moment
    /// never earlier, however long the reads took.
    fn to_instant_between(self, before: Instant, now: Moment, after: Instant) -> Instant {
        if self >= now {
            before
                .checked_add(self.saturating_duration_since(now))
                .unwrap_or(before)
        } else {
            after
                .checked_sub(now.saturating_duration_since(self))
                .unwrap_or(after)
        }
    }
}

/// Time since boot, suspended time included.
#[cfg(any(target_os = "linux", target_os = "android"))]
fn since_origin() -> Duration {
    let now = rustix::time::clock_gettime(rustix::time::ClockId::Boottime);
    // The kernel never reports negative boot times; clamp rather than trust that.
    let secs = u64::try_from(now.tv_sec).unwrap_or(0);
    let nanos = u32::try_from(now.tv_nsec).unwrap_or(0).min(999_999_999);
    Duration::new(secs, nanos)
}

/// Time since the first reading in this process, on `Instant` (which may not count suspended
/// time on this platform).
#[cfg(not(any(target_os = "linux", target_os = "android")))]
fn since_origin() -> Duration {
    static ORIGIN: std::sync::LazyLock<Instant> = std::sync::LazyLock::new(Instant::now);
    ORIGIN.elapsed()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn moments_move_forward_and_differences_saturate() {
        let earlier = Moment::now();
        std::thread::sleep(Duration::from_millis(2));
        let later = Moment::now();
        assert!(later > earlier);
        assert!(later.saturating_duration_since(earlier) >= Duration::from_millis(2));
        assert_eq!(earlier.saturating_duration_since(later), Duration::ZERO);
        assert_eq!(Moment(u64::MAX).checked_add(Duration::from_nanos(1)), None);
    }

    #[test]
    fn a_moment_maps_to_the_instant_at_the_same_offset_from_now() {
        let now = Moment::now();
        let ahead = now.checked_add(Duration::from_secs(60)).unwrap();
        let until = ahead.to_instant().saturating_duration_since(Instant::now());
        assert!(
            until > Duration::from_secs(59) && until <= Duration::from_secs(60),
            "{until:?}"
        );
        assert!(Moment(0).to_instant() <= Instant::now());
        // Far beyond what an Instant can hold: the nearest instant that exists, no panic.
        let _ = Moment(u64::MAX).to_instant();
        assert_eq!(now.checked_add(Duration::MAX), None);
        assert_eq!(now.saturating_add(Duration::MAX), Moment(u64::MAX));
        assert_eq!(now.saturating_add(Duration::ZERO), now);
        assert_eq!(now.saturating_sub(Duration::MAX), Moment(0));
    }

    /// A preemption between the clock readings never lengthens a validity: a deadline is
    /// placed from the earlier `Instant` reading, a past moment from the later one.
    #[test]
    fn a_slow_reading_errs_towards_the_call() {
        let before = Instant::now();
        let after = before + Duration::from_millis(50);
        let now = Moment(100_000_000_000);
        let second = Duration::from_secs(1);
        let deadline = Moment(101_000_000_000);
        assert_eq!(
            deadline.to_instant_between(before, now, after),
            before + second
        );
        let past = Moment(99_990_000_000);
        assert_eq!(
            past.to_instant_between(before, now, after),
            after - Duration::from_millis(10)
        );
        assert_eq!(now.to_instant_between(before, now, after), before);
    }
}
