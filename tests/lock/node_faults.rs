//! Node faults: dead, hung, paused and restarted masters, and what each costs an acquisition.

use std::time::{Duration, Instant};

use quorumlock::{Error, Lock, NodeError, NodeReply};

use crate::common::*;

// promise: decide-early
#[tokio::test]
async fn two_dead_nodes_of_five_still_grant_the_lock() {
    bounded(async {
        let (mut cluster, lock) = quorum_lock(5, once()).await;
        cluster.kill(3).await.unwrap();
        cluster.kill(4).await.unwrap();

        let guard = lock.try_acquire("two-dead").await.unwrap();
        let replies = replies(guard.outcomes());
        assert_eq!(
            replies[..3],
            [NodeReply::Ours, NodeReply::Ours, NodeReply::Ours]
        );
        for reply in &replies[3..] {
            assert!(
                matches!(
                    reply,
                    NodeReply::Failed(NodeError::ConnectionRefused) | NodeReply::NoReply
                ),
                "{reply}"
            );
        }
        assert!(guard.is_valid());
        assert_eq!(guard.release().await.held, 3);
    })
    .await;
}

#[tokio::test]
async fn three_dead_nodes_of_five_fail_as_unavailable_and_leave_no_key() {
    bounded(async {
        let (mut cluster, lock) = quorum_lock(5, once()).await;
        for node in 2..5 {
            cluster.kill(node).await.unwrap();
        }

        let error = lock.try_acquire("three-dead").await.unwrap_err();
        let Error::Unavailable {
            quorum, outcomes, ..
        } = &error
        else {
            panic!("expected Unavailable, got {error}");
        };
        assert_eq!(*quorum, 3);
        let refused = failed_with(outcomes, NodeError::ConnectionRefused);
        assert_eq!(refused, 3, "{error}");
        assert_no_keys(&cluster, 0..2).await;
    })
    .await;
}

/// The nodes a failed acquisition won are released: it leaves no key behind (this is the test
/// that catches the `no-release-on-failure` defect, see docs/chaos.md).
// promise: nothing-left-behind
#[tokio::test]
async fn a_failed_acquisition_leaves_no_key_on_the_nodes_it_won() {
    bounded(async {
        let (cluster, _lock, _error) = acquisition_failed_after_winning_two(once()).await;
        assert_no_keys(&cluster, 0..2).await;
    })
    .await;
}

#[tokio::test]
async fn the_key_reaches_every_live_node_not_only_the_first_quorum() {
    bounded(async {
        let (cluster, lock) = quorum_lock(5, once()).await;
        // Connect to every node first: a request still waiting for its connection when the
        // round is decided is never sent.
        crate::common::warm_up(&lock).await;
        lock.settle().await;
        for round in 0..5 {
            let guard = lock
                .try_acquire(format!("everywhere-{round}"))
                .await
                .unwrap();
            // The acquisition returned at the quorum; the slower nodes' requests finish in the
            // background, which settle() waits for.
            lock.settle().await;
            for node in 0..5 {
                assert_eq!(
                    stored(&cluster, node, guard.key()).await.as_deref(),
                    Some(guard.token().as_str()),
                    "round {round}: node {node}"
                );
            }
            assert!(guard.release().await.held >= 3);
        }
    })
    .await;
}

