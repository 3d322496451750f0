//! The release command on one node: compare-and-delete, and a wake-up published for waiters, as
//! one Lua script. How a release is
//! ordered after the acquisition's requests is `round/release.rs`.

use redis::Cmd;

use super::wire::sized;

/// Deletes the key only while it holds our token (a failed acquisition's cleanup: nobody else
/// held the lock, so nobody is woken).
///
/// Sent with `EVAL` too: the compare-and-delete is then one request, which the ordering rule is
/// about (`rules/ordering.rs`), and a `SCRIPT FLUSH` on the node can never fail a release (with
/// `EVALSHA`, a flush between the `SCRIPT LOAD` that answers NOSCRIPT and the retry does, leaving
/// the key until its TTL). It also saves the first release on each connection two round trips.
const RELEASE: &str = r"if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
return redis.call('DEL', KEYS[1])";

/// [`RELEASE`] for a lock that was held, which then publishes an empty message on the channel
/// named like the key: it wakes the waiters of every client subscribed to it
/// (`subscription.rs`). `pcall`: a user not allowed the channel (an ACL without `&` rules)
/// still releases; its waiters then wake by the key's expiry bound.
const RELEASE_AND_WAKE: &str = r"if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
redis.call('DEL', KEYS[1])
redis.pcall('PUBLISH', KEYS[1], '')
return 1";

/// The compare-and-delete of `key` for `token`, as one `EVAL`: built once per release and sent to
/// every node. It answers 1 (deleted) or 0 (not ours).
/// With `wake`, the release of a held lock: waiters are woken.
pub(crate) fn release_command(key: &[u8], token: &str, wake: bool) -> Cmd {
    let script = if wake { RELEASE_AND_WAKE } else { RELEASE };
    let mut command = sized(5, &[script.as_bytes(), key, token.as_bytes()]);
    command.arg("EVAL").arg(script).arg(1).arg(key).arg(token);
    command
}
