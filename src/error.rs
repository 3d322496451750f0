//! Errors: what went wrong for the whole operation ([`Error`]), with a bad configuration
//! ([`ConfigError`]), or with a kept lock ([`Lost`]). What happened on each node is in
//! `outcome.rs`.
//!
//! Every lock error carries the per-node outcomes, so "held by someone else" is never confused
//! with "not enough nodes answered", and a log line can say which node did what.
//!
//! Over 500 lines because it is one list: every way an operation or a configuration can fail,
//! each documented, kept in one file so that a reader sees them side by side.

use std::fmt;
use std::time::Duration;

use crate::outcome::{NodeOutcome, NodeReply, not_ours};

/// The error type of every fallible operation in this crate.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The configuration was rejected before anything was sent.
    #[error("invalid configuration: {0}")]
    Config(#[from] ConfigError),

    /// Another owner holds the resource: too few nodes can still say yes, and failed nodes alone
    /// would not have prevented the quorum (that is [`Error::Unavailable`]).
    ///
    /// Decided as soon as it was known, so some nodes may not have answered. `unreachable`
    /// counts the nodes that had failed by then (timed out, refused, answered an error): zero
    /// means every node that answered was reachable and the lock is simply held; more means the
    /// owner's keys and those failures together kept the quorum out of reach.
    #[error(
        "{} is held by another owner{} ({})",
        Resource(resource),
        Unreachable(*unreachable),
        Summary(outcomes)
    )]
    #[non_exhaustive]
    Held {
        /// The resource, as given to `acquire`.
        resource: Vec<u8>,
        /// Nodes that had failed when the round was decided.
        unreachable: usize,
        /// What each node said.
        outcomes: Vec<NodeOutcome>,
    },

    /// Too many nodes failed (timed out, refused, returned an error) to reach the quorum.
    #[error(
        "too many nodes failed for a quorum of {quorum} ({})",
        Summary(outcomes)
    )]
    #[non_exhaustive]
    Unavailable {
        /// The number of nodes that must agree.
        quorum: usize,
        /// What each node said.
        outcomes: Vec<NodeOutcome>,
    },

    /// A quorum said yes, but the round trip and clock drift used up the whole TTL, so the lock
    /// was not safe to hand out.
    #[error("lock validity used up during acquisition ({elapsed:?} elapsed of a {ttl:?} TTL)")]
    #[non_exhaustive]
    ValidityExpired {
        /// The TTL that was asked for.
        ttl: Duration,
        /// Time spent waiting for the quorum.
        elapsed: Duration,
        /// What each node said.
        outcomes: Vec<NodeOutcome>,
    },

    /// The caller's cancel signal fired before the operation was decided. Whatever was set on
    /// the nodes has been released.
    #[error("cancelled before a decision ({})", Summary(outcomes))]
    #[non_exhaustive]
    Cancelled {
        /// What each node had said by then.
        outcomes: Vec<NodeOutcome>,
    },

    /// Fencing: a quorum took the lock and the fence was `fence`, but fewer than a quorum of
    /// nodes confirmed the fence's write-back while the lock still held there, so the fence
    /// could not be proven larger than every later holder's. Nothing was handed out, and the
    /// keys set were released.
    #[error(
        "fence {fence} not confirmed by a quorum of {quorum}; released ({})",
        Summary(outcomes)
    )]
    #[non_exhaustive]
    FenceUnconfirmed {
        /// The fence that would have been handed out.
        fence: u64,
        /// The number of nodes that must confirm.
        quorum: usize,
        /// What each node said to the write-back.
        outcomes: Vec<NodeOutcome>,
    },

    /// With fencing on volatile nodes, a node granted the lock with a counter it could not
    /// trust (it lost its data, or part of it, in a restart: `docs/fencing.md`), and the fence
    /// could not be recovered: fewer than a quorum of nodes held trusted counters and not every
    /// node answered. The keys taken were released; a later attempt succeeds once a quorum of
    /// counters is trusted again, or every node answers.
    #[error(
        "the fence could not be recovered: {trusted} of the {quorum} trusted counters needed, \
         and not every node answered"
    )]
    FenceUnrecovered {
        /// How many nodes' counters were trusted.
        trusted: usize,
        /// How many must be, unless every node answers.
        quorum: usize,
        /// Per node: `Ours` for a trusted counter, `NotOurs` for one not trusted, or the
        /// failure.
        outcomes: Vec<NodeOutcome>,
    },

    /// The lock was lost while [`Lock::with_lock`](crate::Lock::with_lock) ran the caller's work:
    /// the work's future was dropped at once. The keys left were released.
    #[error("lock lost: {0}")]
    Lost(Lost),

    /// An extension did not reach the quorum. The keys that still hold were left in place.
    #[error(
        "extend failed; the lock is {} ({})",
        if *still_valid { "still valid until its previous deadline" } else { "no longer valid" },
        Summary(outcomes)
    )]
    #[non_exhaustive]
    ExtendFailed {
        /// Whether the validity from before the extension attempt has time left.
        still_valid: bool,
        /// What each node said.
        outcomes: Vec<NodeOutcome>,
    },

    /// [`Guard::downgrade`](crate::Guard::downgrade) did not turn the write key into a read key
    /// on a quorum of nodes (they no longer held it, or did not answer). Both were released on
    /// every node: the caller holds neither side.
    #[error("downgrade failed; released ({})", Summary(outcomes))]
    #[non_exhaustive]
    DowngradeFailed {
        /// What each node said.
        outcomes: Vec<NodeOutcome>,
    },

    /// A candidate won its election's lock, but fewer than a quorum of nodes took its leader
    /// record (they no longer held its key, or did not answer), so nobody could read it as the
    /// leader. The lock was released: the candidate does not lead.
    #[error(
        "leader record of term {term} not published on a quorum; released ({})",
        Summary(outcomes)
    )]
    #[non_exhaustive]
    NotPublished {
        /// The term the candidate would have led.
        term: u64,
        /// What each node said.
        outcomes: Vec<NodeOutcome>,
    },

    /// [`Lock::resume`](crate::Lock::resume) found no quorum of nodes still holding the
    /// lease's token (it expired, was released, or too few nodes answered), or its deadline had
    /// passed (then nothing was sent). Whatever of it was left on the nodes is released.
    #[error("resume failed: no quorum holds the lease ({})", Summary(outcomes))]
    #[non_exhaustive]
    NotResumed {
        /// What each node said; empty when the deadline had passed.
        outcomes: Vec<NodeOutcome>,
    },
}

