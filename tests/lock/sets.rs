//! Sets of resources (`Lock::acquire_all`): every key or none on each node, a node votes only
//! with the whole set, one guard extends and releases it all, and what merely expired is
//! reported per node and key, never an error.

use quorumlock::{Patience, Request};
use std::time::Duration;

use quorumlock::{
    ConfigError, Error, Lock, LockOptions, MAX_RESOURCES, NodeReply, Resources, RetryPolicy,
};
use redis::AsyncCommands;

use crate::common::*;

const PREFIX: &str = "quorumlock:";

fn key(resource: &str) -> String {
    format!("{PREFIX}{resource}")
}

fn set(names: &[&str]) -> Resources {
    Resources::new(names).unwrap()
}

/// Deletes `resource`'s key on `node`, as if it had expired there.
async fn expire(cluster: &quorumlock_harness::TestCluster, node: usize, resource: &str) {
    let mut direct = cluster.connection(node).await.unwrap();
    let _: () = direct.del(key(resource)).await.unwrap();
}

#[test]
fn a_set_is_checked_when_it_is_made() {
    assert_eq!(
        Resources::new(Vec::<&str>::new()),
        Err(ConfigError::EmptySet)
    );
    assert_eq!(Resources::new(["a", ""]), Err(ConfigError::EmptyResource));
    assert_eq!(
        Resources::new(["b", "a", "b"]),
        Err(ConfigError::DuplicateResource {
            resource: b"b".to_vec()
        })
    );
    let too_many: Vec<String> = (0..=MAX_RESOURCES).map(|i| format!("r{i}")).collect();
    assert_eq!(
        Resources::new(&too_many),
        Err(ConfigError::TooManyResources {
            count: MAX_RESOURCES + 1,
            max: MAX_RESOURCES
        })
    );
    assert_eq!(
        set(&["y", "x"]),
        set(&["x", "y"]),
        "the order given does not matter"
    );
}

#[tokio::test]
async fn a_set_is_taken_on_every_node_and_released_with_one_guard() {
    bounded(async {
        let (cluster, lock) = quorum_lock(5, once()).await;
        // Every connection made, so that every node gets the request before the decision.
        warm_up(&lock).await;
        let guard = lock.acquire(&set(&["c", "a", "b"])).await.unwrap();
        assert_eq!(
            guard.resources().collect::<Vec<_>>(),
            [&b"a"[..], &b"b"[..], &b"c"[..]]
        );
        lock.settle().await;
        for node in 0..5 {
            for resource in ["a", "b", "c"] {
                assert_eq!(
                    stored(&cluster, node, key(resource).as_bytes())
                        .await
                        .as_deref(),
                    Some(guard.token().as_str()),
                    "node {node}, {resource}"
                );
            }
        }
        let report = guard.release().await;
        assert!(
            report.held >= 3,
            "returns once a quorum is free: {report:?}"
        );
        assert_eq!(report.set_outcomes.len(), report.held, "{report:?}");
        assert!(report.set_outcomes.iter().all(|outcome| outcome.held_all()));
        lock.settle().await;
        assert_no_keys(&cluster, 0..5).await;
    })
    .await;
}

// promise: sets-all-or-nothing
#[tokio::test]
async fn a_set_with_one_resource_held_by_another_on_a_majority_is_held_and_leaves_nothing_of_ours()
{
    bounded(async {
        let (cluster, lock) = quorum_lock(5, once()).await;
        let other = Lock::new(cluster.urls(), once()).unwrap();
        // Every connection made, so that the holder's key is on every node.
        warm_up(&other).await;
        let holder = other.try_acquire("b").await.unwrap();
        other.settle().await;
        let error = lock.try_acquire(&set(&["a", "b", "c"])).await.unwrap_err();
        assert!(matches!(error, Error::Held { .. }), "{error}");
        lock.settle().await;
        for node in 0..5 {
            assert_eq!(key_count(&cluster, node).await, 1, "node {node}");
            assert_eq!(
                stored(&cluster, node, key("b").as_bytes()).await.as_deref(),
                Some(holder.token().as_str()),
                "node {node}: the holder's key is untouched"
            );
        }
        holder.release().await;
    })
    .await;
}

