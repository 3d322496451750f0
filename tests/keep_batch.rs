//! The batched keep-alive: many leases of one lock extended together. With a majority frozen,
//! every one of 1,000 leases is reported lost before its validity ends; leases join and leave
//! the batches (the keeper stopping when none is left, starting again for the next); one lease
//! taken by someone else is lost while the others go on; and a kept lock whose acquisition left
//! the key on a bare quorum regains the fault tolerance of all its nodes.
//!
//! Its own binary, so that the other lock tests' load and threads meet it nowhere (`cargo test`
//! runs one test binary at a time).
// Test code: an unwrap that fails is a failed run, which is what it should be.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

// The lock tests' helpers; this binary uses a few of them.
#[allow(dead_code)]
#[path = "lock/common.rs"]
mod common;

use std::time::Duration;

use quorumlock::{KeepAlive, Lock, Lost, NodeReply};
use redis::AsyncCommands;

use crate::common::{
    assert_no_keys, bounded, keep_options as options, kept_leases, key_count, once, stored, until,
};

/// Leases join and leave: a released lease's key is gone while the other goes on being
/// extended; once the last one left, a lease kept afterwards is extended again (the keeper
/// stopped and starts anew).
#[tokio::test]
async fn leases_join_and_leave_the_batches() {
    bounded(async {
        let cluster = crate::common::cluster(3).await;
        let lock = Lock::new(cluster.urls(), options(Duration::from_secs(3))).unwrap();
        let every = KeepAlive::new().every(Duration::from_millis(100));
        let mut leases = kept_leases(&lock, "joining:", 2, every.clone()).await;
        let (second, first) = (leases.pop().unwrap(), leases.pop().unwrap());
        until(async || first.extensions() >= 1 && second.extensions() >= 1).await;
        let first_key = format!("quorumlock:{}", String::from_utf8_lossy(first.resource()));
        let report = first.release().await;
        assert!(report.held >= 2, "{report:?}");
        lock.settle().await;
        for node in 0..3 {
            assert_eq!(stored(&cluster, node, first_key.as_bytes()).await, None);
        }
        let before = second.extensions();
        until(async || second.extensions() >= before + 2).await;
        assert!(second.is_valid());
        drop(second);
        lock.settle().await;
        assert_no_keys(&cluster, 0..3).await;

        let third = lock
            .try_acquire("joining:later")
            .await
            .unwrap()
            .keep_alive(every)
            .unwrap();
        until(async || third.extensions() >= 2).await;
        assert!(third.is_valid());
        third.release().await;
        lock.settle().await;
        assert_no_keys(&cluster, 0..3).await;
    })
    .await;
}

/// Someone else takes one lease's key on a majority (ours deleted, another token set): that
/// lease is lost as taken, the others keep being extended, and the other's keys are never
/// touched.
#[tokio::test]
async fn one_lease_taken_by_another_is_lost_while_the_others_keep_extending() {
    bounded(async {
        let cluster = crate::common::cluster(3).await;
        let lock = Lock::new(cluster.urls(), options(Duration::from_secs(3))).unwrap();
        let every = KeepAlive::new().every(Duration::from_millis(100));
        let kept = kept_leases(&lock, "many:", 20, every).await;
        let (taken, others): (Vec<_>, Vec<_>) = kept
            .into_iter()
            .partition(|lease| lease.resource() == b"many:7");
        let taken = taken.into_iter().next().unwrap();
        for node in 0..2 {
            let mut connection = cluster.connection(node).await.unwrap();
            let _: () = connection.del("quorumlock:many:7").await.unwrap();
            let _: () = connection
                .set_ex("quorumlock:many:7", "someone-else", 60)
                .await
                .unwrap();
        }
        let before: Vec<u64> = others.iter().map(|lease| lease.extensions()).collect();
        let lost = taken.lost().await;
        let Lost::Taken { outcomes, .. } = &lost else {
            panic!("expected Taken, got {lost}");
        };
        assert!(
            outcomes
                .iter()
                .filter(|o| o.reply == NodeReply::NotOurs)
                .count()
                >= 2,
            "{lost}"
        );
        until(async || {
            others
                .iter()
                .zip(&before)
                .all(|(lease, before)| lease.extensions() >= before + 2)
        })
        .await;
        assert!(others.iter().all(|lease| lease.is_valid()));
        taken.release().await;
        for lease in others {
            lease.release().await;
        }
        lock.settle().await;
        for node in 0..2 {
            assert_eq!(
                stored(&cluster, node, b"quorumlock:many:7")
                    .await
                    .as_deref(),
                Some("someone-else")
            );
            assert_eq!(key_count(&cluster, node).await, 1, "node {node}");
        }
        assert_eq!(key_count(&cluster, 2).await, 0);
    })
    .await;
}

