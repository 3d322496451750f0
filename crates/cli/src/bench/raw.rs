//! The raw redis-rs floor: the lock's commands sent straight over redis-rs connections, with no
//! lock logic, to show what the quorum costs at the least on this machine.

use std::sync::LazyLock;
use std::time::Duration;

use futures::StreamExt;
use futures::stream::FuturesUnordered;
use redis::IntoConnectionInfo;
use redis::aio::MultiplexedConnection;
use redis::io::tcp::TcpSettings;

use super::plan::WARMUP;

/// Deletes the key only while it holds our token: the lock's release script.
static RAW_RELEASE: LazyLock<redis::Script> = LazyLock::new(|| {
    redis::Script::new(
        r"if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0",
    )
});

/// The floor under the quorum's cost on this machine: the same commands the lock sends, straight
/// over redis-rs connections with no lock logic (no token, validity, outcome bookkeeping or
/// timeouts). `SET NX PX` on every node until a majority said yes, then the compare-and-delete
/// script on every node, waiting for all. Its sockets have `TCP_NODELAY` on, like the lock's
/// (redis-rs leaves it off; on loopback Nagle's coalescing is faster with many tasks, see
/// docs/benchmarks.md), so that the floor sends the same bytes the same way.
#[derive(Clone)]
pub(super) struct Raw {
    pub(super) connections: Vec<MultiplexedConnection>,
    pub(super) quorum: usize,
}

impl Raw {
    /// Connects to every node of `urls`; `name` says which floor in the errors.
    pub(super) async fn connect(name: &str, urls: &[String]) -> Result<Raw, String> {
        let config = redis::AsyncConnectionConfig::new()
            .set_connection_timeout(Some(Duration::from_secs(1)))
            .set_response_timeout(Some(Duration::from_secs(1)));
        let mut connections = Vec::new();
        for url in urls {
            let info = url
                .as_str()
                .into_connection_info()
                .map_err(|e| format!("{name}: bad URL: {e}"))?
                .set_tcp_settings(TcpSettings::default().set_nodelay(true));
            let client = redis::Client::open(info).map_err(|e| format!("{name}: bad URL: {e}"))?;
            let connection = client
                .get_multiplexed_async_connection_with_config(&config)
                .await
                .map_err(|e| format!("{name}: connecting: {e}"))?;
            connections.push(connection);
        }
        Ok(Raw {
            quorum: urls.len() / 2 + 1,
            connections,
        })
    }

    /// Untimed cycles, like [`warm_up`](super::loops::warm_up).
    pub(super) async fn warm_up(&self) {
        for i in 0..WARMUP {
            let key = format!("raw-warm:{i}");
            self.cycle(&key, &key).await;
        }
    }

    /// One acquire+release; true when a majority was set and every node deleted.
    pub(super) async fn cycle(&self, key: &str, token: &str) -> bool {
        let mut sets: FuturesUnordered<_> = self
            .connections
            .iter()
            .map(|connection| {
                let mut connection = connection.clone();
                async move {
                    let reply: redis::RedisResult<Option<String>> = redis::cmd("SET")
                        .arg(key)
                        .arg(token)
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
                let reply: redis::RedisResult<i64> = RAW_RELEASE
                    .key(key)
                    .arg(token)
                    .invoke_async(&mut connection)
                    .await;
                matches!(reply, Ok(1))
            }
        }))
        .await;
        yes >= self.quorum && deleted.iter().filter(|d| **d).count() >= self.quorum
    }
}
