//! What every lock test shares: a hang guard, clusters, and direct looks at the nodes.

use std::future::Future;
use std::time::Duration;

use futures::StreamExt;
use futures::stream;
use quorumlock::{
    Error, Guard, KeepAlive, KeptGuard, Lock, LockOptions, NodeError, NodeOutcome, NodeReply,
    Patience,
};
use quorumlock_harness::{ClusterOptions, Persistence, TestCluster};
use redis::AsyncCommands;

/// Generous bound on every test, so a hang fails the test instead of stalling CI.
const TEST_BOUND: Duration = Duration::from_secs(120);

/// Runs `test`, failing it if it has not finished within [`TEST_BOUND`].
pub async fn bounded<F: Future>(test: F) -> F::Output {
    tokio::time::timeout(TEST_BOUND, test)
        .await
        .expect("test did not finish within its bound")
}

/// `nodes` local masters that persist every write (AOF, `appendfsync always`, on tmpfs where
/// there is one, so it costs nothing): the restart guard lets them vote at once, so tests need
/// not wait a TTL after starting them.
pub async fn cluster(nodes: usize) -> TestCluster {
    TestCluster::start(
        ClusterOptions::default()
            .nodes(nodes)
            .persistence(Persistence::AofAlways),
    )
    .await
    .expect("start redis-server processes")
}

/// As [`cluster`], each node behind a fault proxy.
pub async fn proxied_cluster(nodes: usize) -> TestCluster {
    TestCluster::start(
        ClusterOptions::default()
            .nodes(nodes)
            .proxies(true)
            .persistence(Persistence::AofAlways),
    )
    .await
    .expect("start redis-server processes behind proxies")
}

/// `nodes` local masters without persistence: a restarted one comes back empty, and the
/// restart guard holds each of them back for `max_ttl` plus the drift after it starts.
pub async fn volatile_cluster(nodes: usize) -> TestCluster {
    TestCluster::start(
        ClusterOptions::default()
            .nodes(nodes)
            .persistence(Persistence::None),
    )
    .await
    .expect("start redis-server processes")
}

/// How long the restart guard still holds this node back, if that is why it failed.
pub fn recovering(outcome: &NodeOutcome) -> Option<Duration> {
    match outcome.reply {
        NodeReply::Failed(NodeError::Recovering { left }) => Some(left),
        _ => None,
    }
}

/// Acquires `resource` once every node that the restart guard holds back may vote: after an
/// attempt that some node failed as recovering, waits out the time it said was left (on the
/// clock: that is the guard), and tries again. A node whose old connection broke (it was
/// restarted) fails once before it reconnects; that attempt is simply made again.
pub async fn acquire_once_voting(lock: &Lock, resource: &str) -> Guard {
    for _ in 0..10 {
        match lock.try_acquire(resource).await {
            Ok(guard) if guard.outcomes().iter().all(|o| recovering(o).is_none()) => {
                return guard;
            }
            Ok(guard) => {
                let left = guard.outcomes().iter().filter_map(recovering).max();
                guard.release().await;
                tokio::time::sleep(left.unwrap_or_default()).await;
            }
            Err(error) => {
                let left = error.outcomes().iter().filter_map(recovering).max();
                tokio::time::sleep(left.unwrap_or_default()).await;
            }
        }
    }
    panic!("{resource}: the nodes never all voted")
}

/// Makes `lock`'s connections before the test proper: one acquisition of a resource of its own,
/// released, tried again (at most 20 times) while a loaded machine makes a short node timeout
/// trip on the first connections. A node still connecting at a decision never gets the key.
pub async fn warm_up(lock: &Lock) {
    let mut last = None;
    for _ in 0..20 {
        match lock.try_acquire("warm-up").await {
            Ok(guard) => {
                guard.release().await;
                lock.settle().await;
                return;
            }
            Err(error) => last = Some(error),
        }
    }
    panic!("warm-up never acquired: {last:?}");
}

/// Both kinds of lock over the same cluster: the single-node lock on node 0, the quorum lock
/// on all of them.
pub fn both_kinds(cluster: &TestCluster, options: LockOptions) -> Vec<(&'static str, Lock)> {
    let urls = cluster.urls();
    vec![
        (
            "single",
            Lock::new([urls[0].as_str()], options.clone()).unwrap(),
        ),
        ("quorum", Lock::new(urls, options).unwrap()),
    ]
}

