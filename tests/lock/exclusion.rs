//! Mutual exclusion and ownership: one winner among many callers, a stale holder never frees
//! the next holder's lock, and a refused caller learns who holds it and what was reachable.

use quorumlock::Patience;
use std::time::Duration;

use quorumlock::{Error, Lock, NodeReply, RetryPolicy};

use crate::common::*;

/// Twenty callers at once. A single simultaneous round over five nodes may split the votes so
/// that nobody wins (Redlock trades liveness for safety there); the jittered retries of
/// `acquire` break the tie, and the losers' `Held` comes from the winner's key.
// promise: exclusion-by-quorum
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn twenty_concurrent_try_locks_on_one_key_exactly_one_wins() {
    bounded(async {
        let cluster = cluster(5).await;
        let retry = RetryPolicy::new()
            .attempts(20)
            .delay(Duration::ZERO)
            .jitter(Duration::from_millis(50));
        for (kind, lock) in both_kinds(&cluster, once().patience(Patience::Retry(retry))) {
            let resource = format!("contended-{kind}");
            let attempts: Vec<_> = (0..20)
                .map(|_| {
                    let (lock, resource) = (lock.clone(), resource.clone());
                    tokio::spawn(async move { lock.acquire(resource).await })
                })
                .collect();
            let mut winners = winners(attempts).await;
            assert_eq!(winners.len(), 1, "{kind}: exactly one of 20 wins");
            let report = winners.pop().unwrap().release().await;
            assert!(report.held >= 1, "{kind}: {report:?}");
            lock.settle().await;
            let next = lock.try_acquire(&resource).await;
            assert!(next.is_ok(), "{kind}: the released lock is free: {next:?}");
        }
    })
    .await;
}

// promise: ownership
#[tokio::test]
async fn a_stale_holder_cannot_release_the_next_holders_lock() {
    bounded(async {
        let mut cluster = cluster(3).await;
        for (kind, lock) in both_kinds(&cluster, once()) {
            let stale = lock.try_acquire("ledger").await.unwrap();
            // The stale holder's lease ends (as if by TTL) and someone else takes the lock.
            for node in 0..cluster.len() {
                cluster.flush(node).await.unwrap();
            }
            let current = lock.try_acquire("ledger").await.unwrap();
            assert_ne!(stale.token(), current.token());

            let wrong = stale.release().await;
            assert_eq!(wrong.held, 0, "{kind}: a wrong token deletes nothing");
            for node in holders(current.outcomes()) {
                assert_eq!(
                    stored(&cluster, node, current.key()).await.as_deref(),
                    Some(current.token().as_str()),
                    "{kind}: the current holder keeps the lock on node {node}"
                );
            }
            assert!(matches!(
                lock.try_acquire("ledger").await,
                Err(Error::Held { .. })
            ));

            let (key, held_on) = (current.key().to_vec(), holders(current.outcomes()));
            let right = current.release().await;
            assert!(right.held >= 1, "{kind}: {right:?}");
            lock.settle().await;
            for node in held_on {
                assert_eq!(
                    stored(&cluster, node, &key).await,
                    None,
                    "{kind}: freed on {node}"
                );
            }
            lock.try_acquire("ledger").await.unwrap().release().await;
        }
    })
    .await;
}

/// `Held` names the resource and tells "held, every node reachable" from "held, and some nodes
/// unreachable": with three of five nodes frozen, two "not ours" and one timeout decide the round
/// before the other frozen nodes answer.
// promise: typed-errors
#[tokio::test]
async fn held_names_the_resource_and_counts_the_unreachable_nodes() {
    bounded(async {
        // The holder's key is on every node.
        let (mut cluster, holder) = quorum_lock(5, once().quorum_size(5)).await;
        let guard = holder.try_acquire("report").await.unwrap();
        let contender = Lock::new(
            cluster.urls(),
            once().node_timeout(Duration::from_millis(300)),
        )
        .unwrap();

        let error = contender.try_acquire("report").await.unwrap_err();
        let Error::Held {
            resource,
            unreachable,
            ..
        } = &error
        else {
            panic!("expected Held, got {error}");
        };
        assert_eq!(resource.as_slice(), b"report");
        assert_eq!(*unreachable, 0, "every node answered: {error}");
        assert!(error.to_string().contains("\"report\""), "{error}");

        for node in 2..5 {
            cluster.pause(node).unwrap();
        }
        let error = contender.try_acquire("report").await.unwrap_err();
        let Error::Held { unreachable, .. } = &error else {
            panic!("expected Held, got {error}");
        };
        assert!(*unreachable >= 1, "{error}");
        assert!(error.to_string().contains("unreachable"), "{error}");
        for node in 2..5 {
            cluster.resume(node).unwrap();
        }
        guard.release().await;
    })
    .await;
}

/// A node that answered that the key is held has nothing of ours, so the lost round's release
/// skips it (the ordering rule skips a node that refused every request); a node whose request
/// was still unanswered at the decision, or that set our key, is released.
#[tokio::test]
async fn a_lost_round_releases_only_where_our_key_may_be() {
    bounded(async {
        let (cluster, lock) = quorum_lock(3, once().quorum_size(3)).await;
        warm_up(&lock).await;
        let holder = Lock::new(cluster.urls(), once().quorum_size(3)).unwrap();
        let held = holder.try_acquire("job").await.unwrap();
        let evals = async |node| {
            command_calls(&cluster, node, "eval").await
                + command_calls(&cluster, node, "evalsha").await
        };
        let before = [evals(0).await, evals(1).await, evals(2).await];

        let error = lock.try_acquire("job").await.unwrap_err();
        assert!(matches!(error, Error::Held { .. }), "{error}");
        lock.settle().await;
        let refused: Vec<usize> = error
            .outcomes()
            .iter()
            .filter(|outcome| outcome.reply == NodeReply::NotOurs)
            .map(|outcome| outcome.node)
            .collect();
        assert!(
            !refused.is_empty(),
            "the round was decided by a refusal: {error}"
        );
        for node in refused {
            assert_eq!(
                evals(node).await,
                before[node],
                "node {node} refused: no release"
            );
        }

        // Node 2 free: our SET lands there, the round is lost on 0 and 1, and node 2 is
        // released, so nothing of ours stays.
        held.release().await;
        holder.settle().await;
        let blocker = Lock::new(
            cluster.urls().into_iter().take(2).collect::<Vec<_>>(),
            once().quorum_size(2),
        )
        .unwrap();
        let _blocking = blocker.try_acquire("job").await.unwrap();
        let node_2_before = evals(2).await;
        let error = lock.try_acquire("job").await.unwrap_err();
        assert!(matches!(error, Error::Held { .. }), "{error}");
        lock.settle().await;
        assert_eq!(
            stored(&cluster, 2, b"quorumlock:job").await,
            None,
            "node 2 released"
        );
        assert_eq!(evals(2).await, node_2_before + 1, "one release, to node 2");
    })
    .await;
}
