//! The keys one acquisition holds: one resource's, a set's, or a reader's. A set is checked here (not empty,
//! no empty name, no name twice, at most [`MAX_RESOURCES`]) and put in one canonical order, so
//! that the order a caller gives does not matter; and here is its vote rule: a node holds a set
//! only if it holds every key of it.

use std::sync::Arc;

use super::token::lock_key;

/// The most resources one set may hold. Each node takes a set in one script that looks at
/// every key and then sets them all; at 64 keys that keeps the server busy for well under a
/// millisecond (`docs/benchmarks.md`, "Sets of resources"), so no set can stall a node for
/// everyone else.
pub const MAX_RESOURCES: usize = 64;

/// Why a list of resource names is not a set a lock can take.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum SetDefect {
    /// No name at all.
    Empty,
    /// One of the names is empty.
    EmptyName,
    /// A name given twice.
    Duplicate(Vec<u8>),
    /// More names than [`MAX_RESOURCES`].
    TooMany(usize),
}

/// Checks `names` as a set and sorts them (bytewise): distinct, non-empty, at most
/// [`MAX_RESOURCES`]. Sorted, two sets of the same names are the same set whatever order they
/// were given in, and reports list the resources in one order.
pub(crate) fn canonical_set(mut names: Vec<Vec<u8>>) -> Result<Vec<Vec<u8>>, SetDefect> {
    if names.is_empty() {
        return Err(SetDefect::Empty);
    }
    if names.len() > MAX_RESOURCES {
        return Err(SetDefect::TooMany(names.len()));
    }
    if names.iter().any(Vec::is_empty) {
        return Err(SetDefect::EmptyName);
    }
    names.sort_unstable();
    if let Some(pair) = names.windows(2).find(|pair| pair.first() == pair.get(1)) {
        return Err(SetDefect::Duplicate(
            pair.first().cloned().unwrap_or_default(),
        ));
    }
    Ok(names)
}

/// The Redis keys of one acquisition: one resource's, or a set's (from [`canonical_set`], each
/// name with the lock's prefix). One key is not a set of one: it keeps the single-key commands
/// (`SET NX PX`), which cost the server less than a script.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) enum Keys {
    /// One resource's key.
    One(Arc<[u8]>),
    /// A set's keys, in the set's order.
    Set(Arc<[Arc<[u8]>]>),
    /// A reader of a read-write lock (`rwlock.rs`): its own key, and the lock's writer key,
    /// which names the channel its release wakes waiters on.
    Read {
        /// The reader's key, `W:rw-read:<token>`.
        reader: Arc<[u8]>,
        /// The writer key `W`.
        writer: Arc<[u8]>,
    },
}

impl Keys {
    /// Every key, in order (one for a single resource).
    pub(crate) fn all(&self) -> &[Arc<[u8]>] {
        match self {
            Keys::One(key) | Keys::Read { reader: key, .. } => std::slice::from_ref(key),
            Keys::Set(keys) => keys,
        }
    }

    /// The key a cluster node routes the keys' requests by: the first (on a lock with a cluster
    /// node a set's keys share a slot, `slots.rs`).
    pub(crate) fn slot_key(&self) -> Arc<[u8]> {
        self.all()
            .first()
            .cloned()
            .unwrap_or_else(|| Arc::from(&[][..]))
    }

    /// The keys whose waiters a release of these wakes (their channels): these keys, but a
    /// reader's release wakes the waiters of its lock's writer key.
    pub(crate) fn woken(&self) -> &[Arc<[u8]>] {
        match self {
            Keys::Read { writer, .. } => std::slice::from_ref(writer),
            keys => keys.all(),
        }
    }

    /// The first key: the only one, or the set's first.
    pub(crate) fn first(&self) -> &[u8] {
        self.all().first().map(|key| &key[..]).unwrap_or_default()
    }

    /// The same resources' keys under another prefix: each key's first `prefix_len` bytes (the
    /// lock's prefix) replaced by `prefix` (the fence counters').
    pub(crate) fn with_prefix(&self, prefix_len: usize, prefix: &[u8]) -> Keys {
        let rekey = |key: &Arc<[u8]>| lock_key(prefix, key.get(prefix_len..).unwrap_or_default());
        match self {
            Keys::One(key) | Keys::Read { reader: key, .. } => Keys::One(rekey(key)),
            Keys::Set(keys) => Keys::Set(keys.iter().map(rekey).collect()),
        }
    }
}

/// Whether a node's per-key answers (`true`: the key holds our token) make it hold the set: all
/// of them, and at least one (an empty answer holds nothing).
pub(crate) fn holds_all(found: &[bool]) -> bool {
    !found.is_empty() && found.iter().all(|&ours| ours)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn names(names: &[&str]) -> Vec<Vec<u8>> {
        names.iter().map(|name| name.as_bytes().to_vec()).collect()
    }

    #[test]
    fn a_set_is_sorted_and_rejects_empty_duplicate_and_oversized_lists() {
        assert_eq!(
            canonical_set(names(&["b", "c", "a"])),
            Ok(names(&["a", "b", "c"]))
        );
        assert_eq!(canonical_set(Vec::new()), Err(SetDefect::Empty));
        assert_eq!(canonical_set(names(&["a", ""])), Err(SetDefect::EmptyName));
        assert_eq!(
            canonical_set(names(&["x", "a", "x"])),
            Err(SetDefect::Duplicate(b"x".to_vec()))
        );
        let many: Vec<Vec<u8>> = (0..=MAX_RESOURCES).map(|i| i.to_string().into()).collect();
        assert_eq!(
            canonical_set(many),
            Err(SetDefect::TooMany(MAX_RESOURCES + 1))
        );
        let most: Vec<Vec<u8>> = (0..MAX_RESOURCES).map(|i| i.to_string().into()).collect();
        assert_eq!(canonical_set(most).map(|set| set.len()), Ok(MAX_RESOURCES));
    }

    #[test]
    fn a_node_holds_a_set_only_with_every_key() {
        assert!(holds_all(&[true, true]));
        assert!(!holds_all(&[true, false]));
        assert!(!holds_all(&[]));
    }

    #[test]
    fn one_key_is_its_own_first_and_only_key() {
        let key: Arc<[u8]> = Arc::from(&b"p:r"[..]);
        let one = Keys::One(Arc::clone(&key));
        assert_eq!(one.all(), &[Arc::clone(&key)]);
        assert_eq!(one.first(), b"p:r");
        assert_eq!(one.with_prefix(2, b"f:"), Keys::One(Arc::from(&b"f:r"[..])));
    }

    proptest! {
        /// The order given never matters: every permutation of a set is the same set.
        #[test]
        fn any_order_gives_the_same_set(mut set in proptest::collection::btree_set("[a-z]{1,4}", 1..10), seed in any::<u64>()) {
            let sorted: Vec<Vec<u8>> = set.iter().map(|name| name.as_bytes().to_vec()).collect();
            let mut shuffled = sorted.clone();
            // A deterministic shuffle from the seed.
            let len = shuffled.len();
            for i in 0..len {
                let j = usize::try_from(seed.rotate_left(u32::try_from(i).unwrap_or(0)) % len as u64).unwrap_or(0);
                shuffled.swap(i, j);
            }
            prop_assert_eq!(canonical_set(shuffled), Ok(sorted));
            set.clear();
        }
    }
}
