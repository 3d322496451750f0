//! `rediss://` URLs against real TLS-only servers (the harness's `ClusterOptions::tls`): locks
//! over TLS with the cluster's own CA trusted (`LockOptions::tls_root_certificates`), and typed
//! errors, never a panic, for an untrusted CA, a bad PEM, a plain server, and the URL without the
//! `tls` feature. Mutual TLS against servers that require a client certificate
//! (`ClusterOptions::tls_auth_clients`): with the cluster's client certificate
//! (`LockOptions::tls_client_certificate`, or a user's `redis::Client` built with it) the lock
//! works; without one every node fails with a typed error and keeps no key.

#[cfg(feature = "tls")]
mod with_the_feature {
    use std::time::Duration;

    use quorumlock::{
        ConfigError, Error, Lock, LockOptions, NodeError, NodeReply, Patience, RetryPolicy,
    };
    use quorumlock_harness::{ClusterOptions, Persistence, TestCluster};

    use crate::common::*;

    /// TLS-only nodes with AOF always, so that they vote at once.
    fn tls_options(nodes: usize) -> ClusterOptions {
        ClusterOptions::default()
            .nodes(nodes)
            .tls(true)
            .persistence(Persistence::AofAlways)
    }

    async fn tls_cluster(nodes: usize) -> TestCluster {
        TestCluster::start(tls_options(nodes))
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
            let error = Lock::new([url], options)
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
    // promise: tls
    #[tokio::test]
    async fn a_lock_over_tls_works_with_the_clusters_ca_trusted() {
        bounded(async {
            let cluster = tls_cluster(3).await;
            let ca = cluster
                .tls_ca_pem()
                .expect("a TLS cluster has a CA")
                .to_owned();
            let lock = Lock::new(cluster.urls(), once().tls_root_certificates(ca)).unwrap();
            let mut guard = lock.try_acquire("tls").await.unwrap();
            assert!(holders(guard.outcomes()).len() >= 2, "{guard:?}");
            guard.extend(Duration::from_secs(10)).await.unwrap();
            assert!(guard.release().await.held >= 2);
            lock.settle().await;
            assert_no_keys(&cluster, 0..3).await;
        })
        .await;
    }

    /// A certificate authority, client certificate or key that cannot be parsed is a
    /// configuration error, not a failure at the first acquisition.
    #[test]
    fn an_unparsable_certificate_or_key_is_a_configuration_error() {
        let garbled = "-----BEGIN CERTIFICATE-----\nnot base64\n";
        // Well-formed PEM: the certificate's contents are checked only in a handshake.
        let pem = "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n";
        for options in [
            once().tls_root_certificates(garbled),
            once().tls_client_certificate(garbled, pem),
            once().tls_client_certificate(pem, "-----BEGIN PRIVATE KEY-----\n!\n"),
            once().tls_client_certificate(pem, "no key here"),
        ] {
            let error = Lock::new(["rediss://127.0.0.1:6380"], options).unwrap_err();
            assert!(
                matches!(
                    error,
                    Error::Config(ConfigError::InvalidNode { index: 0, .. })
                ),
                "{error}"
            );
        }
    }

    /// Without the cluster's CA the nodes present a certificate the library does not trust (it
    /// trusts the public webpki roots by default), so it is a client that trusts a different CA: each node fails with
    /// `NodeError::Connection("invalid peer certificate: UnknownIssuer")`, the acquisition is
    /// `Unavailable`, and no node stores a key.
    // promise: tls
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

            let lock = Lock::new(cluster.urls(), once()).unwrap();
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
                let retrying = once().patience(Patience::Retry(
                    RetryPolicy::new()
                        .attempts(2)
                        .delay(Duration::from_millis(10))
                        .jitter(Duration::ZERO),
                ));
                let error = Lock::new([url], retrying)
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

    async fn mutual_tls_cluster(nodes: usize) -> TestCluster {
        TestCluster::start(tls_options(nodes).tls_auth_clients(true))
            .await
            .expect("start redis-server processes that require client certificates")
    }

    /// The cluster's CA trusted and its client certificate presented.
    fn mutual_tls_options(cluster: &TestCluster) -> LockOptions {
        let files = cluster.tls().expect("a TLS cluster has TLS files");
        once()
            .tls_root_certificates(files.ca_pem())
            .tls_client_certificate(files.client_cert_pem(), files.client_key_pem())
    }

    /// Nodes that require a client certificate grant the lock to one that presents the
    /// cluster's: acquire, extend, release, no key left.
    // promise: tls
    #[tokio::test]
    async fn with_a_client_certificate_the_lock_works_on_nodes_that_require_one() {
        bounded(async {
            let cluster = mutual_tls_cluster(3).await;
            let lock = Lock::new(cluster.urls(), mutual_tls_options(&cluster)).unwrap();
            let mut guard = lock.try_acquire("mtls").await.unwrap();
            assert!(holders(guard.outcomes()).len() >= 2, "{guard:?}");
            guard.extend(Duration::from_secs(10)).await.unwrap();
            assert!(guard.release().await.held >= 2);
            lock.settle().await;
            assert_no_keys(&cluster, 0..3).await;
        })
        .await;
    }

    /// Without a client certificate each node ends the handshake: every node that answered
    /// failed with a typed connection error naming the alert (`CertificateRequired`; not a
    /// timeout: the refusal is immediate), the
    /// acquisition is `Unavailable`, and no node keeps a key.
    // promise: tls
    #[tokio::test]
    async fn without_a_client_certificate_nodes_that_require_one_refuse_with_a_typed_error() {
        bounded(async {
            let cluster = mutual_tls_cluster(3).await;
            let ca = cluster.tls_ca_pem().unwrap().to_owned();
            let lock = Lock::new(cluster.urls(), once().tls_root_certificates(ca)).unwrap();
            let error = lock.try_acquire("mtls").await.unwrap_err();
            assert!(matches!(error, Error::Unavailable { .. }), "{error}");
            let failed = error
                .outcomes()
                .iter()
                .filter(|outcome| outcome.reply != NodeReply::NoReply)
                .inspect(|outcome| {
                    let message = connection_error(&outcome.reply);
                    assert!(message.contains("CertificateRequired"), "{message}");
                })
                .count();
            assert!(failed >= 2, "{error}");
            lock.settle().await;
            assert_no_keys(&cluster, 0..3).await;
        })
        .await;
    }

    /// A user's own clients, built with `redis::Client::build_with_tls` (the cluster's CA and
    /// client certificate), become the lock's nodes with their TLS parameters: the lock works
    /// on nodes that require a client certificate. Certificates in the options as well would be
    /// set twice: a configuration error.
    #[tokio::test]
    async fn clients_built_with_their_own_tls_parameters_keep_them() {
        bounded(async {
            let cluster = mutual_tls_cluster(3).await;
            let files = cluster.tls().unwrap();
            let clients: Vec<redis::Client> = cluster
                .urls()
                .iter()
                .map(|url| {
                    let certificates = redis::TlsCertificates {
                        client_tls: Some(redis::ClientTlsConfig {
                            client_cert: files.client_cert_pem().as_bytes().to_vec(),
                            client_key: files.client_key_pem().as_bytes().to_vec(),
                        }),
                        root_cert: Some(files.ca_pem().as_bytes().to_vec()),
                    };
                    redis::Client::build_with_tls(url.as_str(), certificates).unwrap()
                })
                .collect();
            let lock = Lock::new(&clients, once()).unwrap();
            let guard = lock.try_acquire("own-tls").await.unwrap();
            assert!(holders(guard.outcomes()).len() >= 2, "{guard:?}");
            assert!(guard.release().await.held >= 2);
            lock.settle().await;
            assert_no_keys(&cluster, 0..3).await;

            let error = Lock::new(&clients, mutual_tls_options(&cluster)).unwrap_err();
            assert!(
                matches!(
                    error,
                    Error::Config(ConfigError::ConflictingTls { index: 0 })
                ),
                "{error}"
            );
        })
        .await;
    }

    /// The client key never shows in the options' or the lock's `Debug`.
    #[test]
    fn the_client_key_never_reaches_debug() {
        let options = once().tls_client_certificate("CERT", "SECRET-KEY");
        let debug = format!("{options:?}");
        assert!(!debug.contains("SECRET-KEY"), "{debug}");
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
            let error = Lock::new([url], once())
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
    use redis::{ConnectionAddr, IntoConnectionInfo};

    /// A TLS address given as connection info cannot be reached without the feature either.
    #[test]
    fn a_tls_connection_info_without_the_tls_feature_is_a_configuration_error() {
        let info = ConnectionAddr::TcpTls {
            host: "127.0.0.1".to_owned(),
            port: 6380,
            insecure: false,
            tls_params: None,
        }
        .into_connection_info()
        .unwrap();
        let error = Lock::new([info], LockOptions::new()).unwrap_err();
        assert!(
            matches!(error, Error::Config(ConfigError::TlsDisabled { index: 0 })),
            "{error}"
        );
    }

    /// redis-rs refuses to parse the URL unless another crate in the build turned its TLS on
    /// (as the workspace's CLI does, through another lock crate); then the lock refuses it.
    #[test]
    fn a_tls_url_without_the_tls_feature_is_a_configuration_error() {
        let error = Lock::new(["rediss://127.0.0.1:6380"], LockOptions::new()).unwrap_err();
        assert!(
            matches!(
                error,
                Error::Config(
                    ConfigError::InvalidUrl { index: 0, .. }
                        | ConfigError::TlsDisabled { index: 0 }
                )
            ),
            "{error}"
        );
    }
}
