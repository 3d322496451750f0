//! The retry schedule, as pure logic: how many attempts an acquisition makes, how long it sleeps
//! between them, and when the overall wait deadline stops it.
//!
//! The random jitter desynchronises clients that failed together (split votes), as the Redlock
//! specification asks; the randomness is passed in so the schedule itself is deterministic.

use std::time::Duration;

/// How [`Lock::acquire`](crate::Lock::acquire) retries when an attempt fails.
///
/// Attempt `k + 1` starts `delay + jitter × r` after attempt `k` ended (`r` uniform in `[0, 1)`),
/// for at most `attempts` attempts, and never after `max_wait` has passed since the first one
/// started.
///
/// ```
/// use std::time::Duration;
/// use quorumlock::RetryPolicy;
///
/// // Keep trying for up to 5 s, every 50–100 ms.
/// let policy = RetryPolicy::new()
///     .attempts(u32::MAX)
///     .delay(Duration::from_millis(50))
///     .jitter(Duration::from_millis(50))
///     .max_wait(Duration::from_secs(5));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RetryPolicy {
    attempts: u32,
    delay: Duration,
    jitter: Duration,
    max_wait: Option<Duration>,
}

impl Default for RetryPolicy {
    /// Three attempts, 100–200 ms apart, no overall deadline beyond that.
    fn default() -> Self {
        RetryPolicy {
            attempts: 3,
            delay: Duration::from_millis(100),
            jitter: Duration::from_millis(100),
            max_wait: None,
        }
    }
}

impl RetryPolicy {
    /// The default policy: 3 attempts, 100 ms + up to 100 ms of jitter between them.
    pub fn new() -> Self {
        Self::default()
    }

    /// One attempt, no waiting: what [`Lock::try_acquire`](crate::Lock::try_acquire) uses.
    pub fn once() -> Self {
        RetryPolicy {
            attempts: 1,
            delay: Duration::ZERO,
            jitter: Duration::ZERO,
            max_wait: Some(Duration::ZERO),
        }
    }

    /// The most attempts to make, at least 1 (default 3).
    pub fn attempts(mut self, attempts: u32) -> Self {
        self.attempts = attempts;
        self
    }

    /// The fixed part of the pause between attempts (default 100 ms). Zero is allowed.
    pub fn delay(mut self, delay: Duration) -> Self {
        self.delay = delay;
        self
    }

    /// The most random time added to each pause (default 100 ms). Zero disables jitter.
    pub fn jitter(mut self, jitter: Duration) -> Self {
        self.jitter = jitter;
        self
    }

    /// No attempt starts later than this after the first one (default: none, only `attempts`
    /// bounds the wait). Zero means try once.
    pub fn max_wait(mut self, max_wait: Duration) -> Self {
        self.max_wait = Some(max_wait);
        self
    }

    /// The most attempts this policy makes (0 is refused when a lock is built or an acquisition
    /// starts: `options.rs`).
    pub(crate) fn max_attempts(&self) -> u32 {
        self.attempts
    }

    /// One pause between attempts: `delay + jitter × random` (`random` clamped to `[0, 1]`).
    pub(crate) fn pause(&self, random: f64) -> Duration {
        let random = if random.is_finite() {
            random.clamp(0.0, 1.0)
        } else {
            0.0
        };
        // Float rounding can overshoot by a few nanoseconds; the jitter is a bound.
        let jitter = Duration::try_from_secs_f64(self.jitter.as_secs_f64() * random)
            .map_or(self.jitter, |scaled| scaled.min(self.jitter));
        self.delay.saturating_add(jitter)
    }

    /// The pause before the next attempt, or `None` to give up. `attempts_made` attempts have
    /// finished, `elapsed` has passed since the first started, and `random` (clamped to
    /// `[0, 1]`) scales the jitter.
    pub(crate) fn next_delay(
        &self,
        attempts_made: u32,
        elapsed: Duration,
        random: f64,
    ) -> Option<Duration> {
        if attempts_made >= self.attempts {
            return None;
        }
        let pause = self.pause(random);
        match self.max_wait {
            Some(max_wait) if elapsed.saturating_add(pause) > max_wait => None,
            _ => Some(pause),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn default_policy_makes_three_attempts() {
        let p = RetryPolicy::default();
        assert!(p.next_delay(1, Duration::ZERO, 0.0).is_some());
        assert!(p.next_delay(2, Duration::ZERO, 0.0).is_some());
        assert_eq!(p.next_delay(3, Duration::ZERO, 0.0), None);
    }

    #[test]
    fn once_never_retries() {
        assert_eq!(RetryPolicy::once().next_delay(1, Duration::ZERO, 0.5), None);
    }

    #[test]
    fn zero_delay_and_jitter_retry_at_once() {
        let p = RetryPolicy::new()
            .delay(Duration::ZERO)
            .jitter(Duration::ZERO);
        assert_eq!(p.next_delay(1, Duration::ZERO, 0.7), Some(Duration::ZERO));
    }

    #[test]
    fn the_jitter_is_scaled_by_the_random_number() {
        let p = RetryPolicy::new()
            .delay(Duration::from_millis(100))
            .jitter(Duration::from_secs(1));
        let pause = |random| p.next_delay(1, Duration::ZERO, random);
        assert_eq!(pause(0.0), Some(Duration::from_millis(100)));
        assert_eq!(pause(0.25), Some(Duration::from_millis(350)));
        assert_eq!(pause(0.5), Some(Duration::from_millis(600)));
        assert_eq!(pause(1.0), Some(Duration::from_millis(1_100)));
    }

    #[test]
    fn the_deadline_stops_an_attempt_that_would_start_too_late() {
        let p = RetryPolicy::new()
            .delay(Duration::from_millis(100))
            .jitter(Duration::ZERO)
            .max_wait(Duration::from_millis(250));
        assert!(p.next_delay(1, Duration::from_millis(150), 0.0).is_some());
        assert_eq!(p.next_delay(1, Duration::from_millis(151), 0.0), None);
    }

    proptest! {
        /// Any policy, any state, any random number: no panic, the pause stays within
        /// [delay, delay + jitter], and the attempt and deadline bounds hold.
        #[test]
        fn pauses_stay_within_bounds(
            attempts in any::<u32>(), made in any::<u32>(),
            delay_ms in any::<u64>(), jitter_ms in any::<u64>(),
            max_wait_ms in proptest::option::of(any::<u64>()),
            elapsed_ms in any::<u64>(), random in any::<f64>()
        ) {
            let mut p = RetryPolicy::new()
                .attempts(attempts)
                .delay(Duration::from_millis(delay_ms))
                .jitter(Duration::from_millis(jitter_ms));
            if let Some(ms) = max_wait_ms {
                p = p.max_wait(Duration::from_millis(ms));
            }
            let elapsed = Duration::from_millis(elapsed_ms);
            if let Some(pause) = p.next_delay(made, elapsed, random) {
                prop_assert!(made < attempts);
                prop_assert!(pause >= p.delay);
                prop_assert!(pause <= p.delay.saturating_add(p.jitter));
                if let Some(max_wait) = p.max_wait {
                    prop_assert!(elapsed.saturating_add(pause) <= max_wait);
                }
            }
        }
    }
}
