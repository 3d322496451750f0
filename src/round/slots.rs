//! [`Slots`]: the keeper's leases by number, in a slab (a vector whose free places are reused).
//! A number is the lease's index in the vector and a serial, so a number whose lease has left
//! (released, or lost while a batch was out) does not find the lease that took its place. A
//! slab rather than a hash map: at 100,000 leases a map's buckets, with its spare ones, cost
//! more per lease than a slot itself. (Written out rather than a crate's: it is this file.)

/// The bits of a number that hold the index: room for 2^40 leases, beyond any memory.
const INDEX_BITS: u32 = 40;
const INDEX_MASK: u64 = (1 << INDEX_BITS) - 1;

/// Values by number; a number is never that of two values at once.
pub(super) struct Slots<T> {
    /// Each place: its value and number, or nothing.
    places: Vec<Option<(u64, T)>>,
    /// The empty places, the most recently emptied last.
    free: Vec<usize>,
    /// Counts insertions, for the numbers' upper bits.
    serial: u64,
}

impl<T> Default for Slots<T> {
    fn default() -> Self {
        Slots {
            places: Vec::new(),
            free: Vec::new(),
            serial: 0,
        }
    }
}

impl<T> Slots<T> {
    /// Stores `value`; returns its number.
    pub(super) fn insert(&mut self, value: T) -> u64 {
        let index = self.free.pop().unwrap_or(self.places.len());
        self.serial = self.serial.wrapping_add(1);
        let id =
            (self.serial << INDEX_BITS) | (u64::try_from(index).unwrap_or(u64::MAX) & INDEX_MASK);
        match self.places.get_mut(index) {
            Some(place) => *place = Some((id, value)),
            None => self.places.push(Some((id, value))),
        }
        id
    }

    fn index(id: u64) -> usize {
        usize::try_from(id & INDEX_MASK).unwrap_or(usize::MAX)
    }

    /// The value numbered `id`, if it is still there.
    pub(super) fn get(&self, id: u64) -> Option<&T> {
        match self.places.get(Self::index(id)) {
            Some(Some((own, value))) if *own == id => Some(value),
            _ => None,
        }
    }

    /// The value numbered `id`, if it is still there.
    pub(super) fn get_mut(&mut self, id: u64) -> Option<&mut T> {
        match self.places.get_mut(Self::index(id)) {
            Some(Some((own, value))) if *own == id => Some(value),
            _ => None,
        }
    }

    /// Takes out the value numbered `id`, if it is still there.
    pub(super) fn remove(&mut self, id: u64) -> Option<T> {
        let index = Self::index(id);
        let place = self.places.get_mut(index)?;
        if !matches!(place, Some((own, _)) if *own == id) {
            return None;
        }
        let (_, value) = place.take()?;
        self.free.push(index);
        Some(value)
    }

    /// Whether no value is stored.
    pub(super) fn is_empty(&self) -> bool {
        self.free.len() == self.places.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_number_finds_only_its_own_value_even_where_its_slot_was_reused() {
        let mut slots = Slots::default();
        let first = slots.insert("first");
        assert_eq!(slots.get(first), Some(&"first"));
        assert_eq!(slots.remove(first), Some("first"));
        let second = slots.insert("second");
        assert_eq!(
            first & INDEX_MASK,
            second & INDEX_MASK,
            "the slot is reused"
        );
        assert_ne!(first, second);
        assert_eq!(slots.get(first), None);
        assert_eq!(slots.get_mut(first), None);
        assert_eq!(slots.remove(first), None);
        assert_eq!(slots.get(second), Some(&"second"));
        assert!(!slots.is_empty());
        assert_eq!(slots.remove(second), Some("second"));
        assert!(slots.is_empty());
    }
}
