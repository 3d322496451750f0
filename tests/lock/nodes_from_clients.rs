//! Nodes given as configuration (`NodeConfig`, `Lock::from_nodes`) rather than URLs: from a
//! user's `redis::Client` or `redis::ConnectionInfo`, the lock still connects by itself, so what
//! it does on its own connections still applies: it logs in with the node's credentials (an ACL
//! user here), keeps the node's database, asks every new connection's server who it is (one
//! server, one vote) and holds a freshly started server back (the restart guard).

use std::time::Duration;

use quorumlock::{ConfigError, Error, Lock, NodeConfig, NodeError, NodeReply};
use quorumlock_harness::TestCluster;
use redis::{ConnectionAddr, ConnectionInfo, IntoConnectionInfo};

use crate::acl::{PASSWORD, USER, acl_options, recommended, set_user};
use crate::common::*;

/// The connection info of `host:port`, as an application would build it.
fn info(host: &str, port: u16) -> ConnectionInfo {
    ConnectionAddr::Tcp(host.to_owned(), port)
        .into_connection_info()
        .unwrap()
}

/// The keys in database `db` of node `node`.
async fn db_size(cluster: &TestCluster, node: usize, db: i64) -> usize {
    let info = info("127.0.0.1", cluster.port(node).unwrap());
    let settings = info.redis_settings().clone().set_db(db);
    let mut connection = redis::Client::open(info.set_redis_settings(settings))
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    redis::cmd("DBSIZE")
        .query_async(&mut connection)
        .await
        .unwrap()
}

/// A client (database 2), a `ConnectionInfo` and a URL as the three nodes: the lock acquires,
/// extends and releases, and leaves no key; node 0's keys go to the client's database.
#[tokio::test]
async fn a_lock_from_a_client_a_connection_info_and_a_url_works() {
    bounded(async {
        let cluster = cluster(3).await;
        let port = |node| cluster.port(node).unwrap();
        let client = redis::Client::open(format!("redis://127.0.0.1:{}/2", port(0))).unwrap();
        let nodes = [
            NodeConfig::from(&client),
            NodeConfig::from(info("127.0.0.1", port(1))),
            NodeConfig::from_url(format!("redis://127.0.0.1:{}", port(2))),
        ];
        let lock = Lock::new(nodes, once()).unwrap();
        let addrs: Vec<String> = (0..3)
            .map(|node| format!("127.0.0.1:{}", port(node)))
            .collect();
        assert_eq!(lock.node_addrs(), addrs);
        warm_up(&lock).await;

        let mut guard = lock.try_acquire("byo").await.unwrap();
        assert!(holders(guard.outcomes()).len() >= 2, "{guard:?}");
        guard.extend(Duration::from_secs(10)).await.unwrap();
        assert!(guard.release().await.held >= 2);
        lock.settle().await;
        assert_no_keys(&cluster, 1..3).await;

        // The client's database is the node's: a lock on that client alone keeps its key there.
        let alone = Lock::new([&client], once()).unwrap();
        let guard = alone.try_acquire("byo").await.unwrap();
        assert_eq!(db_size(&cluster, 0, 2).await, 1, "node 0's key is in db 2");
        assert_eq!(db_size(&cluster, 0, 0).await, 0);
        assert_eq!(guard.release().await.held, 1);
        assert_eq!(db_size(&cluster, 0, 2).await, 0);
    })
    .await;
}

