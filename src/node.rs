//! One Redis master: its address, its lazily made multiplexed connection, and the timeouts that
//! bound every command sent to it.
//!
//! The connection is made on first use, in a background task shared by every caller that needs
//! it meanwhile, so a dead or hung node costs each caller at most its own timeout and never
//! queues callers one behind another. A command that finds the connection broken drops it, and
//! the next command connects again: a node that comes back is used without restarting anything.
//! Each connection made gets a new generation number, which commands are told, so that a release
//! can tell whether an earlier request went out over the same connection (see `ledger.rs`).

use std::future::Future;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use futures::FutureExt;
use futures::future::{BoxFuture, Shared};
use redis::aio::MultiplexedConnection;
use redis::io::tcp::TcpSettings;
use redis::{AsyncConnectionConfig, ConnectionInfo, IntoConnectionInfo, RedisResult};

use crate::error::{ConfigError, NodeError};
use crate::options::Settings;

/// A connection attempt in flight, awaited by every caller that needs the node meanwhile.
type Connecting = Shared<BoxFuture<'static, Result<MultiplexedConnection, NodeError>>>;

/// The state of a node's connection. Each new connection attempt gets a new generation, so a
/// caller that saw a connection break only discards that connection, never a newer one.
enum Slot {
    Idle,
    Connecting(u64, Connecting),
    Ready(u64, MultiplexedConnection),
}

/// One Redis master as the lock sees it.
pub(crate) struct Node {
    index: usize,
    addr: Arc<str>,
    client: redis::Client,
    connect_timeout: Duration,
    command_timeout: Duration,
    slot: Mutex<(u64, Slot)>,
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
        })
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
        let (generation, connection) = self.connection().await?;
        let command = command(connection, generation);
        let result = match tokio::time::timeout(self.command_timeout, command).await {
            Ok(Ok(reply)) => return Ok(reply),
            Ok(Err(err)) if err.is_timeout() => NodeError::Timeout(self.command_timeout),
            Ok(Err(err)) => NodeError::from(err),
            Err(_elapsed) => NodeError::Timeout(self.command_timeout),
        };
        if result.breaks_connection() {
            tracing::debug!(node = self.index, addr = %self.addr, error = %result, "dropping connection");
            self.reset(generation);
        }
        Err(result)
    }

    /// The current connection, or a new one: joins an attempt already in flight, else starts one.
    async fn connection(&self) -> Result<(u64, MultiplexedConnection), NodeError> {
        let (generation, connecting) = {
            let mut guard = self.slot.lock().unwrap_or_else(PoisonError::into_inner);
            let (next_generation, slot) = &mut *guard;
            match slot {
                Slot::Ready(generation, connection) => {
                    return Ok((*generation, connection.clone()));
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
        let result = match tokio::time::timeout(self.connect_timeout, connecting).await {
            Ok(result) => result,
            // The attempt goes on in the background; the next caller picks up its result.
            Err(_elapsed) => return Err(NodeError::Timeout(self.connect_timeout)),
        };
        let mut guard = self.slot.lock().unwrap_or_else(PoisonError::into_inner);
        if matches!(guard.1, Slot::Connecting(current, _) if current == generation) {
            guard.1 = match &result {
                Ok(connection) => Slot::Ready(generation, connection.clone()),
                Err(_) => Slot::Idle,
            };
        }
        result.map(|connection| (generation, connection))
    }

    /// Starts a connection attempt as its own task, so it completes even when every caller
    /// waiting for it has given up.
    fn connect(&self) -> Connecting {
        let client = self.client.clone();
        let config = AsyncConnectionConfig::new()
            .set_connection_timeout(Some(self.connect_timeout))
            .set_response_timeout(Some(self.command_timeout));
        let (index, addr) = (self.index, self.addr.clone());
        let task = tokio::spawn(async move {
            let result = client
                .get_multiplexed_async_connection_with_config(&config)
                .await
                .map_err(NodeError::from);
            match &result {
                Ok(_) => tracing::debug!(node = index, %addr, "connected"),
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