impl Error {
    /// A short name of the kind of error, for spans and logs: `held`, `unavailable`,
    /// `validity_expired`, `cancelled`, `fence_unconfirmed`, `lost`, `extend_failed`,
    /// `downgrade_failed`, `not_resumed`, `not_published`, `config`.
    pub(crate) fn label(&self) -> &'static str {
        match self {
            Error::Config(_) => "config",
            Error::Held { .. } => "held",
            Error::Unavailable { .. } => "unavailable",
            Error::ValidityExpired { .. } => "validity_expired",
            Error::Cancelled { .. } => "cancelled",
            Error::FenceUnconfirmed { .. } => "fence_unconfirmed",
            Error::FenceUnrecovered { .. } => "fence_unrecovered",
            Error::Lost(_) => "lost",
            Error::ExtendFailed { .. } => "extend_failed",
            Error::DowngradeFailed { .. } => "downgrade_failed",
            Error::NotResumed { .. } => "not_resumed",
            Error::NotPublished { .. } => "not_published",
        }
    }

    /// Whether trying again cannot succeed until someone acts: a configuration error, or
    /// [`Error::Unavailable`] with so many nodes failing for good
    /// ([`NodeError::is_permanent`](crate::NodeError::is_permanent)) that the others cannot
    /// make a quorum. A waiting or retrying acquisition returns such an error at once rather
    /// than trying until its deadline; an election's campaign, which waits for as long as it
    /// takes, returns it too.
    ///
    /// ```
    /// use quorumlock::{ConfigError, Error};
    ///
    /// assert!(Error::Config(ConfigError::NoNodes).is_permanent());
    /// ```
    pub fn is_permanent(&self) -> bool {
        match self {
            Error::Config(_) => true,
            Error::Unavailable { quorum, outcomes } => {
                let permanent = outcomes
                    .iter()
                    .filter(|outcome| {
                        matches!(&outcome.reply, NodeReply::Failed(error) if error.is_permanent())
                    })
                    .count();
                outcomes.len().saturating_sub(permanent) < *quorum
            }
            _ => false,
        }
    }

    /// Whether an acquisition stops trying on this error: it cannot be cured by trying again
    /// ([`is_permanent`](Error::is_permanent)), or the caller cancelled.
    pub(crate) fn ends_trying(&self) -> bool {
        matches!(self, Error::Cancelled { .. }) || self.is_permanent()
    }

    /// The per-node outcomes carried by this error (empty for configuration errors).
    pub fn outcomes(&self) -> &[NodeOutcome] {
        match self {
            Error::Config(_) => &[],
            Error::Lost(lost) => lost.outcomes(),
            Error::Held { outcomes, .. }
            | Error::Unavailable { outcomes, .. }
            | Error::ValidityExpired { outcomes, .. }
            | Error::Cancelled { outcomes, .. }
            | Error::FenceUnconfirmed { outcomes, .. }
            | Error::FenceUnrecovered { outcomes, .. }
            | Error::ExtendFailed { outcomes, .. }
            | Error::DowngradeFailed { outcomes }
            | Error::NotResumed { outcomes }
            | Error::NotPublished { outcomes, .. } => outcomes,
        }
    }
}

