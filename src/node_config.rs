//! [`NodeConfig`]: one node of a [`Lock`](crate::Lock) as configuration: a URL, or the
//! `redis::ConnectionInfo` of a client the application already built, and how it becomes the
//! connection details the lock's node uses. Credentials never reach an error message or `Debug`.
//!
//! Why configuration and not a live connection: the lock owns each node's connection. It makes
//! it with its own connect and command timeouts, asks the server who it is on every (re)connect
//! (the restart guard and one server, one vote hang on that answer), orders a release after the
//! requests of its acquisition by the connection they went out on, and makes the connection
//! again when it breaks. A connection handed in would escape all of that, so a node is described,
//! and the lock connects.

use std::fmt;

use redis::{ConnectionInfo, IntoConnectionInfo};

use crate::error::ConfigError;

/// One Redis server of a lock, as configuration: where it is, how to log in, and (over TLS) the
/// certificates to use. Build it from a URL, from a `redis::ConnectionInfo`, or from a
/// `redis::Client` the application already has (its connection info is taken; the client itself
/// is not used).
///
/// Whatever it was built from, the lock connects with its own settings
/// ([`LockOptions`](crate::LockOptions)): connect and command timeouts, `TCP_NODELAY`, the
/// restart guard and the `run_id` check on every connection. Taken from the node: the address,
/// username, password, database, protocol, and the TLS parameters a client was built with
/// (`redis::Client::build_with_tls`). A plain TCP connection runs on a socket the lock opens
/// itself, which gets `TCP_NODELAY` only: other TCP settings of a `ConnectionInfo` (keepalive,
/// user timeout) apply to TLS connections alone.
///
/// `Debug` and every error show the address, never the password.
///
/// ```
/// use quorumlock::{Lock, LockOptions, NodeConfig};
///
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let client = redis::Client::open("redis://:secret@127.0.0.1:7001/0")?;
/// let nodes = [
///     NodeConfig::from(&client),
///     NodeConfig::from_url("redis://127.0.0.1:7002"),
///     NodeConfig::from("redis://127.0.0.1:7003".to_owned()),
/// ];
/// assert!(!format!("{nodes:?}").contains("secret"));
/// let lock = Lock::new(nodes, LockOptions::new())?;
/// assert_eq!(lock.node_addrs(), ["127.0.0.1:7001", "127.0.0.1:7002", "127.0.0.1:7003"]);
/// # Ok(()) }
/// ```
#[derive(Clone)]
#[non_exhaustive]
pub struct NodeConfig {
    source: Source,
}

/// What a node was described by.
#[derive(Clone)]
enum Source {
    /// Parsed when the lock is built, so that a bad URL is a configuration error there.
    Url(String),
    /// Boxed: a `ConnectionInfo` is several times the size of a URL.
    Info(Box<ConnectionInfo>),
    /// A Redis Cluster as one node of the quorum, by its seed nodes.
    Cluster(Vec<NodeConfig>),
}

/// A node's connection details, resolved. Short-lived (made and used once per node, when the
/// lock is built): not worth boxing the one-server case.
#[allow(clippy::large_enum_variant)]
pub(crate) enum Resolved {
    /// One server.
    Server(ConnectionInfo),
    /// A Redis Cluster's seeds: where its slot map is read first, and (the first of them) the
    /// login and TLS settings every shard found is reached with.
    Cluster(Vec<ConnectionInfo>),
}

impl NodeConfig {
    /// A node at `url` (`redis://[user:password@]host:port[/db]`, `rediss://…` with the `tls`
    /// feature, `redis+unix:///path`). Parsed when the lock is built.
    pub fn from_url(url: impl Into<String>) -> NodeConfig {
        NodeConfig {
            source: Source::Url(url.into()),
        }
    }

    /// A node described by redis-rs's connection info, TLS parameters included.
    pub fn from_connection_info(info: ConnectionInfo) -> NodeConfig {
        NodeConfig {
            source: Source::Info(Box::new(info)),
        }
    }

    /// A Redis Cluster as one node of the quorum, reached through `seeds` (any of its masters;
    /// the others are found from the cluster's slot map). A resource's vote in this node comes
    /// from the shard that serves the resource's hash slot; every shard the lock reaches gets
    /// the restart guard, its own `run_id` claim (no shard votes for two nodes) and the lock's
    /// timeouts, as a node that is one server does. The seeds' login and TLS settings (the
    /// first seed's) are used for every shard. A lock with a cluster node puts each resource's
    /// name in braces in its keys, its hash tag (README, "Redis Cluster members").
    ///
    /// ```
    /// use quorumlock::{Lock, LockOptions, NodeConfig};
    ///
    /// # fn main() -> Result<(), quorumlock::Error> {
    /// let member = |ports: [u16; 3]| {
    ///     NodeConfig::cluster(ports.map(|port| format!("redis://127.0.0.1:{port}")))
    /// };
    /// let lock = Lock::new(
    ///     [member([7000, 7001, 7002]), member([7100, 7101, 7102]), member([7200, 7201, 7202])],
    ///     LockOptions::new(),
    /// )?;
    /// assert_eq!(lock.node_addrs()[0], "cluster(127.0.0.1:7000, 127.0.0.1:7001, 127.0.0.1:7002)");
    /// # Ok(()) }
    /// ```
    pub fn cluster<I>(seeds: I) -> NodeConfig
    where
        I: IntoIterator,
        I::Item: Into<NodeConfig>,
    {
        NodeConfig {
            source: Source::Cluster(seeds.into_iter().map(Into::into).collect()),
        }
    }

