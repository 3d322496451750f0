//! Configuration and calls: bad values are typed errors, extreme TTLs are handled.

use quorumlock::{Patience, Request};
use std::time::Duration;

use quorumlock::{ConfigError, Error, Lock, LockOptions, RetryPolicy};

use crate::common::*;

// promise: no-panics
#[tokio::test]
async fn extreme_ttls_are_handled_not_panics() {
    bounded(async {
        let cluster = cluster(3).await;
        // The largest TTL Redis can store: accepted, valid, and released.
        let lock = Lock::new(
            cluster.urls(),
            once().ttl(quorumlock::MAX_TTL).max_ttl(quorumlock::MAX_TTL),
        )
        .unwrap();
        let mut guard = lock.try_acquire("forever").await.unwrap();
        // The lease clock ends 584 years after boot: a validity beyond ends there.
        assert!(guard.remaining() > Duration::from_secs(86_400 * 365 * 500));
        guard.extend(quorumlock::MAX_TTL).await.unwrap();
        assert!(guard.release().await.held >= 2);
        lock.settle().await;

        // 1 ms cannot cover the 2 ms drift allowance: refused as used up, and cleaned up.
        let lock = Lock::new(cluster.urls(), once().ttl(Duration::from_millis(1))).unwrap();
        let error = lock.try_acquire("instant").await.unwrap_err();
        assert!(matches!(error, Error::ValidityExpired { .. }), "{error}");
        lock.settle().await;
        assert_no_keys(&cluster, 0..3).await;
    })
    .await;
}

// promise: no-panics
#[test]
fn bad_configurations_are_errors_not_panics() {
    let config_error = |result: Result<Lock, Error>| match result {
        Err(Error::Config(error)) => error,
        Err(other) => panic!("not a configuration error: {other}"),
        Ok(lock) => panic!("accepted: {lock:?}"),
    };
    let no_urls: [&str; 0] = [];
    assert_eq!(
        config_error(Lock::new(no_urls, LockOptions::new())),
        ConfigError::NoNodes
    );
    assert!(matches!(
        config_error(Lock::new(
            ["redis://127.0.0.1:1", "nonsense"],
            LockOptions::new()
        )),
        ConfigError::InvalidUrl { index: 1, .. }
    ));
    assert!(matches!(
        config_error(Lock::new(
            ["redis://u:hunter2@127.0.0.1:1"],
            LockOptions::new().quorum_size(2)
        )),
        ConfigError::InvalidQuorum {
            quorum: 2,
            nodes: 1
        }
    ));
    assert!(matches!(
        config_error(Lock::new(
            ["redis://127.0.0.1:1"],
            LockOptions::new().drift_factor(f64::NAN)
        )),
        ConfigError::InvalidDriftFactor(_)
    ));
    assert!(matches!(
        config_error(Lock::new(
            ["redis://127.0.0.1:1"],
            LockOptions::new().ttl(Duration::ZERO)
        )),
        ConfigError::InvalidTtl(_)
    ));
}

// promise: no-panics
#[tokio::test]
async fn bad_calls_are_errors_not_panics() {
    let lock = Lock::new(["redis://127.0.0.1:1"], once()).unwrap();
    assert!(matches!(
        lock.try_acquire("").await,
        Err(Error::Config(ConfigError::EmptyResource))
    ));
    assert!(matches!(
        lock.acquire_until(
            Request::from("r").patience(Patience::Retry(RetryPolicy::new().attempts(0).clone())),
            std::future::pending()
        )
        .await,
        Err(Error::Config(ConfigError::ZeroAttempts))
    ));
}

/// With the restart guard on, an extension beyond `max_ttl` is refused before anything is
/// sent: the guard would not cover such keys. `max_ttl` itself is checked at construction. With
/// the guard off, any valid TTL goes.
#[tokio::test]
async fn an_extension_beyond_max_ttl_is_refused_while_the_restart_guard_is_on() {
    bounded(async {
        let cluster = cluster(3).await;
        let ttl = Duration::from_secs(10);
        let lock = Lock::new(cluster.urls(), once().quorum_size(3).ttl(ttl)).unwrap();
        let mut guard = lock.try_acquire("max-ttl").await.unwrap();
        let error = guard.extend(ttl * 2).await.unwrap_err();
        assert!(
            matches!(
                error,
                Error::Config(ConfigError::TtlAboveMaxTtl { ttl: asked, max_ttl })
                    if asked == ttl * 2 && max_ttl == ttl
            ),
            "{error}"
        );
        for node in 0..3 {
            let mut connection = cluster.connection(node).await.unwrap();
            let left: u64 = redis::cmd("PTTL")
                .arg(guard.key())
                .query_async(&mut connection)
                .await
                .unwrap();
            assert!(left <= 10_000, "node {node} was extended: {left} ms");
        }
        guard.extend(ttl).await.unwrap();
        guard.release().await;

        let unguarded = Lock::new(cluster.urls(), once().restart_guard(false)).unwrap();
        let mut guard = unguarded.try_acquire("max-ttl").await.unwrap();
        guard.extend(ttl * 2).await.unwrap();
        assert!(guard.remaining() > ttl);
        guard.release().await;

        assert!(matches!(
            Lock::new(cluster.urls(), once().max_ttl(ttl / 2)),
            Err(Error::Config(ConfigError::InvalidMaxTtl { .. }))
        ));
    })
    .await;
}
