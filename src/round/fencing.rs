//! Fencing (`LockOptions::fencing`) over all nodes: the fence of a won round, its write-back to
//! a quorum, and the deletion of a retired resource's counter everywhere. The commands on one
//! node are in `node/` (`acquire.rs` takes the next fence, `write_back.rs`, `delete_counter.rs`).
//!
//! Why the write-back: the fence of a grant is the highest counter among the nodes that granted
//! it. Written back to a quorum while our key still holds there, it is on at least one node of
//! every later winning quorum before that node can grant again, so every later fence is larger.
//! The argument in full is in `docs/fencing.md`.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use super::fan_out::{Until, fan_out};
use super::node_set::NodeSet;
use crate::error::{ConfigError, Error};
use crate::node::counter::{Reading, read_counters};
use crate::node::delete_counter::delete_counter;
use crate::node::set::write_back_set;
use crate::node::write_back::write_back;
use crate::outcome::{NodeOutcome, NodeReply};
use crate::rules::clock::Moment;
use crate::rules::leader::Publication;
use crate::rules::quorum::Verdict;
use crate::rules::resources::Keys;
use crate::rules::token::Token;

/// The fence's write-back over every node: raises the counter to `fence` wherever our key still
/// holds (for a set, every counter of it wherever every key still holds; for an election's
/// candidate, also writes its record with `fence` as the term), and returns when a quorum has
/// confirmed (with the moment it did), else fails with
/// [`Error::FenceUnconfirmed`] (or [`Error::Cancelled`]). The write-backs to slower nodes finish
/// in the background.
pub(crate) async fn write_back_all<C>(
    node_set: &NodeSet,
    keys: &Keys,
    fence_keys: &Keys,
    token: &Token,
    fence: u64,
    record: Option<&Publication>,
    cancel: Pin<&mut C>,
) -> Result<(Moment, Vec<NodeOutcome>), Error>
where
    C: Future<Output = ()> + ?Sized,
{
    let volatile = node_set.settings.volatile_counters();
    let round = fan_out(
        &node_set.nodes,
        node_set.settings.quorum,
        Until::Decided,
        cancel,
        "write_back",
        |node| {
            let (keys, fence_keys, token) = (keys.clone(), fence_keys.clone(), token.clone());
            let record = record.cloned();
            async move {
                let (keys, fence_keys, token) = (keys.all(), fence_keys.all(), token.as_str());
                let record = record.as_ref();
                NodeReply::from_flag(match (keys, fence_keys) {
                    ([key], [fence_key]) => {
                        write_back(&node, (key, fence_key), token, fence, volatile, record).await
                    }
                    _ => write_back_set(&node, keys, fence_keys, token, fence, volatile).await,
                })
            }
        },
    )
    .await;
    let decided = Moment::now();
    if let Some(unanswered) = round.unanswered {
        node_set.background.finish_unanswered(unanswered);
    }
    match round.verdict {
        Some(Verdict::Won) => Ok((decided, round.outcomes)),
        Some(_) => Err(Error::FenceUnconfirmed {
            fence,
            quorum: node_set.settings.quorum,
            outcomes: round.outcomes,
        }),
        None => Err(Error::Cancelled {
            outcomes: round.outcomes,
        }),
    }
}

/// The fence of a won round: the highest counter among the nodes that granted it (each of them
/// took its next value in the same step as its grant); `None` when a node granted it with a
/// counter it could not trust (a volatile node's, `node/counter.rs`, which answers 0): the fence
/// must then be recovered ([`recover_fence`]).
pub(crate) fn highest_fence(fences: &[AtomicU64], outcomes: &[NodeOutcome]) -> Option<u64> {
    let mut highest = 0;
    for outcome in outcomes
        .iter()
        .filter(|outcome| outcome.reply == NodeReply::Ours)
    {
        let fence = fences.get(outcome.node)?.load(Ordering::Relaxed);
        if fence == 0 {
            return None;
        }
        highest = highest.max(fence);
    }
    Some(highest)
}

