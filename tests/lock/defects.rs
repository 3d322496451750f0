//! The deliberate defects of the `chaos-defects` feature (the chaos tooling's mutation score) do
//! what their names say, against real Redis: the machinery that breaks the lock on purpose is
//! itself tested. Compiled only with that feature.

use std::time::Duration;

use quorumlock::{Defect, Guard};
use redis::AsyncCommands;

use crate::common::*;

/// A TTL so long that no acquisition on this machine can use up the margins below: the
/// elapsed time is at most `connect_timeout + node_timeout` (10 s with [`once`]).
const LONG_TTL: Duration = Duration::from_secs(1000);

/// The validity a guard was granted: from its decision to the end of its validity.
fn granted(guard: &Guard) -> Duration {
    guard
        .valid_until()
        .saturating_duration_since(guard.decided_at())
}

#[tokio::test]
async fn validity_plus_5pct_grants_more_than_the_ttl_less_the_drift() {
    bounded(async {
        let (_cluster, lock) = quorum_lock(3, once().ttl(LONG_TTL)).await;
        let honest = lock.try_acquire("honest").await.unwrap();
        // 1000 s − 10.002 s of drift is the most a correct lock can grant.
        let most = LONG_TTL - Duration::from_millis(10_002);
        assert!(granted(&honest) <= most, "{:?}", granted(&honest));
        honest.release().await;

        let (_cluster, lock) =
            quorum_lock(3, once().ttl(LONG_TTL).defect(Defect::ValidityPlus5Pct)).await;
        let guard = lock.try_acquire("overstated").await.unwrap();
        // Overstated by 50 s: more than a correct lock grants even with no time elapsed.
        assert!(
            granted(&guard) > most + Duration::from_secs(30),
            "{:?}",
            granted(&guard)
        );
        guard.release().await;
    })
    .await;
}

#[tokio::test]
async fn drift_ignored_grants_more_than_the_ttl_less_the_drift() {
    bounded(async {
        // A drift of 10 % (100.002 s) against at most 10 s elapsed.
        let options = || once().ttl(LONG_TTL).drift_factor(0.1);
        let most = LONG_TTL - Duration::from_millis(100_002);
        let (_cluster, lock) = quorum_lock(3, options()).await;
        let honest = lock.try_acquire("honest").await.unwrap();
        assert!(granted(&honest) <= most, "{:?}", granted(&honest));
        honest.release().await;

        let (_cluster, lock) = quorum_lock(3, options().defect(Defect::DriftIgnored)).await;
        let guard = lock.try_acquire("no-drift").await.unwrap();
        assert!(granted(&guard) > most, "{:?}", granted(&guard));
        guard.release().await;
    })
    .await;
}

#[tokio::test]
async fn quorum_half_grants_with_two_nodes_of_five() {
    bounded(async {
        let (mut cluster, lock) = quorum_lock(5, once().defect(Defect::QuorumHalf)).await;
        assert_eq!(lock.quorum_size(), 2);
        for node in 2..5 {
            cluster.kill(node).await.unwrap();
        }
        let guard = lock.try_acquire("two-of-five").await.unwrap();
        assert_eq!(holders(guard.outcomes()), [0, 1]);
        guard.release().await;
    })
    .await;
}

#[tokio::test]
async fn no_release_on_failure_leaves_the_won_nodes_locked() {
    bounded(async {
        let (cluster, _lock, _error) =
            acquisition_failed_after_winning_two(once().defect(Defect::NoReleaseOnFailure)).await;
        // The correct lock deletes these keys:
        // `node_faults::a_failed_acquisition_leaves_no_key_on_the_nodes_it_won`.
        for node in 0..2 {
            assert_eq!(key_count(&cluster, node).await, 1, "node {node}");
        }
    })
    .await;
}

#[tokio::test]
async fn extend_minority_extends_with_the_key_gone_on_three_of_five_nodes() {
    bounded(async {
        // A quorum of all five for the acquisition, so that every node is known to hold the key.
        let options = once()
            .quorum_size(5)
            .max_ttl(Duration::from_secs(30))
            .defect(Defect::ExtendMinority);
        let (cluster, lock) = quorum_lock(5, options).await;
        let mut guard = lock.try_acquire("extend-minority").await.unwrap();
        for node in 0..3 {
            let mut connection = cluster.connection(node).await.unwrap();
            let _: () = connection.del(guard.key()).await.unwrap();
        }
        let before = guard.valid_until();
        guard.extend(Duration::from_secs(30)).await.unwrap();
        assert!(guard.valid_until() > before);
        assert_eq!(guard.release().await.held, 2);
    })
    .await;
}
