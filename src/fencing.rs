//! Fencing (`LockOptions::fencing`): the fence's write-back after a won acquisition, and the
//! deletion of a retired resource's counter. The acquire script that takes the next fence from
//! the counter is in `commands.rs`, beside the plain acquire.
//!
//! Why the write-back: the fence of a grant is the highest counter among the nodes that granted
//! it. Written back to a quorum while our key still holds there, it is on at least one node of
//! every later winning quorum before that node can grant again, so every later fence is larger.
//! The argument in full is in `docs/fencing.md`.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, LazyLock};

use redis::Script;

use crate::clock::Moment;
use crate::commands::flag;
use crate::error::{ConfigError, Error, NodeError, NodeOutcome, NodeReply};
use crate::fanout::{Until, fan_out};
use crate::node::Node;
use crate::quorum::Verdict;
use crate::shared::Shared;
use crate::token::{Token, lock_key};

/// The fence's write-back: while the key `KEYS[1]` holds our token, raises the counter `KEYS[2]`
/// to at least the fence `ARGV[2]` and answers 1; else 0. Raising it only while the key is ours
/// is what orders it before any later grant on this node (see `docs/fencing.md`).
static WRITE_BACK: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r"if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
local counter = tonumber(redis.call('GET', KEYS[2]))
if not counter or counter < tonumber(ARGV[2]) then redis.call('SET', KEYS[2], ARGV[2]) end
return 1",
    )
});

/// The fence's write-back over every node: raises the counter to `fence` wherever our key still
/// holds, and returns when a quorum has confirmed (with the moment it did), else fails with
/// [`Error::FenceUnconfirmed`] (or [`Error::Cancelled`]). The write-backs to slower nodes finish
/// in the background.
pub(crate) async fn write_back_all<C>(
    shared: &Shared,
    key: &Arc<[u8]>,
    fence_key: &Arc<[u8]>,
    token: &Token,
    fence: u64,
    cancel: Pin<&mut C>,
) -> Result<(Moment, Vec<NodeOutcome>), Error>
where
    C: Future<Output = ()> + ?Sized,
{
    let round = fan_out(
        &shared.nodes,
        shared.settings.quorum,
        Until::Decided,
        cancel,
        |node| {
            let (key, fence_key, token) = (Arc::clone(key), Arc::clone(fence_key), token.clone());
            async move {
                NodeReply::from_flag(
                    write_back(&node, &key, &fence_key, token.as_str(), fence).await,
                )
            }
        },
    )
    .await;
    let decided = Moment::now();
    if let Some(unanswered) = round.unanswered {
        shared.background.finish_unanswered(unanswered);
    }
    match round.verdict {
        Some(Verdict::Won) => Ok((decided, round.outcomes)),
        Some(_) => Err(Error::FenceUnconfirmed {
            fence,
            quorum: shared.settings.quorum,
            outcomes: round.outcomes,
        }),
        None => Err(Error::Cancelled {
            outcomes: round.outcomes,
        }),
    }
}

/// The fence of a won round: the highest counter among the nodes that granted it (each of them
/// incremented its counter in the same step as its grant).
pub(crate) fn highest_fence(fences: &[AtomicU64], outcomes: &[NodeOutcome]) -> u64 {
    outcomes
        .iter()
        .filter(|outcome| outcome.reply == NodeReply::Ours)
        .filter_map(|outcome| fences.get(outcome.node))
        .map(|fence| fence.load(Ordering::Relaxed))
        .max()
        .unwrap_or(0)
}

/// The fence's write-back on one node: raises the counter to at least `fence` if the key still
/// holds `token`. Answers whether it did (the key was still ours).
async fn write_back(
    node: &Node,
    key: &[u8],
    fence_key: &[u8],
    token: &str,
    fence: u64,
) -> Result<bool, NodeError> {
    node.run_counted(|mut connection, _generation| async move {
        WRITE_BACK
            .key(key)
            .key(fence_key)
            .arg(token)
            .arg(fence)
            .invoke_async(&mut connection)
            .await
    })
    .await
    .and_then(flag)
}

/// Deletes a fence counter. Answers whether there was one.
async fn delete_counter(node: &Node, fence_key: &[u8]) -> Result<bool, NodeError> {
    node.run(|mut connection, _generation| async move {
        redis::cmd("DEL")
            .arg(fence_key)
            .query_async(&mut connection)
            .await
    })
    .await
    .and_then(flag)
}

/// `DEL` of the fence counter of `resource` on every node at once; see
/// [`Lock::delete_fence_counter`].
pub(crate) async fn delete_counters(
    shared: &Shared,
    resource: &[u8],
) -> Result<Vec<NodeOutcome>, Error> {
    if resource.is_empty() {
        return Err(ConfigError::EmptyResource.into());
    }
    let fence_key = lock_key(&shared.settings.fence_prefix, resource);
    let outcomes = futures::future::join_all(shared.nodes.iter().map(|node| {
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
    use crate::commands::{AcquireCommand, AcquireRequest, Taken, acquire};
    use crate::ledger::Ledger;
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
        let node = Node::new(0, &cluster.urls()[0], &settings).unwrap();
        let mut direct = cluster.connection(0).await.unwrap();
        let ledger = Ledger::new(1);
        let attempt = ledger.begin();
        let request = |token, renew_leftover| {
            AcquireCommand::new(&AcquireRequest {
                key: b"lock",
                fence_key: Some(b"fence"),
                token,
                ttl_ms: 60_000,
                renew_leftover,
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

        assert_eq!(write_back(&node, b"lock", b"fence", "a", 7).await, Ok(true));
        let counter: u64 = direct.get("fence").await.unwrap();
        assert_eq!(counter, 7);
        assert_eq!(write_back(&node, b"lock", b"fence", "a", 3).await, Ok(true));
        let counter: u64 = direct.get("fence").await.unwrap();
        assert_eq!(counter, 7, "never lowered");
        assert_eq!(
            write_back(&node, b"lock", b"fence", "b", 9).await,
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
