//! [`Server`]: one Redis master as the lock sees it: its address, its lazily made multiplexed
//! connection, the generation of that connection, and the timeouts that bound every command. A
//! node of the lock is one server, or a cluster member's shards (`member.rs`).
//!
//! The connection is made on first use, in a background task shared by every caller that needs
//! it meanwhile, so a dead or hung node costs each caller at most its own timeout and never
//! queues callers one behind another. A command that finds the connection broken drops it, and
//! the next command connects again: a node that comes back is used without restarting anything.
//! Each connection gets a new generation number, which commands are told, so that a release can
//! tell whether an earlier request went out over the same connection (`rules/ordering.rs`). Every
//! new connection first asks its server who it is (`identify.rs`). A plain TCP connection runs on
//! a socket of ours whose writes gather the requests ready to go (`stream.rs`).

use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use futures::FutureExt;
use futures::future::{BoxFuture, Shared};
use redis::aio::MultiplexedConnection;
use redis::{AsyncConnectionConfig, ConnectionAddr, ConnectionInfo, RedisResult};

use super::client;
use super::history::History;
use super::identify::{Identity, identify, log_identity};
use super::release_scripts::load_scripts;
use super::stream::Gathering;
use super::subscription::{OnMessage, Subscription};
use crate::error::ConfigError;
use crate::metrics;
use crate::outcome::NodeError;
use crate::rules::identity::{Claims, Endpoint};
use crate::settings::Settings;

/// A connection attempt in flight, awaited by every caller that needs the node meanwhile.
type Connecting = Shared<BoxFuture<'static, Result<Connected, NodeError>>>;

/// Which of a server's two connections a request goes on. The keep-alive's batches have a
/// connection of their own, so that no acquisition or release waits behind a batch of a few
/// hundred keys in the connection's queue, nor behind its reply being read
/// (`docs/ARCHITECTURE.md`, "Connections"). It is made when a lease is kept (`Server::warm`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Lane {
    /// Acquisitions, releases, single extensions and everything else.
    Requests,
    /// The keeper's batches (`round/keep_batch.rs`).
    KeepAlive,
}

/// The name the keep-alive's connections give themselves (`CLIENT SETNAME`), so that an operator
/// reading `CLIENT LIST` can tell them apart.
pub(crate) const KEEP_ALIVE_NAME: &str = "quorumlock-keep-alive";

/// The state of a node's connection. Each new connection attempt gets a new generation, so a
/// caller that saw a connection break only discards that connection, never a newer one.
enum Slot {
    Idle,
    Connecting(u64, Connecting),
    Ready(u64, Connected),
}

/// Whether a connection attempt ended in failure. Its callers may all have given up waiting
/// (at the connect timeout), so nobody made the lane idle again: the next caller starts anew
/// rather than be handed this old failure.
fn failed(connecting: &Connecting) -> bool {
    // Polled, not peeked: the attempt runs as a task of its own, and a `Shared` nobody polls
    // any more does not learn that it ended.
    matches!(connecting.clone().now_or_never(), Some(Err(_)))
}

/// A connection and what its server said about itself when it was made.
#[derive(Clone)]
pub(super) struct Connected {
    pub(super) connection: MultiplexedConnection,
    /// The server's identity and from when on it may vote, or why that could not be read (an
    /// error reply to `INFO`, or an `INFO` without `run_id` or uptime): then it never votes.
    pub(super) identity: Result<Arc<Identity>, NodeError>,
}

/// One Redis master as the lock sees it.
pub(crate) struct Server {
    /// The lock's node this server belongs to.
    pub(super) index: usize,
    /// Its number among its node's servers (0 for a node that is one server), for the claims.
    pub(super) shard: usize,
    pub(super) addr: Arc<str>,
    client: redis::Client,
    connect_timeout: Duration,
    command_timeout: Duration,
    /// The connection of each [`Lane`], in its order.
    lanes: [Mutex<Slot>; 2],
    /// Where new generations are numbered: the server's own, or shared by a cluster node's
    /// shards, so that a generation names one connection among all of them.
    generations: Arc<AtomicU64>,
    /// With the restart guard on, how long a server that may have lost writes stays out of
    /// acquisitions after it started.
    pub(super) restart_guard: Option<Duration>,
    /// Fencing on and only durable nodes allowed: a node that may lose writes does not vote.
    pub(super) durable_only: bool,
    /// Which node of the lock votes for which server; shared by the lock's nodes.
    pub(super) claims: Arc<Claims>,
    /// Which server the node knew at its address, and when it last heard from it.
    history: Arc<History>,
    /// The deliberate defect of the lock this node belongs to (test-only, see `defect.rs`).
    #[cfg(feature = "chaos-defects")]
    pub(super) defect: Option<crate::rules::defect::Defect>,
}

