//! When a waiter should try again if no wake-up comes, as pure logic: from what each node said
//! of the lock key's remaining time (`PTTL`), the moment a quorum of nodes will be free of it
//! by expiry alone. A wake-up (a release published, a local release) is only a hint that comes
//! sooner; this bound is what a missed or late message costs at most.

use std::time::Duration;

/// What one node said of a lock key's remaining time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum KeyTtl {
    /// No such key: the node is free now.
    Absent,
    /// The key is gone this long from the reply (the first moment Redis holds it expired).
    Expires(Duration),
    /// The key has no expiry (not one of ours: someone else's key under our name).
    Persistent,
    /// The node did not say (failed, timed out).
    Unknown,
}

impl KeyTtl {
    /// A `PTTL` reply (-2 no key, -1 no expiry, else milliseconds left), with the microseconds
    /// the server's clock was into its millisecond when it answered (`TIME`), if known.
    ///
    /// Redis counts expiry in whole milliseconds and holds a key expired once its millisecond
    /// clock has passed the deadline, that is `PTTL + 1` of its milliseconds on: less the part of
    /// the current one already gone. Unknown, none is taken off (a bound late, never early).
    pub(crate) fn from_pttl(reply: i64, phase_micros: Option<i64>) -> KeyTtl {
        match reply {
            -2 => KeyTtl::Absent,
            millis if millis >= 0 => {
                let gone = phase_micros.map_or(0, |micros| micros.clamp(0, 999).unsigned_abs());
                let left = millis
                    .unsigned_abs()
                    .saturating_add(1)
                    .saturating_mul(1000)
                    .saturating_sub(gone);
                KeyTtl::Expires(Duration::from_micros(left))
            }
            _ => KeyTtl::Persistent,
        }
    }
}

/// How long until `quorum` of the nodes are free of the key by expiry alone: zero if they are
/// already, `None` if expiry alone never frees enough of them (keys without expiry, nodes that
/// did not say).
pub(crate) fn free_after(ttls: &[KeyTtl], quorum: usize) -> Option<Duration> {
    let free_now = ttls.iter().filter(|ttl| **ttl == KeyTtl::Absent).count();
    let Some(missing) = quorum.checked_sub(free_now).filter(|missing| *missing > 0) else {
        return Some(Duration::ZERO);
    };
    let mut expiring: Vec<Duration> = ttls
        .iter()
        .filter_map(|ttl| match ttl {
            KeyTtl::Expires(left) => Some(*left),
            _ => None,
        })
        .collect();
    expiring.sort_unstable();
    expiring.get(missing - 1).copied()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn ms(millis: u64) -> KeyTtl {
        KeyTtl::Expires(Duration::from_millis(millis))
    }

    #[test]
    fn a_quorum_frees_when_its_last_needed_key_expires() {
        let ttls = [ms(900), KeyTtl::Absent, ms(300), ms(600), KeyTtl::Unknown];
        // Quorum 3: one node is free, two more are needed: the 300 and the 600 ms ones.
        assert_eq!(free_after(&ttls, 3), Some(Duration::from_millis(600)));
        assert_eq!(free_after(&ttls, 1), Some(Duration::ZERO));
        assert_eq!(free_after(&ttls, 5), None, "one node never says");
    }

    #[test]
    fn keys_without_expiry_never_free_a_node() {
        let ttls = [KeyTtl::Persistent, KeyTtl::Persistent, ms(10)];
        assert_eq!(free_after(&ttls, 2), None);
        assert_eq!(free_after(&ttls, 1), Some(Duration::from_millis(10)));
    }

    #[test]
    fn pttl_replies_read_as_their_meaning() {
        let micros = |n| KeyTtl::Expires(Duration::from_micros(n));
        assert_eq!(KeyTtl::from_pttl(-2, Some(10)), KeyTtl::Absent);
        assert_eq!(KeyTtl::from_pttl(-1, None), KeyTtl::Persistent);
        assert_eq!(KeyTtl::from_pttl(i64::MIN, None), KeyTtl::Persistent);
        // Without the phase, a whole millisecond more than PTTL says.
        assert_eq!(KeyTtl::from_pttl(0, None), ms(1));
        assert_eq!(KeyTtl::from_pttl(1500, None), ms(1501));
        // 400 µs into the millisecond: the key goes 600 µs after the next PTTL millisecond.
        assert_eq!(KeyTtl::from_pttl(199, Some(400)), micros(199_600));
        assert_eq!(KeyTtl::from_pttl(0, Some(999)), micros(1));
        // A phase out of range is read as the nearest one in range.
        assert_eq!(KeyTtl::from_pttl(5, Some(-3)), ms(6));
        assert_eq!(KeyTtl::from_pttl(5, Some(12_345)), micros(5_001));
        assert_eq!(
            KeyTtl::from_pttl(i64::MAX, Some(0)),
            micros(u64::MAX),
            "saturates"
        );
    }

    proptest! {
        /// Whatever the replies: when a bound is given, at that moment at least a quorum of the
        /// nodes is free by expiry alone, and a microsecond earlier fewer are.
        #[test]
        fn the_bound_is_the_first_moment_a_quorum_is_free(
            replies in proptest::collection::vec(
                (prop_oneof![Just(-2i64), Just(-1i64), 0i64..10_000], proptest::option::of(0i64..1000)),
                1..8,
            ),
            quorum in 1usize..8,
        ) {
            let ttls: Vec<KeyTtl> = replies.iter().map(|(r, phase)| KeyTtl::from_pttl(*r, *phase)).collect();
            let free_at = |at: Duration| ttls.iter().filter(|ttl| match ttl {
                KeyTtl::Absent => true,
                KeyTtl::Expires(left) => *left <= at,
                _ => false,
            }).count();
            match free_after(&ttls, quorum) {
                Some(bound) if bound.is_zero() => prop_assert!(free_at(Duration::ZERO) >= quorum),
                Some(bound) => {
                    prop_assert!(free_at(bound) >= quorum);
                    prop_assert!(free_at(bound - Duration::from_micros(1)) < quorum);
                }
                None => prop_assert!(free_at(Duration::MAX) < quorum),
            }
        }
    }
}
