//! The keep-alive (`Guard::keep_alive`), its lost signal, and `Lock::with_lock`, on both harness
//! backends (local processes, and containers when docker is available): a kept lock outlives
//! its TTL many times over; a lock whose keys are gone, or whose nodes stop answering, is
//! reported lost with the reason; `with_lock` releases on every path.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use quorumlock::{ConfigError, Error, KeepAlive, Lock, LockOptions, Lost};
use quorumlock_harness::{Backend, ClusterOptions, Persistence, TestCluster};
use redis::AsyncCommands;

use crate::common::{assert_no_keys, bounded, once, stored};

/// Three masters that persist every write, on `backend`; `None` when that backend is docker and
/// docker cannot be used here (and is not required).
async fn cluster_on(backend: Backend) -> Option<TestCluster> {
    let options = ClusterOptions::default()
        .nodes(3)
        .persistence(Persistence::AofAlways)
        .backend(backend);
    TestCluster::start_if_usable(options).await.unwrap()
}

const BACKENDS: [Backend; 2] = [Backend::Process, Backend::Docker];

fn kept_options(ttl: Duration) -> LockOptions {
    once().ttl(ttl).node_timeout(Duration::from_millis(100))
}

/// Deletes the lock key of `resource` on nodes 0 and 1 (a majority of three), as if it had
/// expired there.
async fn delete_on_a_majority(cluster: &TestCluster, resource: &str) {
    for node in 0..2 {
        let mut connection = cluster.connection(node).await.unwrap();
        let _: () = connection
            .del(format!("quorumlock:{resource}"))
            .await
            .unwrap();
    }
}

#[tokio::test]
async fn a_kept_lock_stays_valid_for_five_ttls_and_every_node_keeps_its_key() {
    bounded(async {
        for backend in BACKENDS {
            let Some(cluster) = cluster_on(backend).await else {
                continue;
            };
            let ttl = Duration::from_millis(600);
            for (kind, lock) in crate::common::both_kinds(&cluster, kept_options(ttl)) {
                // Connections made first: a node still connecting when the acquisition is
                // decided never gets the key.
                crate::common::warm_up(&lock).await;
                lock.settle().await;
                let kept = lock
                    .try_acquire("kept")
                    .await
                    .unwrap()
                    .keep_alive(KeepAlive::new())
                    .unwrap();
                // The hold itself is what is tested: five TTLs, checked after each.
                for _ in 0..5 {
                    tokio::time::sleep(ttl).await;
                    assert!(kept.is_valid(), "{backend:?} {kind}: {kept:?}");
                }
                assert!(kept.extensions() >= 5, "{backend:?} {kind}: {kept:?}");
                let token = kept.token().as_str().to_owned();
                let nodes = if kind == "single" { 1 } else { 3 };
                for node in 0..nodes {
                    let value = stored(&cluster, node, b"quorumlock:kept").await;
                    assert_eq!(
                        value.as_deref(),
                        Some(token.as_str()),
                        "{kind}: node {node}"
                    );
                }
                let report = kept.release().await;
                assert!(report.held >= 1, "{kind}: {report:?}");
                lock.settle().await;
                assert_no_keys(&cluster, 0..3).await;
            }
        }
    })
    .await;
}

/// The first extension after the keys vanished on a majority proves the lock lost: the signal
/// fires within one interval (before any extension succeeded), and the lease is invalid by then.
// promise: keep-alive-lost-signal
#[tokio::test]
async fn keys_gone_on_a_majority_fire_the_lost_signal_at_the_next_extension() {
    bounded(async {
        for backend in BACKENDS {
            let Some(cluster) = cluster_on(backend).await else {
                continue;
            };
            let lock = Lock::new(cluster.urls(), kept_options(Duration::from_secs(3))).unwrap();
            let kept = lock
                .try_acquire("vanishing")
                .await
                .unwrap()
                .keep_alive(KeepAlive::new().every(Duration::from_millis(300)))
                .unwrap();
            let valid_until = kept.valid_until();
            delete_on_a_majority(&cluster, "vanishing").await;
            let lost = kept.lost().await;
            assert!(matches!(lost, Lost::Taken { .. }), "{backend:?}: {lost}");
            assert!(!kept.is_valid());
            assert_eq!(kept.extensions(), 0, "lost at the first extension");
            assert!(std::time::Instant::now() < valid_until);
            // The keeper released what was left at the loss; the holder's release reports it.
            let report = kept.release().await;
            assert_eq!(report.outcomes.len(), 3, "{backend:?}: {report:?}");
            lock.settle().await;
            assert_no_keys(&cluster, 0..3).await;
        }
    })
    .await;
}

