//! One acquisition's own TTL (`Request::ttl`): the keys live that long on the nodes, the
//! validity is computed from it, a keep-alive extends by it, and the restart guard's bound on
//! TTLs applies to it as to an extension.

use std::time::Duration;

use quorumlock::{ConfigError, Error, KeepAlive, Lock, Request};
use redis::AsyncCommands;

use crate::common::{bounded, cluster, once};

#[tokio::test]
async fn an_acquisition_lives_for_its_own_ttl_not_the_locks() {
    bounded(async {
        let cluster = cluster(3).await;
        // Every node must grant, so every node's key can be read (with a majority, a node whose
        // connection was still being made at the decision gets none).
        let lock = Lock::new(
            cluster.urls(),
            once()
                .ttl(Duration::from_secs(2))
                .max_ttl(Duration::from_secs(60))
                .quorum_size(3),
        )
        .unwrap();
        let ttl = Duration::from_secs(40);
        let guard = lock.acquire(Request::from("job").ttl(ttl)).await.unwrap();
        assert_eq!(guard.ttl(), ttl);
        lock.settle().await;
        for node in 0..3 {
            let mut connection = cluster.connection(node).await.unwrap();
            let left: i64 = connection.pttl(guard.key()).await.unwrap();
            assert!(
                left > 30_000 && left <= 40_000,
                "node {node}: {left} ms left of a 40 s key"
            );
        }
        assert!(guard.remaining() > Duration::from_secs(30));
        assert!(guard.remaining() < ttl);

        // A keep-alive extends by the acquisition's TTL too.
        let kept = guard
            .keep_alive(KeepAlive::new().every(Duration::from_millis(50)))
            .unwrap();
        let lease = kept.lease();
        quorumlock_harness::eventually(Duration::from_secs(2), async || lease.extensions() > 0)
            .await;
        assert!(lease.extensions() > 0, "extended at least once");
        assert!(lease.remaining() > Duration::from_secs(30));
        kept.release().await;
    })
    .await;
}

#[tokio::test]
async fn a_ttl_beyond_what_the_restart_guard_covers_is_refused_before_anything_is_sent() {
    bounded(async {
        let cluster = cluster(3).await;
        let lock = Lock::new(cluster.urls(), once().ttl(Duration::from_secs(2))).unwrap();
        let too_long = Request::from("job").ttl(Duration::from_secs(3));
        let error = lock.acquire(too_long).await.unwrap_err();
        assert!(
            matches!(error, Error::Config(ConfigError::TtlAboveMaxTtl { .. })),
            "{error}"
        );
        let error = lock
            .acquire(Request::from("job").ttl(Duration::ZERO))
            .await
            .unwrap_err();
        assert!(
            matches!(error, Error::Config(ConfigError::InvalidTtl(_))),
            "{error}"
        );
        for node in 0..3 {
            assert_eq!(crate::common::key_count(&cluster, node).await, 0);
        }
    })
    .await;
}