impl Server {
    /// The server at `info`, shard `shard` of node `index`, connected with the lock's settings
    /// and deciding with the other servers of its lock (`claims`) which of them votes for a
    /// server that several reach. Nothing is sent until the first command.
    pub(crate) fn new(
        index: usize,
        shard: usize,
        info: ConnectionInfo,
        settings: &Settings,
        claims: &Arc<Claims>,
        generations: &Arc<AtomicU64>,
    ) -> Result<Server, ConfigError> {
        let client = client::open(index, info, settings)?;
        Ok(Server {
            index,
            shard,
            addr: client.get_connection_info().addr().to_string().into(),
            client,
            connect_timeout: settings.connect_timeout,
            command_timeout: settings.node_timeout,
            lanes: [Mutex::new(Slot::Idle), Mutex::new(Slot::Idle)],
            generations: Arc::clone(generations),
            restart_guard: settings.restart_guard,
            durable_only: settings
                .fencing
                .is_some_and(|fencing| !fencing.volatile_nodes),
            claims: Arc::clone(claims),
            history: Arc::new(History::new(settings.replaced_sit_out)),
            #[cfg(feature = "chaos-defects")]
            defect: settings.defect,
        })
    }

    /// Where the URL points, for telling duplicate URLs apart: host (lower case) and port, or
    /// the Unix socket.
    pub(crate) fn endpoint(&self) -> Endpoint {
        match self.client.get_connection_info().addr() {
            ConnectionAddr::Tcp(host, port) | ConnectionAddr::TcpTls { host, port, .. } => {
                Endpoint::tcp(host, *port)
            }
            other => Endpoint::other(other.to_string()),
        }
    }

    /// A subscription connection to this node's server, for waiters' wake-ups; nothing
    /// connects until its first subscription.
    pub(crate) fn subscription(
        &self,
        connect_timeout: Duration,
        on_message: OnMessage,
    ) -> Subscription {
        Subscription::new(self.client.clone(), connect_timeout, on_message)
    }

    /// `host:port`, without credentials.
    pub(crate) fn addr(&self) -> &Arc<str> {
        &self.addr
    }

    /// Runs one command (which may be several round trips, as a script's NOSCRIPT fallback is)
    /// on this node's connection, within the connect timeout and the command timeout.
    ///
    /// `command` gets the connection and its generation, and is polled for the first time in the
    /// same step that gets the connection. Requests given to one generation run on the node in
    /// the order they enter its queue; a newer generation is a new connection, with no order
    /// relative to requests still inside an older one.
    pub(crate) async fn run<T, F, Fut>(&self, command: F) -> Result<T, NodeError>
    where
        F: FnOnce(MultiplexedConnection, u64) -> Fut,
        Fut: Future<Output = RedisResult<T>>,
    {
        let (generation, connected) = self.connection(Lane::Requests).await?;
        self.bounded(generation, command(connected.connection, generation))
            .await
    }

    /// Runs a command already given its connection of `generation`, within the command
    /// timeout, and drops that connection if the failure broke it.
    ///
    /// A combinator, not an `async fn`: an `async fn` keeps its future argument twice in its
    /// state (as the argument and as the awaited timeout), and every command's future is moved
    /// into the fan-out's set, so its size is copied on every request.
    pub(super) fn bounded<T>(
        &self,
        generation: u64,
        command: impl Future<Output = RedisResult<T>>,
    ) -> impl Future<Output = Result<T, NodeError>> {
        tokio::time::timeout(self.command_timeout, command).map(move |result| {
            let result = match result {
                Ok(Ok(reply)) => Ok(reply),
                Ok(Err(err)) if err.is_timeout() => Err(NodeError::Timeout(self.command_timeout)),
                Ok(Err(err)) => Err(NodeError::from(err)),
                Err(_elapsed) => Err(NodeError::Timeout(self.command_timeout)),
            };
            self.note(generation, &result);
            result
        })
    }

