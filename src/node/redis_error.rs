//! How a redis-rs error becomes a [`NodeError`]: each server error code the lock can meet
//! (`READONLY`, `OOM`, `WRONGTYPE`, `NOPERM`, `LOADING`, auth) gets its own variant, so that no
//! failure is reported as another; and which of them break the connection.

use crate::outcome::NodeError;

impl NodeError {
    /// Whether the connection should be dropped and made again on the next command.
    pub(crate) fn breaks_connection(&self) -> bool {
        matches!(
            self,
            NodeError::ConnectionRefused | NodeError::Connection(_) | NodeError::Protocol(_)
        )
    }
}

/// Whether an `ERR` says an ACL refused a command: one of our script's, or one redis-rs sent in
/// its handshake (`SELECT` of the URL's database), whose `NOPERM` it reports as an `ERR`.
fn acl_refusal(message: &str) -> bool {
    message.contains("ACL failure in script")
        || message.contains("user executing the script can't run this command")
        || message.contains("no permissions to run")
}

impl From<redis::RedisError> for NodeError {
    fn from(err: redis::RedisError) -> Self {
        use redis::{ErrorKind, ServerErrorKind};
        let detail = err.detail().unwrap_or_default().to_owned();
        match err.kind() {
            _ if err.is_connection_refusal() => NodeError::ConnectionRefused,
            ErrorKind::AuthenticationFailed => NodeError::Auth(err.to_string()),
            ErrorKind::Io | ErrorKind::Client | ErrorKind::InvalidClientConfig => {
                NodeError::Connection(err.to_string())
            }
            ErrorKind::Parse | ErrorKind::UnexpectedReturnType => {
                NodeError::Protocol(err.to_string())
            }
            ErrorKind::Server(ServerErrorKind::ReadOnly) => NodeError::ReadOnly(detail),
            ErrorKind::Server(ServerErrorKind::NoPerm) => NodeError::NoPermission(detail),
            ErrorKind::Server(ServerErrorKind::BusyLoading) => NodeError::Loading,
            _ => match err.code() {
                // A command of our script refused by an ACL comes back as the script's `ERR`:
                // "… can't run this command …" from Redis 7.0, "ACL failure in script: …" from
                // Valkey 8; a handshake's `SELECT` as "… has no permissions to run the 'select'
                // command".
                Some("ERR") if acl_refusal(&detail) => NodeError::NoPermission(detail),
                Some("WRONGTYPE") => NodeError::WrongType(detail),
                Some("OOM") => NodeError::OutOfMemory(detail),
                Some("NOAUTH") | Some("WRONGPASS") => NodeError::Auth(detail),
                Some(code) => NodeError::Server {
                    code: code.to_owned(),
                    message: detail,
                },
                None => NodeError::Connection(err.to_string()),
            },
        }
    }
}
