//! One server, one vote: the same server listed twice never counts twice. The same host and
//! port twice is a configuration error; the same server under two names (`127.0.0.1:P` and
//! `localhost:P`) is found on connect by its `run_id`, and only the node that claimed it first
//! votes for it.

use quorumlock::{ConfigError, Error, Lock, LockOptions, NodeError, NodeReply};
use quorumlock_harness::TestCluster;
use redis::AsyncCommands;

use crate::common::*;

/// The node that the claimed server's other node names, if it failed as `SameServer`.
fn same_server_as(reply: &NodeReply) -> Option<usize> {
    match reply {
        NodeReply::Failed(NodeError::SameServer { node, .. }) => Some(*node),
        _ => None,
    }
}

// promise: one-server-one-vote
#[test]
fn the_same_host_and_port_twice_is_a_configuration_error() {
    let duplicate = |urls: [&str; 3]| match Lock::new(urls, LockOptions::new()) {
        Err(Error::Config(ConfigError::DuplicateNode {
            first,
            second,
            addr,
        })) => (first, second, addr),
        other => panic!("{urls:?}: {other:?}"),
    };
    let p = "redis://127.0.0.1:7001";
    assert_eq!(
        duplicate([p, "redis://127.0.0.1:7002", p]),
        (0, 2, "127.0.0.1:7001".to_owned())
    );
    // Host case, database number, credentials: still the same server.
    assert_eq!(
        duplicate([
            "redis://Redis-A.example:6379",
            "redis://redis-b.example:6379",
            "redis://REDIS-a.example:6379",
        ]),
        (0, 2, "redis-a.example:6379".to_owned())
    );
    assert_eq!(
        duplicate([
            "redis://10.0.0.1:6379/0",
            "redis://10.0.0.1:6379/1",
            "redis://10.0.0.2:6379"
        ])
        .0..=1,
        0..=1
    );
    let (first, second, addr) = duplicate([
        "redis://10.0.0.3:6379",
        "redis://user:secret@10.0.0.1:6379",
        "redis://:other@10.0.0.1:6379/2",
    ]);
    assert_eq!((first, second), (1, 2));
    let message = Error::from(ConfigError::DuplicateNode {
        first,
        second,
        addr,
    })
    .to_string();
    assert!(!message.contains("secret"), "{message}");

    // Other ports, or a lone server: fine.
    Lock::new(
        [
            "redis://10.0.0.1:6379",
            "redis://10.0.0.1:6380",
            "redis://10.0.0.2:6379",
        ],
        LockOptions::new(),
    )
    .unwrap();
}

/// The URLs of a five-node lock over four servers: node 0 and node 1 are server 0 (as
/// `127.0.0.1` and `localhost`), nodes 2–4 are servers 1–3.
fn five_urls_over_four_servers(cluster: &TestCluster) -> Vec<String> {
    let port = |server| cluster.port(server).unwrap();
    vec![
        format!("redis://127.0.0.1:{}", port(0)),
        format!("redis://localhost:{}/1", port(0)),
        format!("redis://127.0.0.1:{}", port(1)),
        format!("redis://127.0.0.1:{}", port(2)),
        format!("redis://127.0.0.1:{}", port(3)),
    ]
}