/// The slower nodes' requests go on after the decision and their replies are read: a node
/// that answered after the decision is known to have run our request, so a release over a new
/// connection to it (the old one broke meanwhile) still finds it clear, not in doubt.
// promise: release-after-requests
#[tokio::test]
async fn a_reply_after_the_decision_is_still_read_so_a_release_over_a_new_connection_clears_the_node()
 {
    bounded(async {
        let (mut cluster, lock) = quorum_lock(3, patient()).await;
        // Connect to every node first: a paused node cannot complete a handshake.
        crate::common::warm_up(&lock).await;
        lock.settle().await;
        cluster.pause(2).unwrap();
        let guard = lock.try_acquire("late-reply").await.unwrap();
        assert_eq!(holders(guard.outcomes()), [0, 1]);
        cluster.resume(2).unwrap();
        // Node 2 runs the request now; settle() waits until its reply has been read.
        lock.settle().await;
        assert_eq!(
            stored(&cluster, 2, guard.key()).await.as_deref(),
            Some(guard.token().as_str())
        );
        // Break the lock's connection to node 2 (not this one: SKIPME is on by default).
        let mut direct = cluster.connection(2).await.unwrap();
        let _: i64 = redis::cmd("CLIENT")
            .arg("KILL")
            .arg("TYPE")
            .arg("normal")
            .query_async(&mut direct)
            .await
            .unwrap();
        // Node 0 down: the release needs node 2's answer.
        cluster.kill(0).await.unwrap();
        // The next acquisition fails on node 2's broken connection; one after it reconnects.
        let mut reconnected = false;
        for round in 0..5 {
            if let Ok(other) = lock.try_acquire(format!("reconnect-{round}")).await {
                reconnected = other.outcomes()[2].reply == NodeReply::Ours;
                other.release().await;
            }
            if reconnected {
                break;
            }
        }
        assert!(reconnected, "node 2 never voted again");
        let key = guard.key().to_vec();
        let report = guard.release().await;
        assert_eq!(report.outcomes[2].reply, NodeReply::Ours, "{report:?}");
        assert_eq!(stored(&cluster, 2, &key).await, None);
    })
    .await;
}

// promise: decide-early, bounded-waits
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hung_node_is_not_waited_for_by_any_of_eight_concurrent_callers() {
    bounded(async {
        let cluster = proxied_cluster(5).await;
        cluster.proxy(0).unwrap().blackhole();
        let lock = Lock::new(cluster.urls(), patient()).unwrap();

        let callers: Vec<_> = (0..8)
            .map(|caller| {
                let lock = lock.clone();
                tokio::spawn(async move { lock.try_acquire(format!("hung-{caller}")).await })
            })
            .collect();
        for caller in callers {
            let guard = caller.await.unwrap().unwrap();
            let replies = replies(guard.outcomes());
            assert_eq!(
                replies[0],
                NodeReply::NoReply,
                "the hung node never answered"
            );
            let ours = replies.iter().filter(|r| **r == NodeReply::Ours).count();
            assert!(ours >= lock.quorum_size(), "{replies:?}");
            // Releasing would wait for the hung node for an hour: hand the key to the
            // background instead, where the runtime's shutdown ends the wait.
            drop(guard);
        }
    })
    .await;
}

/// A node killed while the lock is held comes back empty (no persistence). Extend and release
/// still go to it (it answers that the key is not there); acquisitions do not, until the restart
/// guard has passed, then the client (which reconnected on its own) uses it again.
#[tokio::test]
async fn a_node_killed_and_restarted_empty_is_used_again_once_the_restart_guard_has_passed() {
    bounded(async {
        // A quorum of all five: every node holds the key, and a later success proves that the
        // restarted node took part. A TTL short enough to wait out.
        let ttl = Duration::from_secs(1);
        let mut cluster = volatile_cluster(5).await;
        let lock = Lock::new(cluster.urls(), once().quorum_size(5).ttl(ttl)).unwrap();
        // Freshly started nodes without persistence wait out the guard once, too.
        let mut guard = acquire_once_voting(&lock, "restart").await;

        cluster.kill(0).await.unwrap();
        cluster.start_node(0).await.unwrap();
        let restarted = Instant::now();
        // The restarted node lost the key; the other four still hold it and keep it through
        // the failed extension, which node 0 is not kept out of.
        let error = guard.extend(ttl).await.unwrap_err();
        assert!(
            matches!(
                error,
                Error::ExtendFailed {
                    still_valid: true,
                    ..
                }
            ),
            "{error}"
        );
        assert_ne!(error.outcomes()[0].reply, NodeReply::Ours);
        assert_eq!(recovering(&error.outcomes()[0]), None, "{error}");
        let report = guard.release().await;
        assert_eq!(report.held, 4, "{:?}", report.outcomes);

        // Acquisitions: node 0 sits out the guard (after one failure on its broken connection
        // if the release has not replaced it yet), and nothing is sent to it meanwhile.
        let mut left = None;
        for _ in 0..3 {
            let error = lock.try_acquire("restart").await.unwrap_err();
            assert!(matches!(error, Error::Unavailable { .. }), "{error}");
            left = recovering(&error.outcomes()[0]);
            if left.is_some() {
                break;
            }
        }
        let left = left.expect("node 0 is recovering");
        let votes_at = Instant::now() + left;
        let guard_period = lock.restart_guard_period().unwrap();
        assert!(
            votes_at >= restarted + guard_period,
            "not before the guard has passed"
        );
        assert_eq!(
            key_count(&cluster, 0).await,
            0,
            "nothing was sent to node 0"
        );

        tokio::time::sleep_until(votes_at.into()).await;
        let guard = lock.try_acquire("restart").await.unwrap();
        assert_eq!(guard.outcomes()[0].reply, NodeReply::Ours);
        assert_eq!(guard.release().await.held, 5);
    })
    .await;
}

