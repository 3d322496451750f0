//! Fencing tokens over the quorum (`LockOptions::fencing`): each holder of a resource gets a
//! fence larger than every earlier holder's, also when a minority of nodes fails, restarts, or
//! holds a stale counter; a fence no quorum confirmed is never handed out; counters need nodes
//! that persist every write, and can be deleted.

use quorumlock::Patience;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use quorumlock::{ConfigError, Error, Lock, LockOptions, NodeError, NodeReply, RetryPolicy};
use redis::AsyncCommands;

use crate::common::{
    assert_no_keys, assert_no_lock_keys, bounded, cluster, failed_with, holders, once, stored,
    volatile_cluster,
};

/// The counter's key for `resource` under the default prefix.
fn counter_key(resource: &str) -> String {
    format!("quorumlock-fence:{resource}")
}

/// URLs of a user who may run `EVAL` (the acquire script) but not `EVALSHA` (the write-back),
/// with `resource`'s counter set to `counter(node)` on each node.
async fn without_evalsha(
    cluster: &quorumlock_harness::TestCluster,
    resource: &str,
    counter: impl Fn(usize) -> usize,
) -> Vec<String> {
    let mut urls = Vec::new();
    for node in 0..cluster.len() {
        let mut admin = cluster.connection(node).await.unwrap();
        let () = redis::cmd("ACL")
            .arg(&["SETUSER", "fencer", "on", ">pw", "~*", "+@all", "-evalsha"][..])
            .query_async(&mut admin)
            .await
            .unwrap();
        let () = admin
            .set(counter_key(resource), counter(node))
            .await
            .unwrap();
        urls.push(format!(
            "redis://fencer:pw@127.0.0.1:{}",
            cluster.port(node).unwrap()
        ));
    }
    urls
}

fn fenced() -> LockOptions {
    once().fencing(true)
}

/// The counter of `resource` on one node, read directly (0 when there is none).
async fn counter(cluster: &quorumlock_harness::TestCluster, node: usize, resource: &str) -> u64 {
    let mut connection = cluster.connection(node).await.unwrap();
    let value: Option<u64> = connection.get(counter_key(resource)).await.unwrap();
    value.unwrap_or(0)
}

/// Fails unless `fences` (in the order the holds happened) grow strictly.
fn assert_strictly_increasing(fences: &[u64]) {
    for pair in fences.windows(2) {
        assert!(
            pair[0] < pair[1],
            "fence {} was followed by {}: {fences:?}",
            pair[0],
            pair[1]
        );
    }
}

/// Three clients (each its own `Lock`, so its own connections) take turns on one resource until
/// `holds` holds have happened; each records its fence while it holds the lock, so the list is
/// in hold order. `between` runs after each recorded hold, with the hold's number (for faults).
async fn contend(
    urls: Vec<String>,
    holds: usize,
    options: LockOptions,
    between: impl AsyncFn(usize) + Clone,
) -> Vec<u64> {
    let fences = Arc::new(Mutex::new(Vec::new()));
    let clients = (0..3)
        .map(|_| {
            let lock = Lock::new(urls.clone(), options.clone()).unwrap();
            let (fences, between) = (Arc::clone(&fences), between.clone());
            async move {
                loop {
                    let guard = match lock.acquire("contended").await {
                        Ok(guard) => guard,
                        Err(Error::Held { .. } | Error::Unavailable { .. }) => continue,
                        Err(error) => panic!("{error}"),
                    };
                    let number = {
                        let mut fences = fences.lock().unwrap();
                        if fences.len() >= holds {
                            None
                        } else {
                            assert!(guard.is_valid(), "recorded while valid");
                            fences.push(guard.fence().expect("fencing is on"));
                            Some(fences.len())
                        }
                    };
                    guard.release().await;
                    match number {
                        Some(number) => between(number).await,
                        None => break,
                    }
                }
                lock.settle().await;
            }
        })
        .collect::<Vec<_>>();
    futures::future::join_all(clients).await;
    Arc::try_unwrap(fences).unwrap().into_inner().unwrap()
}

