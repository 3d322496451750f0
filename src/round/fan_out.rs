//! Sends one command to every node at once and tallies the replies as they arrive, all inside
//! the caller's future (no task per node), stopping as soon as the quorum rule has decided.
//!
//! Requests still in flight when the round is decided are handed back as [`Round::unanswered`]:
//! a won acquisition lets them finish in the background, so the key reaches every node that can
//! take it, not just the first quorum. A lost round drops them (a request dropped before its
//! connection's driver took it from the queue is never written; one already taken still runs),
//! and the release that follows goes to every node a request went out to, each after that
//! node's request has finished (the ordering rule, `rules/ordering.rs`).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Instant;

use futures::future::{BoxFuture, Either};
use futures::stream::FuturesUnordered;
use futures::{FutureExt, StreamExt};
use tracing::Instrument;

use crate::node::Node;
use crate::outcome::{NodeOutcome, NodeReply};
use crate::rules::quorum::{Tally, Verdict, Vote};

/// When a round stops listening.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Until {
    /// As soon as the verdict is known (acquire, extend).
    Decided,
    /// As soon as a quorum of nodes is known to be free of our key (release): from then on no
    /// one is kept from the lock. Otherwise, when every node has answered or timed out.
    Freed,
}

/// What a round found.
pub(crate) struct Round {
    /// The verdict, or `None` when the cancel signal fired first.
    pub(crate) verdict: Option<Verdict>,
    /// One outcome per node, in node order.
    pub(crate) outcomes: Vec<NodeOutcome>,
    /// The requests still in flight when the round was decided, if any; they complete only if
    /// this future is driven.
    pub(crate) unanswered: Option<BoxFuture<'static, ()>>,
}

impl Round {
    /// How many nodes answered that they hold (or held) the key for us.
    pub(crate) fn ours(&self) -> usize {
        self.outcomes
            .iter()
            .filter(|outcome| outcome.reply == NodeReply::Ours)
            .count()
    }
}

/// Runs `op` on every node concurrently and tallies the answers against `quorum`; `request`
/// names what `op` sends, in each node's span.
pub(crate) async fn fan_out<Op, Fut, Cancel>(
    nodes: &[Arc<Node>],
    quorum: usize,
    until: Until,
    mut cancel: Pin<&mut Cancel>,
    request: &'static str,
    op: Op,
) -> Round
where
    Op: Fn(Arc<Node>) -> Fut,
    Fut: Future<Output = NodeReply> + Send + 'static,
    Cancel: Future<Output = ()> + ?Sized,
{
    let mut outcomes: Vec<NodeOutcome> = nodes
        .iter()
        .map(|node| NodeOutcome {
            node: node.index(),
            addr: Arc::clone(node.addr()),
            reply: NodeReply::NoReply,
        })
        .collect();
    let mut tally = Tally::new(nodes.len(), quorum);
    let mut record = |index: usize, reply: NodeReply| {
        let verdict = tally.record(vote(&reply, until));
        if let Some(outcome) = outcomes.get_mut(index) {
            outcome.reply = reply;
        }
        verdict
    };
    if let [node] = nodes {
        // One node: its reply decides, and nothing is left unanswered, so the request needs no
        // set of futures around it.
        let reply = traced(node, request, op(Arc::clone(node)));
        let verdict = tokio::select! {
            biased;
            () = cancel.as_mut() => None,
            reply = reply => Some(record(node.index(), reply)),
        };
        return Round {
            verdict,
            outcomes,
            unanswered: None,
        };
    }
    let mut in_flight: FuturesUnordered<_> = nodes
        .iter()
        .map(|node| {
            let index = node.index();
            // `map`, not an `async` block, which would hold the request's future twice.
            traced(node, request, op(Arc::clone(node))).map(move |reply| (index, reply))
        })
        .collect();
    let verdict = loop {
        let (index, reply) = tokio::select! {
            biased;
            () = cancel.as_mut() => break None,
            next = in_flight.next() => match next {
                Some(answer) => answer,
                None => break Some(tally.verdict()),
            },
        };
        let verdict = record(index, reply);
        let stop = match until {
            Until::Decided => verdict != Verdict::Pending,
            Until::Freed => verdict == Verdict::Won,
        };
        if stop {
            break Some(verdict);
        }
    };
    let unanswered = (verdict.is_some() && !in_flight.is_empty())
        .then(|| in_flight.for_each(|_| async {}).boxed());
    Round {
        verdict,
        outcomes,
        unanswered,
    }
}

/// One node's request (`request` names it: `acquire`, `extend`, `release`, `write_back`)
/// inside a `quorumlock.node` span, a child of the operation's span: which node, what it replied
/// and how long it took, named the OpenTelemetry way. Without a subscriber that wants it the span
/// is disabled, and nothing is timed or formatted.
fn traced<Fut>(
    node: &Node,
    request: &'static str,
    future: Fut,
) -> impl Future<Output = NodeReply> + use<Fut>
where
    Fut: Future<Output = NodeReply>,
{
    let span = tracing::debug_span!(
        "quorumlock.node",
        otel.name = "quorumlock node",
        otel.kind = "client",
        request,
        node = node.index(),
        addr = %node.addr(),
        reply = tracing::field::Empty,
        latency_us = tracing::field::Empty,
    );
    if span.is_disabled() {
        // Nothing wraps the request: a disabled span would still be entered at every poll.
        return Either::Left(future);
    }
    let started = Instant::now();
    let record = span.clone();
    // Boxed: unboxed, the span, its clone and the clock reading would widen every node's
    // request future, also where nobody listens.
    Either::Right(Box::pin(future.instrument(span).map(move |reply| {
        let latency_us = u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX);
        record.record("latency_us", latency_us);
        record.record("reply", tracing::field::display(&reply));
        reply
    })))
}

/// What one node's reply counts as: for a release, `Ours` means "answered, and free of our key".
fn vote(reply: &NodeReply, until: Until) -> Vote {
    match (reply, until) {
        (NodeReply::Ours, _) => Vote::Ours,
        // Released, or never ours: the node is free of our key.
        (NodeReply::NotOurs, Until::Freed) => Vote::Ours,
        (NodeReply::NotOurs | NodeReply::NotSent, Until::Decided) => Vote::NotOurs,
        // Free of our key too, but sent nothing: it counts neither way, so the release still
        // returns once a quorum of the nodes it went to has answered (as it did when it dialed
        // them), and a report still shows every holder that answered by then.
        (NodeReply::NotSent, Until::Freed) => Vote::Failed,
        // Failed, or a request of ours may still set the key there: not known to be free.
        (NodeReply::Failed(_) | NodeReply::InDoubt | NodeReply::NoReply, _) => Vote::Failed,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::outcome::NodeError;

    #[test]
    fn a_release_counts_a_node_free_only_when_it_answered_and_nothing_of_ours_can_land_there() {
        for reply in [NodeReply::Ours, NodeReply::NotOurs] {
            assert_eq!(vote(&reply, Until::Freed), Vote::Ours, "{reply}");
        }
        for reply in [
            NodeReply::NotSent,
            NodeReply::InDoubt,
            NodeReply::NoReply,
            NodeReply::Failed(NodeError::Loading),
        ] {
            assert_eq!(vote(&reply, Until::Freed), Vote::Failed, "{reply}");
        }
        assert_eq!(vote(&NodeReply::Ours, Until::Decided), Vote::Ours);
        assert_eq!(vote(&NodeReply::NotOurs, Until::Decided), Vote::NotOurs);
    }
}