/// Whether every node that granted the round took `fence` itself: the counter is then `fence`
/// on a quorum holding our key already, which is all the write-back would make it, so the
/// write-back is not needed (and an election's records, written with each grant, agree on
/// the term). The usual case: nodes that miss no grant keep their counters in step.
pub(crate) fn agreed(fences: &[AtomicU64], outcomes: &[NodeOutcome], fence: u64) -> bool {
    outcomes
        .iter()
        .filter(|outcome| outcome.reply == NodeReply::Ours)
        .all(|outcome| {
            fences
                .get(outcome.node)
                .is_some_and(|taken| taken.load(Ordering::Relaxed) == fence)
        })
}

/// Recovers the fence of a won round in which a node's counter was not trusted: reads the
/// counters on every node and, once a quorum of them are trusted or every node has answered,
/// answers one more than the highest value read (and at least `highest_trusted`, the highest
/// fence a trusted winner took). Every earlier fence was written back to a quorum, which meets
/// every quorum of trusted counters in a node that still holds it, or else every node (the
/// argument in `docs/fencing.md`). Fails with [`Error::FenceUnrecovered`] when neither is
/// reached (or [`Error::Cancelled`]).
pub(crate) async fn recover_fence<C>(
    node_set: &NodeSet,
    fence_keys: &Keys,
    highest_trusted: u64,
    cancel: Pin<&mut C>,
) -> Result<u64, Error>
where
    C: Future<Output = ()> + ?Sized,
{
    let fence_keys = fence_keys.all();
    let readings = futures::future::join_all(
        node_set
            .nodes
            .iter()
            .map(|node| async move { (node, read_counters(node, fence_keys).await) }),
    );
    let readings = tokio::select! {
        readings = readings => readings,
        () = cancel => return Err(Error::Cancelled { outcomes: Vec::new() }),
    };
    let trusted = readings
        .iter()
        .filter(|(_, reading)| reading.as_ref().is_ok_and(|reading| reading.trusted))
        .count();
    let answered = readings
        .iter()
        .filter(|(_, reading)| reading.is_ok())
        .count();
    let highest = readings
        .iter()
        .filter_map(|(_, reading)| reading.as_ref().ok())
        .map(|reading| reading.highest)
        .max()
        .unwrap_or(0);
    let quorum = node_set.settings.quorum;
    if trusted < quorum && answered < node_set.nodes.len() {
        return Err(Error::FenceUnrecovered {
            trusted,
            quorum,
            outcomes: readings
                .into_iter()
                .map(|(node, reading)| NodeOutcome {
                    node: node.index(),
                    addr: Arc::clone(node.addr()),
                    reply: match reading {
                        Ok(Reading { trusted: true, .. }) => NodeReply::Ours,
                        Ok(_) => NodeReply::NotOurs,
                        Err(error) => NodeReply::Failed(error),
                    },
                })
                .collect(),
        });
    }
    Ok(highest.saturating_add(1).max(highest_trusted))
}

