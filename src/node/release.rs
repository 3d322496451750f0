//! The release command on one node: compare-and-delete, as one Lua script. How a release is
//! ordered after the acquisition's requests is `round/release.rs`.

use redis::Cmd;

use super::wire::sized;

/// Deletes the key only while it holds our token.
///
/// Sent with `EVAL` too: the compare-and-delete is then one request, which the ordering rule is
/// about (`rules/ordering.rs`), and a `SCRIPT FLUSH` on the node can never fail a release (with
/// `EVALSHA`, a flush between the `SCRIPT LOAD` that answers NOSCRIPT and the retry does, leaving
/// the key until its TTL). It also saves the first release on each connection two round trips.
const RELEASE: &str = r"if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0";

/// The compare-and-delete of `key` for `token`, as one `EVAL`: built once per release and sent to
/// every node. It answers 1 (deleted) or 0 (not ours).
pub(crate) fn release_command(key: &[u8], token: &str) -> Cmd {
    let mut command = sized(5, &[RELEASE.as_bytes(), key, token.as_bytes()]);
    command.arg("EVAL").arg(RELEASE).arg(1).arg(key).arg(token);
    command
}