/// Options for contending clients: retries spaced out, so that turns change hands.
fn contending() -> LockOptions {
    fenced().patience(Patience::Retry(
        RetryPolicy::default()
            .attempts(200)
            .delay(Duration::from_millis(2)),
    ))
}

// promise: fences-grow
#[tokio::test]
async fn fences_grow_strictly_from_each_holder_to_the_next() {
    bounded(async {
        let cluster = cluster(5).await;
        let fences = contend(cluster.urls(), 40, contending(), async |_| {}).await;
        assert_eq!(fences.len(), 40);
        assert_strictly_increasing(&fences);
    })
    .await;
}

/// While the clients contend: a minority node is killed and started again (AOF: it keeps its
/// counter), another frozen and thawed, and then every node in turn is restarted, the restart
/// guard on. No node ever holds a counter the fences depend on alone.
// promise: fences-grow
#[tokio::test]
async fn fences_grow_strictly_through_minority_faults_and_restarts() {
    bounded(async {
        let cluster = Arc::new(tokio::sync::Mutex::new(cluster(5).await));
        let urls = cluster.lock().await.urls();
        let options = contending().node_timeout(Duration::from_millis(300));
        let faults = Arc::clone(&cluster);
        let fences = contend(urls, 60, options, async move |hold| {
            let mut cluster = faults.lock().await;
            match hold {
                5 => cluster.kill(4).await.unwrap(),
                10 => cluster.pause(3).unwrap(),
                15 => cluster.start_node(4).await.unwrap(),
                20 => cluster.resume(3).unwrap(),
                25 | 30 | 35 | 40 | 45 => cluster.restart((hold - 25) / 5).await.unwrap(),
                _ => {}
            }
        })
        .await;
        assert_eq!(fences.len(), 60);
        assert_strictly_increasing(&fences);
    })
    .await;
}

/// The write-back at work: node 0 holds a counter far above the others' (as after acquisitions
/// that won it and lost elsewhere). A holder that wins nodes 0–2 gets a fence above it; a later
/// holder that wins only nodes 1–4, never asking node 0, must still get a larger one. Without
/// the write-back, nodes 1–4 would count from their own low counters.
// promise: fences-grow
#[tokio::test]
async fn a_later_quorum_without_the_highest_counter_still_gets_a_larger_fence() {
    bounded(async {
        let mut cluster = cluster(5).await;
        let lock = Lock::new(
            cluster.urls(),
            fenced().node_timeout(Duration::from_millis(300)),
        )
        .unwrap();
        lock.try_acquire("skewed").await.unwrap().release().await;
        lock.settle().await;
        let mut node0 = cluster.connection(0).await.unwrap();
        let () = node0.set(counter_key("skewed"), 1_000).await.unwrap();

        cluster.pause(3).unwrap();
        cluster.pause(4).unwrap();
        let first = lock.try_acquire("skewed").await.unwrap();
        assert_eq!(holders(first.outcomes()), vec![0, 1, 2]);
        let first_fence = first.fence().unwrap();
        assert_eq!(first_fence, 1_001);
        first.release().await;
        lock.settle().await;
        cluster.resume(3).unwrap();
        cluster.resume(4).unwrap();

        cluster.pause(0).unwrap();
        let second = lock.try_acquire("skewed").await.unwrap();
        let second_fence = second.fence().unwrap();
        assert!(
            second_fence > first_fence,
            "fence {second_fence} after {first_fence}"
        );
        second.release().await;
        cluster.resume(0).unwrap();
        lock.settle().await;
    })
    .await;
}

