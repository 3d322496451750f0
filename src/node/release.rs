//! The release command on one node: compare-and-delete, and a wake-up published for waiters, as
//! one Lua script. How a release is
//! ordered after the acquisition's requests is `round/release.rs`.

use std::sync::Arc;

use redis::{Cmd, Value};

use super::set::{read_found, release_set_command};
use super::wire::{one_or_zero, sized};
use crate::outcome::NodeError;
use crate::rules::resources::Keys;

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

/// A release as one command, built once per release and sent to every node.
pub(crate) struct ReleaseCommand {
    pub(crate) command: Cmd,
    /// The key a cluster node routes it by (`Keys::slot_key`).
    pub(crate) slot_key: Arc<[u8]>,
    /// For a set, how many keys it releases (its answer has one flag per key).
    set_keys: Option<usize>,
}

/// What a node's release found: whether the key was still ours, or for a set, each key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Found {
    One(bool),
    Set(Vec<bool>),
}

impl ReleaseCommand {
    /// The compare-and-delete of `keys` for `token`, as one `EVAL`: for one key it answers 1
    /// (deleted) or 0 (not ours), for a set one such flag per key (`set.rs`). With `wake`, the
    /// release of a held lock: waiters are woken.
    pub(crate) fn new(keys: &Keys, token: &str, wake: bool) -> ReleaseCommand {
        match keys {
            Keys::One(key) => {
                let script = if wake { RELEASE_AND_WAKE } else { RELEASE };
                let mut command = sized(5, &[script.as_bytes(), key, token.as_bytes()]);
                command
                    .arg("EVAL")
                    .arg(script)
                    .arg(1)
                    .arg(&key[..])
                    .arg(token);
                ReleaseCommand {
                    command,
                    slot_key: keys.slot_key(),
                    set_keys: None,
                }
            }
            Keys::Set(set) => ReleaseCommand {
                command: release_set_command(set, token, wake),
                slot_key: keys.slot_key(),
                set_keys: Some(set.len()),
            },
        }
    }

    /// Reads a node's answer (already checked for an error reply).
    pub(crate) fn read(&self, reply: Value) -> Result<Found, NodeError> {
        match self.set_keys {
            None => {
                let deleted: i64 = redis::from_redis_value(reply)
                    .map_err(|error| NodeError::Protocol(error.to_string()))?;
                one_or_zero(deleted).map(Found::One)
            }
            Some(keys) => read_found(reply, keys).map(Found::Set),
        }
    }
}
