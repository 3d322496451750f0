//! A different server behind a known node address sits out: a failover behind one name (a
//! replica promoted behind the same DNS name or proxy, as Sentinel and managed Redis do) puts a
//! server there that may lack the keys the old one held, however well it persists its writes.

use std::net::{Ipv4Addr, SocketAddr};
use std::time::Duration;

use quorumlock::{Error, Lock, NodeError, NodeReply, Replacement};
use quorumlock_harness::TestCluster;

use crate::common::{bounded, cluster, once, proxied_cluster};

/// Waits until both nodes of `cluster` have been up for 2 s by their own count: servers that
/// were running well before the switch, as a standby replica is.
async fn standing_by(cluster: &TestCluster) {
    for node in 0..cluster.len() {
        let up = cluster
            .wait_for_uptime(node, Duration::from_secs(2))
            .await
            .unwrap();
        assert!(
            up >= Duration::from_secs(2),
            "node {node} up for {up:?} only"
        );
    }
}

fn direct(cluster: &TestCluster, node: usize) -> SocketAddr {
    SocketAddr::from((Ipv4Addr::LOCALHOST, cluster.port(node).unwrap()))
}

/// The failover of issue 18: A holds the lock on all three nodes; the addresses of nodes 0 and
/// 1 are switched to two other servers that persist every write and have been up for a while
/// but never had A's key, and the old connections are cut. B, which knew the servers there,
/// must not get the lock while A's guard is valid: those two sit out.
// promise: failover-sits-out
#[tokio::test]
async fn a_server_switched_in_behind_a_known_address_does_not_grant_a_held_lock() {
    bounded(async {
        let standbys = cluster(2).await;
        let main = proxied_cluster(3).await;
        // Standbys that were running well before the lock last heard from the old servers.
        standing_by(&standbys).await;
        let options = once().ttl(Duration::from_secs(5));
        // A takes the lock on all three nodes; B needs the usual majority.
        let a = Lock::new(main.urls(), options.clone().quorum_size(3)).unwrap();
        let b = Lock::new(main.urls(), options).unwrap();
        let guard = a.try_acquire("job").await.unwrap();
        // B has met the three servers: each answered one of its requests before a decision
        // (on a loaded machine one node can be the slowest many times in a row).
        let mut met = [false; 3];
        for _ in 0..200 {
            if let Ok(warm_up) = b.try_acquire("b-warm-up").await {
                for outcome in warm_up.outcomes() {
                    met[outcome.node] |= matches!(outcome.reply, NodeReply::Ours);
                }
                warm_up.release().await;
                b.settle().await;
            }
            if met == [true; 3] {
                break;
            }
        }
        assert_eq!(met, [true; 3], "B answered by every node");
        assert!(matches!(
            b.try_acquire("job").await,
            Err(Error::Held { .. })
        ));

        for node in [0, 1] {
            let proxy = main.proxy(node).unwrap();
            proxy.switch_upstream(direct(&standbys, node));
            proxy.cut().await;
        }

        // The first attempt may find the cut connections broken; the next ones reconnect and
        // meet the new servers (a round can be decided before a slow reconnect answers, so
        // what each node said is gathered over the attempts). None may grant.
        let mut replaced = std::collections::BTreeMap::new();
        for _ in 0..5 {
            let error = match b.try_acquire("job").await {
                Ok(stolen) => panic!(
                    "granted twice while A's guard is valid for {:?}: {:?}",
                    guard.remaining(),
                    stolen.outcomes()
                ),
                Err(error) => error,
            };
            for outcome in error.outcomes() {
                if let NodeReply::Failed(NodeError::Replaced { left, reason }) = &outcome.reply {
                    replaced.insert(outcome.node, (*left, reason.clone()));
                }
            }
            if replaced.len() == 2 {
                break;
            }
        }
        assert_eq!(
            replaced.keys().copied().collect::<Vec<_>>(),
            [0, 1],
            "nodes 0 and 1 sit out: {replaced:?}"
        );
        let period = b.restart_guard_period().unwrap();
        for (node, (left, reason)) in &replaced {
            assert!(*left <= period, "node {node}: {left:?} of {period:?}");
            assert!(
                matches!(reason, Replacement::OtherServer { .. }),
                "node {node}: {reason}"
            );
        }
        assert!(guard.is_valid(), "the test ran within A's validity");
        guard.release().await;
    })
    .await;
}

