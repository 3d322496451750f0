//! The lock's behaviour against real `redis-server` processes: mutual exclusion, ownership,
//! quorum under node loss, hung nodes, cancellation, extension, restarts and server errors.
//!
//! Each test starts its own cluster (stopped on drop, also when the test fails) and runs inside a
//! generous hang guard, so a bug shows up as a failure, never as a stalled CI run.

mod common;

use common::bounded;

use std::time::Duration;

use quorumlock::{
    ConfigError, Error, Guard, Lock, LockOptions, NodeError, NodeReply, RetryPolicy, Topology,
};
use quorumlock_harness::{ClusterOptions, TestCluster};
use redis::AsyncCommands;

async fn cluster(nodes: usize) -> TestCluster {
    TestCluster::start(ClusterOptions::default().nodes(nodes))
        .await
        .expect("start redis-server processes")
}

async fn proxied_cluster(nodes: usize) -> TestCluster {
    TestCluster::start(ClusterOptions::default().nodes(nodes).proxies(true))
        .await
        .expect("start redis-server processes behind proxies")
}

/// Both kinds of lock over the same cluster: the single-node lock on node 0, the quorum lock
/// on all of them.
fn both_kinds(cluster: &TestCluster, options: LockOptions) -> Vec<(&'static str, Lock)> {
    let urls = cluster.urls();
    vec![
        (
            "single",
            Lock::new(Topology::Single(urls[0].clone()), options.clone()).unwrap(),
        ),
        (
            "quorum",
            Lock::new(Topology::Quorum(urls), options).unwrap(),
        ),
    ]
}

/// The value of the lock key on one node, read directly.
async fn stored(cluster: &TestCluster, node: usize, key: &[u8]) -> Option<String> {
    let mut connection = cluster.connection(node).await.unwrap();
    connection.get(key).await.unwrap()
}

/// Number of keys on one node.
async fn key_count(cluster: &TestCluster, node: usize) -> usize {
    let mut connection = cluster.connection(node).await.unwrap();
    redis::cmd("DBSIZE")
        .query_async(&mut connection)
        .await
        .unwrap()
}

/// Fails unless every node in `nodes` is empty: nothing was left locked.
async fn assert_no_keys(cluster: &TestCluster, nodes: std::ops::Range<usize>) {
    for node in nodes {
        assert_eq!(key_count(cluster, node).await, 0, "node {node} kept a key");
    }
}

/// The nodes that said they hold the key. After an early decision these are certain; nodes
/// that had not answered may or may not have the key.
fn holders(outcomes: &[quorumlock::NodeOutcome]) -> Vec<usize> {
    outcomes
        .iter()
        .filter(|o| o.reply == NodeReply::Ours)
        .map(|o| o.node)
        .collect()
}

fn replies(error_or_guard: &[quorumlock::NodeOutcome]) -> Vec<NodeReply> {
    error_or_guard.iter().map(|o| o.reply.clone()).collect()
}

/// One attempt per acquisition, with timeouts that a loaded CI machine running many clusters at
/// once cannot trip by accident (tests of timeouts set their own).
fn once() -> LockOptions {
    LockOptions::new()
        .retry(RetryPolicy::once())
        .node_timeout(Duration::from_secs(5))
        .connect_timeout(Duration::from_secs(5))
}

/// Twenty callers at once. A single simultaneous round over five nodes may split the votes so
/// that nobody wins (Redlock trades liveness for safety there); the jittered retries of
/// `acquire` break the tie, and the losers' `Held` comes from the winner's key.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn twenty_concurrent_try_locks_on_one_key_exactly_one_wins() {
    bounded(async {
        let cluster = cluster(5).await;
        let retry = RetryPolicy::new()
            .attempts(20)
            .delay(Duration::ZERO)
            .jitter(Duration::from_millis(50));
        for (kind, lock) in both_kinds(&cluster, once().retry(retry)) {
            let resource = format!("contended-{kind}");
            let attempts: Vec<_> = (0..20)
                .map(|_| {
                    let (lock, resource) = (lock.clone(), resource.clone());
                    tokio::spawn(async move { lock.acquire(resource).await })
                })
                .collect();
            let mut winners: Vec<Guard> = Vec::new();
            for attempt in attempts {
                match attempt.await.unwrap() {
                    Ok(guard) => winners.push(guard),
                    Err(Error::Held { .. }) => {}
                    Err(other) => panic!("{kind}: unexpected error {other}"),
                }
            }
            assert_eq!(winners.len(), 1, "{kind}: exactly one of 20 wins");
            let report = winners.pop().unwrap().release().await;
            assert!(report.held >= 1, "{kind}: {report:?}");
            lock.settle().await;
            let next = lock.try_acquire(&resource).await;
            assert!(next.is_ok(), "{kind}: the released lock is free: {next:?}");
        }
    })
    .await;
}

