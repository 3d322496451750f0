//! The protected store: a `redis-server` of its own, outside the lock's masters (a one-node
//! [`TestCluster`] without a proxy, never faulted), holding one register and one write log per
//! resource. Each protected write is a read-modify-write in two round trips: `GET` the register,
//! then, in one `MULTI`/`EXEC`, `SET` it to the value + 1 and `RPUSH` `"<token> <value + 1>"`
//! onto the resource's log, so the log is the order the store applied the writes in.
//!
//! A fenced write (one that carries its holder's fence) replaces the `MULTI`/`EXEC` by one
//! script, [`FENCED_WRITE`], which accepts it only if its fence is at least the last one the
//! store accepted for the resource and the register still holds the value read, and then also
//! records the fence (`SET fence:<res>`) and logs `"<token> <value + 1> <fence>"`. Else it
//! changes nothing and says why ([`Rejection`]).

use std::sync::LazyLock;
use std::time::{Duration, Instant};

use quorumlock_harness::{ClusterOptions, Persistence, TestCluster};
use redis::Script;
use redis::aio::MultiplexedConnection;

use super::error::ChaosError;
use crate::history::{LogEntry, Register, Rejection};

/// The fenced write, one atomic step: `KEYS` = the register, the log, the last accepted fence;
/// `ARGV` = the value read, the value to write, the fence, the log entry. Accepts (`ok`) only if
/// the fence is at least the last accepted one (equal: the same holder's next write) and the
/// register still holds the value read (else a write landed since the read, and writing would
/// lose it); then records the fence, writes and logs. Else answers `older-fence` or
/// `value-changed`, having changed nothing.
static FENCED_WRITE: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r"local last = tonumber(redis.call('GET', KEYS[3]) or '0')
if tonumber(ARGV[3]) < last then return 'older-fence' end
if (redis.call('GET', KEYS[1]) or '0') ~= ARGV[1] then return 'value-changed' end
redis.call('SET', KEYS[3], ARGV[3])
redis.call('SET', KEYS[1], ARGV[2])
redis.call('RPUSH', KEYS[2], ARGV[4])
return 'ok'",
    )
});

/// A resource's register.
fn register_key(resource: &str) -> String {
    format!("register:{resource}")
}

/// A resource's write log.
fn log_key(resource: &str) -> String {
    format!("log:{resource}")
}

/// The last fence the store accepted for a resource.
fn fence_key(resource: &str) -> String {
    format!("fence:{resource}")
}

/// The store's server, stopped when dropped.
pub(super) struct Store {
    cluster: TestCluster,
}

