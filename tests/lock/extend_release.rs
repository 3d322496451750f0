//! Extension and release: a failed extension deletes nothing, a dropped guard is released in the
//! background; what a guard says about itself (resource, validity, debug output).

use std::time::Duration;

use quorumlock::{Error, NodeReply};
use redis::AsyncCommands;

use crate::common::*;

// promise: ownership
#[tokio::test]
async fn a_failed_extend_keeps_the_keys_that_still_hold() {
    bounded(async {
        // A quorum of all five, so that every node is known to hold the key.
        // Extensions of up to 30 s, which the restart guard must cover.
        let (cluster, lock) =
            quorum_lock(5, once().quorum_size(5).max_ttl(Duration::from_secs(30))).await;
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

/// The grant's decision instant lies between the call's start and its return, before the
/// validity ends, and an extension moves the validity, not the decision.
#[tokio::test]
async fn the_decision_instant_is_inside_the_call_and_survives_an_extension() {
    bounded(async {
        let (_cluster, lock) = quorum_lock(3, once()).await;
        let called = std::time::Instant::now();
        let mut guard = lock.try_acquire("decided").await.unwrap();
        let returned = std::time::Instant::now();
        let decided = guard.decided_at();
        assert!(called <= decided && decided <= returned, "{decided:?}");
        assert!(decided < guard.valid_until());
        let before = guard.valid_until();
        guard.extend(Duration::from_secs(10)).await.unwrap();
        assert!(guard.valid_until() > before);
        // Both are mapped at each call: equal up to the mapping's rounding.
        let moved = guard.decided_at().max(decided) - guard.decided_at().min(decided);
        assert!(moved < Duration::from_millis(1), "{moved:?}");
        guard.release().await;
    })
    .await;
}

/// A guard gives back the resource it was acquired for, apart from the prefix of its key, and
/// its debug output names that resource without showing the token.
#[tokio::test]
async fn a_guard_names_its_resource_and_its_debug_output_hides_the_token() {
    bounded(async {
        let (_cluster, lock) = quorum_lock(3, once().key_prefix("app:")).await;
        let guard = lock.try_acquire("invoice:42").await.unwrap();
        assert_eq!(guard.resource(), b"invoice:42");
        assert_eq!(guard.key(), b"app:invoice:42");
        let debug = format!("{guard:?}");
        assert!(debug.contains("invoice:42"), "{debug}");
        assert!(!debug.contains(guard.token().as_str()), "{debug}");
        guard.release().await;
    })
    .await;
}

/// Once the validity has run out, the guard says so: not valid, nothing remaining.
// promise: suspend-validity
#[tokio::test]
async fn a_guard_is_not_valid_once_its_validity_has_run_out() {
    bounded(async {
        let (_cluster, lock) = quorum_lock(3, once().ttl(Duration::from_secs(1))).await;
        let guard = lock.try_acquire("short").await.unwrap();
        assert!(guard.is_valid());
        // Past the end of the validity (tokio's timer never fires early).
        tokio::time::sleep(guard.remaining() + Duration::from_millis(1)).await;
        assert!(!guard.is_valid());
        assert_eq!(guard.remaining(), Duration::ZERO);
        guard.release().await;
    })
    .await;
}

/// A release to a node whose acquire request is still in flight waits for that request, then
/// sends the compare-and-delete, whose answer clears the node: the report says the node held
/// our key (not "in doubt"), and nothing is left there.
// promise: release-after-requests
#[tokio::test]
async fn a_release_waits_for_the_acquire_request_still_in_flight_and_then_clears_that_node() {
    bounded(async {
        let (mut cluster, lock) = quorum_lock(3, patient()).await;
        // Connect to every node first: a paused node cannot complete a handshake.
        crate::common::warm_up(&lock).await;
        lock.settle().await;
        cluster.pause(2).unwrap();
        let guard = lock.try_acquire("in-flight").await.unwrap();
        assert_eq!(holders(guard.outcomes()), [0, 1]);
        let key = guard.key().to_vec();
        // Node 0 fails the release, so the release needs node 2's answer.
        cluster.kill(0).await.unwrap();
        let release = tokio::spawn(guard.release());
        // Node 1's key gone: the release round has started, node 2's request with it.
        let mut node_1 = cluster.connection(1).await.unwrap();
        loop {
            let exists: bool = node_1.exists(&key).await.unwrap();
            if !exists {
                break;
            }
        }
        cluster.resume(2).unwrap();
        let report = release.await.unwrap();
        assert_eq!(report.outcomes[2].reply, NodeReply::Ours, "{report:?}");
        assert_eq!(report.held, 2, "{report:?}");
        assert_eq!(stored(&cluster, 2, &key).await, None);
    })
    .await;
}

/// Where the server offers `SET … IFEQ` (Valkey 8.1, Redis 8.4) an extension is that one
/// command, and the script elsewhere; either way it extends only while the key is ours. (The
/// suite runs against Redis 7.0 and Valkey 8.1 in CI, so both sides are taken.)
#[tokio::test]
async fn an_extension_is_a_native_compare_where_the_server_offers_one() {
    bounded(async {
        // A quorum of all three, so that node 0 surely holds the key and answers every request.
        let options = once().quorum_size(3).max_ttl(Duration::from_secs(30));
        let (cluster, lock) = quorum_lock(3, options).await;
        let mut admin = cluster.connection(0).await.unwrap();
        let server: String = redis::cmd("INFO")
            .arg("server")
            .query_async(&mut admin)
            .await
            .unwrap();
        let version = |name: &str| {
            server.lines().find_map(|line| {
                let value = line.trim_end_matches('\r').strip_prefix(name)?;
                let mut parts = value.split('.').map(|part| part.parse::<u32>().unwrap());
                Some((parts.next().unwrap(), parts.next().unwrap()))
            })
        };
        let native = match version("valkey_version:") {
            Some(valkey) => valkey >= (8, 1),
            None => version("redis_version:").is_some_and(|redis| redis >= (8, 4)),
        };

        let mut guard = lock.try_acquire("extend-natively").await.unwrap();
        let (sets, scripts) = (
            command_calls(&cluster, 0, "set").await,
            command_calls(&cluster, 0, "evalsha").await + command_calls(&cluster, 0, "eval").await,
        );
        guard.extend(Duration::from_secs(20)).await.unwrap();
        let ttl: i64 = admin.pttl(guard.key()).await.unwrap();
        assert!(ttl > 10_000, "{ttl}");
        let scripts_after =
            command_calls(&cluster, 0, "evalsha").await + command_calls(&cluster, 0, "eval").await;
        // The script's first call on a node may be an EVALSHA answered NOSCRIPT and its retry.
        let (sets, scripts) = (
            command_calls(&cluster, 0, "set").await - sets,
            scripts_after - scripts,
        );
        if native {
            assert_eq!((sets, scripts), (1, 0));
        } else {
            assert!(sets == 0 && scripts >= 1, "{sets} SETs, {scripts} scripts");
        }

        // Not ours any more on a majority: nothing extended, the other token left alone.
        for node in 0..2 {
            let mut connection = cluster.connection(node).await.unwrap();
            let _: () = connection.set(guard.key(), "someone-else").await.unwrap();
        }
        let error = guard.extend(Duration::from_secs(20)).await.unwrap_err();
        assert!(matches!(error, Error::ExtendFailed { .. }), "{error}");
        for node in 0..2 {
            assert_eq!(
                stored(&cluster, node, guard.key()).await.as_deref(),
                Some("someone-else")
            );
        }
    })
    .await;
}

/// Runs `SCRIPT FLUSH` on every node of `cluster`.
async fn flush_scripts(cluster: &quorumlock_harness::TestCluster) {
    for node in 0..cluster.len() {
        let mut admin = cluster.connection(node).await.unwrap();
        let () = redis::cmd("SCRIPT")
            .arg("FLUSH")
            .query_async(&mut admin)
            .await
            .unwrap();
    }
}

/// `EVALSHA` and `EVAL` calls on each node of `cluster`.
async fn script_calls(cluster: &quorumlock_harness::TestCluster) -> Vec<(u64, u64)> {
    let mut calls = Vec::new();
    for node in 0..cluster.len() {
        calls.push((
            command_calls(cluster, node, "evalsha").await,
            command_calls(cluster, node, "eval").await,
        ));
    }
    calls
}

/// A release is one `EVALSHA` per node, the script's hash rather than its body, as the raw
/// commands send it (the connection loaded the script when it was made); a node whose script
/// cache was flushed answers `NOSCRIPT` and gets the release again as one `EVAL` with the body,
/// so the key is still deleted there. (Broken on
/// purpose by sending `EVAL` every time: no `EVALSHA` is counted; and by dropping the fallback:
/// the flushed nodes keep the key.)
#[tokio::test]
async fn a_release_is_one_evalsha_and_a_flushed_node_gets_the_body() {
    bounded(async {
        let (cluster, lock) = quorum_lock(3, once()).await;
        lock.try_acquire("by-hash").await.unwrap().release().await;
        lock.settle().await;
        let before = script_calls(&cluster).await;
        let report = lock.try_acquire("by-hash").await.unwrap().release().await;
        assert!(report.held >= 2, "{report:?}");
        lock.settle().await;
        let after = script_calls(&cluster).await;
        for (node, ((sha, eval), (sha_after, eval_after))) in before.iter().zip(&after).enumerate()
        {
            assert_eq!(
                (sha_after - sha, eval_after - eval),
                (1, 0),
                "node {node}: (EVALSHA, EVAL) calls of one release"
            );
        }

        let guard = lock.try_acquire("by-hash").await.unwrap();
        flush_scripts(&cluster).await;
        let report = guard.release().await;
        assert!(report.held >= 2, "{report:?}");
        lock.settle().await;
        assert_no_keys(&cluster, 0..3).await;
        let flushed = script_calls(&cluster).await;
        for (node, ((_, eval), (_, eval_flushed))) in after.iter().zip(&flushed).enumerate() {
            assert_eq!(
                eval_flushed - eval,
                1,
                "node {node}: the body after NOSCRIPT"
            );
        }
    })
    .await;
}