/// An acquisition that reached only three of five nodes (two refused connections) leaves the
/// key on a bare quorum. Once those two are back, a batch brings the key
/// there, so the kept lock then survives one of the first three being killed, which it would
/// not have with the key on three nodes only.
// promise: kept-key-everywhere
#[tokio::test]
async fn a_kept_lock_acquired_on_a_bare_quorum_regains_the_fault_tolerance_of_all_its_nodes() {
    bounded(async {
        let mut cluster = crate::common::proxied_cluster(5).await;
        let ttl = Duration::from_millis(1_500);
        let lock = Lock::new(
            cluster.urls(),
            once()
                .ttl(ttl)
                .node_timeout(Duration::from_millis(200))
                .connect_timeout(Duration::from_millis(200)),
        )
        .unwrap();
        // Nodes 3 and 4 refuse connections from the start: the acquisition sends them
        // nothing, so only the batch's own record in the ledger can make the release go there.
        for node in [3, 4] {
            cluster.proxy(node).unwrap().refuse().await;
        }
        let guard = lock.try_acquire("spread").await.unwrap();
        let token = guard.token().as_str().to_owned();
        for node in [3, 4] {
            assert_ne!(guard.outcomes()[node].reply, NodeReply::Ours, "{guard:?}");
        }
        let kept = guard
            .keep_alive(KeepAlive::new().every(Duration::from_millis(200)))
            .unwrap();
        for node in [3, 4] {
            cluster.proxy(node).unwrap().heal().await.unwrap();
        }
        until(async || {
            stored(&cluster, 3, b"quorumlock:spread").await.as_deref() == Some(token.as_str())
                && stored(&cluster, 4, b"quorumlock:spread").await.as_deref()
                    == Some(token.as_str())
        })
        .await;
        cluster.kill(0).await.unwrap();
        let extended = kept.extensions();
        // The hold itself is what is tested: more than a TTL with one of the first three gone.
        tokio::time::sleep(ttl * 2).await;
        assert!(kept.is_valid(), "{kept:?}");
        assert!(kept.extensions() > extended, "{kept:?}");
        // The release goes to the nodes the batch set the key on, too.
        kept.release().await;
        lock.settle().await;
        assert_no_keys(&cluster, 1..5).await;
    })
    .await;
}

/// A node slower to connect than the connect timeout (80 ms each way: connect and identity take
/// several round trips) gets no request from a cold client's acquisition, which decides on the
/// other four. The keep-alive's first batch brings the key there, not its second: when the key
/// first stands on that node, the lease has been extended once. (Its batch connection is made
/// when the lease is kept, not when the first batch finds none and times out making one.)
// promise: kept-key-everywhere
#[tokio::test]
async fn the_first_batch_brings_the_key_to_a_node_the_acquisition_never_reached() {
    bounded(async {
        let cluster = crate::common::proxied_cluster(5).await;
        let lock = Lock::new(
            cluster.urls(),
            once()
                .ttl(Duration::from_secs(6))
                .node_timeout(Duration::from_millis(500))
                .connect_timeout(Duration::from_millis(200)),
        )
        .unwrap();
        cluster
            .proxy(4)
            .unwrap()
            .set_latency(Duration::from_millis(80));
        let guard = lock.try_acquire("slow-node").await.unwrap();
        assert_ne!(guard.outcomes()[4].reply, NodeReply::Ours, "{guard:?}");
        let token = guard.token().as_str().to_owned();
        let kept = guard
            .keep_alive(KeepAlive::new().every(Duration::from_secs(2)))
            .unwrap();
        until(async || {
            stored(&cluster, 4, b"quorumlock:slow-node")
                .await
                .as_deref()
                == Some(token.as_str())
        })
        .await;
        assert_eq!(kept.extensions(), 1, "the key came with a later batch");
        kept.release().await;
        lock.settle().await;
        assert_no_keys(&cluster, 0..5).await;
    })
    .await;
}