/// A majority frozen: every extension times out, and the signal fires when the validity is
/// about to run out, with the last error.
// promise: keep-alive-lost-signal
#[tokio::test]
async fn extensions_failing_until_the_validity_runs_out_fire_the_lost_signal() {
    bounded(async {
        let Some(mut cluster) = cluster_on(Backend::Process).await else {
            unreachable!("the process backend is always there");
        };
        let lock = Lock::new(cluster.urls(), kept_options(Duration::from_secs(1))).unwrap();
        let kept = lock
            .try_acquire("frozen")
            .await
            .unwrap()
            .keep_alive(KeepAlive::new())
            .unwrap();
        cluster.pause(0).unwrap();
        cluster.pause(1).unwrap();
        let lost = kept.lost().await;
        // The last error is the last extension's, if one finished before the deadline (a
        // loaded machine may leave none finished).
        let Lost::Expired { last_error, .. } = &lost else {
            panic!("expected Expired, got {lost}");
        };
        assert!(
            last_error
                .as_deref()
                .is_none_or(|error| matches!(error, Error::ExtendFailed { .. })),
            "{lost}"
        );
        assert!(!kept.is_valid());
        assert_eq!(kept.remaining(), Duration::ZERO);
        cluster.resume(0).unwrap();
        cluster.resume(1).unwrap();
        kept.release().await;
    })
    .await;
}

#[tokio::test]
async fn max_hold_ends_the_hold_and_releases() {
    bounded(async {
        let cluster = crate::common::cluster(3).await;
        let lock = Lock::new(cluster.urls(), kept_options(Duration::from_millis(300))).unwrap();
        let kept = lock
            .try_acquire("bounded")
            .await
            .unwrap()
            .keep_alive(KeepAlive::new().max_hold(Duration::from_millis(700)))
            .unwrap();
        let lost = kept.lost().await;
        assert!(matches!(lost, Lost::MaxHold { .. }), "{lost}");
        assert!(kept.extensions() >= 1);
        kept.release().await;
        lock.settle().await;
        assert_no_keys(&cluster, 0..3).await;
    })
    .await;
}

#[tokio::test]
async fn with_lock_runs_the_work_under_the_lock_and_releases() {
    bounded(async {
        for backend in BACKENDS {
            let Some(cluster) = cluster_on(backend).await else {
                continue;
            };
            let lock = Lock::new(cluster.urls(), kept_options(Duration::from_secs(3))).unwrap();
            let observer = lock.clone();
            let value = lock
                .with_lock("job", KeepAlive::new(), async |lease| {
                    assert!(lease.is_valid());
                    let error = observer.try_acquire("job").await.unwrap_err();
                    assert!(matches!(error, Error::Held { .. }), "{error}");
                    7
                })
                .await
                .unwrap();
            assert_eq!(value, 7);
            lock.settle().await;
            assert_no_keys(&cluster, 0..3).await;
        }
    })
    .await;
}

/// Lost mid-work: the work's future is dropped at its current `.await` (it never finishes), and
/// the error says why.
// promise: keep-alive-lost-signal
#[tokio::test]
async fn with_lock_drops_the_work_when_the_lock_is_lost() {
    bounded(async {
        for backend in BACKENDS {
            let Some(cluster) = cluster_on(backend).await else {
                continue;
            };
            let lock = Lock::new(cluster.urls(), kept_options(Duration::from_secs(3))).unwrap();
            let finished = Arc::new(AtomicBool::new(false));
            let (started, started_rx) = tokio::sync::oneshot::channel();
            let work = lock.with_lock(
                "doomed",
                KeepAlive::new().every(Duration::from_millis(200)),
                {
                    let finished = Arc::clone(&finished);
                    async move |_lease| {
                        let _ = started.send(());
                        std::future::pending::<()>().await;
                        finished.store(true, Ordering::SeqCst);
                    }
                },
            );
            let delete = async {
                started_rx.await.unwrap();
                delete_on_a_majority(&cluster, "doomed").await;
            };
            let (result, ()) = tokio::join!(work, delete);
            let error = result.unwrap_err();
            assert!(
                matches!(error, Error::Lost(Lost::Taken { .. })),
                "{backend:?}: {error}"
            );
            assert!(!finished.load(Ordering::SeqCst));
            lock.settle().await;
            assert_no_keys(&cluster, 0..3).await;
        }
    })
    .await;
}

// promise: nothing-left-behind
#[tokio::test]
async fn with_lock_releases_when_the_work_panics() {
    bounded(async {
        let cluster = crate::common::cluster(3).await;
        let lock = Lock::new(cluster.urls(), kept_options(Duration::from_secs(3))).unwrap();
        let task = tokio::spawn({
            let lock = lock.clone();
            async move {
                lock.with_lock("panicky", KeepAlive::new(), async |_lease| {
                    panic!("the work failed");
                })
                .await
            }
        });
        assert!(task.await.unwrap_err().is_panic());
        lock.settle().await;
        assert_no_keys(&cluster, 0..3).await;
    })
    .await;
}

// promise: nothing-left-behind
#[tokio::test]
async fn with_lock_releases_when_its_future_is_dropped() {
    bounded(async {
        let cluster = crate::common::cluster(3).await;
        let lock = Lock::new(cluster.urls(), kept_options(Duration::from_secs(3))).unwrap();
        let (started, started_rx) = tokio::sync::oneshot::channel();
        let work = lock.with_lock("abandoned", KeepAlive::new(), async move |_lease| {
            let _ = started.send(());
            std::future::pending::<()>().await;
        });
        tokio::select! {
            _ = work => panic!("the work never ends"),
            _ = started_rx => {}
        }
        lock.settle().await;
        assert_no_keys(&cluster, 0..3).await;
    })
    .await;
}

