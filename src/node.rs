//! One Redis master: its address, its lazily made multiplexed connection, and the timeouts that
//! bound every command sent to it.
//!
//! Just over 500 lines: the connection slot, the identity read on connect and the two vote
//! gates share one connection's state; their tests against real servers stay beside them.
//!
//! The connection is made on first use, in a background task shared by every caller that needs
//! it meanwhile, so a dead or hung node costs each caller at most its own timeout and never
//! queues callers one behind another. A command that finds the connection broken drops it, and
//! the next command connects again: a node that comes back is used without restarting anything.
//! Each connection made gets a new generation number, which commands are told, so that a release
//! can tell whether an earlier request went out over the same connection (see `ledger.rs`).
//!
//! Every connection, once made, asks its server who it is, once (not per command): `INFO server`
//! (`run_id`, `uptime_in_seconds`), `INFO persistence` (`aof_enabled`) and `CONFIG GET
//! appendfsync`, all three at once (one round trip). What that means for the node's vote is the
//! pure logic of `recovery.rs` (the restart guard) and `identity.rs` (one server, one vote);
//! acquisitions go through [`Node::run_vote`], which applies it before anything is sent.

use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use futures::FutureExt;
use futures::future::{BoxFuture, Shared};
use redis::aio::MultiplexedConnection;
use redis::io::tcp::TcpSettings;
use redis::{
    AsyncConnectionConfig, ConnectionAddr, ConnectionInfo, IntoConnectionInfo, RedisResult, Value,
};

use crate::error::{ConfigError, NodeError};
use crate::identity::{Claims, Endpoint};
use crate::options::Settings;
use crate::recovery::{ServerFacts, fsync_always};

/// A connection attempt in flight, awaited by every caller that needs the node meanwhile.
type Connecting = Shared<BoxFuture<'static, Result<Connected, NodeError>>>;

/// The state of a node's connection. Each new connection attempt gets a new generation, so a
/// caller that saw a connection break only discards that connection, never a newer one.
enum Slot {
    Idle,
    Connecting(u64, Connecting),
    Ready(u64, Connected),
}

/// A connection and what its server said about itself when it was made.
#[derive(Clone)]
struct Connected {
    connection: MultiplexedConnection,
    /// The server's identity and from when on it may vote, or why that could not be read (an
    /// error reply to `INFO`, or an `INFO` without `run_id` or uptime): then it never votes.
    identity: Result<Arc<Identity>, NodeError>,
}

/// Who a connection's server is, for its acquire votes.
struct Identity {
    /// `run_id`: new at every server start.
    run_id: Arc<str>,
    /// From when on the node may vote: `None` while the restart guard holds it back beyond any
    /// representable instant; the instant the facts were read when it may vote at once.
    votes_from: Option<Instant>,
    /// AOF on with `appendfsync always`: a crash loses nothing it answered.
    persists_every_write: bool,
    /// Whether a refused claim on `run_id` was logged for this connection already.
    warned: AtomicBool,
}

/// One Redis master as the lock sees it.
pub(crate) struct Node {
    index: usize,
    addr: Arc<str>,
    client: redis::Client,
    connect_timeout: Duration,
    command_timeout: Duration,
    slot: Mutex<(u64, Slot)>,
    /// With the restart guard on, how long a server that may have lost writes stays out of
    /// acquisitions after it started.
    restart_guard: Option<Duration>,
    /// Fencing on and only durable nodes allowed: a node that may lose writes does not vote.
    durable_only: bool,
    /// Which node of the lock votes for which server; shared by the lock's nodes.
    claims: Arc<Claims>,
}

