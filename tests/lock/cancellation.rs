//! Cancellation: an acquisition dropped or cancelled mid-flight leaves no key behind.

use std::time::Duration;

use quorumlock::{Error, NodeReply};

use crate::common::*;

// promise: nothing-left-behind
#[tokio::test]
async fn a_dropped_acquire_leaves_no_key_behind_once_it_settles() {
    bounded(async {
        let (mut cluster, lock) = quorum_lock(5, patient()).await;
        // Connect to every node first: a paused node cannot complete a handshake.
        crate::common::warm_up(&lock).await;
        for node in 2..5 {
            cluster.pause(node).unwrap();
        }

        {
            let mut acquire = Box::pin(lock.try_acquire("dropped"));
            // Drive the acquisition until the two live nodes hold the key: it is then mid-flight,
            // waiting for paused nodes that cannot answer.
            let mut polls = 0;
            loop {
                assert!(futures::poll!(acquire.as_mut()).is_pending());
                if key_count(&cluster, 0).await == 1 && key_count(&cluster, 1).await == 1 {
                    break;
                }
                polls += 1;
                assert!(
                    polls < 5_000,
                    "the acquisition never reached the live nodes"
                );
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
        } // dropped here, mid-flight

        for node in 2..5 {
            cluster.resume(node).unwrap();
        }
        lock.settle().await;
        assert_no_keys(&cluster, 0..5).await;
    })
    .await;
}

// promise: nothing-left-behind
#[tokio::test]
async fn a_cancelled_acquire_releases_and_reports_cancelled() {
    bounded(async {
        let (mut cluster, lock) = quorum_lock(3, patient()).await;
        crate::common::warm_up(&lock).await;
        cluster.pause(2).unwrap();
        cluster.pause(1).unwrap();

        let (cancel, cancelled) = tokio::sync::oneshot::channel::<()>();
        let acquire = tokio::spawn({
            let lock = lock.clone();
            async move {
                lock.acquire_until("cancelled", async {
                    let _ = cancelled.await;
                })
                .await
            }
        });
        let mut polls = 0;
        while key_count(&cluster, 0).await == 0 {
            polls += 1;
            assert!(polls < 5_000, "the acquisition never reached node 0");
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        cancel.send(()).unwrap();
        cluster.resume(1).unwrap();
        cluster.resume(2).unwrap();
        let error = acquire.await.unwrap().unwrap_err();
        let Error::Cancelled { outcomes, .. } = &error else {
            panic!("expected Cancelled, got {error}");
        };
        assert_eq!(outcomes[0].reply, NodeReply::Ours);
        lock.settle().await;
        assert_no_keys(&cluster, 0..3).await;
    })
    .await;
}
