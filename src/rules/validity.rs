//! Validity arithmetic, as pure functions: how long a lock that a quorum granted may be trusted.
//!
//! `validity = ttl − elapsed − drift`, with `drift = ttl × drift_factor + 2 ms` (the reference
//! client's formula: the factor covers clock-rate differences between client and nodes, the 2 ms
//! Redis' 1 ms expiry resolution). All arithmetic is checked or saturating: no input panics.

use std::time::Duration;

/// The largest TTL accepted: half of what Redis can store as a millisecond expiry, which leaves
/// room for the server's own clock in `now + ttl` (≈ 146 million years). The client counts a
/// validity in nanoseconds since boot, up to 584 years: a validity beyond that ends there.
pub const MAX_TTL: Duration = Duration::from_millis(i64::MAX as u64 / 2);

/// A duration in whole milliseconds, as Redis takes a TTL (validated TTLs always fit), and as
/// spans record times.
pub(crate) fn whole_millis(ttl: Duration) -> u64 {
    u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX)
}

/// Added to every drift for Redis' millisecond expiry resolution.
pub(crate) const EXPIRY_RESOLUTION_MARGIN: Duration = Duration::from_millis(2);

/// The clock drift to allow for a lease of `ttl`. A factor that is not a finite non-negative
/// number, or a product too large for a `Duration`, yields the largest drift (no validity),
/// never a panic; configuration validation rejects such factors before they get here.
pub(crate) fn drift(ttl: Duration, drift_factor: f64) -> Duration {
    let proportional = if drift_factor.is_finite() && drift_factor >= 0.0 {
        Duration::try_from_secs_f64(ttl.as_secs_f64() * drift_factor).unwrap_or(Duration::MAX)
    } else {
        Duration::MAX
    };
    proportional.saturating_add(EXPIRY_RESOLUTION_MARGIN)
}

/// What is left of a `ttl` lease after `elapsed` and `drift`; `None` when nothing is left.
pub fn validity(ttl: Duration, elapsed: Duration, drift: Duration) -> Option<Duration> {
    ttl.checked_sub(elapsed)?
        .checked_sub(drift)
        .filter(|left| !left.is_zero())
}

/// [`validity`] as a lock built with `defect` computes it (test-only, see `defect.rs`): 5 % of
/// the TTL too much, or without the drift; other defects leave it alone.
#[cfg(feature = "chaos-defects")]
pub(crate) fn validity_with_defect(
    defect: crate::rules::defect::Defect,
    ttl: Duration,
    elapsed: Duration,
    drift: Duration,
) -> Option<Duration> {
    use crate::rules::defect::Defect;
    match defect {
        Defect::ValidityPlus5Pct => {
            validity(ttl, elapsed, drift).map(|left| left.saturating_add(ttl / 20))
        }
        Defect::DriftIgnored => validity(ttl, elapsed, Duration::ZERO),
        _ => validity(ttl, elapsed, drift),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn ten_second_lease_loses_one_percent_plus_two_ms() {
        let ttl = Duration::from_secs(10);
        let d = drift(ttl, 0.01);
        assert_eq!(d, Duration::from_millis(102));
        assert_eq!(
            validity(ttl, Duration::from_millis(5), d),
            Some(Duration::from_millis(9_893))
        );
    }

    #[test]
    fn a_lease_used_up_by_the_round_trip_is_not_valid() {
        let ttl = Duration::from_millis(10);
        let d = drift(ttl, 0.01);
        assert_eq!(validity(ttl, Duration::from_millis(8), d), None);
        assert_eq!(
            validity(
                ttl,
                Duration::from_millis(7) + Duration::from_micros(900),
                d
            ),
            None
        );
        assert_eq!(validity(ttl, ttl * 2, d), None);
    }

    #[test]
    fn a_ttl_is_sent_as_its_whole_milliseconds() {
        assert_eq!(whole_millis(Duration::from_secs(30)), 30_000);
        assert_eq!(whole_millis(Duration::from_micros(1_999)), 1);
        assert_eq!(whole_millis(Duration::MAX), u64::MAX);
    }

    #[test]
    fn a_factor_that_is_not_a_finite_non_negative_number_yields_the_largest_drift() {
        for ttl in [Duration::ZERO, Duration::from_secs(10)] {
            for factor in [-0.5, -1e-300, f64::NAN, f64::INFINITY, f64::NEG_INFINITY] {
                assert_eq!(drift(ttl, factor), Duration::MAX, "{ttl:?} × {factor}");
            }
        }
    }

    #[test]
    fn nonsense_factors_leave_no_validity() {
        for factor in [f64::NAN, f64::INFINITY, -0.5, f64::NEG_INFINITY, 1e300] {
            let d = drift(Duration::from_secs(10), factor);
            assert_eq!(
                validity(Duration::from_secs(10), Duration::ZERO, d),
                None,
                "{factor}"
            );
        }
    }

    proptest! {
        /// No input panics, and the result is never more than the lease minus what was spent.
        #[test]
        fn validity_never_exceeds_the_lease(
            ttl_ns in any::<u64>(), ttl_s in any::<u64>(), elapsed_ns in any::<u64>(),
            factor in any::<f64>()
        ) {
            let ttl = Duration::new(ttl_s, 0).saturating_add(Duration::from_nanos(ttl_ns));
            let elapsed = Duration::from_nanos(elapsed_ns);
            let d = drift(ttl, factor);
            prop_assert!(d >= EXPIRY_RESOLUTION_MARGIN);
            if let Some(left) = validity(ttl, elapsed, d) {
                prop_assert!(!left.is_zero());
                prop_assert!(left < ttl);
                prop_assert!(left.saturating_add(elapsed).saturating_add(d) <= ttl);
            }
        }

        /// Spending more time never leaves more validity.
        #[test]
        fn validity_shrinks_as_time_passes(ttl_ms in 1u64..=u32::MAX as u64, a in any::<u32>(), b in any::<u32>()) {
            let ttl = Duration::from_millis(ttl_ms);
            let d = drift(ttl, 0.01);
            let (early, late) = (a.min(b), a.max(b));
            let left = |us: u32| validity(ttl, Duration::from_micros(us.into()), d).unwrap_or_default();
            prop_assert!(left(late) <= left(early));
        }
    }
}