/// A configuration that cannot work, found before any command is sent.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// No node was given.
    #[error("at least one node is required")]
    NoNodes,
    /// A node URL could not be parsed, or asks for a feature this build lacks.
    #[error("node {index}: invalid URL {url:?}: {reason}")]
    InvalidUrl {
        /// Position of the URL in the list.
        index: usize,
        /// The URL with any password masked.
        url: String,
        /// Why it was rejected.
        reason: String,
    },
    /// A node's connection details were refused when its client was built: a certificate or
    /// key (PEM) that does not parse, from [`LockOptions`](crate::LockOptions) or the node's
    /// own TLS parameters.
    #[error("node {index}: {reason}")]
    InvalidNode {
        /// Position of the node in the list.
        index: usize,
        /// Why it was refused (never a credential).
        reason: String,
    },
    /// A TLS node that brought its own TLS parameters (a `redis::Client` built with
    /// `build_with_tls`), in a lock whose options set certificates too: the two cannot be
    /// merged, and neither is dropped unseen. Set the certificates in one place.
    #[error(
        "node {index} has TLS parameters of its own and the options set TLS certificates too: set them in one place"
    )]
    ConflictingTls {
        /// Position of the node in the list.
        index: usize,
    },
    /// A TLS node in a build without the `tls` feature: given as connection info, or as a
    /// `rediss://` URL that parsed because another crate of the build turned on redis-rs's TLS
    /// (otherwise such a URL is an [`InvalidUrl`](ConfigError::InvalidUrl)).
    #[error("node {index} asks for TLS, which needs the `tls` feature")]
    TlsDisabled {
        /// Position of the node in the list.
        index: usize,
    },
    /// The quorum is not a majority of the nodes, or larger than the number of nodes.
    #[error("quorum {quorum} must be a majority of {nodes} nodes (at least {} and at most {nodes})", nodes / 2 + 1)]
    InvalidQuorum {
        /// The quorum asked for.
        quorum: usize,
        /// The number of nodes.
        nodes: usize,
    },
    /// The TTL is zero, below Redis' 1 ms resolution, or too large for Redis to store.
    #[error("ttl {0:?} must be between 1 ms and {max:?}", max = crate::rules::validity::MAX_TTL)]
    InvalidTtl(Duration),
    /// The drift factor is negative, NaN, infinite, or so large that no lock could be valid.
    #[error("drift factor {0} must be a finite number in [0, 1)")]
    InvalidDriftFactor(f64),
    /// A timeout of zero would fail every command.
    #[error("{name} must be greater than zero")]
    ZeroTimeout {
        /// Which timeout.
        name: &'static str,
    },
    /// A keep-alive's `max_hold` of zero: the lock would be lost the moment it is kept.
    #[error("max_hold must be greater than zero")]
    ZeroMaxHold,
    /// A retry policy with no attempt at all.
    #[error("attempts must be at least 1 (1 means try once)")]
    ZeroAttempts,
    /// An empty resource name.
    #[error("the resource name is empty")]
    EmptyResource,
    /// On a lock with a Redis Cluster node, a resource name starting with `}`: its key's hash
    /// tag (`{name}`) would be empty, so Redis would hash the whole key, and its lock key and
    /// fence counter would fall in different slots.
    #[error("resource {:?} starts with '}}': on a cluster node its key would have no hash tag", String::from_utf8_lossy(.resource))]
    NoHashTag {
        /// The name.
        resource: Vec<u8>,
    },
    /// On a lock with a Redis Cluster node, a key prefix holding `{`: it would open every
    /// key's hash tag inside the prefix instead of around the resource's name.
    #[error(
        "{which} {prefix:?} holds '{{': on a cluster node the resource's name must be each key's hash tag"
    )]
    BraceInPrefix {
        /// `key_prefix` or `fence_prefix`.
        which: &'static str,
        /// The prefix, lossily as text.
        prefix: String,
    },
    /// On a lock with a Redis Cluster node, a set whose resources fall in different hash
    /// slots: a node takes a set in one atomic script, which a cluster runs only on keys of one
    /// slot. Names that start with the same `{tag}` share a slot.
    #[error("resources {:?} and {:?} hash to different slots; on a cluster node a set's names must share a slot (start them with the same {{tag}})", String::from_utf8_lossy(.first), String::from_utf8_lossy(.other))]
    CrossSlotSet {
        /// The set's first resource.
        first: Vec<u8>,
        /// One in another slot.
        other: Vec<u8>,
    },
    /// A set of resources with none in it.
    #[error("the set of resources is empty")]
    EmptySet,
    /// A resource given twice in one set: a set holds each resource once.
    #[error("resource {:?} is in the set twice", String::from_utf8_lossy(.resource))]
    DuplicateResource {
        /// The resource given twice.
        resource: Vec<u8>,
    },
    /// More resources in one set than [`MAX_RESOURCES`](crate::MAX_RESOURCES), so that taking
    /// a set never keeps a node busy for long.
    #[error("{count} resources in one set; at most {max} fit")]
    TooManyResources {
        /// How many were given.
        count: usize,
        /// The most one set may hold.
        max: usize,
    },
    /// A semaphore of zero permits ([`Request::permits`](crate::Request::permits)): nobody could
    /// ever hold it.
    #[error("a semaphore needs at least 1 permit")]
    ZeroPermits,
    /// More permits than [`MAX_PERMITS`](crate::MAX_PERMITS): an acquisition of a full
    /// semaphore tries every slot, one quorum round each.
    #[error("{permits} permits; at most {max} fit")]
    TooManyPermits {
        /// How many were asked for.
        permits: u32,
        /// The most a semaphore may have.
        max: u32,
    },
    /// Permits of a set of resources: a semaphore is named by one resource.
    #[error("permits are of one resource, not of a set")]
    PermitsOfSet,
    /// [`Request::take`](crate::Request::take) of what one acquisition cannot take at once.
    #[error("cannot take {take} permits at once: {reason}")]
    InvalidTake {
        /// How many permits were asked for.
        take: u32,
        /// Why not: none, more than the semaphore's permits, more than a set holds
        /// ([`MAX_RESOURCES`](crate::MAX_RESOURCES)), no semaphore named, an owner (taking
        /// several permits is not reentrant), or a cluster member (each slot is in a hash slot
        /// of its own, and a node takes a set in one).
        reason: &'static str,
    },
    /// A side of a read-write lock ([`Request::read`](crate::Request::read),
    /// [`Request::write`](crate::Request::write)) asked with what it cannot take: a set of
    /// resources, permits, or an owner (a read-write lock is not reentrant).
    #[error("a read-write lock is one resource, without permits or an owner; asked with {with}")]
    SideWith {
        /// `"a set"`, `"permits"` or `"an owner"`.
        with: &'static str,
    },
    /// [`Guard::downgrade`](crate::Guard::downgrade) of a guard that is not a write guard. A
    /// read guard is never upgraded: release it and acquire the write side.
    #[error("only a write guard downgrades")]
    NotAWriteGuard,
    /// Two node URLs point at the same server: the same host (ASCII case ignored) and port, or
    /// the same Unix socket, whatever the database number, credentials or scheme. One server
    /// must never count as two votes.
    #[error("nodes {first} and {second} are the same server ({addr}): one server, one vote")]
    DuplicateNode {
        /// Position of the first URL naming it.
        first: usize,
        /// Position of the second.
        second: usize,
        /// `host:port` (host in lower case), without credentials.
        addr: String,
    },
    /// A keep-alive interval of zero, or not below the TTL.
    #[error(
        "keep-alive interval {every:?} must be greater than zero and less than the ttl {ttl:?}"
    )]
    InvalidKeepAlive {
        /// The interval asked for (or the default).
        every: Duration,
        /// The lock's TTL.
        ttl: Duration,
    },
    /// With fencing on, the lock keys' prefix and the fence counters' prefix overlap (one
    /// starts with the other), so a lock key could be a counter key.
    #[error(
        "key_prefix {key_prefix:?} and fence_prefix {fence_prefix:?} overlap: neither may start with the other"
    )]
    OverlappingPrefixes {
        /// The lock keys' prefix (invalid UTF-8 replaced).
        key_prefix: String,
        /// The fence counters' prefix (invalid UTF-8 replaced).
        fence_prefix: String,
    },
    /// `max_ttl` is below the lock's TTL or above [`MAX_TTL`](crate::MAX_TTL).
    #[error("max_ttl {max_ttl:?} must be at least the ttl {ttl:?} and at most {max:?}", max = crate::rules::validity::MAX_TTL)]
    InvalidMaxTtl {
        /// The `max_ttl` asked for.
        max_ttl: Duration,
        /// The lock's TTL.
        ttl: Duration,
    },
    /// An [`ElectionOptions`](crate::ElectionOptions) whose settings are out of order: each
    /// of the retry period, the renew deadline and the lease duration must be greater than
    /// zero and shorter than the next.
    #[error(
        "invalid election timing (lease_duration {lease_duration:?}, renew_deadline {renew_deadline:?}, retry_period {retry_period:?}): {reason}"
    )]
    InvalidElection {
        /// The lease duration asked for.
        lease_duration: Duration,
        /// The renew deadline asked for.
        renew_deadline: Duration,
        /// The retry period asked for.
        retry_period: Duration,
        /// Which rule it breaks.
        reason: &'static str,
    },
    /// An [`Election`](crate::Election) over a lock without fencing
    /// ([`LockOptions::fencing`](crate::LockOptions::fencing)): its terms are the fences.
    #[error("an election needs a lock with fencing on: its terms are the quorum's fences")]
    ElectionWithoutFencing,
    /// An extension or one acquisition asked for a TTL above `max_ttl`, which the restart guard
    /// would not cover: a node restarted without its data could vote again before such a key
    /// would have expired.
    #[error(
        "a ttl of {ttl:?} exceeds max_ttl {max_ttl:?}, the longest TTL the restart guard covers"
    )]
    TtlAboveMaxTtl {
        /// The TTL asked for.
        ttl: Duration,
        /// The lock's `max_ttl`.
        max_ttl: Duration,
    },
}

