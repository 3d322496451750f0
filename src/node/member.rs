//! [`Node`]: one node of the lock, as the rounds see it: one Redis server, or a Redis Cluster
//! whose shard serving a key's slot takes that key's requests. Every command names the key it
//! is routed by; for a node that is one server the key is not looked at.

use std::future::Future;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use redis::RedisResult;

use super::cluster::Cluster;
use super::connection::{Lane, Server};
use super::redirect::{Connection, Gate, Routed};
use super::subscription::{OnMessage, Subscription};
use super::vote::Counted;
use crate::error::ConfigError;
use crate::node_config::Resolved;
use crate::outcome::NodeError;
use crate::rules::commands::Commands;
use crate::rules::identity::{Claims, Endpoint};
use crate::settings::Settings;

/// One node of the lock.
pub(crate) struct Node {
    index: usize,
    addr: Arc<str>,
    route: Route,
}

/// What a node is. Unboxed: one per node, made once, and the one-server case (every request
/// of most locks) should not pay an indirection for the cluster's.
#[allow(clippy::large_enum_variant)]
enum Route {
    Server(Server),
    Cluster(Arc<Cluster>),
}

impl Node {
    /// Node `index` at `resolved`, connected with the lock's settings, deciding with the other
    /// nodes of its lock (`claims`) which of them votes for a server that several reach.
    /// Nothing is sent until the first command.
    pub(crate) fn new(
        index: usize,
        resolved: Resolved,
        settings: &Settings,
        claims: &Arc<Claims>,
    ) -> Result<Node, ConfigError> {
        match resolved {
            Resolved::Server(info) => {
                let server = Server::new(index, 0, info, settings, claims, &Arc::default())?;
                Ok(Node {
                    index,
                    addr: Arc::clone(server.addr()),
                    route: Route::Server(server),
                })
            }
            Resolved::Cluster(seeds) => {
                let addrs: Vec<String> = seeds.iter().map(|seed| seed.addr().to_string()).collect();
                Ok(Node {
                    index,
                    addr: format!("cluster({})", addrs.join(", ")).into(),
                    route: Route::Cluster(Arc::new(Cluster::new(index, seeds, settings, claims)?)),
                })
            }
        }
    }

    /// Position in the configured node list.
    pub(crate) fn index(&self) -> usize {
        self.index
    }

    /// `host:port` without credentials, or a cluster's seeds in `cluster(…)`.
    pub(crate) fn addr(&self) -> &Arc<str> {
        &self.addr
    }

    /// Where the node's servers are (a cluster's seeds), for telling duplicates apart.
    pub(crate) fn endpoints(&self) -> Vec<Endpoint> {
        match &self.route {
            Route::Server(server) => vec![server.endpoint()],
            Route::Cluster(cluster) => cluster.endpoints().to_vec(),
        }
    }

    /// Starts `lane`'s connection to the server of `key` (a cluster node: to the shard its
    /// slot map, if read, names), without waiting for it.
    pub(crate) fn warm(&self, lane: Lane, key: &[u8]) {
        match &self.route {
            Route::Server(server) => server.warm(lane),
            Route::Cluster(cluster) => cluster.warm(lane, key),
        }
    }

    /// A subscription connection for waiters' wake-ups (to a cluster's first seed: a cluster
    /// delivers every `PUBLISH` on every shard); nothing connects until its first subscription.
    pub(crate) fn subscription(
        &self,
        connect_timeout: Duration,
        on_message: OnMessage,
    ) -> Subscription {
        match &self.route {
            Route::Server(server) => server.subscription(connect_timeout, on_message),
            Route::Cluster(cluster) => cluster
                .first_seed()
                .subscription(connect_timeout, on_message),
        }
    }

    /// Runs one command (which may be several round trips, as a script's NOSCRIPT fallback is)
    /// for `key` (a cluster node: on the shard serving its slot), within the connect timeout and
    /// the command timeout. `command` gets the connection and its generation (for a cluster
    /// node, of the shard's connection it goes out on first; a redirection that leaves the
    /// request without a reply drops that connection, see `redirect.rs`). Requests given to one
    /// generation run in the order they enter its queue.
    pub(crate) async fn run<T, F, Fut>(&self, key: &[u8], command: F) -> Result<T, NodeError>
    where
        F: FnOnce(Connection, u64) -> Fut,
        Fut: Future<Output = RedisResult<T>>,
    {
        match &self.route {
            Route::Server(server) => {
                server
                    .run(|connection, generation| {
                        command(Connection::Direct(connection), generation)
                    })
                    .await
            }
            Route::Cluster(cluster) => {
                let server = self.shard(cluster, key).await?;
                let refused = Arc::default();
                let routed = routed(cluster, &server, Gate::Open, &refused);
                let result = server
                    .run(|connection, generation| {
                        command(routed(connection, generation), generation)
                    })
                    .await;
                reported(cluster, result, &refused)
            }
        }
    }