    /// What a request's end on the connection of `generation` tells: a reply, that the server
    /// is there; an error that broke the connection, that it must be made again.
    pub(super) fn note<T>(&self, generation: u64, result: &Result<T, NodeError>) {
        let Err(error) = result else {
            self.history.heard();
            return;
        };
        metrics::node_error(error);
        if error.breaks_connection() {
            tracing::debug!(node = self.index, addr = %self.addr, %error, "dropping connection");
            self.reset(generation);
        }
    }

    /// As [`note`](Server::note), for a redirected request's reply (`redirect.rs`): any reply
    /// says the server is there; no reply leaves the connection in doubt, so it is made again.
    pub(super) fn note_reply(&self, generation: u64, reply: &RedisResult<redis::Value>) {
        match reply {
            Err(error) if error.code().is_none() => self.reset(generation),
            _ => self.history.heard(),
        }
    }

    /// `lane`'s current connection, or a new one: joins an attempt already in flight, else
    /// starts one.
    ///
    /// A ready connection is handed out without a future of its own; the wait for a connection
    /// attempt is boxed, so that every command's future stays small (each is moved into the
    /// fan-out's set) for the one case that needs it.
    pub(super) async fn connection(&self, lane: Lane) -> Result<(u64, Connected), NodeError> {
        let (generation, connecting) = {
            let mut slot = self.lane(lane);
            match &*slot {
                Slot::Ready(generation, connected) => {
                    return Ok((*generation, connected.clone()));
                }
                Slot::Connecting(generation, connecting) if !failed(connecting) => {
                    (*generation, connecting.clone())
                }
                Slot::Connecting(..) | Slot::Idle => self.start(&mut slot, lane),
            }
        };
        let connected = Box::pin(self.await_connection(lane, generation, connecting)).await;
        // Counted per request that found no connection, as a failed command is.
        if let Err(error) = &connected {
            metrics::node_error(error);
        }
        connected
    }

    /// Starts `lane`'s connection if it has none (or only an attempt that failed), without
    /// waiting for it: the keeper's lane is made when a lease is kept, so that its first batch
    /// finds it made instead of timing out making it.
    pub(super) fn warm(&self, lane: Lane) {
        let mut slot = self.lane(lane);
        if match &*slot {
            Slot::Idle => true,
            Slot::Connecting(_, connecting) => failed(connecting),
            Slot::Ready(..) => false,
        } {
            let (_, _attempt) = self.start(&mut slot, lane);
        }
    }

    /// A new connection attempt of a new generation in `slot`.
    fn start(&self, slot: &mut Slot, lane: Lane) -> (u64, Connecting) {
        let generation = self.generations.fetch_add(1, Ordering::Relaxed) + 1;
        let connecting = self.connect(lane);
        *slot = Slot::Connecting(generation, connecting.clone());
        (generation, connecting)
    }

    fn lane(&self, lane: Lane) -> MutexGuard<'_, Slot> {
        let slot = match lane {
            Lane::Requests => &self.lanes[0],
            Lane::KeepAlive => &self.lanes[1],
        };
        slot.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Waits (within the connect timeout) for `lane`'s connection attempt of `generation`, and
    /// makes its connection the lane's current one, or the lane idle again if it failed.
    async fn await_connection(
        &self,
        lane: Lane,
        generation: u64,
        connecting: Connecting,
    ) -> Result<(u64, Connected), NodeError> {
        let result = match tokio::time::timeout(self.connect_timeout, connecting).await {
            Ok(result) => result,
            // The attempt goes on in the background; the next caller picks up its result.
            Err(_elapsed) => return Err(NodeError::Timeout(self.connect_timeout)),
        };
        let mut slot = self.lane(lane);
        if matches!(*slot, Slot::Connecting(current, _) if current == generation) {
            *slot = match &result {
                Ok(connected) => Slot::Ready(generation, connected.clone()),
                Err(_) => Slot::Idle,
            };
        }
        result.map(|connected| (generation, connected))
    }

