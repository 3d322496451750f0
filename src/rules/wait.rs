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
    /// The key expires this long from the reply.
    Expires(Duration),
    /// The key has no expiry (not one of ours: someone else's key under our name).
    Persistent,
    /// The node did not say (failed, timed out).
    Unknown,
}

impl KeyTtl {
    /// A `PTTL` reply: -2 no key, -1 no expiry, else milliseconds left.
    pub(crate) fn from_pttl(reply: i64) -> KeyTtl {
        match reply {
            -2 => KeyTtl::Absent,
            millis if millis >= 0 => KeyTtl::Expires(Duration::from_millis(millis.unsigned_abs())),
            _ => KeyTtl::Persistent,
        }
    }
}

/// How long until `quorum` of the nodes are free of the key by expiry alone: zero if they are
/// already, `None` if expiry alone never frees enough of them (keys without expiry, nodes that
/// did not say). One millisecond is added for Redis' expiry resolution.
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
    expiring
        .get(missing - 1)
        .map(|left| left.saturating_add(Duration::from_millis(1)))
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
        assert_eq!(free_after(&ttls, 3), Some(Duration::from_millis(601)));
        assert_eq!(free_after(&ttls, 1), Some(Duration::ZERO));
        assert_eq!(free_after(&ttls, 5), None, "one node never says");
    }

    #[test]
    fn keys_without_expiry_never_free_a_node() {
        let ttls = [KeyTtl::Persistent, KeyTtl::Persistent, ms(10)];
        assert_eq!(free_after(&ttls, 2), None);
        assert_eq!(free_after(&ttls, 1), Some(Duration::from_millis(11)));
    }

    #[test]
    fn pttl_replies_read_as_their_meaning() {
        assert_eq!(KeyTtl::from_pttl(-2), KeyTtl::Absent);
        assert_eq!(KeyTtl::from_pttl(-1), KeyTtl::Persistent);
        assert_eq!(KeyTtl::from_pttl(0), ms(0));
        assert_eq!(KeyTtl::from_pttl(1500), ms(1500));
        assert_eq!(KeyTtl::from_pttl(i64::MIN), KeyTtl::Persistent);
    }

    proptest! {
        /// Whatever the replies: when a bound is given, at that moment at least a quorum of the
        /// nodes is free by expiry alone, and a millisecond earlier than the bound less the
        /// resolution, fewer are.
        #[test]
        fn the_bound_is_the_first_moment_a_quorum_is_free(
            replies in proptest::collection::vec(
                prop_oneof![Just(-2i64), Just(-1i64), 0i64..10_000],
                1..8,
            ),
            quorum in 1usize..8,
        ) {
            let ttls: Vec<KeyTtl> = replies.iter().map(|r| KeyTtl::from_pttl(*r)).collect();
            let free_at = |at: Duration| ttls.iter().filter(|ttl| match ttl {
                KeyTtl::Absent => true,
                KeyTtl::Expires(left) => *left < at,
                _ => false,
            }).count();
            match free_after(&ttls, quorum) {
                Some(bound) if bound.is_zero() => prop_assert!(free_at(Duration::ZERO) >= quorum),
                Some(bound) => {
                    prop_assert!(free_at(bound) >= quorum);
                    prop_assert!(free_at(bound - Duration::from_millis(1)) < quorum);
                }
                None => prop_assert!(free_at(Duration::MAX) < quorum),
            }
        }
    }
}
