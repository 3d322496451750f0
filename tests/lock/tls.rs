//! `rediss://` URLs: typed errors with the `tls` feature and without it, never a panic.

#[cfg(feature = "tls")]
mod with_the_feature {
    use std::time::Duration;

    use quorumlock::{Lock, NodeError, NodeReply};

    use crate::common::*;

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
