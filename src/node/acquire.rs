//! The acquire command on one node: `SET key token NX PX ttl`, or a script that also renews a
//! leftover of an earlier attempt of ours, and with fencing also takes the next fence (`INCR` of
//! the resource's counter) in the same atomic step; and how to send it and read its reply. How a
//! request is handed over, in order with the acquisition's other requests, is `round/acquire.rs`.

use std::sync::Arc;

use redis::{Cmd, Pipeline, RedisResult, Value};

use super::acquire_scripts::{ACQUIRE_FENCED, ACQUIRE_LEADER, ACQUIRE_OR_RENEW};
use super::redirect::Connection;
use super::rwlock::{READ_FIRST_COMMANDS, acquire_read, acquire_write, read_first};
use super::set::{acquire_set_command, acquire_set_refused, read_acquire_set};
use super::wire::{send, sized};
use crate::rules::leader::Publication;
use crate::rules::resources::Keys;
use crate::rules::rwlock::{RwKeys, Side};

/// One acquire request: what to set on the node.
pub(crate) struct AcquireRequest<'a> {
    /// The lock key, or a set's keys.
    pub(crate) keys: &'a Keys,
    /// The fence counters' keys (one per lock key), with fencing on.
    pub(crate) fence_keys: Option<&'a Keys>,
    /// With fencing, whether the nodes may be volatile: counters are then trusted only in the
    /// server run that wrote them (`counter.rs`).
    pub(crate) volatile: bool,
    /// The acquisition's token.
    pub(crate) token: &'a str,
    /// Whether this is the caller's own first attempt, not a waiter's: a read then goes as
    /// three native commands that leave its key where it is refused (`rwlock.rs`), which
    /// waiters, woken by each other's clean-ups, must not.
    pub(crate) first_call: bool,
    /// The TTL, in milliseconds.
    pub(crate) ttl_ms: u64,
    /// Whether a key already holding our token (left by an earlier attempt) counts as ours.
    pub(crate) renew_leftover: bool,
    /// For a side of a read-write lock, which, and the lock's keys (`rwlock.rs`).
    pub(crate) rw: Option<(Side, &'a RwKeys)>,
    /// For an election's candidate (one key, fencing on), the leader record to write with each
    /// grant (`leader.rs`).
    pub(crate) record: Option<&'a Publication>,
}

/// An acquire request as one command (`SET NX PX`, or one of the two scripts), built once per
/// attempt and sent to every node: the nodes share its bytes.
pub(crate) struct AcquireCommand {
    command: Cmd,
    /// A caller's first read: the commands sent instead of `command` to a node that is one
    /// server (a cluster node, which may redirect part of them, gets the script).
    first_read: Option<Pipeline>,
    /// The key a cluster node routes it by (`Keys::slot_key`).
    pub(crate) slot_key: Arc<[u8]>,
    reply: AcquireReply,
}

/// How to read the reply to an [`AcquireCommand`].
#[derive(Debug, Clone, Copy)]
enum AcquireReply {
    /// `SET NX PX`: `OK`, or nil when the key exists.
    Set,
    /// [`ACQUIRE_OR_RENEW`]: 1 or 0.
    Renew,
    /// A read: the script's 1 or 0, or the first read's three answers (`rwlock.rs`).
    Read,
    /// [`ACQUIRE_FENCED`]: the fence (0: ours, the counter not trusted), or nil.
    Fenced,
    /// A set's script (`set.rs`): the fence (or 1), 0 when held, -1 when held with a leftover
    /// of ours there, -2 when ours with a counter not trusted.
    AllOrNone {
        /// Whether the positive answer is a fence.
        fenced: bool,
    },
}

