//! Semaphores (`Request::permits`): k permits are k slots, each a lock won by the quorum rule, so
//! at most k hold at once; a permit is a full guard (fence, keep-alive, release); waiting is
//! woken by any slot. Beside them, the construction the field ships and this one replaces: a
//! counter of holders per node, won on a majority, which lets three clients hold two permits.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use quorumlock::{
    ConfigError, Error, KeepAlive, Lock, LockOptions, MAX_PERMITS, MAX_RESOURCES, Owner, Patience,
    Request, Resources,
};

use crate::common::*;

fn permit(name: &str, permits: u32) -> Request<'_> {
    Request::from(name).permits(permits)
}

#[tokio::test]
async fn permits_are_checked_before_anything_is_sent() {
    // Nothing listens on port 1: a request sent there would fail as unavailable, not config.
    let lock = Lock::new(["redis://127.0.0.1:1"], once()).unwrap();
    let refused = async |request: Request<'_>| match lock.try_acquire(request).await {
        Err(Error::Config(error)) => error,
        other => panic!("{other:?}"),
    };
    assert_eq!(refused(permit("w", 0)).await, ConfigError::ZeroPermits);
    assert_eq!(
        refused(permit("w", MAX_PERMITS + 1)).await,
        ConfigError::TooManyPermits {
            permits: MAX_PERMITS + 1,
            max: MAX_PERMITS
        }
    );
    let set = Resources::new(["a", "b"]).unwrap();
    assert_eq!(
        refused(Request::from(&set).permits(2)).await,
        ConfigError::PermitsOfSet
    );
    assert_eq!(refused(permit("", 2)).await, ConfigError::EmptyResource);
}

// promise: semaphore-permits
#[tokio::test]
async fn k_permits_hold_k_at_once_and_a_release_frees_one() {
    bounded(async {
        let (_cluster, lock) = quorum_lock(3, once()).await;
        let first = lock.acquire(permit("workers", 2)).await.unwrap();
        let second = lock.acquire(permit("workers", 2)).await.unwrap();
        let mut slots = [first.resource().to_vec(), second.resource().to_vec()];
        slots.sort();
        assert_eq!(slots, [b"workers:0".to_vec(), b"workers:1".to_vec()]);
        match lock.acquire(permit("workers", 2)).await {
            Err(Error::Held { resource, .. }) => assert_eq!(resource, b"workers"),
            other => panic!("a third permit of two: {other:?}"),
        }
        let freed = second.resource().to_vec();
        second.release().await;
        let third = lock.acquire(permit("workers", 2)).await.unwrap();
        assert_eq!(third.resource(), freed);
        first.release().await;
        third.release().await;
    })
    .await;
}

/// The counterexample of a counter voted on by a majority, run against real servers: with 2
/// permits on 3 nodes, A and B count on node 0, B and C on node 1, A and C on node 2, and each
/// of the three wins a majority. The same three clients on slots: two hold, the third is refused.
// promise: semaphore-permits
#[tokio::test]
async fn a_counter_won_on_a_majority_lets_three_hold_two_permits_and_slots_do_not() {
    bounded(async {
        let (cluster, lock) = quorum_lock(3, once()).await;
        // The field's construction: per node, a set of holders, joined while it has room.
        const JOIN: &str = "if redis.call('SCARD', KEYS[1]) < tonumber(ARGV[2]) then \
                            redis.call('SADD', KEYS[1], ARGV[1]) return 1 end return 0";
        let mut won = [0usize; 3];
        for (node, clients) in [(0, [0, 1]), (1, [1, 2]), (2, [0, 2])] {
            let mut direct = cluster.connection(node).await.unwrap();
            for client in clients {
                let joined: i64 = redis::Script::new(JOIN)
                    .key("counted:workers")
                    .arg(client)
                    .arg(2)
                    .invoke_async(&mut direct)
                    .await
                    .unwrap();
                won[client] += usize::try_from(joined).unwrap();
            }
        }
        let holders = won.iter().filter(|&&votes| votes >= lock.quorum_size());
        assert_eq!(
            holders.count(),
            3,
            "the counter lets all three hold two permits"
        );

        let clients: Vec<Lock> = (0..3)
            .map(|_| Lock::new(cluster.urls(), once()).unwrap())
            .collect();
        let mut guards = Vec::new();
        let mut refused = 0;
        for client in &clients {
            match client.acquire(permit("workers", 2)).await {
                Ok(guard) => guards.push(guard),
                Err(Error::Held { .. }) => refused += 1,
                Err(other) => panic!("{other}"),
            }
        }
        assert_eq!((guards.len(), refused), (2, 1));
        for guard in guards {
            guard.release().await;
        }
    })
    .await;
}