    /// Whether this node is a Redis Cluster ([`NodeConfig::cluster`]).
    pub fn is_cluster(&self) -> bool {
        matches!(self.source, Source::Cluster(_))
    }

    /// Where the node is, for logs and messages: the URL with any credentials masked, or
    /// `host:port` (the socket's path) for connection info; a cluster's seeds in
    /// `cluster(…)`.
    pub fn display_addr(&self) -> String {
        match &self.source {
            Source::Url(url) => redact(url),
            Source::Info(info) => info.addr().to_string(),
            Source::Cluster(seeds) => {
                let seeds: Vec<String> = seeds.iter().map(NodeConfig::display_addr).collect();
                format!("cluster({})", seeds.join(", "))
            }
        }
    }

    /// The connection details of node `index`: the URL parsed, the info as given, or a
    /// cluster's seeds (at least one, none of them a cluster).
    pub(crate) fn resolve(&self, index: usize) -> Result<Resolved, ConfigError> {
        let Source::Cluster(seeds) = &self.source else {
            return self.resolve_server(index).map(Resolved::Server);
        };
        if seeds.is_empty() {
            return Err(ConfigError::InvalidNode {
                index,
                reason: "a cluster node needs at least one seed".to_owned(),
            });
        }
        seeds
            .iter()
            .map(|seed| seed.resolve_server(index))
            .collect::<Result<_, _>>()
            .map(Resolved::Cluster)
    }

    /// One server's connection details.
    fn resolve_server(&self, index: usize) -> Result<ConnectionInfo, ConfigError> {
        match &self.source {
            Source::Cluster(_) => Err(ConfigError::InvalidNode {
                index,
                reason: "a cluster's seed is a cluster".to_owned(),
            }),
            Source::Url(url) => {
                url.as_str()
                    .into_connection_info()
                    .map_err(|err| ConfigError::InvalidUrl {
                        index,
                        url: redact(url),
                        reason: err.to_string(),
                    })
            }
            Source::Info(info) => Ok((**info).clone()),
        }
    }
}

impl fmt::Debug for NodeConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("NodeConfig")
            .field(&self.display_addr())
            .finish()
    }
}

impl From<ConnectionInfo> for NodeConfig {
    fn from(info: ConnectionInfo) -> NodeConfig {
        NodeConfig::from_connection_info(info)
    }
}

/// The client's connection info; the client itself is not used.
impl From<&redis::Client> for NodeConfig {
    fn from(client: &redis::Client) -> NodeConfig {
        NodeConfig::from_connection_info(client.get_connection_info().clone())
    }
}

impl From<String> for NodeConfig {
    fn from(url: String) -> NodeConfig {
        NodeConfig::from_url(url)
    }
}

impl From<&str> for NodeConfig {
    fn from(url: &str) -> NodeConfig {
        NodeConfig::from_url(url)
    }
}

impl From<&String> for NodeConfig {
    fn from(url: &String) -> NodeConfig {
        NodeConfig::from_url(url.as_str())
    }
}

impl From<&NodeConfig> for NodeConfig {
    fn from(node: &NodeConfig) -> NodeConfig {
        node.clone()
    }
}

/// A URL fit for an error message: any credentials replaced by `***`.
pub(crate) fn redact(url: &str) -> String {
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
        for url in ["", "not a url", "http://host", "redis://host:notaport"] {
            let Err(err) = NodeConfig::from_url(url).resolve(3) else {
                panic!("{url:?} was accepted");
            };
            assert!(
                matches!(err, ConfigError::InvalidUrl { index: 3, .. }),
                "{err}"
            );
        }
    }

    #[test]
    fn debug_shows_the_address_and_never_the_password() {
        let info = "redis://user:secret@Host:6379/2"
            .into_connection_info()
            .unwrap();
        for node in [
            NodeConfig::from_url("redis://user:secret@Host:6379/2"),
            NodeConfig::from(info.clone()),
            NodeConfig::from(&redis::Client::open(info).unwrap()),
        ] {
            let debug = format!("{node:?}");
            assert!(!debug.contains("secret"), "{debug}");
            assert!(debug.to_lowercase().contains("host:6379"), "{debug}");
        }
    }
}
