//! The deliberate defects of the `chaos-defects` feature (the chaos tooling's mutation score) do
//! what their names say, against real Redis: the machinery that breaks the lock on purpose is
//! itself tested. Compiled only with that feature.

use std::net::{Ipv4Addr, SocketAddr};
use std::time::Duration;

use quorumlock::{Defect, Error, Guard, Lock, NodeError, NodeReply};
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

#[tokio::test]
async fn restart_guard_ignored_lets_a_node_restarted_empty_vote_at_once() {
    bounded(async {
        // A TTL (and so a guard period) no test run waits out: every grant below is inside it.
        let options = || once().ttl(Duration::from_secs(60));
        let mut cluster = volatile_cluster(1).await;
        let url = cluster.urls()[0].clone();
        // A freshly started node without persistence may have forgotten keys: the correct lock
        // holds it back, the broken one lets it vote at once.
        let honest = Lock::new([url.clone()], options()).unwrap();
        let error = honest.try_acquire("job").await.unwrap_err();
        assert!(recovering(&error.outcomes()[0]).is_some(), "{error}");
        let broken =
            Lock::new([url.clone()], options().defect(Defect::RestartGuardIgnored)).unwrap();
        let first = broken.try_acquire("job").await.unwrap();
        assert_eq!(first.outcomes()[0].reply, NodeReply::Ours);

        // The hazard the guard exists for: the node restarts empty while `first` holds, and a
        // second broken lock is granted the same resource.
        cluster.kill(0).await.unwrap();
        cluster.start_node(0).await.unwrap();
        let second = Lock::new([url], options().defect(Defect::RestartGuardIgnored)).unwrap();
        let stolen = second.try_acquire("job").await.unwrap();
        assert!(first.is_valid() && stolen.is_valid(), "two holders at once");
        assert_eq!(stolen.outcomes()[0].reply, NodeReply::Ours);
        // The correct lock, reconnecting, still holds the restarted node back.
        let mut last = None;
        for _ in 0..2 {
            let error = honest.try_acquire("job").await.unwrap_err();
            if recovering(&error.outcomes()[0]).is_some() {
                last = None;
                break;
            }
            last = Some(error);
        }
        assert!(last.is_none(), "{last:?}");
    })
    .await;
}

#[tokio::test]
async fn replacement_ignored_lets_a_server_switched_in_behind_the_address_grant_a_held_lock() {
    bounded(async {
        let standby = cluster(1).await;
        let main = proxied_cluster(1).await;
        // A standby that was running well before the locks last heard from the old server.
        let up = standby
            .wait_for_uptime(0, Duration::from_secs(2))
            .await
            .unwrap();
        assert!(up >= Duration::from_secs(2), "{up:?}");
        let url = main.urls()[0].clone();
        let options = || once().ttl(Duration::from_secs(60));
        let holder = Lock::new([url.clone()], options()).unwrap();
        let honest = Lock::new([url.clone()], options()).unwrap();
        let broken = Lock::new([url], options().defect(Defect::ReplacementIgnored)).unwrap();
        let guard = holder.try_acquire("job").await.unwrap();
        // Both contenders meet the old server: it answers that the resource is held.
        for lock in [&honest, &broken] {
            assert!(matches!(
                lock.try_acquire("job").await,
                Err(Error::Held { .. })
            ));
        }

        let proxy = main.proxy(0).unwrap();
        proxy.switch_upstream(SocketAddr::from((
            Ipv4Addr::LOCALHOST,
            standby.port(0).unwrap(),
        )));
        proxy.cut().await;

        // The first attempt of each may find its cut connection broken; the next reconnects.
        let mut sits_out = false;
        for _ in 0..3 {
            let error = honest.try_acquire("job").await.unwrap_err();
            if matches!(
                error.outcomes()[0].reply,
                NodeReply::Failed(NodeError::Replaced { .. })
            ) {
                sits_out = true;
                break;
            }
        }
        assert!(sits_out, "the correct lock holds the replacement back");
        let mut stolen = None;
        for _ in 0..3 {
            if let Ok(granted) = broken.try_acquire("job").await {
                stolen = Some(granted);
                break;
            }
        }
        let stolen = stolen.expect("the broken lock is granted by the replacement");
        assert_eq!(stolen.outcomes()[0].reply, NodeReply::Ours);
        assert!(guard.is_valid() && stolen.is_valid(), "two holders at once");
    })
    .await;
}

#[tokio::test]
async fn slot_past_permits_lets_two_hold_one_permit() {
    bounded(async {
        let request = || quorumlock::Request::from("one").permits(1);
        let (_cluster, lock) = quorum_lock(3, once()).await;
        let first = lock.try_acquire(request()).await.unwrap();
        assert!(matches!(
            lock.try_acquire(request()).await,
            Err(Error::Held { .. })
        ));
        first.release().await;

        let (_cluster, lock) = quorum_lock(3, once().defect(Defect::SlotPastPermits)).await;
        let first = lock.try_acquire(request()).await.unwrap();
        let second = lock.try_acquire(request()).await.unwrap();
        let mut slots = [first.resource().to_vec(), second.resource().to_vec()];
        slots.sort();
        assert_eq!(slots, [b"one:0".to_vec(), b"one:1".to_vec()]);
        first.release().await;
        second.release().await;
    })
    .await;
}

#[tokio::test]
async fn writer_ignores_readers_lets_a_writer_hold_beside_a_reader() {
    bounded(async {
        let read = || quorumlock::Request::from("doc").read();
        let write = || quorumlock::Request::from("doc").write();
        let (_cluster, lock) = quorum_lock(3, once()).await;
        let reader = lock.try_acquire(read()).await.unwrap();
        assert!(matches!(
            lock.try_acquire(write()).await,
            Err(Error::Held { .. })
        ));
        reader.release().await;
        // The writer's refusal left a mark that would keep the next reader out: let a writer in
        // and out first, which takes it down.
        lock.try_acquire(write()).await.unwrap().release().await;

        let (_cluster, lock) = quorum_lock(3, once().defect(Defect::WriterIgnoresReaders)).await;
        let reader = lock.try_acquire(read()).await.unwrap();
        let writer = lock.try_acquire(write()).await.unwrap();
        assert!(
            reader.is_valid() && writer.is_valid(),
            "a writer beside a reader"
        );
        reader.release().await;
        writer.release().await;
    })
    .await;
}
