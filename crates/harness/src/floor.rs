//! The raw-command floor for benchmarks: the lock's own commands sent straight over redis-rs
//! connections, with no lock logic, so that a benchmark can show what the lock adds to them.

use std::sync::LazyLock;
use std::time::Duration;

use futures::StreamExt;
use futures::stream::FuturesUnordered;
use redis::aio::MultiplexedConnection;
use redis::io::tcp::TcpSettings;
use redis::{AsyncConnectionConfig, IntoConnectionInfo, RedisResult};

/// Connect and response timeout of the floor's connections.
const TIMEOUT: Duration = Duration::from_secs(1);

/// Deletes the key only while it holds the token: the lock's release script.
static RELEASE: LazyLock<redis::Script> = LazyLock::new(|| {
    redis::Script::new(
        r"if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0",
    )
});

/// A redis-rs connection to `url` whose connect and commands time out after `timeout`;
/// `tcp_nodelay` sets `TCP_NODELAY` (`None`: redis-rs's default, off).
///
/// # Errors
///
/// A bad URL, or the connection failing or timing out.
pub async fn raw_connection(
    url: &str,
    tcp_nodelay: Option<bool>,
    timeout: Duration,
) -> RedisResult<MultiplexedConnection> {
    let mut info = url.into_connection_info()?;
    if let Some(nodelay) = tcp_nodelay {
        info = info.set_tcp_settings(TcpSettings::default().set_nodelay(nodelay));
    }
    let config = AsyncConnectionConfig::new()
        .set_connection_timeout(Some(timeout))
        .set_response_timeout(Some(timeout));
    redis::Client::open(info)?
        .get_multiplexed_async_connection_with_config(&config)
        .await
}

/// The floor under a lock over some nodes: `SET key token NX PX 10000` on every node until a
/// majority said yes, then the compare-and-delete script on every node, waiting for all. No
/// token, validity, outcome bookkeeping or per-node timer of its own.
#[derive(Clone)]
pub struct RawFloor {
    connections: Vec<MultiplexedConnection>,
    quorum: usize,
}

impl RawFloor {
    /// Connects to every node of `urls` (see [`raw_connection`]; 1 s timeouts).
    ///
    /// # Errors
    ///
    /// As [`raw_connection`], for the first node that fails.
    pub async fn connect(urls: &[String], tcp_nodelay: Option<bool>) -> RedisResult<RawFloor> {
        let mut connections = Vec::with_capacity(urls.len());
        for url in urls {
            connections.push(raw_connection(url, tcp_nodelay, TIMEOUT).await?);
        }
        Ok(RawFloor {
            quorum: urls.len() / 2 + 1,
            connections,
        })
    }

    /// One acquire+release of `key` (the key is its own token); true when a majority was set
    /// and a majority deleted it.
    pub async fn cycle(&self, key: &str) -> bool {
        let mut sets: FuturesUnordered<_> = self
            .connections
            .iter()
            .map(|connection| {
                let mut connection = connection.clone();
                async move {
                    let reply: RedisResult<Option<String>> = redis::cmd("SET")
                        .arg(key)
                        .arg(key)
                        .arg("NX")
                        .arg("PX")
                        .arg(10_000)
                        .query_async(&mut connection)
                        .await;
                    matches!(reply, Ok(Some(_)))
                }
            })
            .collect();
        let mut yes = 0;
        while let Some(set) = sets.next().await {
            yes += usize::from(set);
            if yes >= self.quorum {
                break;
            }
        }
        drop(sets);
        let deleted = futures::future::join_all(self.connections.iter().map(|connection| {
            let mut connection = connection.clone();
            async move {
                let reply: RedisResult<i64> = RELEASE
                    .key(key)
                    .arg(key)
                    .invoke_async(&mut connection)
                    .await;
                matches!(reply, Ok(1))
            }
        }))
        .await;
        yes >= self.quorum && deleted.iter().filter(|d| **d).count() >= self.quorum
    }
}