#[tokio::test]
async fn a_stale_holder_cannot_release_the_next_holders_lock() {
    bounded(async {
        let mut cluster = cluster(3).await;
        for (kind, lock) in both_kinds(&cluster, once()) {
            let stale = lock.try_acquire("ledger").await.unwrap();
            // The stale holder's lease ends (as if by TTL) and someone else takes the lock.
            for node in 0..cluster.len() {
                cluster.flush(node).await.unwrap();
            }
            let current = lock.try_acquire("ledger").await.unwrap();
            assert_ne!(stale.token(), current.token());

            let wrong = stale.release().await;
            assert_eq!(wrong.held, 0, "{kind}: a wrong token deletes nothing");
            for node in holders(current.outcomes()) {
                assert_eq!(
                    stored(&cluster, node, current.key()).await.as_deref(),
                    Some(current.token().as_str()),
                    "{kind}: the current holder keeps the lock on node {node}"
                );
            }
            assert!(matches!(
                lock.try_acquire("ledger").await,
                Err(Error::Held { .. })
            ));

            let (key, held_on) = (current.key().to_vec(), holders(current.outcomes()));
            let right = current.release().await;
            assert!(right.held >= 1, "{kind}: {right:?}");
            lock.settle().await;
            for node in held_on {
                assert_eq!(
                    stored(&cluster, node, &key).await,
                    None,
                    "{kind}: freed on {node}"
                );
            }
            lock.try_acquire("ledger").await.unwrap().release().await;
        }
    })
    .await;
}

#[tokio::test]
async fn two_dead_nodes_of_five_still_grant_the_lock() {
    bounded(async {
        let mut cluster = cluster(5).await;
        cluster.kill(3).await.unwrap();
        cluster.kill(4).await.unwrap();
        let lock = Lock::quorum(cluster.urls(), once()).unwrap();

        let guard = lock.try_acquire("two-dead").await.unwrap();
        let replies = replies(guard.outcomes());
        assert_eq!(
            replies[..3],
            [NodeReply::Ours, NodeReply::Ours, NodeReply::Ours]
        );
        for reply in &replies[3..] {
            assert!(
                matches!(
                    reply,
                    NodeReply::Failed(NodeError::ConnectionRefused) | NodeReply::NoReply
                ),
                "{reply}"
            );
        }
        assert!(guard.is_valid());
        assert_eq!(guard.release().await.held, 3);
    })
    .await;
}

#[tokio::test]
async fn three_dead_nodes_of_five_fail_as_unavailable_and_leave_no_key() {
    bounded(async {
        let mut cluster = cluster(5).await;
        for node in 2..5 {
            cluster.kill(node).await.unwrap();
        }
        let lock = Lock::quorum(cluster.urls(), once()).unwrap();

        let error = lock.try_acquire("three-dead").await.unwrap_err();
        let Error::Unavailable { quorum, outcomes } = &error else {
            panic!("expected Unavailable, got {error}");
        };
        assert_eq!(*quorum, 3);
        let refused = outcomes
            .iter()
            .filter(|o| o.reply == NodeReply::Failed(NodeError::ConnectionRefused))
            .count();
        assert_eq!(refused, 3, "{error}");
        assert_no_keys(&cluster, 0..2).await;
    })
    .await;
}

#[tokio::test]
async fn the_key_reaches_every_live_node_not_only_the_first_quorum() {
    bounded(async {
        let cluster = cluster(5).await;
        let lock = Lock::quorum(cluster.urls(), once()).unwrap();
        // Connect to every node first: a request still waiting for its connection when the
        // round is decided is never sent.
        lock.try_acquire("warm-up").await.unwrap().release().await;
        lock.settle().await;
        for round in 0..5 {
            let guard = lock
                .try_acquire(format!("everywhere-{round}"))
                .await
                .unwrap();
            // The acquisition returned at the quorum; the slower nodes' requests finish in the
            // background, which settle() waits for.
            lock.settle().await;
            for node in 0..5 {
                assert_eq!(
                    stored(&cluster, node, guard.key()).await.as_deref(),
                    Some(guard.token().as_str()),
                    "round {round}: node {node}"
                );
            }
            assert!(guard.release().await.held >= 3);
        }
    })
    .await;
}

