//! What can happen in one step ([`Action`]), by a client or the environment, and what a step
//! reports having happened, for the trace printer.

use crate::ids::{ClientId, Fence, NodeId, NodeSet, Tick, Token};
use crate::node::{AcquireReply, Node, Restart, WriteBackReply};
use crate::state::Grant;

/// One step of a client or of the environment.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Action {
    /// Time advances one tick.
    Tick,
    /// A node crashes and restarts.
    Restart {
        /// Which node.
        node: NodeId,
        /// What it keeps.
        restart: Restart,
    },
    /// Counter recovery (only with [`Config::counter_recovery`](crate::config::Config::counter_recovery), in the library within the acquisition instead, `docs/fencing.md`): a node that
    /// lost its data takes the largest counter of the other nodes.
    RecoverCounter {
        /// Which node.
        node: NodeId,
    },
    /// The acquire script runs on one node (step 2); from an idle client, the first request of
    /// a new acquisition, which records T0 (step 1) as it is sent.
    Acquire {
        /// Which client.
        client: ClientId,
        /// Which node.
        node: NodeId,
    },
    /// The write-back script runs on one node (step 4).
    WriteBack {
        /// Which client.
        client: ClientId,
        /// Which node.
        node: NodeId,
    },
    /// A client stops waiting for replies (a timeout) and releases where it may hold keys.
    GiveUp {
        /// Which client.
        client: ClientId,
    },
    /// A holder writes to the fenced store, in time or late (step 6).
    Write {
        /// Which client.
        client: ClientId,
    },
    /// The release script runs on one node (step 7, or a failed acquisition's cleanup); from a
    /// holder, the first request of its release, which ends the hold as it is sent.
    ReleaseAt {
        /// Which client.
        client: ClientId,
        /// Which node.
        node: NodeId,
    },
}

/// What a step did, for the trace printer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Event {
    TimeAdvanced {
        now: Tick,
    },
    KeyExpired {
        node: NodeId,
        token: Token,
    },
    GuardLifted {
        node: NodeId,
    },
    Restarted {
        node: NodeId,
        restart: Restart,
        lost: Node,
        recovering_until: Option<Tick>,
    },
    CounterRecovered {
        node: NodeId,
        before: Fence,
        after: Fence,
    },
    Began {
        token: Token,
        t0: Tick,
    },
    Recovering {
        token: Token,
        node: NodeId,
    },
    Acquired {
        token: Token,
        node: NodeId,
        reply: AcquireReply,
        expires_at: Tick,
    },
    QuorumWon {
        token: Token,
        ours: NodeSet,
        fence: Fence,
        /// Whether every grant took `fence`, so that no write-back follows.
        agreed: bool,
    },
    QuorumLost {
        token: Token,
    },
    WroteBack {
        token: Token,
        node: NodeId,
        reply: WriteBackReply,
    },
    Granted {
        grant: Grant,
    },
    GrantTooLate {
        token: Token,
        valid_until: Tick,
    },
    WriteBackLost {
        token: Token,
    },
    GaveUp {
        token: Token,
    },
    Wrote {
        token: Token,
        fence: Fence,
        stale: bool,
        accepted: bool,
        last_before: Option<Fence>,
    },
    ReleaseStarted {
        token: Token,
    },
    Released {
        token: Token,
        node: NodeId,
        deleted: bool,
    },
    Finished {
        token: Token,
    },
}

/// Where a step's events go: nowhere while checking, into a list while printing a trace.
pub(crate) struct Log<'a>(pub(crate) Option<&'a mut Vec<Event>>);

impl Log<'_> {
    pub(crate) fn note(&mut self, event: Event) {
        if let Some(events) = self.0.as_mut() {
            events.push(event);
        }
    }
}