/// A key of the set that holds another type (a list someone pushed there) is taken, as a held
/// string is: the set is `Held`, and the list and the rest of the nodes are left as they were.
#[tokio::test]
async fn a_set_whose_key_holds_another_type_is_held() {
    bounded(async {
        let (cluster, lock) = quorum_lock(3, once()).await;
        for node in 0..3 {
            let mut connection = cluster.connection(node).await.unwrap();
            let _: () = connection.rpush(key("b"), "not a lock").await.unwrap();
        }
        let error = lock.try_acquire(&set(&["a", "b"])).await.unwrap_err();
        assert!(matches!(error, Error::Held { .. }), "{error}");
        lock.settle().await;
        for node in 0..3 {
            assert_eq!(
                key_count(&cluster, node).await,
                1,
                "node {node}: only the list"
            );
        }
    })
    .await;
}

#[tokio::test]
async fn a_node_holding_a_stray_key_of_the_set_votes_no_and_the_others_take_it() {
    bounded(async {
        let (cluster, lock) = quorum_lock(5, once()).await;
        let mut direct = cluster.connection(0).await.unwrap();
        let _: () = direct.set(key("c"), "someone-else").await.unwrap();
        let guard = lock.try_acquire(&set(&["a", "b", "c"])).await.unwrap();
        lock.settle().await;
        assert!(
            matches!(
                guard.outcomes()[0].reply,
                NodeReply::NotOurs | NodeReply::NoReply
            ),
            "{:?}",
            guard.outcomes()
        );
        assert!(
            holders(guard.outcomes()).len() >= 3,
            "{:?}",
            guard.outcomes()
        );
        // Node 0 set none of the set: only the stray key is there.
        assert_eq!(key_count(&cluster, 0).await, 1);
        assert_eq!(
            stored(&cluster, 0, key("c").as_bytes()).await.as_deref(),
            Some("someone-else")
        );
        guard.release().await;
        lock.settle().await;
        assert_eq!(
            stored(&cluster, 0, key("c").as_bytes()).await.as_deref(),
            Some("someone-else"),
            "the release leaves the stray key alone"
        );
        assert_no_keys(&cluster, 1..5).await;
    })
    .await;
}

#[tokio::test]
async fn a_release_of_a_set_whose_keys_partly_expired_reports_them_per_node_and_key() {
    bounded(async {
        let (cluster, lock) = quorum_lock(5, once()).await;
        warm_up(&lock).await;
        let guard = lock.try_acquire(&set(&["a", "b", "c"])).await.unwrap();
        lock.settle().await;
        expire(&cluster, 0, "b").await;
        expire(&cluster, 1, "b").await;
        expire(&cluster, 1, "c").await;
        let report = guard.release().await;
        lock.settle().await;
        // Released everywhere: a quorum answered before the release returned.
        assert!(report.set_outcomes.len() >= 3, "{report:?}");
        for outcome in &report.set_outcomes {
            let expected = match outcome.node {
                0 => vec![true, false, true],
                1 => vec![true, false, false],
                _ => vec![true, true, true],
            };
            assert_eq!(outcome.held, expected, "node {}", outcome.node);
        }
        let all_held = report
            .set_outcomes
            .iter()
            .filter(|outcome| outcome.held_all())
            .count();
        assert_eq!(report.held, all_held, "{report:?}");
        assert!(
            report.outcomes.iter().all(|outcome| matches!(
                outcome.reply,
                NodeReply::Ours | NodeReply::NotOurs | NodeReply::NoReply
            )),
            "merely expired keys are no error: {report:?}"
        );
        assert_no_keys(&cluster, 0..5).await;
    })
    .await;
}

// promise: sets-all-or-nothing
#[tokio::test]
async fn an_extension_of_a_set_counts_only_the_nodes_that_still_hold_every_key() {
    bounded(async {
        let (cluster, lock) = quorum_lock(
            5,
            once()
                .ttl(Duration::from_secs(10))
                .max_ttl(Duration::from_secs(60)),
        )
        .await;
        warm_up(&lock).await;
        let mut guard = lock.try_acquire(&set(&["a", "b"])).await.unwrap();
        lock.settle().await;
        expire(&cluster, 0, "b").await;
        guard.extend(Duration::from_secs(60)).await.unwrap();
        let outcome = guard
            .set_outcomes()
            .iter()
            .find(|outcome| outcome.node == 0);
        if let Some(outcome) = outcome {
            assert_eq!(outcome.held, [true, false]);
        }
        for node in [1, 2] {
            expire(&cluster, node, "a").await;
        }
        let error = guard.extend(Duration::from_secs(60)).await.unwrap_err();
        assert!(matches!(error, Error::ExtendFailed { .. }), "{error}");
        lock.settle().await;
        let mut direct = cluster.connection(0).await.unwrap();
        let left: i64 = direct.pttl(key("a")).await.unwrap();
        assert!(
            left <= 10_000,
            "a node missing one key of the set extends none of it: {left} ms"
        );
        guard.release().await;
        lock.settle().await;
        assert_no_keys(&cluster, 0..5).await;
    })
    .await;
}

