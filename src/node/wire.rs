//! Building, sending and reading the lock's commands on one connection, the same way for every
//! command: built with their size known, sent with `send_packed_command` (one request, no boxed
//! future), error replies checked, 1/0 replies read.

use super::redirect::Connection;
use redis::{Cmd, RedisResult, Value};

use crate::outcome::NodeError;

/// A command with room for `args` arguments holding `parts` and a few short ones (the command's
/// name, counts, options, a TTL), so that building it allocates twice, not once per argument.
pub(super) fn sized(args: usize, parts: &[&[u8]]) -> Cmd {
    /// Room for each short argument.
    const SHORT: usize = 20;
    let bytes = parts.iter().map(|part| part.len()).sum::<usize>();
    Cmd::with_capacity(args, bytes.saturating_add(args.saturating_mul(SHORT)))
}

/// Sends `command` (one request) and checks the reply for an error reply. Called directly on the
/// connection, not through `query_async`, which boxes a future per request.
pub(crate) async fn send(connection: &mut Connection, command: &Cmd) -> RedisResult<Value> {
    connection.send(command).await?.extract_error()
}

/// Whether the server answered the request (with a value or an error reply), so that it has
/// run. Anything else (I/O error, timeout, an unreadable reply) leaves its fate unknown.
pub(crate) fn answered<T>(reply: &RedisResult<T>) -> bool {
    match reply {
        Ok(_) => true,
        Err(error) => error.code().is_some(),
    }
}

/// A reply that must be 1 (done, or ours) or 0 (not done, not ours), as our scripts and a one-key
/// `DEL` answer; anything else is a protocol error.
pub(crate) fn one_or_zero(reply: i64) -> Result<bool, NodeError> {
    match reply {
        1 => Ok(true),
        0 => Ok(false),
        other => Err(NodeError::Protocol(format!("expected 1 or 0, got {other}"))),
    }
}
