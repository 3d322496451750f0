//! A semaphore's slots: k permits of a name are k mutexes, `name:0` … `name:k-1`, each won by
//! the quorum rule. Why slots and not a counter voted on by a majority is in
//! `docs/ARCHITECTURE.md` ("Semaphores: slots, not a voted counter"); here only the names and
//! the order in which an acquisition tries them.

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

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn a_slot_is_the_name_a_colon_and_its_number() {
        assert_eq!(slot_name(b"workers", 0), b"workers:0");
        assert_eq!(slot_name(b"workers", 1023), b"workers:1023");
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