/// The value of the lock key on one node, read directly.
pub async fn stored(cluster: &TestCluster, node: usize, key: &[u8]) -> Option<String> {
    let mut connection = cluster.connection(node).await.unwrap();
    connection.get(key).await.unwrap()
}

/// How many times node `node` has run `command` (`INFO commandstats`; `script|load` for a
/// subcommand), read directly.
pub async fn command_calls(cluster: &TestCluster, node: usize, command: &str) -> u64 {
    let mut admin = cluster.connection(node).await.unwrap();
    let stats: String = redis::cmd("INFO")
        .arg("commandstats")
        .query_async(&mut admin)
        .await
        .unwrap();
    let prefix = format!("cmdstat_{command}:calls=");
    stats
        .lines()
        .find_map(|line| line.strip_prefix(&prefix))
        .and_then(|rest| rest.split(',').next())
        .map_or(0, |count| count.parse().unwrap())
}

/// Makes node `node` require `password` of every new connection (`CONFIG SET requirepass`).
pub async fn require_password(cluster: &TestCluster, node: usize, password: &str) {
    let mut connection = cluster.connection(node).await.unwrap();
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("requirepass")
        .arg(password)
        .query_async(&mut connection)
        .await
        .unwrap();
}

/// Until `lock` has `count` callers waiting for `resource` (at most 10 s).
pub async fn waiting(lock: &Lock, resource: &str, count: usize) {
    let waiting = quorumlock_harness::eventually(Duration::from_secs(10), async || {
        lock.waiters(resource) == count
    });
    assert!(waiting.await, "not {count} waiters for {resource}");
}

// Used by the lock tests (tests/lock/waiting.rs, tests/lock/hand_off.rs).
#[allow(dead_code)]
/// The key for `resource` under the default prefix.
pub fn key(resource: &str) -> Vec<u8> {
    format!("quorumlock:{resource}").into_bytes()
}

/// Number of keys on one node.
pub async fn key_count(cluster: &TestCluster, node: usize) -> usize {
    let mut connection = cluster.connection(node).await.unwrap();
    redis::cmd("DBSIZE")
        .query_async(&mut connection)
        .await
        .unwrap()
}

/// Fails unless every node in `nodes` is empty: nothing was left locked.
pub async fn assert_no_keys(cluster: &TestCluster, nodes: std::ops::Range<usize>) {
    for node in nodes {
        assert_eq!(key_count(cluster, node).await, 0, "node {node} kept a key");
    }
}

/// Fails if a node holds a lock key; fence counters may stay (they never expire).
pub async fn assert_no_lock_keys(cluster: &TestCluster) {
    for node in 0..cluster.len() {
        let mut connection = cluster.connection(node).await.unwrap();
        let keys: Vec<String> = connection.keys("quorumlock:*").await.unwrap();
        assert!(keys.is_empty(), "node {node} kept {keys:?}");
    }
}

/// The nodes that said they hold the key. After an early decision these are certain; nodes
/// that had not answered may or may not have the key.
pub fn holders(outcomes: &[NodeOutcome]) -> Vec<usize> {
    outcomes
        .iter()
        .filter(|o| o.reply == NodeReply::Ours)
        .map(|o| o.node)
        .collect()
}

/// How many nodes failed with `error`.
pub fn failed_with(outcomes: &[NodeOutcome], error: NodeError) -> usize {
    let failed = NodeReply::Failed(error);
    outcomes.iter().filter(|o| o.reply == failed).count()
}

pub fn replies(error_or_guard: &[NodeOutcome]) -> Vec<NodeReply> {
    error_or_guard.iter().map(|o| o.reply.clone()).collect()
}

/// One attempt per acquisition, with timeouts that a loaded CI machine running many clusters at
/// once cannot trip by accident (tests of timeouts set their own).
pub fn once() -> LockOptions {
    defect_from_env(
        LockOptions::new()
            .patience(Patience::Once)
            .node_timeout(Duration::from_secs(5))
            .connect_timeout(Duration::from_secs(5)),
    )
}

/// Names a deliberate defect (`quorumlock::Defect`, feature `chaos-defects`) for every lock
/// built from [`once`], e.g. `QUORUMLOCK_DEFECT=no-release-on-failure`: the tests that fail then
/// are the ones that catch that defect (the mutation score in docs/chaos.md).
const DEFECT_ENV: &str = "QUORUMLOCK_DEFECT";