// promise: decide-early
#[tokio::test]
async fn a_paused_node_costs_its_timeout_only_when_it_is_needed() {
    bounded(async {
        let mut cluster = cluster(3).await;
        let timeout = Duration::from_millis(200);
        let options = once().node_timeout(timeout);
        let lock = Lock::new(cluster.urls(), options.clone()).unwrap();
        let all_three = Lock::new(cluster.urls(), options.quorum_size(3)).unwrap();
        crate::common::warm_up(&lock).await;
        lock.settle().await;
        all_three
            .try_acquire("warm-up")
            .await
            .unwrap()
            .release()
            .await;
        cluster.pause(0).unwrap();

        // Two of three suffice: the paused node is neither waited for on acquire nor on
        // release (its release finishes in the background once it wakes up).
        let guard = lock.try_acquire("paused").await.unwrap();
        let report = guard.release().await;
        assert_eq!(report.held, 2);
        assert_eq!(report.outcomes[0].reply, NodeReply::NoReply);

        // When every node is needed, the paused one fails with its timeout.
        let error = all_three.try_acquire("paused-all").await.unwrap_err();
        assert!(matches!(error, Error::Unavailable { .. }), "{error}");
        assert_eq!(
            error.outcomes()[0].reply,
            NodeReply::Failed(NodeError::Timeout(timeout))
        );
        cluster.resume(0).unwrap();
        lock.settle().await;
        all_three.settle().await;
        assert_no_keys(&cluster, 0..1).await;
    })
    .await;
}

/// A connection attempt that failed after every request waiting for it had given up (at the
/// connect timeout) is not handed to the next request, which connects anew: node 2 blackholed
/// while a cold lock first tries, then healed; the next attempt, once the old one surely ended,
/// gets node 2's vote. (It used to get the old attempt's failure, and the vote a round later.)
// promise: bounded-waits
#[tokio::test]
async fn a_connection_attempt_that_failed_unwatched_is_not_handed_to_the_next_request() {
    bounded(async {
        let cluster = proxied_cluster(3).await;
        let (connect_timeout, node_timeout) =
            (Duration::from_millis(200), Duration::from_millis(200));
        let options = once()
            .quorum_size(3)
            .connect_timeout(connect_timeout)
            .node_timeout(node_timeout);
        let lock = Lock::new(cluster.urls(), options).unwrap();
        cluster.proxy(2).unwrap().blackhole();
        let refused = lock.try_acquire("first").await.unwrap_err();
        assert!(
            matches!(
                refused.outcomes()[2].reply,
                NodeReply::Failed(NodeError::Timeout(_))
            ),
            "{refused}"
        );
        // The attempt goes on in the background for at most the connect and command timeouts;
        // nothing can be awaited that says it has failed.
        tokio::time::sleep(connect_timeout + node_timeout + Duration::from_millis(300)).await;
        cluster.proxy(2).unwrap().heal().await.unwrap();
        let guard = lock
            .try_acquire("second")
            .await
            .expect("node 2 connects anew and votes");
        assert_eq!(guard.outcomes()[2].reply, NodeReply::Ours);
        guard.release().await;
    })
    .await;
}
