//! What happened on each node during one operation: [`NodeOutcome`] (which node, what it
//! answered), [`NodeReply`] (ours, not ours, failed, never sent, in doubt) and [`NodeError`] (why
//! it failed). Every lock error carries one outcome per node.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use crate::rules::replacement::Replacement;

/// What one node did during one operation.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct NodeOutcome {
    /// Position of the node in the configured list.
    pub node: usize,
    /// The node's address (`host:port`), without credentials.
    pub addr: Arc<str>,
    /// What it answered.
    pub reply: NodeReply,
}

impl fmt::Display for NodeOutcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "node {} ({}): {}", self.node, self.addr, self.reply)
    }
}

/// One node's answer to one operation.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum NodeReply {
    /// The node holds the key for us (acquired, extended, or released while still ours).
    Ours,
    /// The node holds the key for another owner (or, for release and extend: the key is gone or
    /// no longer ours).
    NotOurs,
    /// The node failed.
    Failed(NodeError),
    /// The operation was decided before this node answered. Its request finishes in the
    /// background, or (a lost acquisition) was abandoned.
    NoReply,
    /// Release only: no request of this acquisition that could set the key ever went out to this
    /// node (the acquisition was decided before the node's connection was ready, or none could be
    /// made), so no key of ours can be there, and the release sent nothing (not even a
    /// connection attempt). The early return of a release counts only nodes that answered it.
    NotSent,
    /// Release only: the compare-and-delete ran, but a request of this acquisition that went out
    /// to this node over an earlier connection (replaced since, after an I/O or protocol error) never got a
    /// reply, or one was still in flight when the release stopped waiting for it: it may still
    /// reach the node after the release and set the key, which then expires by its TTL. Does not
    /// count as free.
    InDoubt,
}

impl NodeReply {
    /// A command's answer: `true` (ours), `false` (not ours) or the node's error.
    pub(crate) fn from_flag(result: Result<bool, NodeError>) -> NodeReply {
        match result {
            Ok(true) => NodeReply::Ours,
            Ok(false) => NodeReply::NotOurs,
            Err(error) => NodeReply::Failed(error),
        }
    }
}

impl fmt::Display for NodeReply {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NodeReply::Ours => f.write_str("ours"),
            NodeReply::NotOurs => f.write_str("not ours"),
            NodeReply::Failed(e) => write!(f, "failed: {e}"),
            NodeReply::NoReply => f.write_str("no reply before the decision"),
            NodeReply::NotSent => f.write_str("nothing sent: no request of ours went out to it"),
            NodeReply::InDoubt => {
                f.write_str("in doubt: an earlier request of ours may still set the key")
            }
        }
    }
}

/// What one node held of a set of resources (see [`Resources`](crate::Resources)) when a
/// release or an extension of it looked: per resource, in the set's order, whether its key
/// still held our token. A key that was not is merely expired (or was deleted by someone): it
/// is reported here, never as an error. A node holds the set only where every key was ours.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct SetOutcome {
    /// Position of the node in the configured list.
    pub node: usize,
    /// Per resource of the set, in its order ([`Resources::iter`](crate::Resources::iter)):
    /// whether the key was still ours.
    pub held: Vec<bool>,
}

impl SetOutcome {
    /// Whether the node still held every key of the set.
    pub fn held_all(&self) -> bool {
        crate::rules::resources::holds_all(&self.held)
    }
}

