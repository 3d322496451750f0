//! Releases: the compare-and-delete on one node, sent only after every request of the
//! acquisition that could set the key there has finished (the ordering rule,
//! `rules/ordering.rs`), and the release round over every node, which returns once a quorum is
//! free of our key. Both an acquisition cleaning up after itself and a guard use it.

use std::future::pending;
use std::pin::pin;
use std::sync::Arc;
use std::task::Poll;
use std::time::{Duration, Instant};

use tokio::runtime::Handle;

use super::fan_out::{Round, Until, fan_out};
use super::ledger::Ledger;
use super::node_set::NodeSet;
use super::set_answers::SetAnswers;
use crate::node::Node;
use crate::node::release::{Found, ReleaseCommand};
use crate::node::wire::answered;
use crate::outcome::{NodeReply, SetOutcome};
use crate::rules::hand_off::{Hand, yield_pause};
use crate::rules::ordering::{End, Plan};
use crate::rules::resources::{Keys, holds_all};
use crate::rules::token::Token;

/// What a release round found: the round, and for a set what each node that answered held of
/// it.
pub(crate) struct Released {
    pub(crate) round: Round,
    /// For a set, one entry per node that answered, in node order; empty for one key.
    pub(crate) sets: Vec<SetOutcome>,
}

/// Compare-and-delete on every node a request of ours went out to, never retrying, each after
/// the request of ours still in flight there has finished (see [`release`]). Returns
/// as soon as a quorum of nodes is known to be free of our keys (from then on the lock is free
/// for others); the requests to the other nodes finish as counted background work. Without such
/// a quorum, waits for every node (each within its timeouts). `held`: the lock was held (a
/// guard's release, not a failed acquisition's cleanup), so its waiters everywhere are woken:
/// through the nodes (the release publishes) and this lock's own at once.
///
/// This lock's next holder is woken as soon as the release has been handed to the nodes'
/// connections (the round's first poll), not once it is decided: its `SET NX` then goes out on
/// the same connections, behind the release, and each node runs the two in that order. So the
/// lock passes from one holder to the next in one round trip instead of two. Nothing is taken
/// on trust: the waiter still wins only by the quorum rule, and where its request overtook a
/// release (a node whose release waited for an earlier request of ours, or a new connection),
/// that node refuses it, and the published releases wake it again.
pub(crate) async fn release_all(
    node_set: &NodeSet,
    keys: &Keys,
    token: &Token,
    ledger: &Arc<Ledger>,
    held: bool,
) -> Released {
    let never = pin!(pending::<()>());
    let wait = node_set.request_bound();
    // Built once and shared: every node gets the same bytes.
    // Asked before the command is built: its message says whether the key stays here.
    let hand = match keys {
        Keys::One(key) if held => node_set.wait_list.hand(key, token.release_mark()),
        _ => Hand::Share,
    };
    let command = Arc::new(ReleaseCommand::new(
        keys,
        token.as_str(),
        held.then_some(hand),
    ));
    let sets = SetAnswers::for_keys(keys);
    let _yielded = match (hand, keys) {
        (Hand::Yield, Keys::One(key)) => Some(WakeAfterYield {
            node_set,
            key,
            started: Instant::now(),
        }),
        _ => None,
    };
    let mut round = {
        let mut round = pin!(fan_out(
            &node_set.nodes,
            node_set.settings.quorum,
            Until::Freed,
            never,
            "release",
            |node| {
                let (command, ledger, sets) =
                    (Arc::clone(&command), Arc::clone(ledger), sets.clone());
                async move {
                    let (reply, found) = release(&node, &command, &ledger, wait).await;
                    if let (Some(sets), Some(held)) = (sets, found) {
                        sets.record(node.index(), held);
                    }
                    reply
                }
            },
        ));
        // The first poll hands each node's release to its connection; the next holder's request
        // follows it there.
        let first = futures::poll!(round.as_mut());
        // Left to every process (`Hand::Yield`): this lock's waiter is woken later, by
        // `WakeAfterYield`.
        if held && hand != Hand::Yield {
            for key in keys.woken() {
                node_set.wait_list.wake(key, token.release_mark());
            }
        }
        match first {
            Poll::Ready(round) => round,
            Poll::Pending => round.await,
        }
    };
    if let Some(unanswered) = round.unanswered.take() {
        node_set.background.finish_unanswered(unanswered);
    }
    let sets = sets
        .map(|sets| sets.answered_in(&round))
        .unwrap_or_default();
    Released { round, sets }
}

