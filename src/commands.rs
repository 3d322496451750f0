//! The lock's commands on one node: acquire (`SET NX PX`, and with fencing the `INCR` of the
//! resource's fence counter), release (compare-and-delete) and extend (compare-and-`PEXPIRE`),
//! all but the plain `SET` as Lua scripts so the compare and the writes are one atomic step.
//! Acquire answers whether the node holds the key for our token (and the counter's new value),
//! extend whether it still does; release answers with the node's [`NodeReply`]. The fence's
//! write-back is in `fencing.rs`.
//!
//! Acquire and release keep the acquisition's [`Ledger`] up to date, so that a release is sent to
//! a node only after every request of ours that could still set the key there (see `ledger.rs`).

use std::sync::{Arc, LazyLock};
use std::time::Duration;

use redis::aio::MultiplexedConnection;
use redis::{Cmd, RedisResult, Script, Value};

use crate::error::{NodeError, NodeReply};
use crate::ledger::{Ledger, Plan, Refused};
use crate::node::Node;

/// Sets the key to our token, or, when it already holds our token (a leftover of an earlier
/// attempt of the same acquisition), renews its expiry: our own leftovers count for us.
///
/// Sent with `EVAL`, not `EVALSHA`: one command, never a NOSCRIPT round trip, so the request goes
/// out in the same step that records it handed over (see [`acquire`]). Retries are rare enough
/// that the script's bytes cost nothing.
const ACQUIRE_OR_RENEW: &str = r"if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then return 1 end
if redis.call('GET', KEYS[1]) == ARGV[1] then redis.call('PEXPIRE', KEYS[1], ARGV[2]) return 1 end
return 0";

/// With fencing: [`ACQUIRE_OR_RENEW`] (the renewal only when `ARGV[3]` is `1`), then, once the key
/// is ours, `INCR` of the fence counter `KEYS[2]`, answered; nil when the key is not ours. The
/// counter moves only together with a grant on this node, in one atomic step. A counter that is
/// not a positive integer (someone else wrote it) is an error reply; the key it set is then
/// released like any other of a failed acquisition.
const ACQUIRE_FENCED: &str = r"if not redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
if ARGV[3] ~= '1' or redis.call('GET', KEYS[1]) ~= ARGV[1] then return false end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
local fence = redis.call('INCR', KEYS[2])
if fence < 1 then return redis.error_reply('FENCE the fence counter is not positive') end
return fence";

/// Deletes the key only while it holds our token.
///
/// Sent with `EVAL` too: the compare-and-delete is then one request, which the ordering rule is
/// about (see `ledger.rs`), and a `SCRIPT FLUSH` on the node can never fail a release (with
/// `EVALSHA`, a flush between the `SCRIPT LOAD` that answers NOSCRIPT and the retry does, leaving
/// the key until its TTL). It also saves the first release on each connection two round trips.
const RELEASE: &str = r"if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0";

/// Sets a new expiry only while the key holds our token.
static EXTEND: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r"if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) end
return 0",
    )
});

/// One acquire request: what to set on the node.
pub(crate) struct AcquireRequest<'a> {
    /// The lock key.
    pub(crate) key: &'a [u8],
    /// The fence counter's key, with fencing on.
    pub(crate) fence_key: Option<&'a [u8]>,
    /// The acquisition's token.
    pub(crate) token: &'a str,
    /// The TTL, in milliseconds.
    pub(crate) ttl_ms: u64,
    /// Whether a key already holding our token (left by an earlier attempt) counts as ours.
    pub(crate) renew_leftover: bool,
}

/// An acquire request as one command (`SET NX PX`, or one of the two scripts), built once per
/// attempt and sent to every node: the nodes share its bytes.
pub(crate) struct AcquireCommand {
    command: Cmd,
    reply: AcquireReply,
}