/// Formats outcomes as "3 ours, 1 not ours, 1 failed: node 4 (…): timed out after 50ms".
struct Summary<'a>(&'a [NodeOutcome]);

/// A resource name for a message: its bytes as UTF-8, invalid sequences replaced.
struct Resource<'a>(&'a [u8]);

impl fmt::Display for Resource<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", String::from_utf8_lossy(self.0))
    }
}

/// ", and N nodes unreachable" when N > 0.
struct Unreachable(usize);

impl fmt::Display for Unreachable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            0 => Ok(()),
            1 => f.write_str(", and 1 node unreachable"),
            n => write!(f, ", and {n} nodes unreachable"),
        }
    }
}

impl fmt::Display for Summary<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let count = |pred: fn(&NodeReply) -> bool| self.0.iter().filter(|o| pred(&o.reply)).count();
        let ours = count(|r| matches!(r, NodeReply::Ours));
        let not_ours = count(|r| matches!(r, NodeReply::NotOurs));
        let no_reply = count(|r| matches!(r, NodeReply::NoReply));
        write!(
            f,
            "{} nodes: {ours} ours, {not_ours} not ours, {no_reply} no reply",
            self.0.len()
        )?;
        let mut failures = self
            .0
            .iter()
            .filter(|o| matches!(o.reply, NodeReply::Failed(_)))
            .peekable();
        if failures.peek().is_some() {
            f.write_str("; failed:")?;
            for outcome in failures {
                write!(f, " [{outcome}]")?;
            }
        }
        Ok(())
    }
}

