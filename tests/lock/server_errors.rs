//! Server errors: every error a node can answer becomes a typed per-node error, never a panic.

use std::time::Duration;

use quorumlock::{Lock, NodeError, NodeReply};
use redis::AsyncCommands;

use crate::common::*;

// promise: typed-errors
#[tokio::test]
async fn server_errors_are_typed_per_node() {
    bounded(async {
        let cluster = cluster(3).await;
        let urls = cluster.urls();
        let node = |i| {
            let cluster = &cluster;
            async move { cluster.connection(i).await.unwrap() }
        };

        let single = |url: &str| Lock::new([url], once()).unwrap();
        // READONLY: node 0 becomes a replica of node 1 after the lock connected to it as a
        // master (a new connection would see the replica and send nothing: `failover.rs`).
        let on_replica = single(&urls[0]);
        on_replica
            .try_acquire("warm-up")
            .await
            .unwrap()
            .release()
            .await;
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

        let error = on_replica.try_acquire("typed").await.unwrap_err();
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
        let (cluster, lock) = quorum_lock(3, once().max_ttl(Duration::from_secs(30))).await;
        // Extend runs its script by hash; a cold script cache makes each node answer NOSCRIPT
        // first.
        let mut guard = lock.try_acquire("noscript").await.unwrap();
        guard.extend(Duration::from_secs(20)).await.unwrap();
        for node in 0..3 {
            let mut connection = cluster.connection(node).await.unwrap();
            let _: () = redis::cmd("SCRIPT")
                .arg("FLUSH")
                .query_async(&mut connection)
                .await
                .unwrap();
        }
        guard.extend(Duration::from_secs(30)).await.unwrap();
        assert!(
            guard
                .outcomes()
                .iter()
                .all(|o| !matches!(o.reply, NodeReply::Failed(_))),
            "{:?}",
            guard.outcomes()
        );
        let key = guard.key().to_vec();
        guard.release().await;
        lock.settle().await;
        for node in 0..3 {
            assert_eq!(stored(&cluster, node, &key).await, None, "node {node}");
        }
    })
    .await;
}

// promise: typed-errors
#[tokio::test]
async fn authentication_errors_are_typed_and_credentials_work() {
    bounded(async {
        let cluster = cluster(1).await;
        require_password(&cluster, 0, "s3cret").await;
        let port = cluster.port(0).unwrap();

        for url in [
            format!("redis://127.0.0.1:{port}"),
            format!("redis://:wrong@127.0.0.1:{port}"),
        ] {
            let error = Lock::new([url.as_str()], once())
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
        let lock = Lock::new([format!("redis://:s3cret@127.0.0.1:{port}")], once()).unwrap();
        lock.try_acquire("auth").await.unwrap().release().await;
    })
    .await;
}