/// The contrast: a server that really restarted (its process, with its AOF) at the address
/// votes again at once: it was started after the lock last heard from the old one.
#[tokio::test]
async fn a_restart_with_every_write_persisted_still_votes_at_once() {
    bounded(async {
        let mut main = cluster(3).await;
        // Every node must vote, so node 0's vote is read, not outrun by the others.
        let lock = Lock::new(main.urls(), once().quorum_size(3)).unwrap();
        crate::common::warm_up(&lock).await;
        main.restart(0).await.unwrap();
        // The first attempt may meet the broken connection; the next one reconnects.
        let mut result = lock.try_acquire("after-restart").await;
        if let Err(error) = &result {
            assert!(
                matches!(
                    &error.outcomes()[0].reply,
                    NodeReply::Failed(NodeError::Connection(_) | NodeError::ConnectionRefused)
                ),
                "{error}"
            );
            result = lock.try_acquire("after-restart").await;
        }
        let guard = result.unwrap();
        assert_eq!(guard.outcomes()[0].reply, NodeReply::Ours);
        guard.release().await;
    })
    .await;
}

/// The limit `docs/deployment.md` states: what tells a replacement from a restart is this
/// client's last reply from the old server, not the switch. A plain master started after that
/// reply, here 2 s before the switch while the client was idle, is taken for a restart and,
/// persisting every write, votes at once. (A client that keeps talking to the node, or a
/// promoted replica, is not fooled: the tests above.)
// promise: failover-sits-out
#[tokio::test]
async fn a_plain_master_started_after_the_last_reply_is_taken_for_a_restart() {
    bounded(async {
        let main = proxied_cluster(3).await;
        let lock = Lock::new(main.urls(), once().quorum_size(3)).unwrap();
        crate::common::warm_up(&lock).await;
        // The client is idle from here on; the replacement starts after its last reply and has
        // been up for 2 s when it takes over node 0's address.
        let replacement = cluster(1).await;
        standing_by(&replacement).await;
        let proxy = main.proxy(0).unwrap();
        proxy.switch_upstream(direct(&replacement, 0));
        proxy.cut().await;
        // The first attempt may meet the cut connection; the next one reconnects.
        let mut result = lock.try_acquire("after-switch").await;
        if result.is_err() {
            result = lock.try_acquire("after-switch").await;
        }
        let guard = result.expect("node 0 votes: the replacement is taken for a restart");
        assert_eq!(guard.outcomes()[0].reply, NodeReply::Ours);
        guard.release().await;
    })
    .await;
}

/// A replica never votes, and once promoted it sits out, for a lock that saw it as a replica
/// and for one that never met it before: it may have missed its old master's latest writes.
// promise: failover-sits-out
#[tokio::test]
async fn a_replica_never_votes_and_a_promoted_one_sits_out() {
    bounded(async {
        let servers = cluster(2).await;
        let mut replica = servers.connection(1).await.unwrap();
        let () = redis::cmd("REPLICAOF")
            .arg("127.0.0.1")
            .arg(servers.port(0).unwrap())
            .query_async(&mut replica)
            .await
            .unwrap();
        let url = servers.direct_url(1).unwrap();
        let seen_as_replica = Lock::new([url.clone()], once()).unwrap();
        let error = seen_as_replica.try_acquire("r").await.unwrap_err();
        assert_eq!(
            error.outcomes()[0].reply,
            NodeReply::Failed(NodeError::Replica)
        );

        let () = redis::cmd("REPLICAOF")
            .arg("NO")
            .arg("ONE")
            .query_async(&mut replica)
            .await
            .unwrap();
        let never_met = Lock::new([url], once()).unwrap();
        for (name, lock) in [
            ("saw it as a replica", &seen_as_replica),
            ("never met", &never_met),
        ] {
            let error = lock.try_acquire("r").await.unwrap_err();
            assert!(
                matches!(
                    &error.outcomes()[0].reply,
                    NodeReply::Failed(NodeError::Replaced { left, .. })
                        if *left <= lock.restart_guard_period().unwrap()
                ),
                "{name}: {error}"
            );
        }
    })
    .await;
}
