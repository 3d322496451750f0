//! A majority frozen under a thousand kept leases: every lease's lost signal comes before its
//! validity ends. Its own binary, with this one test, so that nothing else in the process
//! competes with the keeper for the runtime while the deadlines come (`cargo test` runs one
//! test binary at a time; the claim is about the library's timers, not about a machine shared
//! with other tests).
// Test code: an unwrap that fails is a failed run, which is what it should be.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

// The lock tests' helpers; this binary uses a few of them.
#[allow(dead_code)]
#[path = "lock/common.rs"]
mod common;

use std::time::{Duration, Instant};

use futures::StreamExt;
use futures::stream;
use quorumlock::{KeepAlive, Lock, Lost};

use crate::common::{
    assert_no_keys, bounded, keep_options as options, kept_leases, key_count, until,
};

/// A majority frozen (SIGSTOP): no batch reaches a quorum any more, and every one of 1,000
/// leases reports its loss before its own validity ends (the lease's `valid_until`, the
/// validity less the margin, plus that margin: 50 ms, 2 % of 2.5 s), each read when its
/// `lost()` completed.
// promise: keep-alive-lost-signal
#[tokio::test]
async fn with_a_majority_frozen_every_lease_of_a_thousand_is_lost_before_its_validity_ends() {
    bounded(async {
        let mut cluster = crate::common::cluster(3).await;
        let ttl = Duration::from_millis(2_500);
        let margin = Duration::from_millis(50);
        let lock = Lock::new(cluster.urls(), options(ttl)).unwrap();
        crate::common::warm_up(&lock).await;
        let kept = kept_leases(&lock, "frozen:", 1_000, KeepAlive::new()).await;
        // Every lease in the batches before the freeze.
        until(async || kept.iter().all(|lease| lease.extensions() >= 1)).await;
        cluster.pause(0).unwrap();
        cluster.pause(1).unwrap();
        let losses: Vec<(Lost, Instant, Instant)> = stream::iter(&kept)
            .map(|lease| async move {
                let lost = lease.lost().await;
                let lost_at = Instant::now();
                (lost, lost_at, lease.valid_until() + margin)
            })
            .buffer_unordered(kept.len())
            .collect()
            .await;
        for (lost, lost_at, validity_ends) in &losses {
            assert!(matches!(lost, Lost::Expired { .. }), "{lost}");
            assert!(
                lost_at < validity_ends,
                "lost {:?} after the validity ended",
                *lost_at - *validity_ends
            );
        }
        assert!(kept.iter().all(|lease| !lease.is_valid()));
        cluster.resume(0).unwrap();
        cluster.resume(1).unwrap();
        for lease in kept {
            lease.release().await;
        }
        lock.settle().await;
        // The node that never froze was released; on the two that did, a release sent while
        // they were frozen may time out unanswered (a loaded machine keeps them frozen past
        // it), and then their keys end by their TTL.
        assert_no_keys(&cluster, 2..3).await;
        until(async || key_count(&cluster, 0).await + key_count(&cluster, 1).await == 0).await;
    })
    .await;
}