    /// As [`run`](Node::run), on `lane`'s connection, through the vote gate (`vote.rs`):
    /// `command` is also told the `run_id` of the server it goes to.
    pub(crate) async fn run_vote<T, F, Fut>(
        &self,
        key: &[u8],
        lane: Lane,
        command: F,
    ) -> Result<T, NodeError>
    where
        F: FnOnce(Connection, u64, Arc<str>) -> Fut,
        Fut: Future<Output = RedisResult<T>>,
    {
        match &self.route {
            Route::Server(server) => {
                server
                    .run_vote(lane, |connection, generation, run_id| {
                        command(Connection::Direct(connection), generation, run_id)
                    })
                    .await
            }
            Route::Cluster(cluster) => {
                let server = self.shard(cluster, key).await?;
                let refused = Arc::default();
                let routed = routed(cluster, &server, Gate::Vote, &refused);
                let result = server
                    .run_vote(lane, |connection, generation, run_id| {
                        command(routed(connection, generation), generation, run_id)
                    })
                    .await;
                reported(cluster, result, &refused)
            }
        }
    }

    /// As [`run`](Node::run), on `lane`'s connection, through the gate of a request counted
    /// after an acquisition (`vote.rs`): `command` is also told the native commands the server
    /// offers.
    pub(crate) async fn run_counted<T, F, Fut>(
        &self,
        key: &[u8],
        counted: Counted,
        lane: Lane,
        command: F,
    ) -> Result<T, NodeError>
    where
        F: FnOnce(Connection, u64, Commands) -> Fut,
        Fut: Future<Output = RedisResult<T>>,
    {
        match &self.route {
            Route::Server(server) => {
                server
                    .run_counted(counted, lane, |connection, generation, commands| {
                        command(Connection::Direct(connection), generation, commands)
                    })
                    .await
            }
            Route::Cluster(cluster) => {
                let server = self.shard(cluster, key).await?;
                let refused = Arc::default();
                let routed = routed(cluster, &server, Gate::Counted(counted), &refused);
                let result = server
                    .run_counted(counted, lane, |connection, generation, commands| {
                        command(routed(connection, generation), generation, commands)
                    })
                    .await;
                reported(cluster, result, &refused)
            }
        }
    }

    /// Whether requests for different keys may need different connections (a cluster node),
    /// so that one command must not carry keys of more than one slot.
    pub(crate) fn routes_by_slot(&self) -> bool {
        matches!(self.route, Route::Cluster(_))
    }

    /// The cluster's shard for `key`; a failure to find one is noted as any request's is.
    async fn shard(&self, cluster: &Arc<Cluster>, key: &[u8]) -> Result<Arc<Server>, NodeError> {
        let found = cluster.server_for(key).await;
        if let Err(error) = &found {
            cluster.failed(error);
            crate::metrics::node_error(error);
        }
        found
    }
}

/// Makes routed connections out of `first`'s connection of a generation, for one request
/// through `gate`.
fn routed<'a>(
    cluster: &'a Arc<Cluster>,
    first: &'a Arc<Server>,
    gate: Gate,
    refused: &'a Arc<Mutex<Option<NodeError>>>,
) -> impl FnOnce(redis::aio::MultiplexedConnection, u64) -> Connection + 'a {
    move |connection, generation| {
        Connection::Routed(Box::new(Routed {
            connection,
            cluster: Arc::clone(cluster),
            first: Arc::clone(first),
            first_generation: generation,
            in_doubt: false,
            asking: None,
            gate,
            refused: Arc::clone(refused),
        }))
    }
}

/// A cluster request's result, with the reason a redirection was not followed in place of the
/// placeholder the command saw; a failure a changed slot map explains has the map read again.
fn reported<T>(
    cluster: &Arc<Cluster>,
    result: Result<T, NodeError>,
    refused: &Mutex<Option<NodeError>>,
) -> Result<T, NodeError> {
    let result = result.map_err(|error| {
        refused
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
            .unwrap_or(error)
    });
    if let Err(error) = &result {
        cluster.failed(error);
    }
    result
}