/// This lock's waiter's wake-up after its release was left to every process (`Hand::Yield`): as
/// long after the round as the round took ([`yield_pause`]). Made on drop, so that a release
/// cancelled mid-round wakes it too, and it does not sleep on to the key's old expiry.
struct WakeAfterYield<'a> {
    node_set: &'a NodeSet,
    key: &'a Arc<[u8]>,
    started: Instant,
}

impl Drop for WakeAfterYield<'_> {
    fn drop(&mut self) {
        let (wait_list, key) = (Arc::clone(&self.node_set.wait_list), Arc::clone(self.key));
        let pause = yield_pause(self.started.elapsed());
        self.node_set.background.spawn(None, async move {
            tokio::time::sleep(pause).await;
            wait_list.wake_after_yield(&key);
        });
    }
}

/// Starts [`release_all`] as a counted background task. Used from `Drop`, which cannot wait.
pub(crate) fn release_in_background(
    node_set: &Arc<NodeSet>,
    keys: Keys,
    token: Token,
    ledger: Arc<Ledger>,
    fallback: Option<&Handle>,
    held: bool,
) {
    let task_node_set = Arc::clone(node_set);
    let spawned = node_set.background.spawn(fallback, async move {
        let released = release_all(&task_node_set, &keys, &token, &ledger, held).await;
        tracing::debug!(
            released = released.round.ours(),
            "background release finished"
        );
    });
    if !spawned {
        tracing::warn!("no tokio runtime to release a lock on; it will expire after its TTL");
    }
}

/// Deletes the keys that still hold the token (`command`), by the ledger's plan for the node:
/// nothing is sent where no request that could set a key went out ([`NodeReply::NotSent`]); a
/// request still in flight is waited for first, at most `wait`; the answer counts as free
/// ([`NodeReply::Ours`]: every key was ours, [`NodeReply::NotOurs`]) only if it clears the node,
/// else [`NodeReply::InDoubt`]. For a set, also what each key held, once the node answered.
pub(crate) async fn release(
    node: &Node,
    command: &ReleaseCommand,
    ledger: &Ledger,
    wait: Duration,
) -> (NodeReply, Option<Vec<bool>>) {
    let index = node.index();
    if ledger.plan(index) == Plan::Wait {
        ledger.wait_quiet(Some(index), wait).await;
    }
    if ledger.plan(index) == Plan::Skip {
        return (NodeReply::NotSent, None);
    }
    let mut sent_on = None;
    let result = node
        .run(&command.slot_key, |mut connection, generation| {
            sent_on = Some(generation);
            async move {
                let (in_flight, after_all) = ledger.hand_release(index, generation);
                let reply = command.send(&mut connection).await;
                in_flight.finish(End::replied(answered(&reply)));
                Ok((reply?, after_all))
            }
        })
        .await
        .and_then(|(reply, after_all)| Ok((command.read(reply)?, after_all)));
    let (found, after_all) = match result {
        Ok(answer) => answer,
        Err(error) => return (NodeReply::Failed(error), None),
    };
    let (held, per_key) = match found {
        Found::One(held) => (held, None),
        Found::Set(per_key) => (holds_all(&per_key), Some(per_key)),
    };
    let reply = match sent_on {
        Some(generation) if after_all && ledger.cleared_by(index, generation) => {
            if held {
                NodeReply::Ours
            } else {
                NodeReply::NotOurs
            }
        }
        _ => NodeReply::InDoubt,
    };
    (reply, per_key)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::outcome::NodeError;
    use crate::round::acquire::tests::{node, one_node, take};
    use redis::AsyncCommands;

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
        let (reply, _) = release(
            &node,
            &ReleaseCommand::new(&Keys::One(Arc::from(&b"k"[..])), "t", Some(Hand::Share)),
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
        drop(ledger.hand_acquire(attempt, 0, 0, "another").unwrap());
        ledger.decide();
        let (reply, _) = release(
            &node,
            &ReleaseCommand::new(&Keys::One(Arc::from(&b"k"[..])), "t", Some(Hand::Share)),
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
        let (reply, _) = release(
            &node,
            &ReleaseCommand::new(&Keys::One(Arc::from(&b"k"[..])), "t", Some(Hand::Share)),
            &ledger,
            Duration::from_secs(1),
        )
        .await;
        assert_eq!(reply, NodeReply::Ours);
    }
}