#[tokio::test]
async fn an_interval_not_below_the_ttl_is_a_configuration_error() {
    bounded(async {
        let cluster = crate::common::cluster(1).await;
        let lock = Lock::new(
            [cluster.urls()[0].clone()],
            kept_options(Duration::from_secs(1)),
        )
        .unwrap();
        let error = lock
            .try_acquire("misconfigured")
            .await
            .unwrap()
            .keep_alive(KeepAlive::new().every(Duration::from_secs(1)))
            .unwrap_err();
        assert!(
            matches!(error, Error::Config(ConfigError::InvalidKeepAlive { .. })),
            "{error}"
        );
        lock.settle().await;
        assert_no_keys(&cluster, 0..1).await;
    })
    .await;
}

/// A guard handed to a thread outside any runtime can still be kept alive: the keep-alive runs
/// on the runtime the guard was acquired on.
#[tokio::test]
async fn a_guard_kept_alive_outside_any_runtime_is_kept_on_the_one_it_was_acquired_on() {
    bounded(async {
        let cluster = cluster_on(Backend::Process).await.unwrap();
        let lock = Lock::new(cluster.urls(), once()).unwrap();
        let guard = lock.try_acquire("kept-off-runtime").await.unwrap();
        let kept = std::thread::spawn(move || guard.keep_alive(KeepAlive::new()))
            .join()
            .unwrap()
            .unwrap();
        let lost = kept.lost_reason();
        assert!(lost.is_none(), "{lost:?}");
        assert!(kept.is_valid());
        kept.release().await;
        lock.settle().await;
        assert_no_keys(&cluster, 0..3).await;
    })
    .await;
}

/// A lease shows what its guard held: the resource, the fence, the time left, and a debug
/// output that names the resource without showing the token.
#[tokio::test]
async fn a_lease_shows_its_guards_resource_fence_and_time_left() {
    bounded(async {
        let cluster = cluster_on(Backend::Process).await.unwrap();
        let lock = Lock::new(cluster.urls(), once().fencing(true)).unwrap();
        // A second holder, so that the fence is neither 0 nor 1.
        lock.try_acquire("leased").await.unwrap().release().await;
        let guard = lock.try_acquire("leased").await.unwrap();
        let (fence, token) = (guard.fence(), guard.token().clone());
        assert!(fence.is_some_and(|fence| fence >= 2), "{fence:?}");
        let kept = guard.keep_alive(KeepAlive::new()).unwrap();
        assert_eq!(kept.resource(), b"leased");
        assert_eq!(kept.fence(), fence);
        assert!(kept.remaining() > Duration::ZERO);
        let debug = format!("{kept:?}");
        assert!(debug.contains("leased"), "{debug}");
        assert!(!debug.contains(token.as_str()), "{debug}");
        kept.release().await;
    })
    .await;
}

/// A lease whose extensions fail until its validity runs out, long before its `max_hold`, is
/// lost as expired: the bound had nothing to do with it.
#[tokio::test]
async fn a_lease_that_runs_out_long_before_max_hold_is_expired_not_max_hold() {
    bounded(async {
        let mut cluster = cluster_on(Backend::Process).await.unwrap();
        let lock = Lock::new(cluster.urls(), kept_options(Duration::from_secs(1))).unwrap();
        let kept = lock
            .try_acquire("frozen-bounded")
            .await
            .unwrap()
            .keep_alive(KeepAlive::new().max_hold(Duration::from_secs(3600)))
            .unwrap();
        cluster.pause(0).unwrap();
        cluster.pause(1).unwrap();
        let lost = kept.lost().await;
        assert!(matches!(lost, Lost::Expired { .. }), "{lost}");
        cluster.resume(0).unwrap();
        cluster.resume(1).unwrap();
        kept.release().await;
    })
    .await;
}

/// Dropping a kept guard stops the keep-alive and releases in the background, and that release
/// is counted: `Lock::settle` waits for it, and nothing is left once it returns.
#[tokio::test]
async fn a_dropped_kept_guard_is_released_and_settle_waits_for_it() {
    bounded(async {
        let cluster = cluster_on(Backend::Process).await.unwrap();
        let lock = Lock::new(cluster.urls(), once()).unwrap();
        let kept = lock
            .try_acquire("dropped-kept")
            .await
            .unwrap()
            .keep_alive(KeepAlive::new())
            .unwrap();
        // The acquisition's slower requests finished: no other background work is counted.
        lock.settle().await;
        drop(kept);
        // Nothing has run since the drop (one thread, no await in between), so the release
        // is still to come: settle must not be done yet.
        let mut settle = std::pin::pin!(lock.settle());
        assert!(futures::poll!(settle.as_mut()).is_pending());
        settle.await;
        assert_no_keys(&cluster, 0..3).await;
    })
    .await;
}
