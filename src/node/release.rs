//! The release command on one node: compare-and-delete, and a wake-up published for waiters, as
//! one Lua script. How a release is
//! ordered after the acquisition's requests is `round/release.rs`.
//!
//! One key's release goes out as `EVALSHA`, the script's 40-byte hash instead of its body, as the
//! raw commands it is measured against do. Every requests' connection loads both release
//! scripts when it is made (beside its identity's questions, no round trip of its own), so a
//! release is one request: a release that had to answer `NOSCRIPT` first and be sent again would
//! be two, and if the first ran out of time (a paused node), the second would never go, leaving
//! the key until its TTL. A server that still answers `NOSCRIPT` (`SCRIPT FLUSH` since, or an ACL
//! without `SCRIPT LOAD`), or refuses `EVALSHA` (`NOPERM`: an ACL that allows `EVAL` only), gets
//! the same release as `EVAL` with the body, on the same connection.
//! Never `SCRIPT LOAD` and a retry: a flush between the two would fail the release. Either way
//! exactly one request runs the script, which is what the ordering rule (`rules/ordering.rs`) is
//! about. A set's release, larger and rarer, always goes as `EVAL`.

use std::sync::Arc;

use redis::{Arg, Cmd, RedisResult, Value};

use super::redirect::Connection;
use super::release_scripts::{RELEASE, RELEASE_AND_WAKE, RELEASE_AND_WAKE_SHA, RELEASE_SHA};
use super::rwlock::release_read;
use super::set::{read_found, release_set_command};
use super::wire::{one_or_zero, send, sized};
use crate::outcome::NodeError;
use crate::rules::hand_off::{Hand, kept_suffix};
use crate::rules::resources::Keys;

/// A release as one command, built once per release and sent to every node.
pub(crate) struct ReleaseCommand {
    command: Cmd,
    /// For `EVALSHA`, the script's body, sent as `EVAL` to a server that answers `NOSCRIPT`.
    script: Option<&'static str>,
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
    /// The compare-and-delete of `keys` for `token`: for one key (by `EVALSHA`) it answers 1
    /// (deleted) or 0 (not ours), for a set (by `EVAL`) one such flag per key (`set.rs`). With
    /// `wake`, the release of a held lock: waiters are woken (by one key's message, told
    /// whether this process keeps it). Without it, a reader's clean-up still wakes them where a
    /// writer's mark says one may have been kept out (`rwlock.rs`).
    pub(crate) fn new(keys: &Keys, token: &str, wake: Option<Hand>) -> ReleaseCommand {
        match keys {
            Keys::One(key) => {
                let (script, sha, suffix) = match wake {
                    Some(hand) => (RELEASE_AND_WAKE, &*RELEASE_AND_WAKE_SHA, kept_suffix(hand)),
                    None => (RELEASE, &*RELEASE_SHA, None),
                };
                let mut command = sized(6, &[sha.as_bytes(), key, token.as_bytes()]);
                command
                    .arg("EVALSHA")
                    .arg(sha)
                    .arg(1)
                    .arg(&key[..])
                    .arg(token);
                if let Some(suffix) = suffix {
                    command.arg(suffix);
                }
                ReleaseCommand {
                    command,
                    script: Some(script),
                    slot_key: keys.slot_key(),
                    set_keys: None,
                }
            }
            Keys::Read { reader, writer } => ReleaseCommand {
                command: release_read(
                    reader,
                    writer,
                    token,
                    if wake.is_some() { "1" } else { "2" },
                ),
                script: None,
                slot_key: keys.slot_key(),
                set_keys: None,
            },
            Keys::Set(set) => ReleaseCommand {
                command: release_set_command(set, token, wake.is_some()),
                script: None,
                slot_key: keys.slot_key(),
                set_keys: Some(set.len()),
            },
        }
    }

    /// Sends the release on `connection` and checks the reply for an error reply: a `NOSCRIPT`
    /// answer to `EVALSHA` (nothing ran), or `NOPERM` (an ACL that allows `EVAL` only, as this
    /// lock's releases needed before they went by hash), has it sent again as `EVAL` with the
    /// script's body.
    pub(crate) async fn send(&self, connection: &mut Connection) -> RedisResult<Value> {
        let reply = send(connection, &self.command).await;
        match (&reply, self.script) {
            (Err(error), Some(script)) if matches!(error.code(), Some("NOSCRIPT" | "NOPERM")) => {
                send(connection, &self.with_body(script)).await
            }
            _ => reply,
        }
    }

    /// The `EVALSHA` command as `EVAL` with `script`'s body: the same keys and arguments.
    fn with_body(&self, script: &str) -> Cmd {
        let rest: Vec<&[u8]> = self
            .command
            .args_iter()
            .skip(2)
            .filter_map(|arg| match arg {
                Arg::Simple(bytes) => Some(bytes),
                _ => None,
            })
            .collect();
        let mut command = sized(rest.len().saturating_add(2), &[script.as_bytes()]);
        command.arg("EVAL").arg(script);
        for arg in rest {
            command.arg(arg);
        }
        command
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