impl AcquireCommand {
    /// Without fencing, the first attempt uses a plain `SET NX PX` (its token is new, so no key
    /// of ours can exist yet); later attempts use the script that also accepts and renews a
    /// leftover of an earlier attempt. With fencing, every attempt uses the script that also
    /// takes the next fence from the counter. A set always uses its script, which takes every
    /// key or none, and a side of a read-write lock its own.
    pub(crate) fn new(request: &AcquireRequest<'_>) -> AcquireCommand {
        let AcquireRequest {
            keys,
            fence_keys,
            volatile,
            token,
            first_call,
            ttl_ms,
            renew_leftover,
            rw,
            record,
        } = *request;
        if let Some((side, rw)) = rw {
            let fence = fence_keys.map(|fence_keys| (fence_keys.first(), renew_leftover, volatile));
            let first_read = (side == Side::Read && first_call)
                .then(|| read_first(rw, keys.first(), token, ttl_ms));
            let (command, reply) = match side {
                Side::Read => (
                    acquire_read(rw, keys.first(), token, ttl_ms),
                    AcquireReply::Read,
                ),
                Side::Write => (
                    acquire_write(rw, fence, token, ttl_ms),
                    if fence.is_some() {
                        AcquireReply::Fenced
                    } else {
                        AcquireReply::Renew
                    },
                ),
            };
            return AcquireCommand {
                command,
                first_read,
                slot_key: keys.slot_key(),
                reply,
            };
        }
        let key = match keys {
            Keys::One(key) | Keys::Read { reader: key, .. } => &key[..],
            Keys::Set(keys) => {
                let fence_keys = fence_keys.map(Keys::all);
                return AcquireCommand {
                    first_read: None,
                    command: acquire_set_command(
                        keys,
                        fence_keys,
                        volatile,
                        token,
                        ttl_ms,
                        renew_leftover,
                    ),
                    slot_key: request.keys.slot_key(),
                    reply: AcquireReply::AllOrNone {
                        fenced: fence_keys.is_some(),
                    },
                };
            }
        };
        let fence_key = fence_keys.map(Keys::first);
        let (mut command, reply) = match (fence_key, renew_leftover) {
            (Some(fence_key), _) => {
                let (script, record_key) = match record {
                    Some(record) => (ACQUIRE_LEADER.as_str(), Some(&record.record_key[..])),
                    None => (ACQUIRE_FENCED.as_str(), None),
                };
                let value = record.map_or(&[][..], |record| &record.value[..]);
                let mut command = sized(
                    9 + 2 * usize::from(record.is_some()),
                    &[
                        script.as_bytes(),
                        key,
                        fence_key,
                        token.as_bytes(),
                        record_key.unwrap_or_default(),
                        value,
                    ],
                );
                command
                    .arg("EVAL")
                    .arg(script)
                    .arg(2 + usize::from(record_key.is_some()))
                    .arg(key)
                    .arg(fence_key);
                if let Some(record_key) = record_key {
                    command.arg(record_key);
                }
                command.arg(token);
                (command, AcquireReply::Fenced)
            }
            (None, true) => {
                let mut command = sized(6, &[ACQUIRE_OR_RENEW.as_bytes(), key, token.as_bytes()]);
                command
                    .arg("EVAL")
                    .arg(ACQUIRE_OR_RENEW)
                    .arg(1)
                    .arg(key)
                    .arg(token);
                (command, AcquireReply::Renew)
            }
            (None, false) => {
                let mut command = sized(6, &[key, token.as_bytes()]);
                command.arg("SET").arg(key).arg(token).arg("NX").arg("PX");
                (command, AcquireReply::Set)
            }
        };
        command.arg(ttl_ms);
        if let AcquireReply::Fenced = reply {
            command
                .arg(if renew_leftover { "1" } else { "0" })
                .arg(if volatile { "1" } else { "0" });
            if let Some(record) = record {
                command.arg(&record.value[..]);
            }
        }
        AcquireCommand {
            command,
            first_read: None,
            slot_key: request.keys.slot_key(),
            reply,
        }
    }

    /// Sends the request on `connection` and checks the reply for an error reply (each of a
    /// first read's answers too, as one array).
    pub(crate) async fn send(&self, connection: &mut Connection) -> RedisResult<Value> {
        match (&self.first_read, connection.direct()) {
            (Some(pipeline), Some(direct)) => {
                let replies = direct
                    .send_packed_commands(pipeline, 0, READ_FIRST_COMMANDS)
                    .await?;
                Value::Array(replies).extract_error()
            }
            _ => send(connection, &self.command).await,
        }
    }

    /// Whether `reply` says this request did not set the key: it was held (by another token,
    /// or by none of ours to renew). Only the exact "no" of each form counts; anything else may
    /// have set it (a first read always has).
    pub(crate) fn refused(&self, reply: &Value) -> bool {
        match self.reply {
            AcquireReply::Set | AcquireReply::Fenced => {
                matches!(reply, Value::Nil | Value::Boolean(false))
            }
            AcquireReply::Renew | AcquireReply::Read => matches!(reply, Value::Int(0)),
            AcquireReply::AllOrNone { .. } => acquire_set_refused(reply),
        }
    }

    /// Reads a node's reply (already checked for an error reply).
    pub(crate) fn taken(&self, reply: Value) -> RedisResult<Taken> {
        let taken = match self.reply {
            AcquireReply::AllOrNone { fenced } => {
                return Ok(match read_acquire_set(reply)? {
                    Some(fence) => Taken::Ours(fenced.then_some(fence)),
                    None => Taken::NotOurs,
                });
            }
            AcquireReply::Set => match reply {
                Value::Okay => true,
                Value::Nil => false,
                // Not what `SET NX` answers; read as the string it should be.
                other => redis::from_redis_value::<Option<String>>(other)?.is_some(),
            },
            AcquireReply::Renew => redis::from_redis_value::<i64>(reply)? == 1,
            // A first read's answers: granted where neither the writer key nor a mark was found.
            AcquireReply::Read => match reply {
                Value::Array(replies) => matches!(replies.last(), Some(Value::Int(0))),
                reply => redis::from_redis_value::<i64>(reply)? == 1,
            },
            AcquireReply::Fenced => {
                // The script never answers a counter below 1, so the conversion cannot fail;
                // were it to, the node would count as not ours, never as a grant with a
                // made-up fence.
                return Ok(
                    match redis::from_redis_value::<Option<i64>>(reply)?.map(u64::try_from) {
                        Some(Ok(fence)) => Taken::Ours(Some(fence)),
                        None | Some(Err(_)) => Taken::NotOurs,
                    },
                );
            }
        };
        Ok(if taken {
            Taken::Ours(None)
        } else {
            Taken::NotOurs
        })
    }
}

/// What a node answered to an acquire request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Taken {
    /// The key is someone else's.
    NotOurs,
    /// The key is ours; with fencing, the fence it took from the counter, or 0 when the counter
    /// is not trusted (a volatile node's, not written in the server's current run) and the
    /// fence must be recovered from the other nodes.
    Ours(Option<u64>),
}
