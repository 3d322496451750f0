//! Reentrancy by owner (`Request::owner`): an owner that holds a resource gets it again at
//! once, as another guard of the same hold (token, fence, validity, lost signal); the lock is
//! released with the owner's last guard, on every path; anyone else, and an owner whose hold ran
//! out, acquires as any other caller would.
//!
//! Every lock here needs all of its nodes (`quorum_size(n)`), so each node's key can be read.

use std::time::Duration;

use quorumlock::{Error, KeepAlive, Lock, LockOptions, Owner, Patience, Request};
use redis::AsyncCommands;

use crate::common::{assert_no_keys, bounded, cluster, once, stored, waiting};

const NODES: usize = 3;

fn lock(cluster: &quorumlock_harness::TestCluster, options: LockOptions) -> Lock {
    Lock::new(cluster.urls(), options.quorum_size(NODES)).unwrap()
}

/// Whether every node holds `key` with `token`.
async fn held_everywhere(
    cluster: &quorumlock_harness::TestCluster,
    key: &[u8],
    token: &str,
) -> bool {
    for node in 0..NODES {
        if stored(cluster, node, key).await.as_deref() != Some(token) {
            return false;
        }
    }
    true
}

/// Whether two readings of one moment agree: `valid_until` maps the lease clock onto `Instant`
/// at each call, which moves it by the nanoseconds between the two clocks' reads.
fn same_moment(a: std::time::Instant, b: std::time::Instant) -> bool {
    a.max(b).duration_since(a.min(b)) < Duration::from_millis(1)
}

// promise: owner-one-hold
#[tokio::test]
async fn an_owner_acquires_what_it_holds_at_once_and_the_last_release_frees_it() {
    bounded(async {
        let cluster = cluster(NODES).await;
        let lock = lock(&cluster, once().ttl(Duration::from_secs(60)));
        let job = Owner::new();

        let outer = lock
            .acquire(Request::from("invoice").owner(job))
            .await
            .unwrap();
        // One attempt, no wait: a caller that waited for itself would get `Held`.
        let inner = lock
            .acquire(Request::from("invoice").owner(job))
            .await
            .unwrap();
        assert_eq!(inner.token(), outer.token());
        assert!(same_moment(inner.valid_until(), outer.valid_until()));
        assert_eq!((outer.hold_count(), inner.hold_count()), (2, 2));
        assert!(inner.outcomes().is_empty(), "a re-entry sends nothing");

        // Anyone else is held off: no owner, another owner, a clone of the lock for another.
        let other = Owner::new();
        for request in [
            Request::from("invoice"),
            Request::from("invoice").owner(other),
        ] {
            let error = lock.acquire(request).await;
            assert!(matches!(error, Err(Error::Held { .. })), "{error:?}");
        }
        // Clones of the lock share the owner's holds.
        let through_clone = lock
            .clone()
            .acquire(Request::from("invoice").owner(job))
            .await
            .unwrap();
        assert_eq!(through_clone.token(), outer.token());
        assert_eq!(through_clone.release().await.still_held_by, 2);

        // The inner release leaves the lock held, on every node.
        let report = inner.release().await;
        assert_eq!((report.still_held_by, report.held), (1, 0));
        assert!(report.outcomes.is_empty());
        assert_eq!(outer.hold_count(), 1);
        assert!(held_everywhere(&cluster, outer.key(), outer.token().as_str()).await);
        let error = lock.acquire(Request::from("invoice").owner(other)).await;
        assert!(matches!(error, Err(Error::Held { .. })), "{error:?}");

        // The last one releases it everywhere.
        let report = outer.release().await;
        assert_eq!((report.still_held_by, report.held), (0, NODES));
        lock.settle().await;
        assert_no_keys(&cluster, 0..NODES).await;
        lock.acquire(Request::from("invoice").owner(other))
            .await
            .unwrap()
            .release()
            .await;
    })
    .await;
}

// promise: owner-one-hold
#[tokio::test]
async fn dropped_guards_release_only_with_the_owners_last() {
    bounded(async {
        let cluster = cluster(NODES).await;
        let lock = lock(&cluster, once().ttl(Duration::from_secs(60)));
        let job = Owner::new();
        let outer = lock.acquire(Request::from("job").owner(job)).await.unwrap();
        let (key, token) = (outer.key().to_vec(), outer.token().as_str().to_owned());
        let inner = lock.acquire(Request::from("job").owner(job)).await.unwrap();

        // The outer guard goes first, dropped: the inner one still holds the lock.
        drop(outer);
        lock.settle().await;
        assert!(held_everywhere(&cluster, &key, &token).await);
        assert_eq!(inner.hold_count(), 1);
        assert!(inner.is_valid());

        drop(inner);
        lock.settle().await;
        assert_no_keys(&cluster, 0..NODES).await;
    })
    .await;
}

