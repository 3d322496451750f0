//! A list of at most `N` items held inline. States keep their nodes, clients, grants and store
//! writes in these, so that copying a state, which the checker does for every successor and
//! every symmetric renaming, never allocates.

use std::cmp::Ordering;
use std::fmt;
use std::hash::{Hash, Hasher};
use std::ops::{Deref, DerefMut};

/// At most `N` items (`N` below 256), in order. Comparisons and hashes see only the items, not
/// the unused slots.
#[derive(Clone, Copy)]
pub struct Bounded<T, const N: usize> {
    items: [T; N],
    len: u8,
}

impl<T: Copy + Default, const N: usize> Bounded<T, N> {
    /// No items.
    pub fn new() -> Self {
        Bounded {
            items: [T::default(); N],
            len: 0,
        }
    }

    /// `len` copies of `item` (at most `N`).
    pub fn filled(len: usize, item: T) -> Self {
        let mut list = Bounded::new();
        for _ in 0..len.min(N) {
            list.push(item);
        }
        list
    }

    /// Appends `item`; `false` (and no change) when the list is full.
    pub fn push(&mut self, item: T) -> bool {
        let Some(slot) = self.items.get_mut(usize::from(self.len)) else {
            return false;
        };
        *slot = item;
        self.len = self.len.saturating_add(1);
        true
    }
}

impl<T: Copy + Default, const N: usize> Default for Bounded<T, N> {
    fn default() -> Self {
        Bounded::new()
    }
}

impl<T, const N: usize> Deref for Bounded<T, N> {
    type Target = [T];

    fn deref(&self) -> &[T] {
        self.items.get(..usize::from(self.len)).unwrap_or(&[])
    }
}

impl<T, const N: usize> DerefMut for Bounded<T, N> {
    fn deref_mut(&mut self) -> &mut [T] {
        self.items
            .get_mut(..usize::from(self.len))
            .unwrap_or(&mut [])
    }
}

impl<T: PartialEq, const N: usize> PartialEq for Bounded<T, N> {
    fn eq(&self, other: &Self) -> bool {
        **self == **other
    }
}

impl<T: Eq, const N: usize> Eq for Bounded<T, N> {}

impl<T: PartialOrd, const N: usize> PartialOrd for Bounded<T, N> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        (**self).partial_cmp(&**other)
    }
}

impl<T: Ord, const N: usize> Ord for Bounded<T, N> {
    fn cmp(&self, other: &Self) -> Ordering {
        (**self).cmp(&**other)
    }
}

impl<T: Hash, const N: usize> Hash for Bounded<T, N> {
    fn hash<H: Hasher>(&self, state: &mut H) {
        (**self).hash(state);
    }
}

impl<'a, T, const N: usize> IntoIterator for &'a Bounded<T, N> {
    type Item = &'a T;
    type IntoIter = std::slice::Iter<'a, T>;

    fn into_iter(self) -> Self::IntoIter {
        self.iter()
    }
}

impl<T: fmt::Debug, const N: usize> fmt::Debug for Bounded<T, N> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bounded_list_takes_items_up_to_its_capacity() {
        let mut list: Bounded<u8, 2> = Bounded::new();
        assert!(list.push(1) && list.push(2));
        assert!(!list.push(3));
        assert_eq!(&*list, &[1, 2]);
        assert_eq!(&*Bounded::<u8, 3>::filled(5, 7), &[7, 7, 7]);
    }

    #[test]
    fn lists_with_the_same_items_are_equal() {
        let mut one: Bounded<u8, 3> = Bounded::filled(2, 4);
        let two: Bounded<u8, 3> = Bounded::filled(2, 4);
        assert_eq!(one, two);
        one.push(0);
        assert_ne!(one, two);
    }
}
