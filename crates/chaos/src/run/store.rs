//! The protected store: a `redis-server` of its own, outside the lock's masters (a one-node
//! [`TestCluster`] without a proxy, never faulted), holding one register and one write log per
//! resource. Each protected write is a read-modify-write in two round trips: `GET` the register,
//! then, in one `MULTI`/`EXEC`, `SET` it to the value + 1 and `RPUSH` `"<token> <value + 1>"`
//! onto the resource's log, so the log is the order the store applied the writes in.

use std::time::Instant;

use quorumlock_harness::{ClusterOptions, Persistence, TestCluster};
use redis::aio::MultiplexedConnection;

use super::error::ChaosError;
use crate::history::{LogEntry, Register};

/// A resource's register.
fn register_key(resource: &str) -> String {
    format!("register:{resource}")
}

/// A resource's write log.
fn log_key(resource: &str) -> String {
    format!("log:{resource}")
}

/// The store's server, stopped when dropped.
pub(super) struct Store {
    cluster: TestCluster,
}

impl Store {
    /// Starts the store's server with `options`' backend and binary: one node, no proxy, no
    /// persistence (it is never restarted), real-time clock.
    pub(super) async fn start(options: &ClusterOptions) -> Result<Store, ChaosError> {
        let options = options
            .clone()
            .nodes(1)
            .proxies(false)
            .persistence(Persistence::None);
        Ok(Store {
            cluster: TestCluster::start(options).await?,
        })
    }

    /// A connection of its own for one client.
    pub(super) async fn client(&self) -> Result<StoreClient, ChaosError> {
        Ok(StoreClient {
            connection: self.cluster.connection(0).await?,
        })
    }

    /// The final state of each resource's register and log.
    pub(super) async fn read_back(
        &self,
        resources: &[String],
    ) -> Result<Vec<Register>, ChaosError> {
        let mut connection = self.cluster.connection(0).await?;
        let mut registers = Vec::with_capacity(resources.len());
        for resource in resources {
            let (value, log): (Option<u64>, Vec<String>) = redis::pipe()
                .get(register_key(resource))
                .lrange(log_key(resource), 0, -1)
                .query_async(&mut connection)
                .await?;
            let log = log
                .iter()
                .map(|entry| parse_entry(entry))
                .collect::<Result<_, _>>()?;
            registers.push(Register::new(resource.as_str(), value, log));
        }
        Ok(registers)
    }
}

/// `"<token> <value>"` as a [`LogEntry`].
fn parse_entry(entry: &str) -> Result<LogEntry, ChaosError> {
    entry
        .split_once(' ')
        .and_then(|(token, value)| Some(LogEntry::new(token, value.parse().ok()?)))
        .ok_or_else(|| ChaosError::StoreLog(entry.to_owned()))
}

/// One client's connection to the store.
pub(super) struct StoreClient {
    connection: MultiplexedConnection,
}

/// What one read-modify-write did, on the `Instant` clock.
pub(super) struct Increment {
    /// Before the read was sent.
    pub(super) invoked: Instant,
    /// After the acknowledgement, or when the writer gave up.
    pub(super) completed: Instant,
    /// The value read, if the read succeeded.
    pub(super) read: Option<u64>,
    /// The value written, if the write was sent.
    pub(super) written: Option<u64>,
    /// Whether the write was acknowledged.
    pub(super) acked: bool,
}

impl StoreClient {
    /// Reads `resource`'s register, then writes it + 1 and logs `token` with the new value,
    /// giving up at `deadline`: then the write is unacknowledged (it may still land). `None`
    /// when the deadline had passed before anything was sent.
    ///
    /// The deadline is kept exactly, not only by the timeout: neither the read nor the write is
    /// sent once it has passed, and an acknowledgement seen after it counts as none (the writer
    /// treats it as a timeout), because Tokio's timers fire up to a millisecond late (they
    /// round up to whole milliseconds) and a busy machine polls the task later still. So an
    /// acknowledged write always completed by its deadline.
    pub(super) async fn increment(
        &mut self,
        resource: &str,
        token: &str,
        deadline: Instant,
    ) -> Option<Increment> {
        let invoked = Instant::now();
        if invoked >= deadline {
            return None;
        }
        let not_sent = |read| {
            Some(Increment {
                invoked,
                completed: Instant::now(),
                read,
                written: None,
                acked: false,
            })
        };
        let timer = tokio::time::Instant::from_std(deadline);
        let mut get = redis::cmd("GET");
        get.arg(register_key(resource));
        let get = get.query_async::<Option<u64>>(&mut self.connection);
        let read = match tokio::time::timeout_at(timer, get).await {
            Ok(Ok(value)) => value.unwrap_or(0),
            Ok(Err(_)) | Err(_) => return not_sent(None),
        };
        if Instant::now() >= deadline {
            return not_sent(Some(read));
        }
        let written = read.saturating_add(1);
        let mut write = redis::pipe();
        write
            .atomic()
            .set(register_key(resource), written)
            .ignore()
            .rpush(log_key(resource), format!("{token} {written}"))
            .ignore();
        let write = write.query_async::<()>(&mut self.connection);
        let answered = matches!(tokio::time::timeout_at(timer, write).await, Ok(Ok(())));
        let completed = Instant::now();
        Some(Increment {
            invoked,
            completed,
            read: Some(read),
            written: Some(written),
            acked: answered && completed <= deadline,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_entries_parse_or_fail() {
        assert_eq!(parse_entry("ab12 7").ok(), Some(LogEntry::new("ab12", 7)));
        assert!(parse_entry("ab12").is_err());
        assert!(parse_entry("ab12 x").is_err());
    }

    /// Against a real server: two increments in turn leave 2 in the register and both in the
    /// log; a deadline already past sends nothing.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn increments_land_in_register_and_log() {
        let store = Store::start(&ClusterOptions::default())
            .await
            .unwrap_or_else(|e| panic!("store: {e}"));
        let mut client = store.client().await.unwrap_or_else(|e| panic!("{e}"));
        let far = Instant::now() + std::time::Duration::from_secs(5);
        let first = client.increment("r", "a", far).await.expect("sent");
        let second = client.increment("r", "b", far).await.expect("sent");
        assert!(first.acked && second.acked);
        assert_eq!((first.read, first.written), (Some(0), Some(1)));
        assert_eq!((second.read, second.written), (Some(1), Some(2)));
        assert!(client.increment("r", "c", Instant::now()).await.is_none());
        let registers = store
            .read_back(&["r".to_owned(), "s".to_owned()])
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            registers,
            vec![
                Register::new(
                    "r",
                    Some(2),
                    vec![LogEntry::new("a", 1), LogEntry::new("b", 2)]
                ),
                Register::new("s", None, vec![]),
            ]
        );
    }
}