/// The write-back is refused on every node (the ACL user may run `EVAL`, which acquires, but not
/// `EVALSHA`, which the write-back uses): no fence is handed out, the error names the fence
/// that was not confirmed, and no lock key is left behind. The counters start out of step (10,
/// 20, 30), so that no two granting nodes take the same fence and the write-back is needed.
// promise: fences-grow
#[tokio::test]
async fn a_fence_no_quorum_confirmed_is_not_handed_out_and_the_keys_are_released() {
    bounded(async {
        let cluster = cluster(3).await;
        let urls = without_evalsha(&cluster, "unconfirmed", |node| (node + 1) * 10).await;
        let lock = Lock::new(urls, fenced()).unwrap();
        let error = lock.try_acquire("unconfirmed").await.unwrap_err();
        let Error::FenceUnconfirmed {
            fence,
            quorum,
            outcomes,
            ..
        } = &error
        else {
            panic!("expected FenceUnconfirmed, got {error}");
        };
        assert!(
            matches!(fence, 21 | 31),
            "the highest of two grants: {fence}"
        );
        assert_eq!(*quorum, 2);
        assert!(
            outcomes
                .iter()
                .any(|o| matches!(o.reply, NodeReply::Failed(NodeError::NoPermission(_)))),
            "{error}"
        );
        lock.settle().await;
        for node in 0..cluster.len() {
            assert_eq!(
                stored(&cluster, node, b"quorumlock:unconfirmed").await,
                None
            );
        }
    })
    .await;
}

/// Nodes whose counters are in step all take the same fence: it is on a quorum with the grant,
/// and no write-back is sent. The same ACL user as above, who cannot run the write-back, gets
/// its fence.
// promise: fences-grow
#[tokio::test]
async fn a_fence_every_granting_node_took_needs_no_write_back() {
    bounded(async {
        let cluster = cluster(3).await;
        let urls = without_evalsha(&cluster, "in-step", |_| 41).await;
        let lock = Lock::new(urls, fenced()).unwrap();
        let guard = lock.try_acquire("in-step").await.unwrap();
        assert_eq!(guard.fence(), Some(42));
    })
    .await;
}

/// The least-privilege ACL user of `docs/deployment.md`, with the three rules fencing adds, can
/// take fences; without `+incr`, or without `+config|get` (the fsync policy unknown, so no node
/// counts as durable), it cannot.
#[tokio::test]
async fn the_documented_acl_user_with_the_fencing_rules_takes_fences() {
    bounded(async {
        let cluster = cluster(3).await;
        let fencing_rules = [
            "reset",
            "on",
            ">pw",
            "~quorumlock:*",
            "~quorumlock-fence:*",
            "resetchannels",
            "+set",
            "+get",
            "+del",
            "+pexpire",
            "+incr",
            "+eval",
            "+evalsha",
            "+script|load",
            "+info",
            "+config|get",
        ];
        let set_user = async |rules: &[&str]| {
            for node in 0..cluster.len() {
                let mut admin = cluster.connection(node).await.unwrap();
                let () = redis::cmd("ACL")
                    .arg("SETUSER")
                    .arg("fencer")
                    .arg(rules)
                    .query_async(&mut admin)
                    .await
                    .unwrap();
            }
        };
        let urls: Vec<String> = (0..cluster.len())
            .map(|node| {
                format!(
                    "redis://fencer:pw@127.0.0.1:{}",
                    cluster.port(node).unwrap()
                )
            })
            .collect();
        set_user(&fencing_rules).await;
        let lock = Lock::new(urls.clone(), fenced()).unwrap();
        for expected in 1..=2 {
            let mut guard = lock.try_acquire("acl").await.unwrap();
            assert_eq!(guard.fence(), Some(expected));
            guard.extend(Duration::from_secs(10)).await.unwrap();
            guard.release().await;
        }
        lock.settle().await;

        for left_out in ["+incr", "+config|get"] {
            let rules: Vec<&str> = fencing_rules
                .iter()
                .copied()
                .filter(|rule| *rule != left_out)
                .collect();
            set_user(&rules).await;
            let lock = Lock::new(urls.clone(), fenced()).unwrap();
            let error = lock.try_acquire("acl").await.unwrap_err();
            assert!(
                matches!(error, Error::Unavailable { .. }),
                "{left_out}: {error}"
            );
            if left_out == "+config|get" {
                assert!(
                    failed_with(error.outcomes(), NodeError::NotDurable) > 0,
                    "{error}"
                );
            }
            lock.settle().await;
            assert_no_lock_keys(&cluster).await;
        }
    })
    .await;
}