/// An ACL user's credentials in the `ConnectionInfo` are what the lock logs in with: the
/// recommended user acquires and releases; a wrong password is an `Auth` error on every node
/// that answered, and neither password reaches an error message or `Debug`.
#[tokio::test]
async fn an_acl_users_connection_info_logs_in_with_its_credentials() {
    bounded(async {
        let cluster = cluster(3).await;
        set_user(&cluster, &recommended()).await;
        let as_user = |password: &str| -> Vec<NodeConfig> {
            (0..3)
                .map(|node| {
                    let info = info("127.0.0.1", cluster.port(node).unwrap());
                    let login = info
                        .redis_settings()
                        .clone()
                        .set_username(USER)
                        .set_password(password);
                    NodeConfig::from(info.set_redis_settings(login))
                })
                .collect()
        };

        let lock = Lock::new(as_user(PASSWORD), acl_options()).unwrap();
        assert!(!format!("{lock:?}").contains(PASSWORD));
        let guard = lock.try_acquire("acl").await.unwrap();
        assert!(holders(guard.outcomes()).len() >= 2, "{guard:?}");
        assert!(guard.release().await.held >= 2);
        lock.settle().await;

        let wrong = "not-the-password";
        let nodes = as_user(wrong);
        assert!(!format!("{nodes:?}").contains(wrong));
        let error = Lock::new(nodes, acl_options())
            .unwrap()
            .try_acquire("acl")
            .await
            .unwrap_err();
        assert!(matches!(error, Error::Unavailable { .. }), "{error}");
        let refused = error
            .outcomes()
            .iter()
            .filter(|outcome| matches!(outcome.reply, NodeReply::Failed(NodeError::Auth(_))))
            .count();
        assert!(refused >= 2, "{error}");
        for shown in [error.to_string(), format!("{error:?}")] {
            assert!(!shown.contains(wrong), "{shown}");
        }
        assert_no_keys(&cluster, 0..3).await;
    })
    .await;
}

/// One server, one vote, for nodes given as connection info: the same host and port twice is a
/// configuration error, and the same server as `127.0.0.1` and `localhost` is found by its
/// `run_id`: one of the two is refused as `SameServer`, and with two of the other three servers
/// down the five-node lock (quorum 3) is never granted.
#[tokio::test]
async fn one_server_given_twice_as_connection_info_votes_once() {
    bounded(async {
        let duplicate = Lock::new(
            [
                info("127.0.0.1", 7001),
                info("127.0.0.1", 7002),
                info("127.0.0.1", 7001),
            ],
            once(),
        );
        assert!(
            matches!(
                duplicate,
                Err(Error::Config(ConfigError::DuplicateNode {
                    first: 0,
                    second: 2,
                    ..
                }))
            ),
            "{duplicate:?}"
        );

        let mut cluster = cluster(4).await;
        let port = |server| cluster.port(server).unwrap();
        let nodes = [
            info("127.0.0.1", port(0)),
            info("localhost", port(0)),
            info("127.0.0.1", port(1)),
            info("127.0.0.1", port(2)),
            info("127.0.0.1", port(3)),
        ];
        let lock = Lock::new(nodes, once()).unwrap();
        assert_eq!(lock.quorum_size(), 3);
        warm_up(&lock).await;
        lock.settle().await;
        let guard = lock.try_acquire("all-up").await.unwrap();
        let same_server =
            |reply: &NodeReply| matches!(reply, NodeReply::Failed(NodeError::SameServer { .. }));
        let replies = replies(guard.outcomes());
        assert_eq!(
            replies[..2]
                .iter()
                .filter(|reply| same_server(reply))
                .count(),
            1,
            "{replies:?}"
        );
        guard.release().await;

        cluster.kill(2).await.unwrap();
        cluster.kill(3).await.unwrap();
        let error = lock.try_acquire("two-down").await.unwrap_err();
        assert!(matches!(error, Error::Unavailable { .. }), "{error}");
        lock.settle().await;
        assert_no_keys(&cluster, 0..2).await;
    })
    .await;
}

/// The restart guard reads every new connection's server, whatever the node was built from:
/// freshly started servers that do not persist every write, given as clients, are held back
/// (`Recovering`), so the lock is not granted and no key is set.
#[tokio::test]
async fn the_restart_guard_holds_back_fresh_servers_given_as_clients() {
    bounded(async {
        let cluster = volatile_cluster(3).await;
        let clients: Vec<redis::Client> = cluster
            .urls()
            .iter()
            .map(|url| redis::Client::open(url.as_str()).unwrap())
            .collect();
        let lock = Lock::new(&clients, once()).unwrap();
        let error = lock.try_acquire("fresh").await.unwrap_err();
        assert!(matches!(error, Error::Unavailable { .. }), "{error}");
        let held_back = error
            .outcomes()
            .iter()
            .filter(|outcome| recovering(outcome).is_some())
            .count();
        assert!(held_back >= 2, "{error}");
        assert_no_keys(&cluster, 0..3).await;
    })
    .await;
}
