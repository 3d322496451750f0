//! What a new connection's server says about itself, asked once per connection (not per
//! command): `INFO server` (`run_id`, `uptime_in_seconds`), `INFO persistence` (`aof_enabled`),
//! `INFO replication` (`role`, `master_replid`, `master_replid2`) and `CONFIG GET appendfsync`,
//! all at once (one round trip). What that means for the node's vote is pure logic, in
//! `rules/recovery.rs` (the restart guard), `rules/replacement.rs` (another server at the
//! address, judged with the node's `history.rs`) and `rules/identity.rs` (one server, one vote);
//! `vote.rs` applies it.

use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

use redis::aio::MultiplexedConnection;
use redis::{RedisResult, Value};

use super::history::{History, Standing};
use crate::outcome::NodeError;
use crate::rules::commands::Commands;
use crate::rules::recovery::{ServerFacts, fsync_always};

/// Who a connection's server is, for its acquire votes.
pub(super) struct Identity {
    /// `run_id`: new at every server start.
    pub(super) run_id: Arc<str>,
    /// From when on the node may vote: `None` while the restart guard holds it back beyond any
    /// representable instant; the instant the facts were read when it may vote at once.
    pub(super) votes_from: Option<Instant>,
    /// AOF on with `appendfsync always`: a crash loses nothing it answered.
    pub(super) persists_every_write: bool,
    /// Whether it may vote at all, by what the node remembers of the server at its address: a
    /// replica never does, a server that replaced the known one sits out for a while.
    pub(super) standing: Standing,
    /// Whether a refused claim on `run_id` was logged for this connection already.
    pub(super) warned: AtomicBool,
    /// The native commands the server offers in place of a script.
    pub(super) commands: Commands,
}

/// Asks a new connection's server who it is: `INFO server`, `INFO persistence`, `INFO
/// replication` and `CONFIG GET appendfsync`, sent at once (one round trip), and judges it
/// against the node's `history`. An error reply to `INFO`, or an `INFO` without a
/// `run_id` or uptime, is the identity's error (the connection itself works); one to `CONFIG GET`
/// (a user without `+config|get`) means the fsync policy is unknown: not `always`. Any other
/// failure (I/O, timeout) fails the connection.
pub(super) async fn identify(
    connection: &MultiplexedConnection,
    restart_guard: Option<Duration>,
    history: &History,
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
    let (server, persistence, replication, config) = futures::join!(
        info("server"),
        info("persistence"),
        info("replication"),
        config
    );
    let read_at = Instant::now();
    let fsync = match config {
        Ok(reply) => fsync_always(&flatten(reply)),
        Err(error) if error.code().is_some() => None,
        Err(error) => return Err(error),
    };
    let mut text = String::new();
    for section in [server, persistence, replication] {
        match section {
            Ok(section) => {
                text.push_str(&section);
                text.push_str("\r\n");
            }
            Err(error) if error.code().is_some() => return Ok(Err(NodeError::from(error))),
            Err(error) => return Err(error),
        }
    }
    let Some(facts) = ServerFacts::from_info(&text, fsync) else {
        return Ok(Err(NodeError::Protocol(
            "INFO server gave no run_id or uptime_in_seconds".to_owned(),
        )));
    };
    let wait = restart_guard.map_or(Duration::ZERO, |guard| facts.votes_after(guard));
    let standing = history.judge(&facts, read_at);
    Ok(Ok(Arc::new(Identity {
        persists_every_write: facts.persists_every_write(),
        standing,
        run_id: facts.run_id.into(),
        votes_from: read_at.checked_add(wait),
        warned: AtomicBool::new(false),
        commands: Commands::from_info(&text),
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

/// Logs what a new connection's server said: a server that replaced the known one, or whose
/// identity could not be read, as a warning; a replica, or a server the restart guard holds
/// back, at info level.
pub(super) fn log_identity(
    index: usize,
    addr: &str,
    restart_guard: Option<Duration>,
    identity: &Result<Arc<Identity>, NodeError>,
) {
    match identity
        .as_ref()
        .map(|identity| (identity, &identity.standing))
    {
        Ok((identity, Standing::Replica)) => tracing::info!(
            node = index, %addr, run_id = %identity.run_id,
            "connected to a replica; it never votes in acquisitions"
        ),
        Ok((identity, Standing::SitsOut(until, replacement))) => tracing::warn!(
            node = index, %addr, run_id = %identity.run_id, %replacement,
            left = ?until.saturating_duration_since(Instant::now()),
            "another server answers at this node's address and may lack keys the old one \
             held; it sits out acquisitions until every such key has expired"
        ),
        Ok((identity, Standing::Votes)) => {
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
        Err(error) => tracing::warn!(
            node = index, %addr, %error,
            "connected, but the server's identity (INFO) could not be read; \
             it does not vote in acquisitions"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