/// Why a command on one node failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum NodeError {
    /// No reply within the per-node timeout.
    #[error("timed out after {0:?}")]
    Timeout(Duration),
    /// Nothing listens at the address.
    #[error("connection refused")]
    ConnectionRefused,
    /// The connection broke or could not be set up.
    #[error("connection error: {0}")]
    Connection(String),
    /// The server rejected our credentials.
    #[error("authentication failed: {0}")]
    Auth(String),
    /// The server is a replica (`READONLY`).
    #[error("READONLY: the node is a replica: {0}")]
    ReadOnly(String),
    /// The server is out of memory (`OOM`).
    #[error("OOM: the node is out of memory: {0}")]
    OutOfMemory(String),
    /// The key holds a value of another type (`WRONGTYPE`): something else uses our key name.
    #[error("WRONGTYPE: the lock key holds a non-string value: {0}")]
    WrongType(String),
    /// The user lacks the ACL permission for our commands (`NOPERM`).
    #[error("NOPERM: {0}")]
    NoPermission(String),
    /// The node is loading its dataset (`LOADING`).
    #[error("LOADING: the node is loading its dataset")]
    Loading,
    /// Any other error reply from the server, with its code.
    #[error("server error {code}: {message}")]
    Server {
        /// The error code (`ERR`, `NOSCRIPT`, …).
        code: String,
        /// The rest of the message.
        message: String,
    },
    /// The reply had a shape the lock protocol never produces.
    #[error("unexpected reply: {0}")]
    Protocol(String),
    /// Acquire only: a release of ours from an earlier attempt of this acquisition is still in
    /// flight to this node (it had not answered when that attempt was decided), and could land
    /// after a new request and delete its key, so nothing was sent. The node was never asked:
    /// this is no timeout of the node's.
    #[error("not sent: an earlier attempt's release is still in flight to this node")]
    ReleaseInFlight,
    /// Acquire only: this node reaches the same Redis server (the same `run_id`) as another
    /// configured node, which holds the claim on it, so its acquire votes are refused and nothing
    /// is sent: one server never counts as two votes. (Two URLs for one server, e.g.
    /// `127.0.0.1:P` and `localhost:P`.)
    #[error("same server as node {node} (run_id {run_id}): one server, one vote")]
    SameServer {
        /// The configured node that votes for that server.
        node: usize,
        /// The server's `run_id`.
        run_id: String,
    },
    /// Acquire only: the node (re)started recently and may have lost keys it held (it does not
    /// persist every write: AOF with `appendfsync always`), so it stays out of acquisitions
    /// until it has been up for longer than `max_ttl` plus the drift allowance (the restart
    /// guard, [`LockOptions::restart_guard`](crate::LockOptions::restart_guard)). Nothing but an
    /// `INFO keyspace` is sent to it, which finds a restart since the countdown was read (the
    /// vote is then the broken connection's error, and the next one this server's countdown).
    /// Extend and release are not held back.
    #[error(
        "recovering from a (re)start: may vote in {left:?} (restart guard: the node does not persist \
         every write; AOF with appendfsync always lets it vote at once, see LockOptions::restart_guard)"
    )]
    Recovering {
        /// How long from the moment of this error until the node may vote again: counted from
        /// the server's uptime read on connect, for the server that still answers on that
        /// connection.
        left: Duration,
    },
    /// Acquire and the fence's write-back only: another server than the one the lock knew
    /// answers at this node's address (a failover behind the same name: see [`Replacement`]),
    /// and it may lack keys the old one held, so it sits out until every such key has expired:
    /// `max_ttl` plus the drift allowance from when the lock noticed, whatever its persistence.
    /// Nothing is sent to it. Extend and release are not held back.
    #[error(
        "another server answers at this address ({reason}): it sits out acquisitions for {left:?}, \
         until every key the old one held has expired"
    )]
    Replaced {
        /// How long from the moment of this error until the node may vote again.
        left: Duration,
        /// How the lock told the server apart from the one it knew.
        reason: Replacement,
    },
    /// Acquire and the fence's write-back only: the server at this address is a replica
    /// (`role:slave`), whose data can lag its master's; it never votes. Nothing is sent. The
    /// next acquisition reconnects, so a promotion is noticed (and then sits out, see
    /// [`NodeError::Replaced`]).
    #[error("the server is a replica (role:slave): it never votes")]
    Replica,
    /// Acquire with fencing only: the node does not persist every write (AOF with `appendfsync
    /// always`), or the user may not read its fsync policy (`CONFIG GET`, refused by an ACL), so
    /// a crash could take its fence counter back to an older value and a later holder could get
    /// a fence no larger than an earlier one's. Nothing is sent to it. See
    /// [`LockOptions::fence_volatile_nodes`](crate::LockOptions::fence_volatile_nodes).
    #[error(
        "fencing: the node does not persist every write (AOF with appendfsync always), or CONFIG \
         GET appendfsync was refused, so its fence counter could go back in a crash (see \
         LockOptions::fence_volatile_nodes)"
    )]
    NotDurable,
}

impl NodeError {
    /// Whether this failure lasts until someone changes the server, its data or the lock's
    /// configuration, so that trying again cannot cure it: a refused password or command
    /// (`Auth`, `NoPermission`), another kind of value where the lock keeps a key, such as a
    /// fence counter (`WrongType`), a node that does not persist every write where fencing
    /// needs it (`NotDurable`, read once per connection), a second URL of one server
    /// (`SameServer`). Everything else may pass: a timeout, a refused or broken connection, a
    /// node loading, out of memory, a replica (it may be promoted), or held back by the
    /// restart guard.
    pub fn is_permanent(&self) -> bool {
        matches!(
            self,
            NodeError::Auth(_)
                | NodeError::NoPermission(_)
                | NodeError::WrongType(_)
                | NodeError::NotDurable
                | NodeError::SameServer { .. }
        )
    }
}

/// How many nodes answered that the key is not ours.
pub(crate) fn not_ours(outcomes: &[NodeOutcome]) -> usize {
    outcomes
        .iter()
        .filter(|outcome| outcome.reply == NodeReply::NotOurs)
        .count()
}