/// `DEL` of the fence counter of `resource` on every node at once; see
/// [`Lock::delete_fence_counter`](crate::Lock::delete_fence_counter).
pub(crate) async fn delete_counters(
    node_set: &NodeSet,
    resource: &[u8],
) -> Result<Vec<NodeOutcome>, Error> {
    if resource.is_empty() {
        return Err(ConfigError::EmptyResource.into());
    }
    let fence_key = node_set.settings.fence_key(resource)?;
    let outcomes = futures::future::join_all(node_set.nodes.iter().map(|node| {
        let fence_key = &fence_key;
        async move {
            NodeOutcome {
                node: node.index(),
                addr: Arc::clone(node.addr()),
                reply: NodeReply::from_flag(delete_counter(node, fence_key).await),
            }
        }
    }))
    .await;
    Ok(outcomes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::LockOptions;
    use crate::node::acquire::{AcquireCommand, AcquireRequest, Taken};
    use crate::outcome::NodeError;
    use crate::round::acquire::acquire;
    use crate::round::ledger::Ledger;
    use quorumlock_harness::{ClusterOptions, Persistence, TestCluster};
    use redis::AsyncCommands;
    use std::time::Duration;

    /// Against a real server: the counter moves only with a grant on the node (a fresh one, or a
    /// leftover of ours renewed), and the write-back raises it only while the key is ours, never
    /// lowering it.
    #[tokio::test]
    async fn the_fence_counter_moves_only_with_a_grant_and_the_write_back_only_raises_it() {
        let cluster = TestCluster::start(
            ClusterOptions::default()
                .nodes(1)
                .persistence(Persistence::AofAlways),
        )
        .await
        .unwrap();
        let settings = LockOptions::new()
            .node_timeout(Duration::from_secs(5))
            .connect_timeout(Duration::from_secs(5))
            .validate(1)
            .unwrap();
        let node = crate::node::test_node(0, &cluster.urls()[0], &settings);
        let mut direct = cluster.connection(0).await.unwrap();
        let ledger = Ledger::new(1);
        let attempt = ledger.begin();
        let (lock_key, fence_key) = (
            Keys::One(Arc::from(&b"lock"[..])),
            Keys::One(Arc::from(&b"fence"[..])),
        );
        let request = |token, renew_leftover| {
            AcquireCommand::new(&AcquireRequest {
                keys: &lock_key,
                fence_keys: Some(&fence_key),
                volatile: false,
                token,
                first_call: true,
                ttl_ms: 60_000,
                renew_leftover,
                rw: None,
                record: None,
            })
        };

        let taken = acquire(&node, &request("a", false), &ledger, attempt).await;
        assert_eq!(taken, Ok(Taken::Ours(Some(1))));
        let taken = acquire(&node, &request("b", true), &ledger, attempt).await;
        assert_eq!(taken, Ok(Taken::NotOurs), "held by a: no grant, no INCR");
        let counter: u64 = direct.get("fence").await.unwrap();
        assert_eq!(counter, 1);
        let taken = acquire(&node, &request("a", true), &ledger, attempt).await;
        assert_eq!(taken, Ok(Taken::Ours(Some(2))), "our own leftover, renewed");

        assert_eq!(
            write_back(&node, (b"lock", b"fence"), "a", 7, false, None).await,
            Ok(true)
        );
        let counter: u64 = direct.get("fence").await.unwrap();
        assert_eq!(counter, 7);
        assert_eq!(
            write_back(&node, (b"lock", b"fence"), "a", 3, false, None).await,
            Ok(true)
        );
        let counter: u64 = direct.get("fence").await.unwrap();
        assert_eq!(counter, 7, "never lowered");
        assert_eq!(
            write_back(&node, (b"lock", b"fence"), "b", 9, false, None).await,
            Ok(false)
        );
        let counter: u64 = direct.get("fence").await.unwrap();
        assert_eq!(counter, 7, "not raised for a key that is not ours");

        let _: () = direct.del("lock").await.unwrap();
        let _: () = direct.set("fence", "not a number").await.unwrap();
        let taken = acquire(&node, &request("c", false), &ledger, attempt).await;
        assert!(
            matches!(taken, Err(NodeError::Server { .. })),
            "a counter someone else wrote is an error: {taken:?}"
        );
        let _: () = direct.set("fence", -5).await.unwrap();
        let _: () = direct.del("lock").await.unwrap();
        let taken = acquire(&node, &request("c", false), &ledger, attempt).await;
        assert!(
            matches!(&taken, Err(NodeError::Server { code, .. }) if code == "FENCE"),
            "a counter below 1 hands out no fence: {taken:?}"
        );

        assert_eq!(delete_counter(&node, b"fence").await, Ok(true));
        assert_eq!(delete_counter(&node, b"fence").await, Ok(false));
    }
}
