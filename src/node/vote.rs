//! The gates in front of a node's requests: whether it may vote in an acquisition now (its
//! server's identity known, the claim on that server held, no replica and no server sitting out
//! after it replaced the known one, the restart guard passed, with fencing a server that
//! persists every write), and whether it may be counted towards a quorum after one (the claim
//! held; for the fence's write-back also no replica or replacement sitting out). Nothing is
//! sent through a closed gate.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use redis::RedisResult;
use redis::aio::MultiplexedConnection;

use super::connection::{Lane, Server};
use super::history::Standing;
use super::identify::Identity;
use crate::metrics;
use crate::outcome::NodeError;
use crate::rules::commands::Commands;
#[cfg(feature = "chaos-defects")]
use crate::rules::defect::Defect;

/// What a request counted after an acquisition confirms, for which gate it passes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Counted {
    /// An extension: only renews a key of ours the server already holds.
    Extend,
    /// The fence's write-back: raises the server's counter, which a server that replaced the
    /// known one may hold an old value of, so it passes the same standing as a vote.
    WriteBack,
}

impl Server {
    /// As [`run`](Server::run), for a request that votes in an acquisition: `command` is called
    /// (and so anything sent) only if this server may vote now, and it is also told the
    /// server's `run_id`, which it must hand to the acquisition's ledger in the same step as the
    /// request (one request per server and attempt). Otherwise, without sending anything:
    ///
    /// - the server's identity could not be read on connect: that error (the connection is
    ///   dropped, so that the next command reads it again, e.g. once an ACL allows `INFO`);
    /// - another node of the lock holds the claim on the same server:
    ///   [`NodeError::SameServer`];
    /// - the server is a replica ([`NodeError::Replica`]; the connection is dropped too, so that
    ///   a promotion is read on the next one), or replaced the known one and sits out
    ///   ([`NodeError::Replaced`]);
    /// - the restart guard holds the node back: [`NodeError::Recovering`].
    pub(crate) async fn run_vote<T, F, Fut>(&self, lane: Lane, command: F) -> Result<T, NodeError>
    where
        F: FnOnce(MultiplexedConnection, u64, Arc<str>) -> Fut,
        Fut: Future<Output = RedisResult<T>>,
    {
        let (generation, connection, run_id) = self.pass_vote(lane).await?;
        self.bounded(generation, command(connection, generation, run_id))
            .await
    }

    /// The vote gate alone: `lane`'s connection (and its generation) to send a voting request
    /// over, and the server's `run_id`; or why this server may not vote now (see
    /// [`run_vote`](Server::run_vote)).
    pub(super) async fn pass_vote(
        &self,
        lane: Lane,
    ) -> Result<(u64, MultiplexedConnection, Arc<str>), NodeError> {
        let (generation, connected) = self.connection(lane).await?;
        match self.may_vote(&connected.identity) {
            Ok(run_id) => Ok((generation, connected.connection, run_id)),
            Err(error) => {
                if connected.identity.is_err() || error == NodeError::Replica {
                    self.reset(generation);
                }
                if matches!(error, NodeError::Recovering { .. }) {
                    // The countdown is the connection's, read when it was made. A restart since
                    // broke the connection, but nothing else goes to a recovering node to find
                    // out: a probe does, and the next attempt reads the new server's countdown.
                    // `INFO keyspace`: small, and allowed wherever the identity could be read.
                    let (mut connection, mut probe) = (connected.connection, redis::cmd("INFO"));
                    probe.arg("keyspace");
                    self.bounded(generation, probe.query_async::<()>(&mut connection))
                        .await?;
                    metrics::sat_out();
                }
                metrics::node_error(&error);
                Err(error)
            }
        }
    }

    /// As [`run`](Server::run), for a request counted towards a quorum after an acquisition:
    /// `command` is called only if this server holds the claim on its server (so that one
    /// server never confirms twice), and for the fence's write-back only if it is no replica and
    /// no replacement sitting out (else [`NodeError::SameServer`], [`NodeError::Replica`],
    /// [`NodeError::Replaced`] or the identity's error, without sending anything). The restart
    /// guard does not apply: such a request only confirms a key of ours that the server already
    /// holds. `command` is also told the connection's generation and the native commands its
    /// server offers.
    pub(crate) async fn run_counted<T, F, Fut>(
        &self,
        counted: Counted,
        lane: Lane,
        command: F,
    ) -> Result<T, NodeError>
    where
        F: FnOnce(MultiplexedConnection, u64, Commands) -> Fut,
        Fut: Future<Output = RedisResult<T>>,
    {
        let (generation, connection, commands) = self.pass_counted(counted, lane).await?;
        self.bounded(generation, command(connection, generation, commands))
            .await
    }