/// Clients contending for 2 permits, each holding for a moment, many times: never more than 2
/// valid guards at once, and every acquisition served.
// promise: semaphore-permits
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn contending_clients_never_hold_more_than_the_permits() {
    bounded(async {
        let most = most_permits_held("pool", 2, |_| 1).await;
        assert!((1..=2).contains(&most), "{most} held 2 permits at once");
    })
    .await;
}

/// Six clients of their own (each a `Lock`) on three servers, each taking `take(client)` of
/// `permits` permits of `name` five times, holding each for a moment so that holds overlap
/// when they can: the most permits held at once. Each guard holds as many slots as it took,
/// and is valid when it is released.
async fn most_permits_held(name: &'static str, permits: u32, take: fn(u32) -> u32) -> usize {
    let (cluster, _lock) = quorum_lock(3, once()).await;
    let options = LockOptions::new()
        .ttl(Duration::from_secs(10))
        .node_timeout(Duration::from_secs(5))
        .connect_timeout(Duration::from_secs(5))
        .patience(Patience::Wait(Duration::from_secs(60)));
    let in_use = Arc::new(AtomicUsize::new(0));
    let most = Arc::new(AtomicUsize::new(0));
    let tasks: Vec<_> = (0..6u32)
        .map(|client| {
            let lock = Lock::new(cluster.urls(), options.clone()).unwrap();
            let (in_use, most) = (Arc::clone(&in_use), Arc::clone(&most));
            let take = take(client);
            tokio::spawn(async move {
                for _ in 0..5 {
                    let guard = lock
                        .acquire(permit(name, permits).take(take))
                        .await
                        .unwrap();
                    let held = guard.resources().count();
                    assert_eq!(held, take as usize);
                    let now = in_use.fetch_add(held, Ordering::SeqCst) + held;
                    most.fetch_max(now, Ordering::SeqCst);
                    tokio::time::sleep(Duration::from_millis(5)).await;
                    assert!(guard.is_valid());
                    in_use.fetch_sub(held, Ordering::SeqCst);
                    guard.release().await;
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.unwrap();
    }
    most.load(Ordering::SeqCst)
}

/// A waiter in another client, both permits held for a minute: the release of one wakes it,
/// and it takes that slot well before any key could have expired.
// promise: semaphore-permits
#[tokio::test]
async fn a_waiter_takes_the_slot_another_client_releases() {
    bounded(async {
        let (cluster, lock) = quorum_lock(3, once().ttl(Duration::from_secs(60))).await;
        let holders = [
            lock.acquire(permit("jobs", 2)).await.unwrap(),
            lock.acquire(permit("jobs", 2)).await.unwrap(),
        ];
        let waiter = Lock::new(cluster.urls(), once()).unwrap();
        let waiting_call = {
            let waiter = waiter.clone();
            tokio::spawn(async move {
                let request = permit("jobs", 2).patience(Patience::Wait(Duration::from_secs(30)));
                waiter.acquire(request).await
            })
        };
        waiting(&waiter, "jobs:0", 1).await;
        let [kept, released] = holders;
        let freed = released.resource().to_vec();
        released.release().await;
        let guard = waiting_call.await.unwrap().unwrap();
        assert_eq!(guard.resource(), freed);
        assert!(kept.is_valid());
        guard.release().await;
        kept.release().await;
    })
    .await;
}

/// A semaphore's waiters answer a release with one attempt at its slot, and the waiter that
/// then moves up into the heads, told of no release, reads the slots instead of trying them:
/// both held, it sends no `SET` (a search would send one per slot).
// promise: semaphore-permits
#[tokio::test]
async fn a_waiter_moved_up_into_a_full_semaphores_heads_reads_the_slots_and_tries_none() {
    bounded(async {
        let (cluster, lock) = quorum_lock(3, once().ttl(Duration::from_secs(60))).await;
        let holders = [
            lock.acquire(permit("full", 2)).await.unwrap(),
            lock.acquire(permit("full", 2)).await.unwrap(),
        ];
        let waiter = Lock::new(cluster.urls(), once()).unwrap();
        let mut calls = Vec::new();
        for _ in 0..3 {
            let caller = waiter.clone();
            calls.push(tokio::spawn(async move {
                let request = permit("full", 2).patience(Patience::Wait(Duration::from_secs(30)));
                caller.acquire(request).await
            }));
            waiting(&waiter, "full:0", calls.len()).await;
        }
        // Each of the two heads read the slots once (the script reads the server's clock).
        let reads = async |count| {
            quorumlock_harness::eventually(Duration::from_secs(10), async || {
                command_calls(&cluster, 0, "time").await >= count
            })
            .await
        };
        assert!(reads(2).await, "the two heads read the slots");
        let sets = command_calls(&cluster, 0, "set").await;

        let [released, kept] = holders;
        released.release().await;
        waiting(&waiter, "full:0", 2).await;
        assert!(reads(3).await, "the waiter moved up read the slots");
        assert_eq!(
            command_calls(&cluster, 0, "set").await - sets,
            1,
            "one attempt, at the freed slot"
        );

        kept.release().await;
        waiting(&waiter, "full:0", 1).await;
        for call in calls {
            if call.is_finished() {
                call.await.unwrap().unwrap().release().await;
            } else {
                call.abort();
            }
        }
    })
    .await;
}

/// A permit is a whole guard: with fencing, its slot's fence, which grows from one holder of
/// the slot to the next; kept alive, it keeps its slot.
// promise: semaphore-permits
#[tokio::test]
async fn a_permit_carries_its_slots_fence_and_can_be_kept_alive() {
    bounded(async {
        let (_cluster, lock) = quorum_lock(3, once().fencing(true)).await;
        let first = lock.acquire(permit("fenced", 2)).await.unwrap();
        let other = lock.acquire(permit("fenced", 2)).await.unwrap();
        let (slot, fence) = (first.resource().to_vec(), first.fence().unwrap());
        first.release().await;
        let next = lock.acquire(permit("fenced", 2)).await.unwrap();
        assert_eq!(next.resource(), slot, "the only free slot");
        assert!(next.fence().unwrap() > fence, "the slot's fence grows");
        let kept = next
            .keep_alive(KeepAlive::new().every(Duration::from_millis(100)))
            .unwrap();
        assert!(kept.lease().is_valid());
        assert!(matches!(
            lock.acquire(permit("fenced", 2)).await,
            Err(Error::Held { .. })
        ));
        kept.release().await;
        other.release().await;
    })
    .await;
}

/// A holder that crashed (its guard forgotten, never released) frees only its own permit, when
/// its key expires; the other holder keeps its own.
// promise: semaphore-permits
#[tokio::test]
async fn a_crashed_holders_permit_frees_by_its_own_ttl() {
    bounded(async {
        let (_cluster, lock) = quorum_lock(3, once().ttl(Duration::from_secs(60))).await;
        let crashed = lock
            .acquire(permit("crash", 2).ttl(Duration::from_millis(300)))
            .await
            .unwrap();
        let freed = crashed.resource().to_vec();
        std::mem::forget(crashed);
        let kept = lock.acquire(permit("crash", 2)).await.unwrap();
        let request = permit("crash", 2).patience(Patience::Wait(Duration::from_secs(30)));
        let guard = lock.acquire(request).await.unwrap();
        assert_eq!(guard.resource(), freed);
        assert!(kept.is_valid());
        guard.release().await;
        kept.release().await;
    })
    .await;
}

#[tokio::test]
async fn taking_several_permits_is_checked_before_anything_is_sent() {
    // Nothing listens on port 1: a request sent there would fail as unavailable, not config.
    let lock = Lock::new(["redis://127.0.0.1:1"], once()).unwrap();
    let refused = async |request: Request<'_>| match lock.try_acquire(request).await {
        Err(Error::Config(ConfigError::InvalidTake { take, .. })) => take,
        other => panic!("{other:?}"),
    };
    assert_eq!(refused(permit("w", 4).take(0)).await, 0);
    assert_eq!(refused(permit("w", 4).take(5)).await, 5);
    let most = u32::try_from(MAX_RESOURCES).unwrap();
    assert_eq!(
        refused(permit("w", most * 2).take(most + 1)).await,
        most + 1
    );
    assert_eq!(refused(Request::from("w").take(2)).await, 2);
    assert_eq!(refused(permit("w", 4).take(2).owner(Owner::new())).await, 2);
}

/// Two of four permits taken at once are two slots, held together and released together; a
/// request for two when one is free takes nothing (the free one is still there for a single
/// permit), and a waiter for two in another client gets them once two are free.
// promise: semaphore-take
#[tokio::test]
async fn several_permits_are_taken_all_or_none() {
    bounded(async {
        let (cluster, lock) = quorum_lock(3, once().ttl(Duration::from_secs(60))).await;
        let one = lock.acquire(permit("bulk", 4)).await.unwrap();
        let two = lock.acquire(permit("bulk", 4).take(2)).await.unwrap();
        let slots: Vec<Vec<u8>> = two.resources().map(<[u8]>::to_vec).collect();
        assert_eq!(slots.len(), 2, "{slots:?}");
        assert!(!slots.contains(&one.resource().to_vec()), "{slots:?}");
        assert!(two.is_valid());
        match lock.acquire(permit("bulk", 4).take(2)).await {
            Err(Error::Held { resource, .. }) => assert_eq!(resource, b"bulk"),
            other => panic!("two of four with three held: {other:?}"),
        }
        let last = lock.acquire(permit("bulk", 4)).await.unwrap();
        let waiter = Lock::new(cluster.urls(), once()).unwrap();
        let waiting_call = {
            let waiter = waiter.clone();
            tokio::spawn(async move {
                let request = permit("bulk", 4)
                    .take(2)
                    .patience(Patience::Wait(Duration::from_secs(30)));
                waiter.acquire(request).await
            })
        };
        waiting(&waiter, "bulk:0", 1).await;
        let mut freed = vec![one.resource().to_vec(), last.resource().to_vec()];
        freed.sort();
        one.release().await;
        last.release().await;
        let taken = waiting_call.await.unwrap().unwrap();
        let mut got: Vec<Vec<u8>> = taken.resources().map(<[u8]>::to_vec).collect();
        got.sort();
        assert_eq!(got, freed);
        taken.release().await;
        two.release().await;
        assert_no_lock_keys(&cluster).await;
    })
    .await;
}

/// Clients taking one or two of three permits, contending many times: the permits held never
/// add up to more than three, and every acquisition is served (none holds a part and waits for
/// the rest).
// promise: semaphore-take
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn takers_of_one_and_two_never_hold_more_than_the_permits() {
    bounded(async {
        let most = most_permits_held("mixed", 3, |client| 1 + client % 2).await;
        assert!((2..=3).contains(&most), "{most} permits of 3 held at once");
    })
    .await;
}
