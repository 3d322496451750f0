//! The batched keep-alive's pure parts: how many keys one command carries, what a node's answer
//! for one key means and how it votes, which nodes a lease's key is missing on (to be brought
//! there), and how the batches are paced: how far apart, and how early a lease may go.

use std::time::Duration;

use super::quorum::Vote;

/// The most keys one batch command carries, so that no command keeps a node busy for more than
/// about a millisecond (Redis runs one script at a time; every other client waits meanwhile).
/// Measured with redis-server 7.0.15 (`INFO commandstats`, AOF `appendfsync always` on tmpfs,
/// two loaded cores): 1.04 µs per key renewed, 1.56 µs per key set where absent, about 25 µs per
/// call; 400 keys take 0.42–0.65 ms, leaving room for a slower server (`docs/benchmarks.md`).
pub(crate) const BATCH_KEYS: usize = 400;

/// How many leases go into each batch, in order, for leases of `keys` keys each (a set of
/// resources has several): as many as fit in [`BATCH_KEYS`] keys, and at least one per batch
/// (no lease has more keys than that: a set holds at most 64).
pub(crate) fn batch_sizes(keys: &[usize]) -> Vec<usize> {
    let mut sizes = Vec::new();
    let (mut leases, mut in_batch) = (0usize, 0usize);
    for &count in keys {
        if leases > 0 && in_batch.saturating_add(count) > BATCH_KEYS {
            sizes.push(leases);
            (leases, in_batch) = (0, 0);
        }
        leases += 1;
        in_batch = in_batch.saturating_add(count);
    }
    if leases > 0 {
        sizes.push(leases);
    }
    sizes
}

/// One answer for a lease of several keys (a set) from its keys' answers on one node: renewed
/// only if every key was; another's if any key is someone else's (the node does not hold the
/// set, and nothing is brought there); set if the rest were renewed or set; else absent.
pub(crate) fn combined(replies: &[KeyReply]) -> KeyReply {
    if replies.contains(&KeyReply::Other) {
        KeyReply::Other
    } else if replies.contains(&KeyReply::Absent) || replies.is_empty() {
        KeyReply::Absent
    } else if replies.contains(&KeyReply::Set) {
        KeyReply::Set
    } else {
        KeyReply::Renewed
    }
}

/// What a node answered for one key of a batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum KeyReply {
    /// The key held our token: its expiry was renewed.
    Renewed,
    /// The key was absent and the batch was allowed to set it there: it now holds our token.
    Set,
    /// The key holds another token: never touched.
    Other,
    /// The key was absent and not set (the node had not passed the vote gates for it).
    Absent,
}

impl KeyReply {
    /// The script's code for one key: 1 renewed, 2 set, 0 another's, -1 absent.
    pub(crate) fn from_code(code: i64) -> Option<KeyReply> {
        match code {
            1 => Some(KeyReply::Renewed),
            2 => Some(KeyReply::Set),
            0 => Some(KeyReply::Other),
            -1 => Some(KeyReply::Absent),
            _ => None,
        }
    }

    /// How the answer counts for the lease's extension: only a renewal is ours. A key set in
    /// this batch was absent until now, so it proves nothing about who held the lock since the
    /// last validity; it counts from the next batch on, when it answers as a renewal (a key of
    /// ours that lived there since). So a majority that lacked the key still proves the lock
    /// lost, whatever the batch set.
    pub(crate) fn vote(self) -> Vote {
        match self {
            KeyReply::Renewed => Vote::Ours,
            KeyReply::Set | KeyReply::Other | KeyReply::Absent => Vote::NotOurs,
        }
    }
}

/// The nodes (by index, the first 64) where a lease's key is not known to be ours, so that the
/// next batch brings it there.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Missing(u64);

impl Missing {
    /// The bit of node `node`; none beyond the 64th (its key is only ever renewed).
    fn bit(node: usize) -> u64 {
        u32::try_from(node)
            .ok()
            .and_then(|node| 1u64.checked_shl(node))
            .unwrap_or(0)
    }

    /// Whether the key is to be brought to `node`.
    pub(crate) fn contains(self, node: usize) -> bool {
        self.0 & Self::bit(node) != 0
    }

    /// Marks the key missing on `node`.
    pub(crate) fn insert(&mut self, node: usize) {
        self.0 |= Self::bit(node);
    }

    /// What `node`'s answer says: absent there → missing; ours there (renewed or set) → not.
    /// Another's key is never touched, so it is not wanted either.
    pub(crate) fn record(&mut self, node: usize, reply: KeyReply) {
        match reply {
            KeyReply::Absent => self.0 |= Self::bit(node),
            KeyReply::Renewed | KeyReply::Set | KeyReply::Other => self.0 &= !Self::bit(node),
        }
    }
}

/// How early a lease due at `due` may go out in a paced batch leaving at `now`: half its
/// interval. Extending early only makes the validity longer sooner; the next extension is then
/// due an interval after it, so in steady state going early shifts a lease's extensions, it does
/// not add any. Leases taken on at once (a burst) are spread over the interval this way.
pub(crate) fn may_go_early(now: Duration, due: Duration, every: Duration) -> bool {
    due <= now.saturating_add(every / 2)
}

/// The longest spacing between paced batches.
const MAX_SPACING: Duration = Duration::from_secs(3600);

/// How far apart paced batches go at most under a steady load, so that each carries few keys:
/// a node then runs one short command of ours at a time, and another client's command waits
/// behind at most that. With 10,000 one-key leases extended every second, 100 keys every 10 ms.
const PACE: Duration = Duration::from_millis(10);

/// The fewest keys a paced batch carries, so that a light load does not go out key by key (each
/// command costs a node about 25 µs beside its keys' 1 µs each).
const MIN_PACED_KEYS: usize = 16;

