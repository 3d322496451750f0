//! `rediss://` URLs against real TLS-only servers (the harness's `ClusterOptions::tls`): locks
//! over TLS with the cluster's own CA trusted (`LockOptions::tls_root_certificates`), and typed
//! errors, never a panic, for an untrusted CA, a bad PEM, a plain server, and the URL without the
//! `tls` feature.

#[cfg(feature = "tls")]
mod with_the_feature {
    use std::time::Duration;

    use quorumlock::{ConfigError, Error, Lock, NodeError, NodeReply, RetryPolicy};
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

    /// With the cluster's CA trusted, the lock works over TLS: acquire, extend, release, and
    /// no key left.
    #[tokio::test]
    async fn a_lock_over_tls_works_with_the_clusters_ca_trusted() {
        bounded(async {
            let cluster = tls_cluster(3).await;
            let ca = cluster
                .tls_ca_pem()
                .expect("a TLS cluster has a CA")
                .to_owned();
            let lock = Lock::quorum(cluster.urls(), once().tls_root_certificates(ca)).unwrap();
            let mut guard = lock.try_acquire("tls").await.unwrap();
            assert!(holders(guard.outcomes()).len() >= 2, "{guard:?}");
            guard.extend(Duration::from_secs(10)).await.unwrap();
            assert!(guard.release().await.held >= 2);
            lock.settle().await;
            assert_no_keys(&cluster, 0..3).await;
        })
        .await;
    }

    /// A certificate authority that cannot be parsed is a configuration error, not a failure at
    /// the first acquisition.
    #[test]
    fn an_unparsable_root_certificate_is_a_configuration_error() {
        let options = once().tls_root_certificates("-----BEGIN CERTIFICATE-----\nnot base64\n");
        let error = Lock::single("rediss://127.0.0.1:6380", options).unwrap_err();
        assert!(
            matches!(
                error,
                Error::Config(ConfigError::InvalidUrl { index: 0, .. })
            ),
            "{error}"
        );
    }

    /// Without the cluster's CA the nodes present a certificate the library does not trust (it
    /// trusts the public webpki roots by default), so it is a client that trusts a different CA: each node fails with
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
