//! [`NodeConfig`]: one node of a [`Topology`](crate::Topology) as configuration: a URL, or the
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
/// let lock = Lock::from_nodes(nodes, LockOptions::new())?;
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

    /// Where the node is, for logs and messages: the URL with any credentials masked, or
    /// `host:port` (the socket's path) for connection info.
    pub fn display_addr(&self) -> String {
        match &self.source {
            Source::Url(url) => redact(url),
            Source::Info(info) => info.addr().to_string(),
        }
    }

    /// The connection details of node `index`: the URL parsed, or the info as given.
    pub(crate) fn resolve(&self, index: usize) -> Result<ConnectionInfo, ConfigError> {
        match &self.source {
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
