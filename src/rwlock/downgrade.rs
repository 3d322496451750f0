//! [`Guard::downgrade`]: a write guard becomes a read guard of the same token with no gap, on
//! every node in one atomic step (`node/rwlock.rs`), won by the quorum rule.

use std::future::pending;
use std::pin::pin;
use std::sync::Arc;

use crate::error::{ConfigError, Error};
use crate::guard::Guard;
use crate::hold::{Acquired, Grant, Hold};
use crate::node::rwlock::downgrade;
use crate::outcome::NodeReply;
use crate::round::fan_out::{Until, fan_out};
use crate::round::release::{release_all, release_in_background};
use crate::rules::quorum::Verdict;
use crate::rules::resources::Keys;
use crate::rules::rwlock::{RwKeys, Side, reader_key};

impl Guard {
    /// Turns a write guard ([`Request::write`](crate::Request::write)) into a read guard with no
    /// gap: on each node, in one atomic step, the writer key becomes a reader's key of the same
    /// token that expires when the writer key would have, and waiting readers are woken. The
    /// read guard is valid until this guard was (extend it or keep it alive as any guard), and
    /// carries no fence. No writer can get in between: every node that turned holds a reader
    /// from the same instant its writer key is gone.
    ///
    /// There is no upgrade the other way: a reader waiting to write would wait for itself.
    /// Release the read guard and acquire the write side.
    ///
    /// # Errors
    ///
    /// - [`Error::DowngradeFailed`]: fewer than a quorum of nodes still held the writer key for
    ///   us (or answered); both keys were released on every node, nothing is held;
    /// - [`Error::Config`] ([`ConfigError::NotAWriteGuard`]): this guard is not a write guard
    ///   (a lock's, a set's, a permit's or a reader's); it is released as a dropped guard is.
    pub async fn downgrade(self) -> Result<Guard, Error> {
        let hold = Arc::clone(self.hold());
        if hold.side != Some(Side::Write) {
            return Err(ConfigError::NotAWriteGuard.into());
        }
        let node_set = &hold.node_set;
        // Every key made once, for all the nodes' requests.
        let rw = Arc::new(RwKeys::new(hold.keys.slot_key()));
        let token = hold.token.clone();
        let reader_key = reader_key(&rw.writer, token.as_str());
        let reader = Keys::Read {
            reader: Arc::clone(&reader_key),
            writer: Arc::clone(&rw.writer),
        };
        // Dropped before the round is decided (cancelled, unwound), the nodes that turned hold
        // a reader key of ours; this guard's drop releases the writer key.
        let mut cleanup = ReleaseReaderOnDrop {
            hold: &hold,
            reader: &reader,
            armed: true,
        };
        let round = fan_out(
            &node_set.nodes,
            node_set.settings.quorum,
            Until::Decided,
            pin!(pending::<()>()),
            "downgrade",
            |node| {
                let (rw, reader_key, token) =
                    (Arc::clone(&rw), Arc::clone(&reader_key), token.clone());
                async move {
                    NodeReply::from_flag(downgrade(&node, &rw, &reader_key, token.as_str()).await)
                }
            },
        )
        .await;
        cleanup.armed = false;
        drop(cleanup);
        if round.verdict != Some(Verdict::Won) {
            futures::join!(
                release_all(node_set, &hold.keys, &token, &hold.ledger, true),
                release_all(node_set, &reader, &token, &hold.ledger, true),
            );
            // Released above, by hand: nothing more when it goes.
            self.into_custody();
            return Err(Error::DowngradeFailed {
                outcomes: round.outcomes,
            });
        }
        if let Some(unanswered) = round.unanswered {
            // The slower nodes turn too, as an extension's do.
            node_set.background.finish_unanswered(unanswered);
        }
        let acquired = Acquired {
            node_set: Arc::clone(node_set),
            keys: reader,
            token,
            ledger: Arc::clone(&hold.ledger),
            owner: None,
            side: Some(Side::Read),
        };
        let grant = Grant {
            decided: hold.decided,
            valid_until: hold.valid_until(),
            fence: None,
            ttl: hold.ttl,
        };
        // Its writer key is now the read guard's reader key: nothing to release for it.
        self.into_custody();
        Ok(Guard::new(Hold::new(acquired, grant), round.outcomes))
    }
}

/// Releases a downgrade's reader keys in the background if the downgrade is dropped mid-round.
struct ReleaseReaderOnDrop<'a> {
    hold: &'a Arc<Hold>,
    reader: &'a Keys,
    armed: bool,
}

impl Drop for ReleaseReaderOnDrop<'_> {
    fn drop(&mut self) {
        if self.armed {
            release_in_background(
                &self.hold.node_set,
                self.reader.clone(),
                self.hold.token.clone(),
                Arc::clone(&self.hold.ledger),
                self.hold.runtime.as_ref(),
                true,
            );
        }
    }
}