impl Node {
    /// Parses a node URL. Nothing is sent until the first command.
    pub(crate) fn new(index: usize, url: &str, settings: &Settings) -> Result<Node, ConfigError> {
        let invalid = |err: redis::RedisError| ConfigError::InvalidUrl {
            index,
            url: redact(url),
            reason: err.to_string(),
        };
        let info = url
            .into_connection_info()
            .map_err(invalid)?
            .set_tcp_settings(TcpSettings::default().set_nodelay(settings.tcp_nodelay));
        let client = open_client(info, settings).map_err(invalid)?;
        Ok(Node {
            index,
            addr: client.get_connection_info().addr().to_string().into(),
            client,
            connect_timeout: settings.connect_timeout,
            command_timeout: settings.node_timeout,
            slot: Mutex::new((0, Slot::Idle)),
            restart_guard: settings.restart_guard,
            durable_only: settings
                .fencing
                .is_some_and(|fencing| !fencing.volatile_nodes),
            claims: Arc::default(),
        })
    }

    /// This node, deciding with the other nodes of its lock which of them votes for a server
    /// that several of them reach.
    pub(crate) fn with_claims(mut self, claims: &Arc<Claims>) -> Node {
        self.claims = Arc::clone(claims);
        self
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

    /// Position in the configured node list.
    pub(crate) fn index(&self) -> usize {
        self.index
    }

    /// `host:port`, without credentials.
    pub(crate) fn addr(&self) -> &Arc<str> {
        &self.addr
    }

    /// The longest one command waits for this node's reply.
    pub(crate) fn command_timeout(&self) -> Duration {
        self.command_timeout
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
        let (generation, connected) = self.connection().await?;
        self.finish(generation, command(connected.connection, generation))
            .await
    }

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
        self.finish(
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
        self.finish(generation, command(connected.connection, generation))
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

    /// Runs a command already given its connection of `generation`, within the command
    /// timeout, and drops that connection if the failure broke it.
    ///
    /// A combinator, not an `async fn`: an `async fn` keeps its future argument twice in its
    /// state (as the argument and as the awaited timeout), and every command's future is moved
    /// into the fan-out's set, so its size is copied on every request.
    fn finish<T>(
        &self,
        generation: u64,
        command: impl Future<Output = RedisResult<T>>,
    ) -> impl Future<Output = Result<T, NodeError>> {
        tokio::time::timeout(self.command_timeout, command).map(move |result| {
            let error = match result {
                Ok(Ok(reply)) => return Ok(reply),
                Ok(Err(err)) if err.is_timeout() => NodeError::Timeout(self.command_timeout),
                Ok(Err(err)) => NodeError::from(err),
                Err(_elapsed) => NodeError::Timeout(self.command_timeout),
            };
            if error.breaks_connection() {
                tracing::debug!(node = self.index, addr = %self.addr, %error, "dropping connection");
                self.reset(generation);
            }
            Err(error)
        })
    }

    /// The current connection, or a new one: joins an attempt already in flight, else starts one.
    ///
    /// A ready connection is handed out without a future of its own; the wait for a connection
    /// attempt is boxed, so that every command's future stays small (each is moved into the
    /// fan-out's set) for the one case that needs it.
    async fn connection(&self) -> Result<(u64, Connected), NodeError> {
        let (generation, connecting) = {
            let mut guard = self.slot.lock().unwrap_or_else(PoisonError::into_inner);
            let (next_generation, slot) = &mut *guard;
            match slot {
                Slot::Ready(generation, connected) => {
                    return Ok((*generation, connected.clone()));
                }
                Slot::Connecting(generation, connecting) => (*generation, connecting.clone()),
                Slot::Idle => {
                    *next_generation += 1;
                    let connecting = self.connect();
                    *slot = Slot::Connecting(*next_generation, connecting.clone());
                    (*next_generation, connecting)
                }
            }
        };
        Box::pin(self.await_connection(generation, connecting)).await
    }

    /// Waits (within the connect timeout) for the connection attempt of `generation`, and makes
    /// its connection the node's current one, or the slot idle again if it failed.
    async fn await_connection(
        &self,
        generation: u64,
        connecting: Connecting,
    ) -> Result<(u64, Connected), NodeError> {
        let result = match tokio::time::timeout(self.connect_timeout, connecting).await {
            Ok(result) => result,
            // The attempt goes on in the background; the next caller picks up its result.
            Err(_elapsed) => return Err(NodeError::Timeout(self.connect_timeout)),
        };
        let mut guard = self.slot.lock().unwrap_or_else(PoisonError::into_inner);
        if matches!(guard.1, Slot::Connecting(current, _) if current == generation) {
            guard.1 = match &result {
                Ok(connected) => Slot::Ready(generation, connected.clone()),
                Err(_) => Slot::Idle,
            };
        }
        result.map(|connected| (generation, connected))
    }

    /// Starts a connection attempt as its own task, so it completes even when every caller
    /// waiting for it has given up. The attempt includes asking the server who it is.
    fn connect(&self) -> Connecting {
        let client = self.client.clone();
        // No response timeout of redis-rs's own: every command already runs within the command
        // timeout (`finish`), and a second timer per request would only cost time.
        let config = AsyncConnectionConfig::new()
            .set_connection_timeout(Some(self.connect_timeout))
            .set_response_timeout(None);
        let (index, addr, restart_guard, command_timeout) = (
            self.index,
            self.addr.clone(),
            self.restart_guard,
            self.command_timeout,
        );
        let task = tokio::spawn(async move {
            let result = async {
                let connection = client
                    .get_multiplexed_async_connection_with_config(&config)
                    .await?;
                let identity =
                    tokio::time::timeout(command_timeout, identify(&connection, restart_guard))
                        .await
                        .map_err(|_elapsed| {
                            redis::RedisError::from(std::io::Error::from(
                                std::io::ErrorKind::TimedOut,
                            ))
                        })??;
                Ok::<_, redis::RedisError>(Connected {
                    connection,
                    identity,
                })
            }
            .await
            .map_err(NodeError::from);
            match &result {
                Ok(Connected {
                    identity: Ok(identity),
                    ..
                }) => {
                    let left = identity
                        .votes_from
                        .map(|from| from.saturating_duration_since(Instant::now()));
                    if restart_guard.is_some() && left != Some(Duration::ZERO) {
                        tracing::info!(
                            node = index, %addr, run_id = %identity.run_id, ?left,
                            "connected to a recently started server that may have lost writes; \
                             it votes in acquisitions once the restart guard has passed"
                        );
                    } else {
                        tracing::debug!(node = index, %addr, run_id = %identity.run_id, "connected");
                    }
                }
                Ok(Connected {
                    identity: Err(error),
                    ..
                }) => tracing::warn!(
                    node = index, %addr, %error,
                    "connected, but the server's identity (INFO) could not be read; \
                     it does not vote in acquisitions"
                ),
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

    /// Drops the connection of `generation` if it is still the current one.
    fn reset(&self, generation: u64) {
        let mut guard = self.slot.lock().unwrap_or_else(PoisonError::into_inner);
        if matches!(guard.1, Slot::Ready(current, _) if current == generation) {
            guard.1 = Slot::Idle;
        }
    }
}

/// A client for one node: with the configured certificate authorities for a TLS node, if any.
fn open_client(info: ConnectionInfo, settings: &Settings) -> RedisResult<redis::Client> {
    #[cfg(feature = "tls")]
    if let Some(pem) = &settings.tls_root_certificates
        && matches!(info.addr(), redis::ConnectionAddr::TcpTls { .. })
    {
        let certificates = redis::TlsCertificates {
            client_tls: None,
            root_cert: Some(pem.clone()),
        };
        return redis::Client::build_with_tls(info, certificates);
    }
    #[cfg(not(feature = "tls"))]
    let _ = settings;
    redis::Client::open(info)
}

/// Asks a new connection's server who it is: `INFO server`, `INFO persistence` and `CONFIG GET
/// appendfsync`, sent at once (one round trip). An error reply to `INFO`, or an `INFO` without a
/// `run_id` or uptime, is the identity's error (the connection itself works); one to `CONFIG GET`
/// (a user without `+config|get`) means the fsync policy is unknown: not `always`. Any other
/// failure (I/O, timeout) fails the connection.
async fn identify(
    connection: &MultiplexedConnection,
    restart_guard: Option<Duration>,
) -> RedisResult<Result<Arc<Identity>, NodeError>> {
    let info = |section: &'static str| {
        let mut connection = connection.clone();
        async move {
            redis::cmd("INFO")
                .arg(section)
                .query_async::<String>(&mut connection)
                .await
        }
    };
    let mut config_connection = connection.clone();
    let config = async move {
        redis::cmd("CONFIG")
            .arg("GET")
            .arg("appendfsync")
            .query_async::<Value>(&mut config_connection)
            .await
    };
    let (server, persistence, config) = futures::join!(info("server"), info("persistence"), config);
    let read_at = Instant::now();
    let fsync = match config {
        Ok(reply) => fsync_always(&flatten(reply)),
        Err(error) if error.code().is_some() => None,
        Err(error) => return Err(error),
    };
    let text = match (server, persistence) {
        (Ok(server), Ok(persistence)) => server + "\r\n" + &persistence,
        (Err(error), _) | (_, Err(error)) if error.code().is_some() => {
            return Ok(Err(NodeError::from(error)));
        }
        (Err(error), _) | (_, Err(error)) => return Err(error),
    };
    let Some(facts) = ServerFacts::from_info(&text, fsync) else {
        return Ok(Err(NodeError::Protocol(
            "INFO server gave no run_id or uptime_in_seconds".to_owned(),
        )));
    };
    let wait = restart_guard.map_or(Duration::ZERO, |guard| facts.votes_after(guard));
    Ok(Ok(Arc::new(Identity {
        persists_every_write: facts.persists_every_write(),
        run_id: facts.run_id.into(),
        votes_from: read_at.checked_add(wait),
        warned: AtomicBool::new(false),
    })))
}

/// A `CONFIG GET` reply as a flat list of strings: RESP2 sends `[name, value]`, RESP3 a map.
fn flatten(reply: Value) -> Vec<String> {
    let text = |value: &Value| redis::from_redis_value_ref::<String>(value).ok();
    match reply {
        Value::Array(items) => items.iter().filter_map(text).collect(),
        Value::Map(pairs) => pairs
            .iter()
            .flat_map(|(name, value)| [text(name), text(value)])
            .flatten()
            .collect(),
        _ => Vec::new(),
    }
}

/// A URL fit for an error message: any credentials replaced by `***`.
fn redact(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(scheme_end), Some(at)) if at > scheme_end => {
            format!("{}://***@{}", &url[..scheme_end], &url[at + 1..])
        }
        _ => url.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::LockOptions;

    #[test]
    fn a_config_get_reply_reads_the_same_in_resp2_and_resp3() {
        let text = |s: &str| Value::BulkString(s.as_bytes().to_vec());
        let resp2 = Value::Array(vec![text("appendfsync"), text("always")]);
        let resp3 = Value::Map(vec![(text("appendfsync"), text("everysec"))]);
        assert_eq!(fsync_always(&flatten(resp2)), Some(true));
        assert_eq!(fsync_always(&flatten(resp3)), Some(false));
        assert_eq!(fsync_always(&flatten(Value::Array(Vec::new()))), None);
        assert_eq!(fsync_always(&flatten(Value::Nil)), None);
    }

    #[test]
    fn credentials_never_reach_error_messages() {
        assert_eq!(
            redact("redis://user:secret@host:6379/0"),
            "redis://***@host:6379/0"
        );
        assert_eq!(redact("redis://:p@ss@host"), "redis://***@host");
        assert_eq!(redact("redis://host:6379"), "redis://host:6379");
    }

    #[test]
    fn an_unparsable_url_is_a_configuration_error() {
        let settings = LockOptions::new().validate(1).unwrap();
        for url in ["", "not a url", "http://host", "redis://host:notaport"] {
            let Err(err) = Node::new(3, url, &settings) else {
                panic!("{url:?} was accepted");
            };
            assert!(
                matches!(err, ConfigError::InvalidUrl { index: 3, .. }),
                "{err}"
            );
        }
    }
}
