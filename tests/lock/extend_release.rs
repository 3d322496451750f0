//! Extension and release: a failed extension deletes nothing, a dropped guard is released in the background.

use std::time::Duration;

use quorumlock::Error;
use redis::AsyncCommands;

use crate::common::*;

#[tokio::test]
async fn a_failed_extend_keeps_the_keys_that_still_hold() {
    bounded(async {
        // A quorum of all five, so that every node is known to hold the key.
        // Extensions of up to 30 s, which the restart guard must cover.
        let (cluster, lock) =
            quorum_lock(5, once().quorum_size(5).max_ttl(Duration::from_secs(30))).await;
        let mut guard = lock.try_acquire("extend-me").await.unwrap();
        guard.extend(Duration::from_secs(20)).await.unwrap();
        assert!(guard.remaining() > Duration::from_secs(10));

        for node in 0..3 {
            let mut connection = cluster.connection(node).await.unwrap();
            let _: () = connection.del(guard.key()).await.unwrap();
        }
        let error = guard.extend(Duration::from_secs(30)).await.unwrap_err();
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
        for node in 3..5 {
            assert_eq!(
                stored(&cluster, node, guard.key()).await.as_deref(),
                Some(guard.token().as_str()),
                "node {node} lost its key to a failed extend"
            );
        }
        assert!(guard.is_valid(), "the earlier validity still runs");
        assert_eq!(guard.release().await.held, 2);
    })
    .await;
}

#[tokio::test]
async fn a_guard_dropped_without_release_is_released_in_the_background() {
    bounded(async {
        let cluster = cluster(3).await;
        for (kind, lock) in both_kinds(&cluster, once()) {
            let guard = lock.try_acquire("forgotten").await.unwrap();
            let key = guard.key().to_vec();
            drop(guard);
            lock.settle().await;
            assert_eq!(stored(&cluster, 0, &key).await, None, "{kind}");
            lock.try_acquire("forgotten").await.unwrap().release().await;
        }
    })
    .await;
}

/// The grant's decision instant lies between the call's start and its return, before the
/// validity ends, and an extension moves the validity, not the decision.
#[tokio::test]
async fn the_decision_instant_is_inside_the_call_and_survives_an_extension() {
    bounded(async {
        let (_cluster, lock) = quorum_lock(3, once()).await;
        let called = std::time::Instant::now();
        let mut guard = lock.try_acquire("decided").await.unwrap();
        let returned = std::time::Instant::now();
        let decided = guard.decided_at();
        assert!(called <= decided && decided <= returned, "{decided:?}");
        assert!(decided < guard.valid_until());
        let before = guard.valid_until();
        guard.extend(Duration::from_secs(10)).await.unwrap();
        assert!(guard.valid_until() > before);
        // Both are mapped at each call: equal up to the mapping's rounding.
        let moved = guard.decided_at().max(decided) - guard.decided_at().min(decided);
        assert!(moved < Duration::from_millis(1), "{moved:?}");
        guard.release().await;
    })
    .await;
}
