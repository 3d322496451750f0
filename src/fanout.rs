//! Sends one command to every node at once and tallies the replies as they arrive, all inside
//! the caller's future (no task per node), stopping as soon as the quorum rule has decided.
//!
//! Requests still in flight when the round stops are dropped: on a multiplexed connection one not
//! yet written is never sent, one already written runs and its reply is discarded. That is why a
//! failed acquisition releases on every node, including those that never answered.

use std::future::Future;
use std::pin::Pin;

use futures::StreamExt;
use futures::stream::FuturesUnordered;

use crate::error::{NodeError, NodeOutcome, NodeReply};
use crate::node::Node;
use crate::quorum::{Tally, Verdict, Vote};

/// When a round stops listening.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Until {
    /// As soon as the verdict is known (acquire, extend).
    Decided,
    /// When every node has answered or timed out (release).
    AllAnswered,
}

/// What a round found.
#[derive(Debug)]
pub(crate) struct Round {
    /// The verdict, or `None` when the cancel signal fired first.
    pub(crate) verdict: Option<Verdict>,
    /// One outcome per node, in node order.
    pub(crate) outcomes: Vec<NodeOutcome>,
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

/// Runs `op` on every node concurrently and tallies the answers against `quorum`.
pub(crate) async fn fan_out<'n, Op, Fut, Cancel>(
    nodes: &'n [Node],
    quorum: usize,
    until: Until,
    mut cancel: Pin<&mut Cancel>,
    op: Op,
) -> Round
where
    Op: Fn(&'n Node) -> Fut,
    Fut: Future<Output = Result<bool, NodeError>> + 'n,
    Cancel: Future<Output = ()> + ?Sized,
{
    let mut replies = vec![NodeReply::NoReply; nodes.len()];
    let mut tally = Tally::new(nodes.len(), quorum);
    let mut in_flight: FuturesUnordered<_> = nodes
        .iter()
        .map(|node| {
            let reply = op(node);
            async move { (node.index(), reply.await) }
        })
        .collect();
    let verdict = loop {
        let (index, result) = tokio::select! {
            biased;
            () = cancel.as_mut() => break None,
            next = in_flight.next() => match next {
                Some(answer) => answer,
                None => break Some(tally.verdict()),
            },
        };
        let (vote, reply) = match result {
            Ok(true) => (Vote::Ours, NodeReply::Ours),
            Ok(false) => (Vote::NotOurs, NodeReply::NotOurs),
            Err(error) => (Vote::Failed, NodeReply::Failed(error)),
        };
        let verdict = tally.record(vote);
        if let Some(slot) = replies.get_mut(index) {
            *slot = reply;
        }
        if until == Until::Decided && verdict != Verdict::Pending {
            break Some(verdict);
        }
    };
    let outcomes = nodes
        .iter()
        .zip(replies)
        .map(|(node, reply)| NodeOutcome {
            node: node.index(),
            addr: node.addr().to_owned(),
            reply,
        })
        .collect();
    Round { verdict, outcomes }
}