/// Why a kept lock was lost: it can no longer be proven held.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum Lost {
    /// An extension found our key gone on so many nodes that no quorum can hold it: it expired
    /// or was deleted there, and someone else may hold the lock now.
    #[error(
        "our key is gone on too many nodes for a quorum ({} answered not ours)",
        not_ours(outcomes)
    )]
    #[non_exhaustive]
    Taken {
        /// What each node said to that extension.
        outcomes: Vec<NodeOutcome>,
    },
    /// No extension succeeded before the validity ran out (nodes failing or unreachable).
    #[error("no extension succeeded before the validity ran out{}", LastError(last_error.as_deref()))]
    #[non_exhaustive]
    Expired {
        /// The last extension's error, if one was tried.
        last_error: Option<Box<Error>>,
    },
    /// The hold reached [`KeepAlive::max_hold`](crate::KeepAlive::max_hold).
    #[error("held for max_hold ({max_hold:?})")]
    #[non_exhaustive]
    MaxHold {
        /// The bound.
        max_hold: Duration,
    },
    /// There was no tokio runtime to run the keep-alive on (the guard was moved out of every
    /// runtime), so the lock was never kept alive.
    #[error("no tokio runtime to keep the lock alive on")]
    NoRuntime,
}

impl Lost {
    /// The per-node outcomes behind the loss (empty when there are none).
    pub fn outcomes(&self) -> &[NodeOutcome] {
        match self {
            Lost::Taken { outcomes } => outcomes,
            Lost::Expired {
                last_error: Some(error),
            } => error.outcomes(),
            _ => &[],
        }
    }
}