    /// Starts a connection attempt as its own task, so it completes even when every caller
    /// waiting for it has given up. The attempt includes asking the server who it is.
    fn connect(&self, lane: Lane) -> Connecting {
        let client = self.client.clone();
        // No response timeout of redis-rs's own: every command already runs within the command
        // timeout (`bounded`), and a second timer per request would only cost time.
        let config = AsyncConnectionConfig::new()
            .set_connection_timeout(Some(self.connect_timeout))
            .set_response_timeout(None);
        let (index, addr, restart_guard, command_timeout, connect_timeout) = (
            self.index,
            self.addr.clone(),
            self.restart_guard,
            self.command_timeout,
            self.connect_timeout,
        );
        let history = Arc::clone(&self.history);
        let task = tokio::spawn(async move {
            let result = async {
                let connection = open_connection(&client, &config, connect_timeout).await?;
                // The name, or the release scripts, go out beside the identity's questions,
                // costing no round trip.
                let named = async {
                    match lane {
                        Lane::KeepAlive => name(&connection, index, &addr, command_timeout).await,
                        Lane::Requests => {
                            let loaded = load_scripts(&connection);
                            let _ = tokio::time::timeout(command_timeout, loaded).await;
                        }
                    }
                };
                let identify = identify(&connection, restart_guard, &history);
                let ((), identity) =
                    futures::join!(named, tokio::time::timeout(command_timeout, identify));
                let identity = identity.map_err(|_elapsed| {
                    redis::RedisError::from(std::io::Error::from(std::io::ErrorKind::TimedOut))
                })??;
                Ok::<_, redis::RedisError>(Connected {
                    connection,
                    identity,
                })
            }
            .await
            .map_err(NodeError::from);
            match &result {
                Ok(connected) => log_identity(index, &addr, restart_guard, &connected.identity),
                Err(error) => tracing::debug!(node = index, %addr, %error, "connect failed"),
            }
            result
        });
        async move {
            task.await
                .unwrap_or_else(|err| Err(NodeError::Connection(format!("connect task: {err}"))))
        }
        .boxed()
        .shared()
    }

    /// Drops the connection of `generation` if it is still its lane's current one (a
    /// generation names one connection of one lane).
    pub(super) fn reset(&self, generation: u64) {
        for lane in [Lane::Requests, Lane::KeepAlive] {
            let mut slot = self.lane(lane);
            if matches!(*slot, Slot::Ready(current, _) if current == generation) {
                *slot = Slot::Idle;
                return;
            }
        }
    }
}

/// Names a keep-alive connection ([`KEEP_ALIVE_NAME`]). A refusal (an ACL without `CLIENT`)
/// costs nothing but the name.
async fn name(connection: &MultiplexedConnection, index: usize, addr: &str, timeout: Duration) {
    let mut connection = connection.clone();
    let mut setname = redis::cmd("CLIENT");
    setname.arg("SETNAME").arg(KEEP_ALIVE_NAME);
    let named = tokio::time::timeout(timeout, setname.query_async::<()>(&mut connection))
        .await
        .unwrap_or_else(|_elapsed| Err(std::io::Error::from(std::io::ErrorKind::TimedOut).into()));
    if let Err(error) = named {
        tracing::debug!(node = index, %addr, %error, "keep-alive connection left unnamed");
    }
}

/// A multiplexed connection to the client's server. Over plain TCP the socket is ours, wrapped so
/// that its writes gather every request ready to go (`stream.rs`), with the client's
/// `TCP_NODELAY`; TLS and Unix sockets go through redis-rs's own connect. Both run the same
/// handshake (`AUTH`, `SELECT`, protocol) and are bounded by `timeout`.
async fn open_connection(
    client: &redis::Client,
    config: &AsyncConnectionConfig,
    timeout: Duration,
) -> RedisResult<MultiplexedConnection> {
    let info = client.get_connection_info();
    let ConnectionAddr::Tcp(host, port) = info.addr() else {
        return client
            .get_multiplexed_async_connection_with_config(config)
            .await;
    };
    let connect = async {
        let socket = tokio::net::TcpStream::connect((host.as_str(), *port)).await?;
        socket.set_nodelay(info.tcp_settings().nodelay())?;
        let (connection, driver) = MultiplexedConnection::new_with_config(
            info.redis_settings(),
            Gathering::new(socket),
            config.clone(),
        )
        .await?;
        // The driver ends once the last handle of the connection is dropped (its queue closes).
        tokio::spawn(driver);
        Ok(connection)
    };
    tokio::time::timeout(timeout, connect)
        .await
        .unwrap_or_else(|_elapsed| Err(std::io::Error::from(std::io::ErrorKind::TimedOut).into()))
}
