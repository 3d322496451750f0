//! What `Lock::acquire` does with a held lock: by default it waits (up to the lock's TTL, or
//! `LockOptions::wait`), woken by the release; `acquire_until` gives up when cancelled, also
//! while waiting; `LockOptions::retry` makes it poll instead.

use quorumlock::Patience;
use std::time::Duration;

use quorumlock::{Error, Lock, LockOptions, RetryPolicy};

use crate::common::{assert_no_keys, bounded, cluster, command_calls, waiting};

/// Timeouts no loaded machine trips, and the default way of acquiring.
fn waiting_by_default(ttl: Duration) -> LockOptions {
    LockOptions::new()
        .ttl(ttl)
        .node_timeout(Duration::from_secs(5))
        .connect_timeout(Duration::from_secs(5))
}

#[tokio::test]
async fn acquire_waits_for_a_held_lock_until_it_is_released() {
    bounded(async {
        let cluster = cluster(3).await;
        let lock = Lock::new(cluster.urls(), waiting_by_default(Duration::from_secs(60))).unwrap();
        let held = lock.try_acquire("job").await.unwrap();
        // The old default, three attempts 100–200 ms apart, gave up within half a second; the
        // holder here releases only once the caller is seen waiting.
        let caller = {
            let lock = lock.clone();
            tokio::spawn(async move { lock.acquire("job").await })
        };
        waiting(&lock, "job", 1).await;
        held.release().await;
        let guard = caller.await.unwrap().expect("woken by the release");
        guard.release().await;
        lock.settle().await;
        assert_no_keys(&cluster, 0..3).await;
    })
    .await;
}

#[tokio::test]
async fn acquire_until_gives_up_when_cancelled_while_waiting() {
    bounded(async {
        let cluster = cluster(3).await;
        let lock = Lock::new(cluster.urls(), waiting_by_default(Duration::from_secs(60))).unwrap();
        let held = lock.try_acquire("job").await.unwrap();
        let (cancel, cancelled) = tokio::sync::oneshot::channel::<()>();
        let caller = {
            let lock = lock.clone();
            tokio::spawn(async move {
                lock.acquire_until("job", async {
                    let _ = cancelled.await;
                })
                .await
            })
        };
        // Past its first attempt: it found the lock held, read the keys' expiry, and sleeps.
        assert!(
            quorumlock_harness::eventually(Duration::from_secs(10), async || {
                command_calls(&cluster, 0, "pttl").await > 0
            })
            .await,
            "the caller reads the expiry bound"
        );
        assert_eq!(lock.waiters("job"), 1);
        cancel.send(()).unwrap();
        let result = caller.await.unwrap();
        assert!(matches!(result, Err(Error::Cancelled { .. })), "{result:?}");
        assert_eq!(lock.waiters("job"), 0, "it left the queue");
        held.release().await;
    })
    .await;
}

#[tokio::test]
async fn a_retry_policy_or_a_zero_wait_makes_acquire_give_up_on_a_held_lock() {
    bounded(async {
        let cluster = cluster(3).await;
        let holder =
            Lock::new(cluster.urls(), waiting_by_default(Duration::from_secs(60))).unwrap();
        let held = holder.try_acquire("job").await.unwrap();
        for options in [
            waiting_by_default(Duration::from_secs(60)).patience(Patience::Once),
            waiting_by_default(Duration::from_secs(60)).patience(Patience::Wait(Duration::ZERO)),
            waiting_by_default(Duration::from_secs(60)).patience(Patience::Retry(
                RetryPolicy::new()
                    .attempts(2)
                    .delay(Duration::from_millis(1)),
            )),
        ] {
            let lock = Lock::new(cluster.urls(), options).unwrap();
            let result = lock.acquire("job").await;
            assert!(matches!(result, Err(Error::Held { .. })), "{result:?}");
        }
        held.release().await;
    })
    .await;
}