// promise: sets-all-or-nothing
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sets_named_in_any_order_and_overlapping_sets_exclude_each_other() {
    bounded(async {
        let (cluster, lock) = quorum_lock(5, once()).await;
        let retry = RetryPolicy::new()
            .attempts(20)
            .delay(Duration::ZERO)
            .jitter(Duration::from_millis(50));
        let sets = [set(&["x", "y"]), set(&["y", "x"]), set(&["y", "z"])];
        let attempts: Vec<_> = (0..12)
            .map(|i| {
                let (lock, resources, retry) = (lock.clone(), sets[i % 3].clone(), retry.clone());
                tokio::spawn(async move {
                    lock.acquire_until(
                        Request::from(&resources).patience(Patience::Retry(retry.clone())),
                        std::future::pending(),
                    )
                    .await
                })
            })
            .collect();
        let mut winners = winners(attempts).await;
        assert_eq!(winners.len(), 1, "every set holds y: one winner");
        winners.pop().unwrap().release().await;
        lock.settle().await;
        assert_no_keys(&cluster, 0..5).await;
    })
    .await;
}

// promise: sets-all-or-nothing
#[tokio::test]
async fn a_set_and_a_single_lock_on_one_of_its_resources_exclude_each_other() {
    bounded(async {
        let (cluster, lock) = quorum_lock(3, once()).await;
        let single = lock.try_acquire("y").await.unwrap();
        let error = lock.try_acquire(&set(&["x", "y"])).await.unwrap_err();
        assert!(matches!(error, Error::Held { .. }), "{error}");
        single.release().await;
        let both = lock.try_acquire(&set(&["x", "y"])).await.unwrap();
        let error = lock.try_acquire("x").await.unwrap_err();
        assert!(matches!(error, Error::Held { .. }), "{error}");
        drop(both);
        lock.settle().await;
        assert_no_keys(&cluster, 0..3).await;
    })
    .await;
}

#[tokio::test]
async fn releasing_a_set_wakes_a_waiter_for_one_of_its_resources() {
    bounded(async {
        let (cluster, lock) = quorum_lock(3, once().ttl(Duration::from_secs(60))).await;
        warm_up(&lock).await;
        let both = lock.try_acquire(&set(&["x", "y"])).await.unwrap();
        // Another client's waiter: only the release published on the nodes can wake it.
        let other = Lock::new(cluster.urls(), once()).unwrap();
        let waiter = {
            let other = other.clone();
            tokio::spawn(async move {
                other
                    .acquire(Request::from("y").patience(Patience::Wait(Duration::from_secs(30))))
                    .await
            })
        };
        waiting(&other, "y", 1).await;
        both.release().await;
        // Woken by the release: the set's keys would hold for another minute.
        let guard = waiter.await.unwrap().unwrap();
        guard.release().await;
    })
    .await;
}

#[tokio::test]
async fn a_fenced_set_gets_one_fence_above_the_last_of_each_of_its_resources() {
    bounded(async {
        let (_cluster, lock) = quorum_lock(3, once().fencing(true)).await;
        for _ in 0..3 {
            lock.try_acquire("a").await.unwrap().release().await;
        }
        let b = lock.try_acquire("b").await.unwrap();
        assert_eq!(b.fence(), Some(1));
        b.release().await;
        let both = lock.try_acquire(&set(&["a", "b"])).await.unwrap();
        let fence = both.fence().unwrap();
        assert!(fence > 3, "above a's last fence, 3: {fence}");
        both.release().await;
        for resource in ["a", "b"] {
            let next = lock.try_acquire(resource).await.unwrap();
            assert!(
                next.fence().unwrap() > fence,
                "{resource}'s next fence follows the set's: {:?} after {fence}",
                next.fence()
            );
            next.release().await;
        }
    })
    .await;
}

