//! The lock key formats of other Redlock clients, so that a [`Lock`](crate::Lock) and a peer
//! written in another language exclude each other on the same nodes
//! ([`LockOptions::key_format`](crate::LockOptions::key_format); `docs/interop.md`).

use std::time::Duration;

/// How often a waiter tries again when no wake-up comes, for formats other clients write: their
/// releases publish nothing, so without it a waiter would sleep until the holder's keys expire.
const PEER_RECHECK: Duration = Duration::from_millis(100);

/// Which client's lock keys a [`Lock`](crate::Lock) writes and contends for: every format here is
/// `SET key token NX PX ttl` with a compare-and-delete release, so a lock of either client on
/// the same resource is refused while the other holds it.
///
/// A peer's format also makes a waiter try again every 100 ms when no wake-up comes
/// ([`LockOptions::recheck`](crate::LockOptions::recheck)), since a peer's release publishes
/// nothing this library listens for.
///
/// ```
/// use quorumlock::{KeyFormat, Lock, LockOptions};
///
/// // Locks named as pottery's `Redlock(key="printer", ...)` names them: `redlock:printer`.
/// let options = LockOptions::new().key_format(KeyFormat::Pottery);
/// let lock = Lock::new(["redis://127.0.0.1:6379"], options)?;
/// # Ok::<(), quorumlock::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum KeyFormat {
    /// `quorumlock:NAME`, this library's own (the default).
    Quorumlock,
    /// `NAME` itself, as redsync (Go), node-redlock (JavaScript), rslock (Rust) and redis-py's
    /// single-node `Lock` write it.
    Bare,
    /// `redlock:NAME`, as pottery (Python) writes it.
    Pottery,
}

impl KeyFormat {
    /// The bytes put before the resource name.
    pub fn prefix(self) -> &'static [u8] {
        match self {
            KeyFormat::Quorumlock => b"quorumlock:",
            KeyFormat::Bare => b"",
            KeyFormat::Pottery => b"redlock:",
        }
    }

    /// The waiter's re-check bound this format implies when none is set: none for this
    /// library's own keys (every release publishes), 100 ms for a peer's.
    pub(crate) fn recheck(self) -> Option<Duration> {
        match self {
            KeyFormat::Quorumlock => None,
            KeyFormat::Bare | KeyFormat::Pottery => Some(PEER_RECHECK),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn peers_formats_recheck_and_ours_does_not() {
        assert_eq!(KeyFormat::Quorumlock.recheck(), None);
        assert_eq!(KeyFormat::Bare.recheck(), Some(PEER_RECHECK));
        assert_eq!(KeyFormat::Pottery.prefix(), b"redlock:");
        assert_eq!(KeyFormat::Bare.prefix(), b"");
    }
}