#[cfg(feature = "chaos-defects")]
fn defect_from_env(options: LockOptions) -> LockOptions {
    match std::env::var(DEFECT_ENV) {
        Ok(name) => options.defect(name.parse().unwrap_or_else(|e| panic!("{DEFECT_ENV}: {e}"))),
        Err(_) => options,
    }
}

#[cfg(not(feature = "chaos-defects"))]
fn defect_from_env(options: LockOptions) -> LockOptions {
    assert!(
        std::env::var_os(DEFECT_ENV).is_none(),
        "{DEFECT_ENV} needs --features chaos-defects"
    );
    options
}

/// Timeouts far longer than the hang guard: if acquire waited for the hung node, the test would
/// fail by hanging, not pass slowly.
pub fn patient() -> LockOptions {
    LockOptions::new()
        .ttl(Duration::from_secs(7200))
        .node_timeout(Duration::from_secs(3600))
        .connect_timeout(Duration::from_secs(3600))
        .patience(Patience::Once)
}

/// Five nodes, and an acquisition over them that wins nodes 0 and 1 and then fails as
/// `Unavailable`: nodes 2–4 are frozen (SIGSTOP) after the connections are made, and time out
/// after 500 ms. Returns the cluster (nodes 2–4 still frozen; dropping it kills them), the lock
/// and the error.
pub async fn acquisition_failed_after_winning_two(
    options: LockOptions,
) -> (TestCluster, Lock, quorumlock::Error) {
    let (mut cluster, lock) =
        quorum_lock(5, options.node_timeout(Duration::from_millis(500))).await;
    warm_up(&lock).await;
    lock.settle().await;
    for node in 2..5 {
        cluster.pause(node).unwrap();
    }
    let error = lock.try_acquire("two-won").await.unwrap_err();
    assert!(
        matches!(error, quorumlock::Error::Unavailable { .. }),
        "{error}"
    );
    assert_eq!(holders(error.outcomes()), [0, 1], "{error}");
    lock.settle().await;
    (cluster, lock, error)
}

/// The usual setup: `nodes` local masters and a quorum lock over all of them.
pub async fn quorum_lock(nodes: usize, options: LockOptions) -> (TestCluster, Lock) {
    let cluster = cluster(nodes).await;
    let lock = Lock::new(cluster.urls(), options).expect("a valid lock configuration");
    (cluster, lock)
}

/// The guards of the contending acquisitions `attempts` that won; each of the others must have
/// found the lock held.
pub async fn winners(attempts: Vec<tokio::task::JoinHandle<Result<Guard, Error>>>) -> Vec<Guard> {
    let mut winners = Vec::new();
    for attempt in attempts {
        match attempt.await.unwrap() {
            Ok(guard) => winners.push(guard),
            Err(Error::Held { .. }) => {}
            Err(other) => panic!("unexpected error {other}"),
        }
    }
    winners
}

// Used by the keep-alive test binaries (tests/keep_batch.rs, tests/keep_frozen.rs).
#[allow(dead_code)]
/// Until `condition` holds; the test fails if it does not within 30 s.
pub async fn until(condition: impl AsyncFnMut() -> bool) {
    let held = quorumlock_harness::eventually(Duration::from_secs(30), condition).await;
    assert!(held, "the condition did not hold within 30 s");
}

// Used by the keep-alive test binaries (tests/keep_batch.rs, tests/keep_frozen.rs).
#[allow(dead_code)]
/// `count` leases of `lock` on resources `{prefix}{i}`, each kept alive with `keep_alive`.
pub async fn kept_leases(
    lock: &Lock,
    prefix: &str,
    count: usize,
    keep_alive: KeepAlive,
) -> Vec<KeptGuard> {
    stream::iter(0..count)
        .map(|i| {
            let keep_alive = keep_alive.clone();
            async move {
                lock.try_acquire(format!("{prefix}{i}"))
                    .await
                    .unwrap()
                    .keep_alive(keep_alive)
                    .unwrap()
            }
        })
        .buffer_unordered(32)
        .collect()
        .await
}

// Used by the keep-alive test binaries (tests/keep_batch.rs, tests/keep_frozen.rs).
#[allow(dead_code)]
/// The options of the keep-alive tests: one attempt, a short node timeout.
pub fn keep_options(ttl: Duration) -> LockOptions {
    once().ttl(ttl).node_timeout(Duration::from_millis(100))
}
