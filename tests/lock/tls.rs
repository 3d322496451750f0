//! `rediss://` URLs: typed errors with the `tls` feature and without it, never a panic, and the
//! TLS path against real TLS-only servers (the harness's `ClusterOptions::tls`).
//!
//! What these tests cannot show yet: an acquisition that succeeds over TLS. The library trusts
//! the webpki roots alone (redis' `tls-rustls-webpki-roots`) and has no option to add a root
//! certificate, and a `rediss://…#insecure` URL needs redis' `tls-rustls-insecure` feature,
//! which the library's `tls` feature does not turn on. The CA the harness makes for each cluster
//! is in neither, so every handshake below fails: the tests pin how it fails. The library
//! change that would let a test (and a deployment with a private CA) succeed is described in
//! `docs/deployment.md`, "TLS".

#[cfg(feature = "tls")]
mod with_the_feature {
    use std::time::Duration;

    use quorumlock::{Error, Lock, NodeError, NodeReply, RetryPolicy};
    use quorumlock_harness::{ClusterOptions, Persistence, TestCluster};

    use crate::common::*;

    async fn tls_cluster(nodes: usize) -> TestCluster {
        TestCluster::start(
            ClusterOptions::default()
                .nodes(nodes)
                .tls(true)
                .persistence(Persistence::AofAlways),
        )
        .await
        .expect("start TLS-only redis-server processes")
    }

    /// The message of a `NodeError::Connection`, or a failure naming what the reply was.
    fn connection_error(reply: &NodeReply) -> &str {
        match reply {
            NodeReply::Failed(NodeError::Connection(message)) => message,
            other => panic!("expected NodeError::Connection, got {other:?}"),
        }
    }

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

    /// The nodes present a certificate from the cluster's own CA; the library trusts the webpki
    /// roots only, so it is a client that trusts a different CA: each node fails with
    /// `NodeError::Connection("invalid peer certificate: UnknownIssuer")`, the acquisition is
    /// `Unavailable`, and no node stores a key.
    #[tokio::test]
    async fn a_certificate_from_a_ca_the_library_does_not_trust_is_a_connection_error() {
        bounded(async {
            let cluster = tls_cluster(3).await;
            assert!(
                cluster
                    .urls()
                    .iter()
                    .all(|url| url.starts_with("rediss://"))
            );

            let lock = Lock::quorum(cluster.urls(), once()).unwrap();
            let error = lock.try_acquire("tls").await.unwrap_err();
            assert!(matches!(error, Error::Unavailable { .. }), "{error}");
            let mut failed = 0;
            for outcome in error.outcomes() {
                if outcome.reply == NodeReply::NoReply {
                    // Decided (quorum out of reach) before this node's handshake ended.
                    continue;
                }
                let message = connection_error(&outcome.reply);
                assert!(message.contains("invalid peer certificate"), "{message}");
                assert!(message.contains("UnknownIssuer"), "{message}");
                failed += 1;
            }
            assert!(failed >= 2, "{error}");

            // Node by node, so every node's own handshake is seen to fail, and again on a
            // second attempt (the failed connection is made anew, and fails the same way).
            for url in cluster.urls() {
                let retrying = once().retry(
                    RetryPolicy::new()
                        .attempts(2)
                        .delay(Duration::from_millis(10))
                        .jitter(Duration::ZERO),
                );
                let error = Lock::single(url, retrying)
                    .unwrap()
                    .acquire("tls")
                    .await
                    .unwrap_err();
                let message = connection_error(&error.outcomes()[0].reply);
                assert!(message.contains("UnknownIssuer"), "{message}");
            }
            assert_no_keys(&cluster, 0..3).await;
        })
        .await;
    }

    /// `#insecure` (encryption without verification) is what redis-rs offers for a CA it does
    /// not know, but only with its `tls-rustls-insecure` feature, which the library's `tls`
    /// feature does not enable: the URL is accepted, and every connection then fails with a
    /// typed `NodeError::Connection` naming the missing feature.
    #[tokio::test]
    async fn an_insecure_url_is_a_connection_error_without_redis_tls_rustls_insecure() {
        bounded(async {
            let cluster = tls_cluster(1).await;
            let url = format!("{}/#insecure", cluster.urls()[0]);
            let error = Lock::single(url, once())
                .unwrap()
                .try_acquire("tls")
                .await
                .unwrap_err();
            let message = connection_error(&error.outcomes()[0].reply);
            assert!(message.contains("tls-rustls-insecure"), "{message}");
            assert_no_keys(&cluster, 0..1).await;
        })
        .await;
    }
}

#[cfg(not(feature = "tls"))]
mod without_the_feature {
    use quorumlock::{ConfigError, Error, Lock, LockOptions};

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
}
