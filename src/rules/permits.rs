//! A semaphore's slots: k permits of a name are k mutexes, `name:0` … `name:k-1`, each won by
//! the quorum rule. Why slots and not a counter voted on by a majority is in
//! `docs/ARCHITECTURE.md` ("Semaphores: slots, not a voted counter"); here only the names and
//! the order in which an acquisition tries them, and which to try when it takes several.

use std::time::Duration;

/// The most permits one semaphore may have: an acquisition of a full semaphore tries every slot
/// once, one quorum round each.
pub const MAX_PERMITS: u32 = 1024;

/// The resource name of slot `slot` of the semaphore `name`: `name:slot`.
pub(crate) fn slot_name(name: &[u8], slot: u32) -> Vec<u8> {
    let mut slot_name = Vec::with_capacity(name.len().saturating_add(11));
    slot_name.extend_from_slice(name);
    slot_name.push(b':');
    slot_name.extend_from_slice(slot.to_string().as_bytes());
    slot_name
}

/// The order in which an acquisition of one of `permits` slots tries them: every slot once,
/// from `start` (taken modulo `permits`) onwards, wrapping. Contenders that start at random
/// slots spread over the free ones instead of all asking for slot 0 first.
pub(crate) fn slot_order(permits: u32, start: u32) -> impl Iterator<Item = u32> {
    let permits = permits.max(1);
    let start = start % permits;
    (0..permits).map(move |i| {
        // start + i < 2 * permits ≤ 2 * u32::MAX / 2 cannot overflow in u64.
        ((u64::from(start) + u64::from(i)) % u64::from(permits)) as u32
    })
}

/// `take` slots to try at once, given when each slot is free on a quorum by expiry alone
/// (`bounds`, in slot order: zero when it is free now, `None` when expiry alone never frees it):
/// `take` of the slots free now, the first from `start` (modulo their count) onwards, so that
/// contenders spread; `None` when fewer are free. A hint read before the attempt, not a
/// promise: the quorum rule still decides.
pub(crate) fn pick_free(bounds: &[Option<Duration>], take: usize, start: u32) -> Option<Vec<u32>> {
    let free: Vec<u32> = bounds
        .iter()
        .zip(0u32..)
        .filter(|(bound, _)| **bound == Some(Duration::ZERO))
        .map(|(_, slot)| slot)
        .collect();
    if take == 0 || free.len() < take {
        return None;
    }
    let count = u32::try_from(free.len()).ok()?;
    slot_order(count, start)
        .take(take)
        .map(|index| {
            usize::try_from(index)
                .ok()
                .and_then(|i| free.get(i).copied())
        })
        .collect()
}

/// When `take` of the slots are free on a quorum by expiry alone: the `take`-th soonest of
/// their bounds (`None` if fewer than `take` ever are by expiry alone).
pub(crate) fn free_after_take(bounds: &[Option<Duration>], take: usize) -> Option<Duration> {
    let mut known: Vec<Duration> = bounds.iter().flatten().copied().collect();
    known.sort_unstable();
    known.get(take.checked_sub(1)?).copied()
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn a_slot_is_the_name_a_colon_and_its_number() {
        assert_eq!(slot_name(b"workers", 0), b"workers:0");
        assert_eq!(slot_name(b"workers", 1023), b"workers:1023");
    }

    fn free() -> Option<Duration> {
        Some(Duration::ZERO)
    }

    fn in_ms(millis: u64) -> Option<Duration> {
        Some(Duration::from_millis(millis))
    }

    // promise: semaphore-take
    #[test]
    fn only_slots_free_now_are_picked_and_too_few_pick_none() {
        let bounds = [in_ms(5), free(), None, free(), free()];
        assert_eq!(pick_free(&bounds, 2, 0), Some(vec![1, 3]));
        assert_eq!(pick_free(&bounds, 2, 2), Some(vec![4, 1]));
        assert_eq!(pick_free(&bounds, 3, 7), Some(vec![3, 4, 1]));
        assert_eq!(pick_free(&bounds, 4, 0), None);
        assert_eq!(pick_free(&bounds, 0, 0), None);
    }

    #[test]
    fn taking_n_waits_for_the_nth_soonest_slot() {
        let bounds = [in_ms(30), None, free(), in_ms(10)];
        assert_eq!(free_after_take(&bounds, 1), free());
        assert_eq!(free_after_take(&bounds, 2), in_ms(10));
        assert_eq!(free_after_take(&bounds, 3), in_ms(30));
        assert_eq!(
            free_after_take(&bounds, 4),
            None,
            "one slot never frees by expiry"
        );
        assert_eq!(free_after_take(&bounds, 0), None);
    }

    proptest! {
        #[test]
        fn a_pick_is_distinct_free_slots_or_none_when_too_few_are(
            bounds in proptest::collection::vec(
                proptest::option::of(0u64..3).prop_map(|b| b.map(Duration::from_millis)),
                0..40,
            ),
            take in 0usize..10,
            start: u32,
        ) {
            let free = bounds.iter().filter(|b| **b == Some(Duration::ZERO)).count();
            match pick_free(&bounds, take, start) {
                None => prop_assert!(take == 0 || free < take),
                Some(picked) => {
                    prop_assert_eq!(picked.len(), take);
                    let mut distinct = picked.clone();
                    distinct.sort_unstable();
                    distinct.dedup();
                    prop_assert_eq!(distinct.len(), take);
                    for slot in picked {
                        prop_assert_eq!(bounds[slot as usize], Some(Duration::ZERO));
                    }
                }
            }
        }
    }

    proptest! {
        #[test]
        fn every_slot_is_tried_once_from_the_start(permits in 1u32..2048, start: u32) {
            let order: Vec<u32> = slot_order(permits, start).collect();
            prop_assert_eq!(order.len(), permits as usize);
            prop_assert_eq!(order[0], start % permits);
            let mut sorted = order.clone();
            sorted.sort_unstable();
            prop_assert_eq!(sorted, (0..permits).collect::<Vec<_>>());
        }
    }
}