    /// The gate of [`run_counted`](Server::run_counted) alone: `lane`'s connection, its
    /// generation and the server's native commands, or why nothing may be sent.
    pub(super) async fn pass_counted(
        &self,
        counted: Counted,
        lane: Lane,
    ) -> Result<(u64, MultiplexedConnection, Commands), NodeError> {
        let (generation, connected) = self.connection(lane).await?;
        if let Err(error) = connected
            .identity
            .as_ref()
            .map_err(Clone::clone)
            .and_then(|identity| {
                self.claim(identity)?;
                match counted {
                    Counted::Extend => Ok(()),
                    Counted::WriteBack => self.standing(identity),
                }
            })
        {
            if connected.identity.is_err() || error == NodeError::Replica {
                self.reset(generation);
            }
            metrics::node_error(&error);
            return Err(error);
        }
        let commands = connected
            .identity
            .as_ref()
            .map_or_else(|_| Commands::default(), |identity| identity.commands);
        Ok((generation, connected.connection, commands))
    }

    /// Whether this node may vote in an acquisition now, and for which server.
    fn may_vote(&self, identity: &Result<Arc<Identity>, NodeError>) -> Result<Arc<str>, NodeError> {
        let identity = identity.as_ref().map_err(Clone::clone)?;
        self.claim(identity)?;
        self.standing(identity)?;
        if self.durable_only && !identity.persists_every_write {
            return Err(NodeError::NotDurable);
        }
        // The `restart-guard-ignored` defect (test-only): the guard's decision forced to "may
        // vote now".
        #[cfg(feature = "chaos-defects")]
        if self.defect == Some(Defect::RestartGuardIgnored) {
            return Ok(Arc::clone(&identity.run_id));
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

    /// Whether the server may vote at all by what the node remembers of its address
    /// ([`standing`]); with the `replacement-ignored` defect a sit-out counts as a vote.
    fn standing(&self, identity: &Identity) -> Result<(), NodeError> {
        // The `replacement-ignored` defect (test-only): `SitsOut` treated as `Votes`.
        #[cfg(feature = "chaos-defects")]
        if self.defect == Some(Defect::ReplacementIgnored)
            && matches!(identity.standing, Standing::SitsOut(..))
        {
            return Ok(());
        }
        standing(identity)
    }

    /// One server, one vote: whether this node holds the claim on its server (else
    /// [`NodeError::SameServer`], logged once per connection).
    fn claim(&self, identity: &Identity) -> Result<(), NodeError> {
        let Err(owner) = self
            .claims
            .claim((self.index, self.shard), &identity.run_id)
        else {
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

/// Whether the server may vote at all by what the node remembers of its address: never as a
/// replica, and not while it sits out after replacing the server the node knew.
fn standing(identity: &Identity) -> Result<(), NodeError> {
    match &identity.standing {
        Standing::Votes => Ok(()),
        Standing::Replica => Err(NodeError::Replica),
        Standing::SitsOut(until, reason) => {
            let now = Instant::now();
            if *until <= now {
                return Ok(());
            }
            Err(NodeError::Replaced {
                left: until.saturating_duration_since(now),
                reason: reason.clone(),
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use std::net::{Ipv4Addr, SocketAddr};

    use quorumlock_harness::{ClusterOptions, Persistence, TestCluster};

    use super::*;
    use crate::LockOptions;
    use crate::node::extend::extend;
    use crate::node::write_back::write_back;

    /// Against real servers behind a proxy: once the proxy's upstream is switched to another
    /// server that was running all along, the fence's write-back is refused there (the counter
    /// it would raise may be an old one), while extend still runs (it only renews a key of ours
    /// that the server holds, and there is none here).
    #[tokio::test]
    async fn a_replacement_sits_out_of_the_write_back_but_not_of_extend() {
        let servers = TestCluster::start(
            ClusterOptions::default()
                .nodes(2)
                .proxies(true)
                .persistence(Persistence::AofAlways),
        )
        .await
        .unwrap();
        let settings = LockOptions::new()
            .node_timeout(Duration::from_secs(5))
            .connect_timeout(Duration::from_secs(5))
            .validate(1)
            .unwrap();
        // The other server was running before the node's last reply from server 0: reported
        // 2 s, surely up for 1 s.
        let up = servers
            .wait_for_uptime(1, Duration::from_secs(2))
            .await
            .unwrap();
        assert!(up >= Duration::from_secs(2), "{up:?}");
        let node = crate::node::test_node(0, &servers.urls()[0], &settings);
        assert_eq!(
            write_back(&node, (b"k", b"f"), "t", 1, false, None).await,
            Ok(false)
        );
        let proxy = servers.proxy(0).unwrap();
        proxy.switch_upstream(SocketAddr::from((
            Ipv4Addr::LOCALHOST,
            servers.port(1).unwrap(),
        )));
        proxy.cut().await;

        let mut refused = None;
        for _ in 0..2 {
            match write_back(&node, (b"k", b"f"), "t", 1, false, None).await {
                Err(error @ NodeError::Replaced { .. }) => {
                    refused = Some(error);
                    break;
                }
                // The cut connection fails once; the next call reconnects.
                Err(error) if error.breaks_connection() => {}
                other => panic!("write-back to a replacement: {other:?}"),
            }
        }
        assert!(
            matches!(
                refused,
                Some(NodeError::Replaced { left, reason: crate::Replacement::OtherServer { .. } })
                    if left <= settings.replaced_sit_out
            ),
            "{refused:?}"
        );
        assert_eq!(extend(&node, b"k", "t", 1_000).await, Ok(false));
    }
}