/// How paced batches go out: how many keys each carries at most, and how far apart.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Pace {
    pub(crate) keys: usize,
    pub(crate) spacing: Duration,
}

/// The pace for a keep-alive load of `keys_per_second` (every kept key over its interval,
/// summed): batches of what falls due in [`PACE`] (at least [`MIN_PACED_KEYS`], at most
/// [`BATCH_KEYS`]), each that batch's share of a second apart, so that they go out evenly rather
/// than all at once when a burst of leases falls due.
pub(crate) fn pace(keys_per_second: f64) -> Pace {
    if keys_per_second.is_nan() || keys_per_second <= 0.0 {
        return Pace {
            keys: MIN_PACED_KEYS,
            spacing: MAX_SPACING,
        };
    }
    let keys = (keys_per_second * PACE.as_secs_f64())
        .ceil()
        .clamp(MIN_PACED_KEYS as f64, BATCH_KEYS as f64);
    // Whole by the clamp above: the cast loses nothing.
    let spacing = Duration::try_from_secs_f64(keys / keys_per_second)
        .map_or(MAX_SPACING, |spacing| spacing.min(MAX_SPACING));
    Pace {
        keys: keys as usize,
        spacing,
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn batches_hold_at_most_batch_keys_keys_and_a_set_only_whole() {
        assert_eq!(batch_sizes(&[1; 1000]), [400, 400, 200]);
        assert_eq!(batch_sizes(&[64; 10]), [6, 4]);
        assert_eq!(batch_sizes(&[300, 200, 1]), [1, 2]);
        assert_eq!(batch_sizes(&[]), Vec::<usize>::new());
    }

    #[test]
    fn ten_thousand_one_key_leases_every_second_go_out_a_hundred_every_ten_milliseconds() {
        let at = |keys, ms| Pace {
            keys,
            spacing: Duration::from_millis(ms),
        };
        assert_eq!(pace(10_000.0), at(100, 10));
        assert_eq!(pace(100_000.0), at(400, 4));
        assert_eq!(pace(800.0), at(16, 20));
        assert_eq!(
            pace(0.0),
            Pace {
                keys: 16,
                spacing: MAX_SPACING
            }
        );
        assert_eq!(pace(-1.0).spacing, MAX_SPACING);
    }

    #[test]
    fn a_set_is_renewed_on_a_node_only_when_every_key_was() {
        use KeyReply::*;
        assert_eq!(combined(&[Renewed, Renewed]), Renewed);
        assert_eq!(combined(&[Renewed, Set]), Set);
        assert_eq!(combined(&[Renewed, Absent, Set]), Absent);
        assert_eq!(combined(&[Set, Other]), Other);
        assert_eq!(combined(&[]), Absent);
    }

    use super::*;
    use proptest::prelude::*;

    #[test]
    fn every_code_reads_and_only_a_renewal_counts_ours() {
        for (code, reply, vote) in [
            (1, KeyReply::Renewed, Vote::Ours),
            (2, KeyReply::Set, Vote::NotOurs),
            (0, KeyReply::Other, Vote::NotOurs),
            (-1, KeyReply::Absent, Vote::NotOurs),
        ] {
            assert_eq!(KeyReply::from_code(code), Some(reply));
            assert_eq!(reply.vote(), vote);
        }
        assert_eq!(KeyReply::from_code(3), None);
    }

    #[test]
    fn a_key_is_missing_where_absent_and_wanted_nowhere_else() {
        let mut missing = Missing::default();
        assert_eq!(missing, Missing(0));
        missing.insert(3);
        assert!(missing.contains(3) && !missing.contains(2));
        missing.record(3, KeyReply::Set);
        assert_eq!(missing, Missing(0));
        missing.record(4, KeyReply::Absent);
        assert!(missing.contains(4));
        missing.record(4, KeyReply::Other);
        assert!(!missing.contains(4), "another's key is never overwritten");
        missing.insert(64);
        assert_eq!(
            missing,
            Missing(0),
            "beyond the 64th node keys are only renewed"
        );
    }

    proptest! {
        #[test]
        fn a_lease_goes_at_most_half_its_interval_early(now in 0u64..1 << 40, due in 0u64..1 << 40, every in 1u64..1 << 30) {
            let (now, due, every) = (Duration::from_millis(now), Duration::from_millis(due), Duration::from_millis(every));
            if may_go_early(now, due, every) {
                prop_assert!(due <= now + every / 2);
            } else {
                prop_assert!(due > now);
            }
        }

        #[test]
        fn paced_batches_carry_the_load_and_never_stall(keys_per_second in proptest::num::f64::ANY) {
            let Pace { keys, spacing } = pace(keys_per_second);
            prop_assert!(spacing <= MAX_SPACING);
            prop_assert!((MIN_PACED_KEYS..=BATCH_KEYS).contains(&keys));
            // Up to a billion keys a second (spacings of 400 ns: a nanosecond's rounding is 0.25 %).
            if (MIN_PACED_KEYS as f64 / MAX_SPACING.as_secs_f64()..=1e9).contains(&keys_per_second) {
                // As many keys as are due, give or take the nanosecond's rounding.
                let carried = keys as f64 / spacing.as_secs_f64();
                prop_assert!((carried - keys_per_second).abs() <= keys_per_second * 3e-3, "{carried} for {keys_per_second}");
                // What falls due in `PACE`, rounded up to a whole key: at most one key's time more.
                let one_key = 1.0 / keys_per_second;
                prop_assert!(
                    spacing.as_secs_f64() <= PACE.as_secs_f64() + one_key + 1e-9 || keys == MIN_PACED_KEYS,
                    "{spacing:?} for {keys} keys at {keys_per_second}/s"
                );
            }
        }
    }
}