#[tokio::test]
async fn a_set_of_one_is_a_single_lock() {
    bounded(async {
        let (cluster, lock) = quorum_lock(3, LockOptions::new()).await;
        let guard = lock.try_acquire(&set(&["solo"])).await.unwrap();
        let error = lock.try_acquire("solo").await.unwrap_err();
        assert!(matches!(error, Error::Held { .. }), "{error}");
        guard.release().await;
        lock.settle().await;
        assert_no_keys(&cluster, 0..3).await;
    })
    .await;
}

#[tokio::test]
async fn a_set_takes_its_own_ttl_and_owner_and_waits_as_its_request_says() {
    bounded(async {
        let (cluster, lock) = quorum_lock(3, once()).await;
        warm_up(&lock).await;
        let owner = quorumlock::Owner::new();
        let pq = set(&["p", "q"]);
        let request = Request::from(&pq).ttl(Duration::from_secs(7)).owner(owner);
        let first = lock.acquire(request.clone()).await.unwrap();
        assert_eq!(first.ttl(), Duration::from_secs(7));
        let mut direct = cluster.connection(0).await.unwrap();
        let left: i64 = direct.pttl(key("q")).await.unwrap();
        assert!((1..=7_000).contains(&left), "{left} ms");
        // The owner's second acquisition of the same set joins its hold: nothing is sent.
        let qp = set(&["q", "p"]);
        let second = lock
            .acquire(Request::from(&qp).ttl(Duration::from_secs(7)).owner(owner))
            .await
            .unwrap();
        assert_eq!(second.hold_count(), 2);
        assert_eq!(second.token(), first.token());

        // Another caller waits for the set, queued (not polling), and gets it once the owner
        // has let go.
        let waiter = {
            let lock = lock.clone();
            tokio::spawn(async move {
                let pq = set(&["p", "q"]);
                lock.acquire(Request::from(&pq).patience(Patience::Wait(Duration::from_secs(60))))
                    .await
            })
        };
        waiting(&lock, "p", 1).await;
        assert_eq!(
            lock.waiters("q"),
            1,
            "a set waits in each of its resources' queues"
        );
        assert_eq!(second.release().await.still_held_by, 1);
        first.release().await;
        let guard = waiter.await.unwrap().unwrap();
        guard.release().await;
        lock.settle().await;
        assert_no_keys(&cluster, 0..3).await;
    })
    .await;
}

#[tokio::test]
async fn a_kept_set_is_extended_whole_and_lost_when_one_of_its_keys_is_taken() {
    bounded(async {
        let (cluster, lock) = quorum_lock(3, once().ttl(Duration::from_millis(600))).await;
        warm_up(&lock).await;
        let kept = lock
            .try_acquire(&set(&["k1", "k2"]))
            .await
            .unwrap()
            .keep_alive(quorumlock::KeepAlive::new())
            .unwrap();
        quorumlock_harness::eventually(Duration::from_secs(10), async || kept.extensions() >= 4)
            .await;
        // Four extensions, 200 ms apart: longer than the TTL, so every key was renewed.
        assert!(kept.extensions() >= 4, "{kept:?}");
        assert!(kept.is_valid(), "{kept:?}");
        for node in 0..3 {
            for resource in ["k1", "k2"] {
                assert_eq!(
                    stored(&cluster, node, key(resource).as_bytes())
                        .await
                        .as_deref(),
                    Some(kept.token().as_str()),
                    "node {node}, {resource}"
                );
            }
        }
        // Someone else takes k2 on a majority: the set is lost, though k1 is still ours.
        for node in 0..2 {
            let mut direct = cluster.connection(node).await.unwrap();
            let _: () = direct.set(key("k2"), "someone-else").await.unwrap();
        }
        let lost = tokio::time::timeout(Duration::from_secs(10), kept.lost())
            .await
            .expect("the set is found lost");
        assert!(matches!(lost, quorumlock::Lost::Taken { .. }), "{lost}");
        kept.release().await;
        lock.settle().await;
        for node in 0..2 {
            assert_eq!(
                stored(&cluster, node, key("k2").as_bytes())
                    .await
                    .as_deref(),
                Some("someone-else")
            );
            assert_eq!(stored(&cluster, node, key("k1").as_bytes()).await, None);
        }
    })
    .await;
}