/// `": <error>"` when there is one.
struct LastError<'a>(Option<&'a Error>);

impl fmt::Display for LastError<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            Some(error) => write!(f, ": {error}"),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::outcome::NodeError;

    /// `Unavailable` over five nodes (quorum three) with these replies.
    fn unavailable(replies: Vec<NodeReply>) -> Error {
        let outcomes = replies
            .into_iter()
            .enumerate()
            .map(|(node, reply)| NodeOutcome {
                node,
                addr: "127.0.0.1:1".into(),
                reply,
            })
            .collect();
        Error::Unavailable {
            quorum: 3,
            outcomes,
        }
    }

    #[test]
    fn an_error_is_permanent_when_the_nodes_failing_for_good_leave_no_quorum() {
        let durable = || NodeReply::Failed(NodeError::NotDurable);
        let auth = || NodeReply::Failed(NodeError::Auth("WRONGPASS".into()));
        let timeout = || NodeReply::Failed(NodeError::Timeout(Duration::from_millis(50)));
        // Three of five for good: two cannot make a quorum of three.
        let three = vec![
            durable(),
            auth(),
            durable(),
            NodeReply::NoReply,
            NodeReply::Ours,
        ];
        assert!(unavailable(three).is_permanent());
        // Two for good, one timed out: the three others may yet make one.
        let two = vec![
            durable(),
            auth(),
            timeout(),
            NodeReply::NoReply,
            NodeReply::Ours,
        ];
        assert!(!unavailable(two).is_permanent());
        let passing = vec![timeout(), timeout(), timeout(), timeout(), timeout()];
        assert!(!unavailable(passing).is_permanent());
        let held = Error::Held {
            resource: b"r".to_vec(),
            unreachable: 0,
            outcomes: Vec::new(),
        };
        assert!(!held.is_permanent());
        assert!(Error::Config(ConfigError::NoNodes).is_permanent());
    }
}