/// A node held back by the restart guard never gets the key from a batch: two of five nodes
/// restarted empty (and so recovering) while a kept lock holds the other three; once one of
/// those three is killed, the lock is lost, as it must be (the two recovering nodes may have
/// lost another's key in their crash), and neither of them ever held our key.
// promise: kept-key-everywhere
#[tokio::test]
async fn a_recovering_node_is_not_given_the_key_and_the_lock_is_lost_without_it() {
    bounded(async {
        let mut cluster = crate::common::volatile_cluster(5).await;
        let lock = Lock::new(
            cluster.urls(),
            options(Duration::from_secs(1)).max_ttl(Duration::from_secs(8)),
        )
        .unwrap();
        let guard = crate::common::acquire_once_voting(&lock, "gated").await;
        let token = guard.token().as_str().to_owned();
        lock.settle().await;
        for node in [3, 4] {
            cluster.restart(node).await.unwrap();
        }
        let kept = guard
            .keep_alive(KeepAlive::new().every(Duration::from_millis(100)))
            .unwrap();
        cluster.kill(0).await.unwrap();
        let given = async {
            until(async || {
                stored(&cluster, 3, b"quorumlock:gated").await.is_some()
                    || stored(&cluster, 4, b"quorumlock:gated").await.is_some()
            })
            .await;
        };
        tokio::select! {
            lost = kept.lost() => assert!(matches!(lost, Lost::Expired { .. }), "{lost}"),
            () = given => panic!("a recovering node was given our key ({token})"),
        }
        for node in [3, 4] {
            assert_eq!(stored(&cluster, node, b"quorumlock:gated").await, None);
        }
        kept.release().await;
    })
    .await;
}

/// The lock's connection of `name` on `node` (`""` for an unnamed one), other than the one that
/// asks: the last command it ran (`CLIENT LIST`'s `cmd`), one per such connection.
async fn last_commands(
    cluster: &quorumlock_harness::TestCluster,
    node: usize,
    name: &str,
) -> Vec<String> {
    let mut admin = cluster.connection(node).await.unwrap();
    let listed: String = redis::cmd("CLIENT")
        .arg("LIST")
        .arg("TYPE")
        .arg("normal")
        .query_async(&mut admin)
        .await
        .unwrap();
    listed
        .lines()
        .filter(|line| line.split(' ').any(|field| field == format!("name={name}")))
        .filter_map(|line| line.split(' ').find_map(|field| field.strip_prefix("cmd=")))
        .filter(|cmd| *cmd != "client|list")
        .map(str::to_owned)
        .collect()
}

/// The keeper's batches go on a connection of their own per node, named
/// `quorumlock-keep-alive`, so that no acquisition waits behind a batch in the connection's
/// queue: an acquisition made while a lease is kept goes out on the other connection, which
/// runs no batch. (Broken on purpose by sending the batches on the requests' connection: no
/// connection is named, and the acquisition's connection runs the batches.)
#[tokio::test]
async fn keep_alive_batches_go_on_a_connection_of_their_own() {
    bounded(async {
        let cluster = crate::common::cluster(3).await;
        let lock = Lock::new(cluster.urls(), options(Duration::from_secs(3))).unwrap();
        let every = KeepAlive::new().every(Duration::from_millis(100));
        let kept = kept_leases(&lock, "lane:", 1, every).await.pop().unwrap();
        until(async || kept.extensions() >= 1).await;
        // A single key's acquisition is a plain `SET NX PX`; every batch is an `EVAL`.
        let other = lock.try_acquire("lane-other").await.unwrap();
        let after = kept.extensions();
        until(async || kept.extensions() >= after + 2).await;
        for node in 0..cluster.len() {
            assert_eq!(
                last_commands(&cluster, node, "quorumlock-keep-alive").await,
                ["eval"],
                "node {node}: the keep-alive's connection"
            );
            assert_eq!(
                last_commands(&cluster, node, "").await,
                ["set"],
                "node {node}: the requests' connection ran a batch after the acquisition"
            );
        }
        other.release().await;
        kept.release().await;
    })
    .await;
}

/// Leases taken on at once are extended spread over their interval, not all at once each time:
/// paced batches go out evenly, taking the leases due soonest up to half an interval early, so
/// that no node ever has more than a batch of ours ahead of another client's command. Here 1,200
/// leases taken in a burst (well under a third of the interval on an idle machine) end their
/// validities, two extensions later, spread over at least a third of it. (Broken on purpose by
/// sending only leases that are due: the validities stay as bunched as the burst.)
#[tokio::test]
async fn leases_taken_in_a_burst_are_extended_spread_over_their_interval() {
    bounded(async {
        let cluster = crate::common::cluster(3).await;
        let lock = Lock::new(cluster.urls(), options(Duration::from_secs(6))).unwrap();
        let every = Duration::from_millis(1_500);
        let kept = kept_leases(&lock, "burst:", 1_200, KeepAlive::new().every(every)).await;
        until(async || kept.iter().all(|lease| lease.extensions() >= 2)).await;
        let ends: Vec<_> = kept.iter().map(|lease| lease.valid_until()).collect();
        let (first, last) = (ends.iter().min().unwrap(), ends.iter().max().unwrap());
        assert!(
            *last - *first >= every / 3,
            "validities end within {:?} of each other",
            *last - *first
        );
        for lease in kept {
            lease.release().await;
        }
        lock.settle().await;
        assert_no_keys(&cluster, 0..3).await;
    })
    .await;
}