/// Timeouts far longer than the hang guard: if acquire waited for the hung node, the test would
/// fail by hanging, not pass slowly.
fn patient() -> LockOptions {
    LockOptions::new()
        .ttl(Duration::from_secs(7200))
        .node_timeout(Duration::from_secs(3600))
        .connect_timeout(Duration::from_secs(3600))
        .retry(RetryPolicy::once())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hung_node_is_not_waited_for_by_any_of_eight_concurrent_callers() {
    bounded(async {
        let cluster = proxied_cluster(5).await;
        cluster.proxy(0).unwrap().blackhole();
        let lock = Lock::quorum(cluster.urls(), patient()).unwrap();

        let callers: Vec<_> = (0..8)
            .map(|caller| {
                let lock = lock.clone();
                tokio::spawn(async move { lock.try_acquire(format!("hung-{caller}")).await })
            })
            .collect();
        for caller in callers {
            let guard = caller.await.unwrap().unwrap();
            let replies = replies(guard.outcomes());
            assert_eq!(
                replies[0],
                NodeReply::NoReply,
                "the hung node never answered"
            );
            let ours = replies.iter().filter(|r| **r == NodeReply::Ours).count();
            assert!(ours >= lock.quorum_size(), "{replies:?}");
            // Releasing would wait for the hung node for an hour: hand the key to the
            // background instead, where the runtime's shutdown ends the wait.
            drop(guard);
        }
    })
    .await;
}

#[tokio::test]
async fn a_dropped_acquire_leaves_no_key_behind_once_it_settles() {
    bounded(async {
        let mut cluster = cluster(5).await;
        let lock = Lock::quorum(cluster.urls(), patient()).unwrap();
        // Connect to every node first: a paused node cannot complete a handshake.
        lock.try_acquire("warm-up").await.unwrap().release().await;
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

#[tokio::test]
async fn a_cancelled_acquire_releases_and_reports_cancelled() {
    bounded(async {
        let mut cluster = cluster(3).await;
        let lock = Lock::quorum(cluster.urls(), patient()).unwrap();
        lock.try_acquire("warm-up").await.unwrap().release().await;
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
        let Error::Cancelled { outcomes } = &error else {
            panic!("expected Cancelled, got {error}");
        };
        assert_eq!(outcomes[0].reply, NodeReply::Ours);
        lock.settle().await;
        assert_no_keys(&cluster, 0..3).await;
    })
    .await;
}

#[tokio::test]
async fn a_failed_extend_keeps_the_keys_that_still_hold() {
    bounded(async {
        let cluster = cluster(5).await;
        // A quorum of all five, so that every node is known to hold the key.
        let lock = Lock::quorum(cluster.urls(), once().quorum(5)).unwrap();
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
async fn a_node_killed_and_restarted_while_held_is_used_again() {
    bounded(async {
        let mut cluster = cluster(5).await;
        // A quorum of all five: every node holds the key, and a later success proves that the
        // restarted node took part.
        let lock = Lock::quorum(cluster.urls(), once().quorum(5)).unwrap();
        let mut guard = lock.try_acquire("restart").await.unwrap();

        cluster.kill(0).await.unwrap();
        cluster.start_node(0).await.unwrap();
        // The restarted node lost the key (no persistence); the other four still hold it and
        // keep it through the failed extension.
        let error = guard.extend(Duration::from_secs(10)).await.unwrap_err();
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
        assert_ne!(error.outcomes()[0].reply, NodeReply::Ours);
        let report = guard.release().await;
        assert_eq!(report.held, 4, "{:?}", report.outcomes);

        // The client reconnected on its own.
        let guard = lock.try_acquire("restart").await.unwrap();
        assert_eq!(guard.outcomes()[0].reply, NodeReply::Ours);
        assert_eq!(guard.release().await.held, 5);
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

#[tokio::test]
async fn server_errors_are_typed_per_node() {
    bounded(async {
        let cluster = cluster(3).await;
        let urls = cluster.urls();
        let node = |i| {
            let cluster = &cluster;
            async move { cluster.connection(i).await.unwrap() }
        };

        // READONLY: node 0 becomes a replica of node 1.
        let mut replica = node(0).await;
        let port = cluster.port(1).unwrap();
        let _: () = redis::cmd("REPLICAOF")
            .arg("127.0.0.1")
            .arg(port)
            .query_async(&mut replica)
            .await
            .unwrap();
        // OOM: node 2 may not grow.
        let mut full = node(2).await;
        let _: () = redis::cmd("CONFIG")
            .arg("SET")
            .arg("maxmemory")
            .arg("1")
            .query_async(&mut full)
            .await
            .unwrap();

        let single = |url: &str| Lock::single(url, once()).unwrap();
        let error = single(&urls[0]).try_acquire("typed").await.unwrap_err();
        assert!(
            matches!(
                &error.outcomes()[0].reply,
                NodeReply::Failed(NodeError::ReadOnly(_))
            ),
            "{error}"
        );
        let error = single(&urls[2]).try_acquire("typed").await.unwrap_err();
        assert!(
            matches!(
                &error.outcomes()[0].reply,
                NodeReply::Failed(NodeError::OutOfMemory(_))
            ),
            "{error}"
        );

        // WRONGTYPE: someone else's hash sits under our key.
        let lock = single(&urls[1]);
        let guard = lock.try_acquire("typed").await.unwrap();
        let mut other = node(1).await;
        let _: () = other.del(guard.key()).await.unwrap();
        let _: () = other.hset(guard.key(), "field", "value").await.unwrap();
        let report = guard.release().await;
        assert!(
            matches!(
                &report.outcomes[0].reply,
                NodeReply::Failed(NodeError::WrongType(_))
            ),
            "{:?}",
            report.outcomes
        );
    })
    .await;
}

#[tokio::test]
async fn scripts_flushed_from_a_node_are_reloaded_transparently() {
    bounded(async {
        let cluster = cluster(3).await;
        let lock = Lock::quorum(cluster.urls(), once()).unwrap();
        lock.try_acquire("noscript").await.unwrap().release().await;
        for node in 0..3 {
            let mut connection = cluster.connection(node).await.unwrap();
            let _: () = redis::cmd("SCRIPT")
                .arg("FLUSH")
                .query_async(&mut connection)
                .await
                .unwrap();
        }
        let guard = lock.try_acquire("noscript").await.unwrap();
        let key = guard.key().to_vec();
        let report = guard.release().await;
        assert!(
            report
                .outcomes
                .iter()
                .all(|o| !matches!(o.reply, NodeReply::Failed(_))),
            "{:?}",
            report.outcomes
        );
        lock.settle().await;
        for node in 0..3 {
            assert_eq!(stored(&cluster, node, &key).await, None, "node {node}");
        }
    })
    .await;
}

#[tokio::test]
async fn authentication_errors_are_typed_and_credentials_work() {
    bounded(async {
        let cluster = cluster(1).await;
        let mut connection = cluster.connection(0).await.unwrap();
        let _: () = redis::cmd("CONFIG")
            .arg("SET")
            .arg("requirepass")
            .arg("s3cret")
            .query_async(&mut connection)
            .await
            .unwrap();
        let port = cluster.port(0).unwrap();

        for url in [
            format!("redis://127.0.0.1:{port}"),
            format!("redis://:wrong@127.0.0.1:{port}"),
        ] {
            let error = Lock::single(url.as_str(), once())
                .unwrap()
                .try_acquire("auth")
                .await
                .unwrap_err();
            assert!(
                matches!(
                    &error.outcomes()[0].reply,
                    NodeReply::Failed(NodeError::Auth(_))
                ),
                "{url}: {error}"
            );
            assert!(
                !error.to_string().contains("wrong"),
                "the password leaked: {error}"
            );
        }
        let lock = Lock::single(format!("redis://:s3cret@127.0.0.1:{port}"), once()).unwrap();
        lock.try_acquire("auth").await.unwrap().release().await;
    })
    .await;
}

#[tokio::test]
async fn a_paused_node_costs_its_timeout_only_when_it_is_needed() {
    bounded(async {
        let mut cluster = cluster(3).await;
        let timeout = Duration::from_millis(200);
        let options = once().node_timeout(timeout);
        let lock = Lock::quorum(cluster.urls(), options.clone()).unwrap();
        let all_three = Lock::quorum(cluster.urls(), options.quorum(3)).unwrap();
        lock.try_acquire("warm-up").await.unwrap().release().await;
        lock.settle().await;
        all_three
            .try_acquire("warm-up")
            .await
            .unwrap()
            .release()
            .await;
        cluster.pause(0).unwrap();

        // Two of three suffice: the paused node is neither waited for on acquire nor on
        // release (its release finishes in the background once it wakes up).
        let guard = lock.try_acquire("paused").await.unwrap();
        let report = guard.release().await;
        assert_eq!(report.held, 2);
        assert_eq!(report.outcomes[0].reply, NodeReply::NoReply);

        // When every node is needed, the paused one fails with its timeout.
        let error = all_three.try_acquire("paused-all").await.unwrap_err();
        assert!(matches!(error, Error::Unavailable { .. }), "{error}");
        assert_eq!(
            error.outcomes()[0].reply,
            NodeReply::Failed(NodeError::Timeout(timeout))
        );
        cluster.resume(0).unwrap();
        lock.settle().await;
        all_three.settle().await;
        assert_no_keys(&cluster, 0..1).await;
    })
    .await;
}

#[tokio::test]
async fn extreme_ttls_are_handled_not_panics() {
    bounded(async {
        let cluster = cluster(3).await;
        // The largest TTL Redis can store: accepted, valid, and released.
        let lock = Lock::quorum(cluster.urls(), once().ttl(quorumlock::MAX_TTL)).unwrap();
        let mut guard = lock.try_acquire("forever").await.unwrap();
        assert!(guard.remaining() > Duration::from_secs(86_400 * 365 * 1000));
        guard.extend(quorumlock::MAX_TTL).await.unwrap();
        assert!(guard.release().await.held >= 2);

        // 1 ms cannot cover the 2 ms drift allowance: refused as used up, and cleaned up.
        let lock = Lock::quorum(cluster.urls(), once().ttl(Duration::from_millis(1))).unwrap();
        let error = lock.try_acquire("instant").await.unwrap_err();
        assert!(matches!(error, Error::ValidityExpired { .. }), "{error}");
        lock.settle().await;
        assert_no_keys(&cluster, 0..3).await;
    })
    .await;
}

#[test]
fn bad_configurations_are_errors_not_panics() {
    let config_error = |result: Result<Lock, Error>| match result {
        Err(Error::Config(error)) => error,
        Err(other) => panic!("not a configuration error: {other}"),
        Ok(lock) => panic!("accepted: {lock:?}"),
    };
    let no_urls: [&str; 0] = [];
    assert_eq!(
        config_error(Lock::quorum(no_urls, LockOptions::new())),
        ConfigError::NoNodes
    );
    assert!(matches!(
        config_error(Lock::quorum(
            ["redis://127.0.0.1:1", "nonsense"],
            LockOptions::new()
        )),
        ConfigError::InvalidUrl { index: 1, .. }
    ));
    assert!(matches!(
        config_error(Lock::single(
            "redis://u:hunter2@127.0.0.1:1",
            LockOptions::new().quorum(2)
        )),
        ConfigError::InvalidQuorum {
            quorum: 2,
            nodes: 1
        }
    ));
    assert!(matches!(
        config_error(Lock::single(
            "redis://127.0.0.1:1",
            LockOptions::new().drift_factor(f64::NAN)
        )),
        ConfigError::InvalidDriftFactor(_)
    ));
    assert!(matches!(
        config_error(Lock::single(
            "redis://127.0.0.1:1",
            LockOptions::new().ttl(Duration::ZERO)
        )),
        ConfigError::InvalidTtl(_)
    ));
}

#[tokio::test]
async fn bad_calls_are_errors_not_panics() {
    let lock = Lock::single("redis://127.0.0.1:1", once()).unwrap();
    assert!(matches!(
        lock.try_acquire("").await,
        Err(Error::Config(ConfigError::EmptyResource))
    ));
    assert!(matches!(
        lock.acquire_with("r", &RetryPolicy::new().attempts(0), std::future::pending())
            .await,
        Err(Error::Config(ConfigError::ZeroAttempts))
    ));
}

#[cfg(feature = "tls")]
#[tokio::test]
async fn a_tls_url_against_a_plain_server_is_a_typed_error_not_a_panic() {
    bounded(async {
        let cluster = cluster(1).await;
        let url = format!("rediss://127.0.0.1:{}", cluster.port(0).unwrap());
        // A plain server reads the TLS hello as a garbled command and never answers it.
        let options = once().connect_timeout(Duration::from_millis(300));
        let error = Lock::single(url, options)
            .unwrap()
            .try_acquire("tls")
            .await
            .unwrap_err();
        assert!(
            matches!(
                &error.outcomes()[0].reply,
                NodeReply::Failed(
                    NodeError::Connection(_) | NodeError::Protocol(_) | NodeError::Timeout(_)
                )
            ),
            "{error}"
        );
    })
    .await;
}

#[cfg(not(feature = "tls"))]
#[test]
fn a_tls_url_without_the_tls_feature_is_a_configuration_error() {
    let error = Lock::single("rediss://127.0.0.1:6380", LockOptions::new()).unwrap_err();
    assert!(
        matches!(
            error,
            Error::Config(ConfigError::InvalidUrl { index: 0, .. })
        ),
        "{error}"
    );
}