// promise: owner-one-hold
#[tokio::test]
async fn nested_guards_share_validity_fence_and_the_lost_signal_with_a_kept_one() {
    bounded(async {
        let cluster = cluster(NODES).await;
        let ttl = Duration::from_secs(2);
        let lock = lock(&cluster, once().ttl(ttl).fencing(true));
        let job = Owner::new();
        let kept = lock
            .acquire(Request::from("report").owner(job))
            .await
            .unwrap()
            .keep_alive(KeepAlive::new().every(Duration::from_millis(50)))
            .unwrap();
        let inner = lock
            .acquire(Request::from("report").owner(job))
            .await
            .unwrap();
        assert_eq!(inner.fence(), kept.fence());
        assert!(inner.fence().is_some());
        assert_eq!(inner.token(), kept.token());

        // The keep-alive's extensions move the nested guard's validity too.
        let first = inner.valid_until();
        quorumlock_harness::eventually(Duration::from_secs(5), async || kept.extensions() >= 2)
            .await;
        assert!(kept.extensions() >= 2, "extended");
        assert!(
            inner.valid_until() > first,
            "the nested guard sees the extension"
        );

        // Someone deletes the keys: the keep-alive finds the lock taken, and the nested guard
        // stops being valid with it, long before its validity would have run out.
        for node in 0..NODES {
            let mut connection = cluster.connection(node).await.unwrap();
            let _: i64 = connection.del(inner.key()).await.unwrap();
        }
        let lost = tokio::time::timeout(Duration::from_secs(20), kept.lost())
            .await
            .expect("the loss is noticed");
        assert!(matches!(lost, quorumlock::Lost::Taken { .. }), "{lost}");
        assert!(!inner.is_valid(), "a nested guard sees the loss");
        assert_eq!(inner.remaining(), Duration::ZERO);
        kept.release().await;
        inner.release().await;
    })
    .await;
}

#[tokio::test]
async fn an_owners_task_waiting_behind_another_of_its_tasks_joins_its_hold() {
    bounded(async {
        let cluster = cluster(NODES).await;
        let lock = lock(&cluster, once().ttl(Duration::from_secs(60)));
        let holder = lock.try_acquire("shared").await.unwrap();
        let job = Owner::new();
        let tasks: Vec<_> = (0..2)
            .map(|_| {
                let lock = lock.clone();
                let request = Request::from("shared")
                    .owner(job)
                    .patience(Patience::Wait(Duration::from_secs(30)));
                tokio::spawn(async move { lock.acquire(request).await })
            })
            .collect();
        waiting(&lock, "shared", 2).await;
        holder.release().await;
        let mut guards = Vec::new();
        for task in tasks {
            guards.push(task.await.unwrap().unwrap());
        }
        assert_eq!(guards[0].token(), guards[1].token(), "one hold, two guards");
        assert_eq!(guards[0].hold_count(), 2);
        for guard in guards {
            guard.release().await;
        }
        lock.settle().await;
        assert_no_keys(&cluster, 0..NODES).await;
    })
    .await;
}

#[tokio::test]
async fn an_owner_whose_hold_ran_out_acquires_anew() {
    bounded(async {
        let cluster = cluster(NODES).await;
        let lock = lock(
            &cluster,
            once()
                .ttl(Duration::from_millis(300))
                .max_ttl(Duration::from_secs(60)),
        );
        let job = Owner::new();
        let expired = lock
            .acquire(Request::from("short").owner(job))
            .await
            .unwrap();
        quorumlock_harness::eventually(Duration::from_secs(3), async || !expired.is_valid()).await;
        assert!(!expired.is_valid());
        // Not joined: the keys may be gone, so a guard of it would promise nothing. The new
        // acquisition waits for them to expire on the nodes, as anyone's would.
        let fresh = lock
            .acquire(
                Request::from("short")
                    .owner(job)
                    .ttl(Duration::from_secs(60))
                    .patience(Patience::Wait(Duration::from_secs(10))),
            )
            .await
            .unwrap();
        assert_ne!(fresh.token(), expired.token());
        assert_eq!((fresh.hold_count(), expired.hold_count()), (1, 1));
        // The old hold's release touches none of the new one's keys.
        let report = expired.release().await;
        assert_eq!(report.held, 0);
        assert!(held_everywhere(&cluster, fresh.key(), fresh.token().as_str()).await);
        // And the owner's next acquisition joins the fresh hold.
        let again = lock
            .acquire(Request::from("short").owner(job))
            .await
            .unwrap();
        assert_eq!(again.token(), fresh.token());
        drop(again);
        fresh.release().await;
    })
    .await;
}