impl Store {
    /// Starts the store's server with `options`' backend and binary: one node, no proxy, no
    /// persistence (it is never restarted), real-time clock. Loads [`FENCED_WRITE`], so that
    /// no fenced write pays for loading it.
    pub(super) async fn start(options: &ClusterOptions) -> Result<Store, ChaosError> {
        let options = options
            .clone()
            .nodes(1)
            .proxies(false)
            .persistence(Persistence::None);
        let cluster = TestCluster::start(options).await?;
        let mut connection = cluster.connection(0).await?;
        FENCED_WRITE
            .prepare_invoke()
            .load_async(&mut connection)
            .await?;
        Ok(Store { cluster })
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

/// `"<token> <value>"`, or `"<token> <value> <fence>"` for a fenced write, as a [`LogEntry`].
fn parse_entry(entry: &str) -> Result<LogEntry, ChaosError> {
    let parse = || {
        let mut fields = entry.split(' ');
        let (token, value) = (fields.next()?, fields.next()?);
        let logged = LogEntry::new(token, value.parse().ok()?);
        match (fields.next(), fields.next()) {
            (None, _) => Some(logged),
            (Some(fence), None) => Some(logged.fenced(fence.parse().ok()?)),
            (Some(_), Some(_)) => None,
        }
    };
    parse().ok_or_else(|| ChaosError::StoreLog(entry.to_owned()))
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
    /// Whether the write was answered (accepted or rejected) by the deadline.
    pub(super) acked: bool,
    /// Why the fenced store refused the write, if it did (also when the answer came late).
    pub(super) rejected: Option<Rejection>,
}

impl StoreClient {
    /// Reads `resource`'s register, then writes it + 1 and logs `token` with the new value,
    /// giving up at `deadline`: then the write is unacknowledged (it may still land). `None`
    /// when the deadline had passed before anything was sent. With a `fence`, the write is
    /// the fenced one ([`FENCED_WRITE`]): the store may reject it.
    ///
    /// The deadline is kept exactly, not only by the timeout: nothing is sent with less than a
    /// microsecond left, neither the read nor the write once it has passed, and an acknowledgement seen after it counts as none (the writer
    /// treats it as a timeout), because Tokio's timers fire up to a millisecond late (they
    /// round up to whole milliseconds) and a busy machine polls the task later still. So an
    /// acknowledged write always completed by its deadline.
    pub(super) async fn increment(
        &mut self,
        resource: &str,
        token: &str,
        fence: Option<u64>,
        deadline: Instant,
    ) -> Option<Increment> {
        let invoked = Instant::now();
        // The history stamps whole microseconds: a write invoked less than one before its
        // deadline could be stamped in the deadline's own microsecond, at the window's end.
        if deadline.saturating_duration_since(invoked) < Duration::from_micros(1) {
            return None;
        }
        let not_sent = |read| {
            Some(Increment {
                invoked,
                completed: Instant::now(),
                read,
                written: None,
                acked: false,
                rejected: None,
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
        let answer = match fence {
            None => {
                let mut write = redis::pipe();
                write
                    .atomic()
                    .set(register_key(resource), written)
                    .ignore()
                    .rpush(log_key(resource), format!("{token} {written}"))
                    .ignore();
                let write = write.query_async::<()>(&mut self.connection);
                match tokio::time::timeout_at(timer, write).await {
                    Ok(Ok(())) => Some(None),
                    Ok(Err(_)) | Err(_) => None,
                }
            }
            Some(fence) => {
                let mut write = FENCED_WRITE.prepare_invoke();
                write
                    .key(register_key(resource))
                    .key(log_key(resource))
                    .key(fence_key(resource))
                    .arg(read)
                    .arg(written)
                    .arg(fence)
                    .arg(format!("{token} {written} {fence}"));
                let write = write.invoke_async::<String>(&mut self.connection);
                match tokio::time::timeout_at(timer, write).await {
                    Ok(Ok(answer)) => fenced_answer(&answer),
                    Ok(Err(_)) | Err(_) => None,
                }
            }
        };
        let completed = Instant::now();
        Some(Increment {
            invoked,
            completed,
            read: Some(read),
            written: Some(written),
            acked: answer.is_some() && completed <= deadline,
            rejected: answer.flatten(),
        })
    }
}

/// The fenced write's answer: `Some(None)` accepted, `Some(Some(reason))` rejected, `None` an
/// answer it never gives (counted as no answer).
fn fenced_answer(answer: &str) -> Option<Option<Rejection>> {
    match answer {
        "ok" => Some(None),
        "older-fence" => Some(Some(Rejection::OlderFence)),
        "value-changed" => Some(Some(Rejection::ValueChanged)),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_entries_parse_or_fail() {
        assert_eq!(parse_entry("ab12 7").ok(), Some(LogEntry::new("ab12", 7)));
        assert_eq!(
            parse_entry("ab12 7 3").ok(),
            Some(LogEntry::new("ab12", 7).fenced(3))
        );
        assert!(parse_entry("ab12").is_err());
        assert!(parse_entry("ab12 x").is_err());
        assert!(parse_entry("ab12 7 x").is_err());
        assert!(parse_entry("ab12 7 3 4").is_err());
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
        let first = client.increment("r", "a", None, far).await.expect("sent");
        let second = client.increment("r", "b", None, far).await.expect("sent");
        assert!(first.acked && second.acked);
        assert_eq!((first.read, first.written), (Some(0), Some(1)));
        assert_eq!((second.read, second.written), (Some(1), Some(2)));
        assert!(
            client
                .increment("r", "c", None, Instant::now())
                .await
                .is_none()
        );
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

    /// Against a real server: the fenced write accepts a fence at least the last accepted one
    /// (equal: the same holder again), refuses an older one, and refuses a write whose read is
    /// out of date; a refused write changes nothing, and the log carries each write's fence.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn fenced_writes_refuse_older_fences_and_changed_values() {
        let store = Store::start(&ClusterOptions::default())
            .await
            .unwrap_or_else(|e| panic!("store: {e}"));
        let mut client = store.client().await.unwrap_or_else(|e| panic!("{e}"));
        let far = Instant::now() + std::time::Duration::from_secs(5);
        let mut write = async |token, fence| {
            let increment = client
                .increment("r", token, Some(fence), far)
                .await
                .expect("sent");
            assert!(increment.acked, "answered");
            (increment.written, increment.rejected)
        };
        assert_eq!(write("a", 1).await, (Some(1), None));
        assert_eq!(write("b", 2).await, (Some(2), None));
        assert_eq!(write("a", 1).await, (Some(3), Some(Rejection::OlderFence)));
        assert_eq!(write("b", 2).await, (Some(3), None));

        // A read the register has moved past since: refused, even with a newer fence.
        let mut connection = store.cluster.connection(0).await.unwrap();
        let answer: String = FENCED_WRITE
            .key(register_key("r"))
            .key(log_key("r"))
            .key(fence_key("r"))
            .arg(1)
            .arg(2)
            .arg(5)
            .arg("c 2 5")
            .invoke_async(&mut connection)
            .await
            .unwrap();
        assert_eq!(fenced_answer(&answer), Some(Some(Rejection::ValueChanged)));

        let registers = store
            .read_back(&["r".to_owned()])
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            registers,
            vec![Register::new(
                "r",
                Some(3),
                vec![
                    LogEntry::new("a", 1).fenced(1),
                    LogEntry::new("b", 2).fenced(2),
                    LogEntry::new("b", 3).fenced(2),
                ]
            )]
        );
        let last: u64 = redis::cmd("GET")
            .arg(fence_key("r"))
            .query_async(&mut connection)
            .await
            .unwrap();
        assert_eq!(last, 2, "a refused write records no fence");
    }
}
