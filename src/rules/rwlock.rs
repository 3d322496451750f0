//! A read-write lock's keys on each node, all made from its writer key `W` (the lock key of its
//! name, so on a cluster node they share its hash slot): `W` itself holds the writer's token,
//! each reader holds a key of its own, `W:rw-read:<token>`, with its own expiry (one reader's
//! crash frees only its share), `W:rw-readers` is the set of the readers' tokens that a writer
//! looks them up by, and `W:rw-waiting` is the mark of a writer that readers kept out, which
//! keeps new readers out until it expires or that writer gets in (writer preference).

use std::sync::Arc;

/// Which side of a read-write lock an acquisition takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Side {
    /// Shared: any number of readers at once, none while a writer holds or waits.
    Read,
    /// Exclusive: refused wherever another writer holds or a reader does.
    Write,
}

/// Every key of one read-write lock but its readers' own, made once per request.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct RwKeys {
    /// `W`, the lock key of the lock's name.
    pub(crate) writer: Arc<[u8]>,
    /// `W:rw-readers`.
    pub(crate) readers: Arc<[u8]>,
    /// `W:rw-waiting`.
    pub(crate) mark: Arc<[u8]>,
    /// `W:rw-read:`, which a reader's token completes into its key.
    pub(crate) reader_base: Arc<[u8]>,
}

impl RwKeys {
    /// The keys of the read-write lock whose writer key is `writer`.
    pub(crate) fn new(writer: Arc<[u8]>) -> RwKeys {
        RwKeys {
            readers: readers_key(&writer),
            mark: mark_key(&writer),
            reader_base: reader_base(&writer),
            writer,
        }
    }
}

/// What a reader's key is named after its token: `W:rw-read:`.
pub(crate) fn reader_base(writer: &[u8]) -> Arc<[u8]> {
    suffixed(writer, b":rw-read:")
}

/// The key of the reader whose token is `token`.
pub(crate) fn reader_key(writer: &[u8], token: &str) -> Arc<[u8]> {
    let mut key = reader_base(writer).to_vec();
    key.extend_from_slice(token.as_bytes());
    Arc::from(key)
}

/// The set of the readers' tokens.
pub(crate) fn readers_key(writer: &[u8]) -> Arc<[u8]> {
    suffixed(writer, b":rw-readers")
}

/// A waiting writer's mark.
pub(crate) fn mark_key(writer: &[u8]) -> Arc<[u8]> {
    suffixed(writer, b":rw-waiting")
}

/// `writer` with `suffix` after it: a key of the same lock (in its hash slot on a cluster).
pub(crate) fn suffixed(writer: &[u8], suffix: &[u8]) -> Arc<[u8]> {
    let mut key = Vec::with_capacity(writer.len().saturating_add(suffix.len()));
    key.extend_from_slice(writer);
    key.extend_from_slice(suffix);
    Arc::from(key)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_key_starts_with_the_writer_key_so_a_cluster_tag_covers_them() {
        let writer = b"quorumlock:{doc}";
        let token = "ab12";
        for key in [
            reader_key(writer, token),
            readers_key(writer),
            mark_key(writer),
        ] {
            assert!(key.starts_with(writer), "{key:?}");
        }
        assert_eq!(
            &*reader_key(writer, token),
            b"quorumlock:{doc}:rw-read:ab12"
        );
        assert!(reader_key(writer, token).starts_with(&reader_base(writer)));
    }

    #[test]
    fn the_keys_of_one_lock_are_distinct() {
        let writer = b"w";
        let keys = [
            Arc::from(&writer[..]),
            reader_key(writer, "t"),
            readers_key(writer),
            mark_key(writer),
        ];
        for (i, a) in keys.iter().enumerate() {
            for b in keys.iter().skip(i + 1) {
                assert_ne!(a, b);
            }
        }
    }
}
