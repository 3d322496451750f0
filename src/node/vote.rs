//! The gates in front of a node's requests: whether it may vote in an acquisition now (its
//! server's identity known, the claim on that server held, the restart guard passed, with
//! fencing a server that persists every write), and whether it may be counted towards a quorum
//! after one (the claim held). Nothing is sent through a closed gate.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use redis::RedisResult;
use redis::aio::MultiplexedConnection;

use super::connection::Node;
use super::identify::Identity;
use crate::outcome::NodeError;

impl Node {
    /// As [`run`](Node::run), for a request that votes in an acquisition: `command` is called
    /// (and so anything sent) only if this node may vote now, and it is also told the server's
    /// `run_id`, which it must hand to the acquisition's ledger in the same step as the request
    /// (one request per server and attempt). Otherwise, without sending anything:
    ///
    /// - the server's identity could not be read on connect: that error (the connection is
    ///   dropped, so that the next command reads it again, e.g. once an ACL allows `INFO`);
    /// - another node of the lock holds the claim on the same server:
    ///   [`NodeError::SameServer`];
    /// - the restart guard holds the node back: [`NodeError::Recovering`].
    pub(crate) async fn run_vote<T, F, Fut>(&self, command: F) -> Result<T, NodeError>
    where
        F: FnOnce(MultiplexedConnection, u64, Arc<str>) -> Fut,
        Fut: Future<Output = RedisResult<T>>,
    {
        let (generation, connected) = self.connection().await?;
        let run_id = match self.may_vote(&connected.identity) {
            Ok(run_id) => run_id,
            Err(error) => {
                if connected.identity.is_err() {
                    self.reset(generation);
                }
                return Err(error);
            }
        };
        self.bounded(
            generation,
            command(connected.connection, generation, run_id),
        )
        .await
    }

    /// As [`run`](Node::run), for a request that is counted towards a quorum after the
    /// acquisition (extend, and the fence's write-back): `command` is called only if this node
    /// holds the claim on its server, so one server never counts twice. The restart guard does
    /// not apply: such a request only confirms a key of ours that the node already holds.
    pub(crate) async fn run_counted<T, F, Fut>(&self, command: F) -> Result<T, NodeError>
    where
        F: FnOnce(MultiplexedConnection, u64) -> Fut,
        Fut: Future<Output = RedisResult<T>>,
    {
        let (generation, connected) = self.connection().await?;
        if let Err(error) = connected
            .identity
            .as_ref()
            .map_err(Clone::clone)
            .and_then(|identity| self.claim(identity))
        {
            if connected.identity.is_err() {
                self.reset(generation);
            }
            return Err(error);
        }
        self.bounded(generation, command(connected.connection, generation))
            .await
    }

    /// Whether this node may vote in an acquisition now, and for which server.
    fn may_vote(&self, identity: &Result<Arc<Identity>, NodeError>) -> Result<Arc<str>, NodeError> {
        let identity = identity.as_ref().map_err(Clone::clone)?;
        self.claim(identity)?;
        if self.durable_only && !identity.persists_every_write {
            return Err(NodeError::NotDurable);
        }
        if self.restart_guard.is_some() {
            let now = Instant::now();
            match identity.votes_from {
                Some(from) if from <= now => {}
                Some(from) => {
                    return Err(NodeError::Recovering {
                        left: from.saturating_duration_since(now),
                    });
                }
                None => {
                    return Err(NodeError::Recovering {
                        left: self.restart_guard.unwrap_or(Duration::MAX),
                    });
                }
            }
        }
        Ok(Arc::clone(&identity.run_id))
    }

    /// One server, one vote: whether this node holds the claim on its server (else
    /// [`NodeError::SameServer`], logged once per connection).
    fn claim(&self, identity: &Identity) -> Result<(), NodeError> {
        let Err(owner) = self.claims.claim(self.index, &identity.run_id) else {
            return Ok(());
        };
        if !identity.warned.swap(true, Ordering::Relaxed) {
            tracing::warn!(
                node = self.index,
                addr = %self.addr,
                same_as = owner,
                run_id = %identity.run_id,
                "this node reaches the same Redis server as another node of the lock; \
                 only that one votes for it"
            );
        }
        Err(NodeError::SameServer {
            node: owner,
            run_id: identity.run_id.to_string(),
        })
    }
}