/// Fencing needs counters that survive a crash: nodes without AOF `always` do not vote unless
/// allowed, and the error says why.
// promise: fencing-durable-nodes
#[tokio::test]
async fn only_nodes_that_persist_every_write_vote_for_a_fence_unless_allowed() {
    bounded(async {
        let cluster = volatile_cluster(3).await;
        // The restart guard would hold these fresh volatile nodes back too; this test is about
        // durability alone.
        let options = fenced().restart_guard(false);
        let lock = Lock::new(cluster.urls(), options.clone()).unwrap();
        let error = lock.try_acquire("volatile").await.unwrap_err();
        assert!(matches!(error, Error::Unavailable { .. }), "{error}");
        let refused = failed_with(error.outcomes(), NodeError::NotDurable);
        assert!(refused >= 2, "decided once two refused: {error}");
        assert_no_keys(&cluster, 0..3).await;

        let lock = Lock::new(cluster.urls(), options.fence_volatile_nodes(true)).unwrap();
        let guard = lock.try_acquire("volatile").await.unwrap();
        assert_eq!(guard.fence(), Some(1));
        guard.release().await;
    })
    .await;
}

#[tokio::test]
async fn without_fencing_there_is_no_fence_and_no_counter() {
    bounded(async {
        let cluster = cluster(3).await;
        let lock = Lock::new(cluster.urls(), once()).unwrap();
        let guard = lock.try_acquire("plain").await.unwrap();
        assert_eq!(guard.fence(), None);
        guard.release().await;
        lock.settle().await;
        for node in 0..3 {
            assert_eq!(counter(&cluster, node, "plain").await, 0);
        }
    })
    .await;
}

/// Counters never expire; `delete_fence_counter` removes them from every node, and fences
/// start again at 1.
#[tokio::test]
async fn a_deleted_counter_starts_fences_again_at_one() {
    bounded(async {
        let cluster = cluster(3).await;
        // Every node must grant, so every node has a counter to delete (with a majority, a
        // node whose connection was still being made at each decision got no INCR, which a
        // loaded machine showed once).
        let lock = Lock::new(cluster.urls(), fenced().quorum_size(3)).unwrap();
        for expected in 1..=3 {
            let guard = lock.try_acquire("retired").await.unwrap();
            assert_eq!(guard.fence(), Some(expected));
            guard.release().await;
        }
        lock.settle().await;
        let mut node0 = cluster.connection(0).await.unwrap();
        let ttl: i64 = node0.pttl(counter_key("retired")).await.unwrap();
        assert_eq!(ttl, -1, "a counter has no expiry");

        let outcomes = lock.delete_fence_counter("retired").await.unwrap();
        assert!(
            outcomes.iter().all(|o| o.reply == NodeReply::Ours),
            "{outcomes:?}"
        );
        assert_no_keys(&cluster, 0..3).await;
        let guard = lock.try_acquire("retired").await.unwrap();
        assert_eq!(guard.fence(), Some(1));
        guard.release().await;
    })
    .await;
}

/// The single-node lock hands out fences too, by the same protocol over one node.
#[tokio::test]
async fn a_single_node_lock_hands_out_growing_fences() {
    bounded(async {
        let cluster = cluster(1).await;
        let lock = Lock::new([cluster.urls()[0].clone()], fenced()).unwrap();
        let mut last = 0;
        for _ in 0..5 {
            let guard = lock.try_acquire("single").await.unwrap();
            let fence = guard.fence().unwrap();
            assert!(fence > last);
            last = fence;
            guard.release().await;
        }
    })
    .await;
}

#[test]
fn overlapping_prefixes_are_a_configuration_error_with_fencing_on() {
    let overlap = LockOptions::new().fencing(true).key_prefix("quorumlock-f");
    let error = Lock::new(["redis://127.0.0.1:1"], overlap.clone()).unwrap_err();
    assert!(
        matches!(
            error,
            Error::Config(ConfigError::OverlappingPrefixes { .. })
        ),
        "{error}"
    );
    // Without fencing the counter prefix is unused by acquisitions.
    Lock::new(["redis://127.0.0.1:1"], overlap.fencing(false)).unwrap();
    let error = Lock::new(
        ["redis://127.0.0.1:1"],
        LockOptions::new().fencing(true).key_prefix(""),
    )
    .unwrap_err();
    assert!(matches!(
        error,
        Error::Config(ConfigError::OverlappingPrefixes { .. })
    ));
}