/// The same server under two names votes once: one of its two nodes is refused with
/// `SameServer` naming the other, which keeps its claim for as long as that server runs. With
/// two of the other three servers stopped only two real servers are left, and the five-node
/// lock (quorum 3) is `Unavailable`, never granted.
// promise: one-server-one-vote
#[tokio::test]
async fn one_server_under_two_names_votes_once() {
    bounded(async {
        let mut cluster = cluster(4).await;
        let urls = five_urls_over_four_servers(&cluster);
        let lock = Lock::new(urls.clone(), once()).unwrap();
        assert_eq!(lock.quorum_size(), 3);
        // Connect everything first: a node refused before its connection was made could be
        // decided without, as `NoReply`. (The race is the next test's.)
        crate::common::warm_up(&lock).await;
        lock.settle().await;

        let mut claimed = None;
        for round in 0..5 {
            let guard = lock.try_acquire(format!("all-up-{round}")).await.unwrap();
            lock.settle().await;
            let replies = replies(guard.outcomes());
            // Exactly one of nodes 0 and 1 speaks for server 0, always the same one.
            let (voter, refused) = match (same_server_as(&replies[0]), same_server_as(&replies[1]))
            {
                (None, Some(0)) => (0, 1),
                (Some(1), None) => (1, 0),
                other => panic!("round {round}: {other:?} in {replies:?}"),
            };
            assert_ne!(replies[refused], NodeReply::Ours);
            assert_eq!(*claimed.get_or_insert(voter), voter, "the claim stays");
            // In the voter's database (node 1's URL names db 1).
            let mut voter_db = redis::Client::open(urls[voter].as_str())
                .unwrap()
                .get_multiplexed_async_connection()
                .await
                .unwrap();
            let value: Option<String> = voter_db.get(guard.key()).await.unwrap();
            assert_eq!(value.as_deref(), Some(guard.token().as_str()));
            guard.release().await;
        }

        cluster.kill(2).await.unwrap();
        cluster.kill(3).await.unwrap();
        for round in 0..5 {
            let error = lock
                .try_acquire(format!("two-down-{round}"))
                .await
                .unwrap_err();
            let Error::Unavailable { outcomes, .. } = &error else {
                panic!("round {round}: expected Unavailable, got {error}");
            };
            let ours = outcomes
                .iter()
                .filter(|o| o.reply == NodeReply::Ours)
                .count();
            assert!(ours <= 2, "{error}");
        }
        lock.settle().await;
        assert_no_keys(&cluster, 0..2).await;
        let mut db1 = redis::Client::open(urls[1].as_str())
            .unwrap()
            .get_multiplexed_async_connection()
            .await
            .unwrap();
        let keys: usize = redis::cmd("DBSIZE").query_async(&mut db1).await.unwrap();
        assert_eq!(keys, 0, "db 1 of server 0 kept a key");
    })
    .await;
}

/// The race: many locks, each making its connections afresh, acquire at once while the two
/// names of server 0 connect at the same moment, with servers 2 and 3 down. One server never
/// counts twice, so none of them is granted the lock.
// promise: one-server-one-vote
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_names_connecting_at_once_never_vote_twice() {
    bounded(async {
        let mut cluster = cluster(4).await;
        cluster.kill(2).await.unwrap();
        cluster.kill(3).await.unwrap();
        let urls = five_urls_over_four_servers(&cluster);

        let mut tasks = Vec::new();
        for client in 0..16 {
            let lock = Lock::new(urls.clone(), once()).unwrap();
            // Several acquisitions at once on one cold lock too.
            for resource in 0..2 {
                let lock = lock.clone();
                tasks.push(tokio::spawn(async move {
                    let result = lock.try_acquire(format!("race-{client}-{resource}")).await;
                    lock.settle().await;
                    result
                }));
            }
        }
        let mut same_server = 0;
        for task in tasks {
            let error = match task.await.unwrap() {
                Ok(guard) => panic!("granted by two real servers: {:?}", guard.outcomes()),
                Err(error) => error,
            };
            assert!(matches!(error, Error::Unavailable { .. }), "{error}");
            let both = error.outcomes()[..2]
                .iter()
                .filter(|o| o.reply == NodeReply::Ours)
                .count();
            assert!(both <= 1, "server 0 voted twice: {error}");
            same_server += error.outcomes()[..2]
                .iter()
                .filter(|o| same_server_as(&o.reply).is_some())
                .count();
        }
        assert!(same_server > 0, "the second name was refused at least once");
        assert_no_keys(&cluster, 0..2).await;
    })
    .await;
}