/// How to read the reply to an [`AcquireCommand`].
#[derive(Debug, Clone, Copy)]
enum AcquireReply {
    /// `SET NX PX`: `OK`, or nil when the key exists.
    Set,
    /// [`ACQUIRE_OR_RENEW`]: 1 or 0.
    Renew,
    /// [`ACQUIRE_FENCED`]: the counter, or nil.
    Fenced,
}

impl AcquireCommand {
    /// Without fencing, the first attempt uses a plain `SET NX PX` (its token is new, so no key
    /// of ours can exist yet); later attempts use the script that also accepts and renews a
    /// leftover of an earlier attempt. With fencing, every attempt uses the script that also
    /// takes the next fence from the counter.
    pub(crate) fn new(request: &AcquireRequest<'_>) -> AcquireCommand {
        let AcquireRequest {
            key,
            fence_key,
            token,
            ttl_ms,
            renew_leftover,
        } = *request;
        let (mut command, reply) = match (fence_key, renew_leftover) {
            (Some(fence_key), _) => {
                let mut command = sized(
                    7,
                    &[ACQUIRE_FENCED.as_bytes(), key, fence_key, token.as_bytes()],
                );
                command
                    .arg("EVAL")
                    .arg(ACQUIRE_FENCED)
                    .arg(2)
                    .arg(key)
                    .arg(fence_key)
                    .arg(token);
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
            command.arg(if renew_leftover { "1" } else { "0" });
        }
        AcquireCommand { command, reply }
    }

    /// Reads a node's reply (already checked for an error reply).
    fn taken(&self, reply: Value) -> RedisResult<Taken> {
        let taken = match self.reply {
            AcquireReply::Set => match reply {
                Value::Okay => true,
                Value::Nil => false,
                // Not what `SET NX` answers; read as the string it should be.
                other => redis::from_redis_value::<Option<String>>(other)?.is_some(),
            },
            AcquireReply::Renew => redis::from_redis_value::<i64>(reply)? == 1,
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

/// A command with room for `args` arguments holding `parts` and a few short ones (the command's
/// name, counts, options, a TTL), so that building it allocates twice, not once per argument.
fn sized(args: usize, parts: &[&[u8]]) -> Cmd {
    /// Room for each short argument.
    const SHORT: usize = 20;
    let bytes = parts.iter().map(|part| part.len()).sum::<usize>();
    Cmd::with_capacity(args, bytes.saturating_add(args.saturating_mul(SHORT)))
}

/// Sends `command` (one request) and checks the reply for an error reply. Called directly on the
/// connection, not through `query_async`, which boxes a future per request.
async fn send(connection: &mut MultiplexedConnection, command: &Cmd) -> RedisResult<Value> {
    connection
        .send_packed_command(command)
        .await?
        .extract_error()
}

/// What a node answered to an acquire request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Taken {
    /// The key is someone else's.
    NotOurs,
    /// The key is ours; with fencing, the counter's value after its `INCR`.
    Ours(Option<u64>),
}

/// What became of an acquire request.
enum Sent {
    /// The server answered.
    Reply(Taken),
    /// Not handed to the connection; see [`Refused`]. With the server's `run_id`.
    Refused(Refused, Arc<str>),
}

/// Takes the key for the request's token in attempt `attempt` of the acquisition that `ledger`
/// belongs to, with the attempt's [`AcquireCommand`].
///
/// The request is recorded in the ledger as handed over in the same step that gives it to the
/// connection, and only while the attempt is undecided: one still waiting for its connection at
/// the decision is never sent (and answers [`Taken::NotOurs`]). Handed over, it may still wait
/// before it enters the connection's queue (for room in the queue, or for its task to be
/// polled), possibly in a background task after the decision, so a release started later could
/// overtake it: the release to this node waits until the request has finished (answered,
/// failed, timed out or dropped), which the ledger records. A node that a release of ours is
/// still in flight to gets no request (it fails as a timeout): that release could otherwise
/// delete the new key.
///
/// Nothing is sent either when the node may not vote (see [`Node::run_vote`]: its server's
/// identity is unknown, another node votes for that server, the restart guard holds it back, or
/// fencing needs a node that persists every write), or when this attempt already sent to the
/// same server through another node ([`NodeError::SameServer`]).
pub(crate) async fn acquire(
    node: &Node,
    command: &AcquireCommand,
    ledger: &Ledger,
    attempt: u32,
) -> Result<Taken, NodeError> {
    let index = node.index();
    let sent = node
        .run_vote(|mut connection, generation, server| async move {
            let in_flight = match ledger.hand_acquire(attempt, index, generation, &server) {
                Ok(in_flight) => in_flight,
                Err(refused) => return Ok(Sent::Refused(refused, server)),
            };
            let reply = send(&mut connection, &command.command).await;
            in_flight.finish(answered(&reply));
            command.taken(reply?).map(Sent::Reply)
        })
        .await?;
    match sent {
        Sent::Reply(taken) => Ok(taken),
        Sent::Refused(Refused::Decided, _) => Ok(Taken::NotOurs),
        Sent::Refused(Refused::Busy, _) => Err(NodeError::Timeout(node.command_timeout())),
        Sent::Refused(Refused::SameServer(other), server) => Err(NodeError::SameServer {
            node: other,
            run_id: server.to_string(),
        }),
    }
}

/// The compare-and-delete of `key` for `token`, as one `EVAL`: built once per release and sent to
/// every node.
pub(crate) fn release_command(key: &[u8], token: &str) -> Cmd {
    let mut command = sized(5, &[RELEASE.as_bytes(), key, token.as_bytes()]);
    command.arg("EVAL").arg(RELEASE).arg(1).arg(key).arg(token);
    command
}

/// Deletes the key if it still holds the token (`command`, from [`release_command`]), in the
/// order the ledger asks for:
///
/// - no request that could set the key ever went out to the node: nothing is sent
///   ([`NodeReply::NotSent`]);
/// - one is still in flight: first wait until it has finished, at most `wait`;
/// - the compare-and-delete's answer is [`NodeReply::Ours`] (deleted) or [`NodeReply::NotOurs`]
///   only when every request of ours that could set the key there ran before it (it was
///   answered, or went out over the same connection and had finished). Otherwise (a request
///   that ended without a reply on a connection since replaced, or one still in flight after
///   `wait`) the node may still get our key later: [`NodeReply::InDoubt`].
pub(crate) async fn release(
    node: &Node,
    command: &Cmd,
    ledger: &Ledger,
    wait: Duration,
) -> NodeReply {
    let index = node.index();
    if ledger.plan(index) == Plan::Wait {
        ledger.wait_quiet(Some(index), wait).await;
    }
    if ledger.plan(index) == Plan::Skip {
        return NodeReply::NotSent;
    }
    let mut sent_on = None;
    let result = node
        .run(|mut connection, generation| {
            sent_on = Some(generation);
            async move {
                let (in_flight, after_all) = ledger.hand_release(index, generation);
                let reply = send(&mut connection, command).await;
                in_flight.finish(answered(&reply));
                Ok((redis::from_redis_value::<i64>(reply?)?, after_all))
            }
        })
        .await
        .and_then(|(reply, after_all)| Ok((flag(reply)?, after_all)));
    match (result, sent_on) {
        (Err(error), _) => NodeReply::Failed(error),
        (Ok((held, true)), Some(generation)) if ledger.settle(index, generation) => {
            if held {
                NodeReply::Ours
            } else {
                NodeReply::NotOurs
            }
        }
        (Ok(_), _) => NodeReply::InDoubt,
    }
}

/// Sets the key's expiry to `ttl_ms` if it still holds `token`.
pub(crate) async fn extend(
    node: &Node,
    key: &[u8],
    token: &str,
    ttl_ms: u64,
) -> Result<bool, NodeError> {
    node.run_counted(|mut connection, _generation| async move {
        EXTEND
            .key(key)
            .arg(token)
            .arg(ttl_ms)
            .invoke_async(&mut connection)
            .await
    })
    .await
    .and_then(flag)
}

/// Whether the server answered the request (with a value or an error reply), so that it has
/// run. Anything else (I/O error, timeout, an unreadable reply) leaves its fate unknown.
fn answered<T>(reply: &RedisResult<T>) -> bool {
    match reply {
        Ok(_) => true,
        Err(error) => error.code().is_some(),
    }
}

/// Our scripts answer 1 (done) or 0 (not ours); anything else is a protocol error.
pub(crate) fn flag(reply: i64) -> Result<bool, NodeError> {
    match reply {
        1 => Ok(true),
        0 => Ok(false),
        other => Err(NodeError::Protocol(format!("script answered {other}"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::LockOptions;
    use quorumlock_harness::{ClusterOptions, Persistence, TestCluster};
    use redis::AsyncCommands;

    /// One server that persists every write, so that the restart guard lets it vote at once.
    async fn one_node() -> TestCluster {
        TestCluster::start(
            ClusterOptions::default()
                .nodes(1)
                .persistence(Persistence::AofAlways),
        )
        .await
        .unwrap()
    }

    /// An acquire request without fencing, as a yes or no.
    async fn take(
        node: &Node,
        key: &[u8],
        token: &str,
        ttl_ms: u64,
        renew_leftover: bool,
        ledger: &Ledger,
        attempt: u32,
    ) -> Result<bool, NodeError> {
        let request = AcquireRequest {
            key,
            fence_key: None,
            token,
            ttl_ms,
            renew_leftover,
        };
        let taken = acquire(node, &AcquireCommand::new(&request), ledger, attempt).await?;
        Ok(taken == Taken::Ours(None))
    }

    fn node(url: &str) -> Node {
        let settings = LockOptions::new()
            .node_timeout(Duration::from_secs(5))
            .connect_timeout(Duration::from_secs(5));
        Node::new(0, url, &settings.validate(1).unwrap()).unwrap()
    }

    /// Against a real server: a key of ours left by an earlier attempt counts for us (and gets
    /// the new TTL); a key of someone else's does not; a free key is taken.
    #[tokio::test]
    async fn acquire_or_renew_counts_only_our_own_leftovers() {
        let cluster = one_node().await;
        let node = node(&cluster.urls()[0]);
        let mut direct = cluster.connection(0).await.unwrap();
        let ledger = Ledger::new(1);
        let attempt = ledger.begin();

        let _: () = direct.set_ex("ours", "token-a", 1).await.unwrap();
        assert!(
            take(&node, b"ours", "token-a", 60_000, true, &ledger, attempt)
                .await
                .unwrap()
        );
        let ttl_ms: i64 = direct.pttl("ours").await.unwrap();
        assert!(ttl_ms > 1_000, "the leftover got the new TTL: {ttl_ms}");
        // A plain first attempt never renews: its token cannot have been stored before.
        assert!(
            !take(&node, b"ours", "token-a", 60_000, false, &ledger, attempt)
                .await
                .unwrap()
        );

        let _: () = direct.set("theirs", "token-b").await.unwrap();
        assert!(
            !take(&node, b"theirs", "token-a", 60_000, true, &ledger, attempt)
                .await
                .unwrap()
        );
        let value: String = direct.get("theirs").await.unwrap();
        assert_eq!(value, "token-b");

        assert!(
            take(&node, b"free", "token-a", 60_000, true, &ledger, attempt)
                .await
                .unwrap()
        );
        let value: String = direct.get("free").await.unwrap();
        assert_eq!(value, "token-a");

        // Once the round is decided, a request not yet sent is never sent.
        ledger.decide();
        assert!(
            !take(&node, b"late", "token-a", 60_000, false, &ledger, attempt)
                .await
                .unwrap()
        );
        let exists: bool = direct.exists("late").await.unwrap();
        assert!(!exists);
    }

    /// Two nodes of one acquisition that reach the same server, each believing it holds the
    /// claim on it (as when a claim changes hands in the middle of an acquisition): the attempt
    /// still sends to that server once. Only the next attempt may send there again.
    #[tokio::test]
    async fn one_attempt_sends_to_one_server_once_whatever_the_claims_say() {
        let cluster = one_node().await;
        let settings = LockOptions::new()
            .node_timeout(Duration::from_secs(5))
            .connect_timeout(Duration::from_secs(5))
            .validate(2)
            .unwrap();
        let url = &cluster.urls()[0];
        // Separate claim tables: neither node knows of the other.
        let first = Node::new(0, url, &settings).unwrap();
        let second = Node::new(1, url, &settings).unwrap();
        let ledger = Ledger::new(2);
        let attempt = ledger.begin();
        assert!(
            take(&first, b"k", "t", 60_000, false, &ledger, attempt)
                .await
                .unwrap()
        );
        let error = take(&second, b"k", "t", 60_000, true, &ledger, attempt)
            .await
            .unwrap_err();
        assert!(
            matches!(error, NodeError::SameServer { node: 0, .. }),
            "{error:?}"
        );
        ledger.decide();
        assert_eq!(
            ledger.plan(1),
            Plan::Skip,
            "nothing went out through node 1"
        );

        let attempt = ledger.begin();
        assert!(
            take(&second, b"k", "t", 60_000, true, &ledger, attempt)
                .await
                .unwrap()
        );
    }

    /// A release sends nothing to a node no request of ours went out to: not even a connection
    /// attempt (nothing listens on port 1, so dialing would fail).
    #[tokio::test]
    async fn a_release_skips_a_node_never_sent_to() {
        let node = node("redis://127.0.0.1:1");
        let ledger = Ledger::new(1);
        let attempt = ledger.begin();
        let error = take(&node, b"k", "t", 1_000, false, &ledger, attempt)
            .await
            .unwrap_err();
        assert_eq!(error, NodeError::ConnectionRefused);
        ledger.decide();
        let reply = release(
            &node,
            &release_command(b"k", "t"),
            &ledger,
            Duration::from_secs(1),
        )
        .await;
        assert_eq!(reply, NodeReply::NotSent);
    }

    /// A release over a newer connection than the one an unanswered request of ours went out on
    /// cannot say the node is free; over the same connection it can.
    #[tokio::test]
    async fn a_release_after_an_unanswered_request_on_an_older_connection_is_in_doubt() {
        let cluster = one_node().await;
        let node = node(&cluster.urls()[0]);
        let ledger = Ledger::new(1);
        let attempt = ledger.begin();
        assert!(
            take(&node, b"k", "t", 60_000, false, &ledger, attempt)
                .await
                .unwrap()
        );
        // As if a request had gone out on an earlier connection (generation 0 is never used)
        // and timed out there.
        drop(
            ledger
                .hand_acquire(attempt, 0, 0, &"another".into())
                .unwrap(),
        );
        ledger.decide();
        let reply = release(
            &node,
            &release_command(b"k", "t"),
            &ledger,
            Duration::from_secs(1),
        )
        .await;
        assert_eq!(reply, NodeReply::InDoubt);
        let mut direct = cluster.connection(0).await.unwrap();
        let exists: bool = direct.exists("k").await.unwrap();
        assert!(!exists, "the compare-and-delete still ran");

        let ledger = Ledger::new(1);
        let attempt = ledger.begin();
        assert!(
            take(&node, b"k", "t", 60_000, false, &ledger, attempt)
                .await
                .unwrap()
        );
        ledger.decide();
        let reply = release(
            &node,
            &release_command(b"k", "t"),
            &ledger,
            Duration::from_secs(1),
        )
        .await;
        assert_eq!(reply, NodeReply::Ours);
    }
}
