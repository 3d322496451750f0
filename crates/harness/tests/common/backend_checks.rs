//! Checks of the test harness that hold on every backend. Each takes a started cluster (or the
//! options to start one) so that `tests/harness.rs` (process backend) and `tests/docker.rs`
//! (docker backend) make the same assertions; what only one backend can show (pids, containers,
//! published ports) is passed in as a hook or asserted by the caller.

use std::io::ErrorKind;
use std::time::Duration;

use quorumlock_harness::{ClusterOptions, HarnessError, PacketDrop, Persistence, TestCluster};

use super::{LONG, SHORT, connect, dbsize, get, ping, pttl, set, set_px};

/// Every node is running, answers PING on its own `127.0.0.1` port, and (without proxies) its
/// URL is the server itself. `each_node(cluster, index, port)` adds backend-specific checks.
pub async fn every_node_answers_on_its_own_loopback_port(
    cluster: &mut TestCluster,
    mut each_node: impl AsyncFnMut(&mut TestCluster, usize, u16),
) {
    let urls = cluster.urls();
    assert_eq!(urls.len(), cluster.len());
    for (index, url) in urls.iter().enumerate() {
        let port = cluster.port(index).unwrap();
        assert_eq!(*url, format!("redis://127.0.0.1:{port}"));
        assert_eq!(*url, cluster.direct_url(index).unwrap());
        assert!(cluster.proxy(index).is_none());
        assert!(cluster.is_running(index).unwrap());
        assert!(cluster.pid(index).unwrap().is_some());
        let mut connection = connect(url, LONG).await.unwrap();
        assert_eq!(ping(&mut connection).await.unwrap(), "PONG");
        each_node(cluster, index, port).await;
    }
    let mut ports: Vec<u16> = (0..cluster.len())
        .map(|index| cluster.port(index).unwrap())
        .collect();
    ports.sort_unstable();
    ports.dedup();
    assert_eq!(ports.len(), cluster.len(), "every node has its own port");
}

/// A key written to node 0 is on no other node, and every node is a master.
pub async fn nodes_are_independent_masters(cluster: &TestCluster) {
    set(
        &mut cluster.connection(0).await.unwrap(),
        "key",
        "on-node-0",
    )
    .await;
    for index in 0..cluster.len() {
        let mut connection = cluster.connection(index).await.unwrap();
        if index != 0 {
            assert_eq!(get(&mut connection, "key").await, None);
        }
        let role: Vec<redis::Value> = redis::cmd("ROLE")
            .query_async(&mut connection)
            .await
            .unwrap();
        assert_eq!(
            role.first(),
            Some(&redis::Value::BulkString(b"master".to_vec()))
        );
    }
}

/// Killed, `node` is down and (checked by `refuses`) takes no connections; killing it again is a
/// no-op that leaves the other nodes running; started again, it is back empty on the same port,
/// and starting it once more is an error.
pub async fn killed_node_comes_back_empty_on_the_same_port(
    cluster: &mut TestCluster,
    node: usize,
    refuses: impl AsyncFnOnce(&mut TestCluster),
) {
    let port = cluster.port(node).unwrap();
    set(&mut cluster.connection(node).await.unwrap(), "key", "value").await;

    cluster.kill(node).await.unwrap();
    assert!(!cluster.is_running(node).unwrap());
    assert_eq!(cluster.pid(node).unwrap(), None);
    refuses(cluster).await;
    cluster.kill(node).await.unwrap();
    for other in (0..cluster.len()).filter(|&index| index != node) {
        assert!(cluster.is_running(other).unwrap(), "node {other} untouched");
    }

    cluster.start_node(node).await.unwrap();
    assert!(cluster.is_running(node).unwrap());
    assert_eq!(cluster.port(node).unwrap(), port);
    let mut connection = cluster.connection(node).await.unwrap();
    assert_eq!(
        dbsize(&mut connection).await,
        0,
        "no persistence: back empty"
    );
    let err = cluster.start_node(node).await.unwrap_err();
    assert!(
        matches!(err, HarnessError::AlreadyRunning(index) if index == node),
        "{err}"
    );
}

/// Without persistence, node 0 comes back empty from a restart (`after_restart` runs right after
/// it); stopped, it is not running and a command on an open connection fails without waiting
/// for a timeout. Returns that error.
pub async fn restart_empties_the_node_and_stop_shuts_it_down(
    cluster: &mut TestCluster,
    after_restart: impl AsyncFnOnce(&mut TestCluster),
) -> redis::RedisError {
    set(&mut cluster.connection(0).await.unwrap(), "key", "value").await;

    cluster.restart(0).await.unwrap();
    after_restart(cluster).await;
    let mut connection = cluster.connection(0).await.unwrap();
    assert_eq!(get(&mut connection, "key").await, None);
    assert_eq!(dbsize(&mut connection).await, 0);

    cluster.stop(0).await.unwrap();
    assert!(!cluster.is_running(0).unwrap());
    let err = ping(&mut connection).await.unwrap_err();
    assert!(!err.is_timeout(), "a stopped node fails fast: {err}");
    err
}

/// With `Persistence::None` on node 0, neither a restart nor a kill and start keeps the data.
pub async fn without_persistence_restart_and_kill_lose_the_data(cluster: &mut TestCluster) {
    set(&mut cluster.connection(0).await.unwrap(), "key", "value").await;
    cluster.restart(0).await.unwrap();
    assert_eq!(
        get(&mut cluster.connection(0).await.unwrap(), "key").await,
        None
    );
    set(&mut cluster.connection(0).await.unwrap(), "key", "value").await;
    cluster.kill(0).await.unwrap();
    cluster.start_node(0).await.unwrap();
    assert_eq!(
        get(&mut cluster.connection(0).await.unwrap(), "key").await,
        None
    );
}

/// The options for [`without_persistence_restart_and_kill_lose_the_data`].
pub fn without_persistence() -> ClusterOptions {
    ClusterOptions::default()
        .nodes(1)
        .persistence(Persistence::None)
}

/// With `Persistence::AofAlways` on node 0, acknowledged writes survive a restart and a kill;
/// the other nodes keep their own (empty) data.
pub async fn aof_always_keeps_the_data_across_restart_and_kill(cluster: &mut TestCluster) {
    let mut connection = cluster.connection(0).await.unwrap();
    let appendfsync: Vec<String> = redis::cmd("CONFIG")
        .arg("GET")
        .arg("appendfsync")
        .query_async(&mut connection)
        .await
        .unwrap();
    assert_eq!(appendfsync[1], "always");
    set(&mut connection, "key", "kept").await;

    cluster.restart(0).await.unwrap();
    let mut connection = cluster.connection(0).await.unwrap();
    assert_eq!(get(&mut connection, "key").await.as_deref(), Some("kept"));

    // Acknowledged writes survive SIGKILL too.
    set(&mut connection, "after-restart", "also kept").await;
    cluster.kill(0).await.unwrap();
    cluster.start_node(0).await.unwrap();
    let mut connection = cluster.connection(0).await.unwrap();
    assert_eq!(get(&mut connection, "key").await.as_deref(), Some("kept"));
    assert_eq!(
        get(&mut connection, "after-restart").await.as_deref(),
        Some("also kept")
    );
    for other in 1..cluster.len() {
        assert_eq!(
            dbsize(&mut cluster.connection(other).await.unwrap()).await,
            0,
            "node {other} has its own data"
        );
    }
}

/// A node restarted over a large AOF is handed back only once it has loaded it: its first
/// command is answered, not refused with `LOADING` (a chaos run once read a key right after a
/// restart and got `LOADING`). Needs one node with AOF.
pub async fn a_restarted_node_is_handed_back_with_its_data_loaded(cluster: &mut TestCluster) {
    const KEYS: i64 = 300_000;
    let mut connection = cluster.connection(0).await.unwrap();
    connection.set_response_timeout(LONG);
    // One script writes them all: the AOF gets every SET, and loading them takes a while.
    let written: i64 = redis::cmd("EVAL")
        .arg("for i = 1, tonumber(ARGV[1]) do redis.call('SET', 'k' .. i, i) end return redis.call('DBSIZE')")
        .arg(0)
        .arg(KEYS)
        .query_async(&mut connection)
        .await
        .unwrap();
    assert_eq!(written, KEYS);
    cluster.kill(0).await.unwrap();
    cluster.start_node(0).await.unwrap();
    let mut connection = cluster.connection(0).await.unwrap();
    let loaded: redis::RedisResult<i64> = redis::cmd("DBSIZE").query_async(&mut connection).await;
    assert_eq!(loaded.map_err(|e| e.to_string()), Ok(KEYS));
}

/// The options for [`aof_always_keeps_the_data_across_restart_and_kill`].
pub fn aof_always(nodes: usize) -> ClusterOptions {
    ClusterOptions::default()
        .nodes(nodes)
        .persistence(Persistence::AofAlways)
}

/// Paused, node 0 still runs but answers nothing (other nodes do); resumed, it completes the
/// commands queued meanwhile; resuming it again is harmless. Needs two nodes.
pub async fn pause_makes_commands_time_out_and_resume_completes_queued_ones(
    cluster: &mut TestCluster,
) {
    // Connections are opened first: a paused server cannot complete a handshake.
    let mut impatient = cluster.connection(0).await.unwrap();
    impatient.set_response_timeout(SHORT);
    let mut patient = cluster.connection(0).await.unwrap();
    patient.set_response_timeout(LONG);

    cluster.pause(0).unwrap();
    assert!(
        cluster.is_running(0).unwrap(),
        "a paused node is still running"
    );
    let err = ping(&mut impatient).await.unwrap_err();
    assert!(err.is_timeout(), "{err}");
    // Other nodes are unaffected.
    assert_eq!(
        ping(&mut cluster.connection(1).await.unwrap())
            .await
            .unwrap(),
        "PONG"
    );

    let increment = redis::cmd("INCR").arg("counter").clone();
    let mut queued = std::pin::pin!(increment.query_async::<i64>(&mut patient));
    assert!(
        tokio::time::timeout(SHORT, &mut queued).await.is_err(),
        "a paused node answers nothing"
    );
    cluster.resume(0).unwrap();
    assert_eq!(queued.await.unwrap(), 1);
    assert_eq!(ping(&mut impatient).await.unwrap(), "PONG");
    // Resuming a node that is not paused is harmless.
    cluster.resume(0).unwrap();
}

/// A paused node 0 can be stopped (`after_stop` checks it is gone) and started again, and
/// paused again it can be killed and started again; each time it answers afterwards.
pub async fn paused_node_can_be_stopped_and_killed(
    cluster: &mut TestCluster,
    after_stop: impl AsyncFnOnce(&mut TestCluster),
) {
    cluster.pause(0).unwrap();
    cluster.stop(0).await.unwrap();
    assert!(!cluster.is_running(0).unwrap());
    after_stop(cluster).await;
    cluster.start_node(0).await.unwrap();
    assert_answers_ping(cluster, 0).await;

    cluster.pause(0).unwrap();
    cluster.kill(0).await.unwrap();
    assert!(!cluster.is_running(0).unwrap());
    cluster.start_node(0).await.unwrap();
    assert_answers_ping(cluster, 0).await;
}

async fn assert_answers_ping(cluster: &TestCluster, node: usize) {
    let mut connection = cluster.connection(node).await.unwrap();
    assert_eq!(ping(&mut connection).await.unwrap(), "PONG", "node {node}");
}

/// On a killed node, pause, resume and flush are `NotRunning` errors; a node past the end is
/// `NoSuchNode`.
pub async fn faults_on_a_killed_node_are_errors(cluster: &mut TestCluster) {
    cluster.kill(0).await.unwrap();
    assert!(matches!(cluster.pause(0), Err(HarnessError::NotRunning(0))));
    assert!(matches!(
        cluster.resume(0),
        Err(HarnessError::NotRunning(0))
    ));
    assert!(matches!(
        cluster.flush(0).await,
        Err(HarnessError::NotRunning(0))
    ));
    let past_the_end = cluster.len();
    assert!(matches!(
        cluster.kill(past_the_end).await,
        Err(HarnessError::NoSuchNode(index)) if index == past_the_end
    ));
}

/// Flushing node 0 empties it and leaves node 1 alone.
pub async fn flush_empties_only_that_node(cluster: &mut TestCluster) {
    for index in 0..2 {
        let mut connection = cluster.connection(index).await.unwrap();
        set(&mut connection, "a", "1").await;
        set(&mut connection, "b", "2").await;
    }
    cluster.flush(0).await.unwrap();
    assert_eq!(dbsize(&mut cluster.connection(0).await.unwrap()).await, 0);
    assert_eq!(dbsize(&mut cluster.connection(1).await.unwrap()).await, 2);
}

/// With proxies on, every node's URL is its proxy, which forwards to that node.
pub async fn proxy_forwards_to_its_node(cluster: &TestCluster) {
    let urls = cluster.urls();
    for (index, url) in urls.iter().enumerate() {
        let proxy = cluster.proxy(index).expect("proxies are on");
        assert_eq!(*url, proxy.url());
        assert_ne!(*url, cluster.direct_url(index).unwrap());
        assert_eq!(proxy.upstream().port(), cluster.port(index).unwrap());

        let mut through_proxy = connect(url, LONG).await.unwrap();
        set(&mut through_proxy, "written-via", url).await;
        let mut direct = cluster.connection(index).await.unwrap();
        assert_eq!(
            get(&mut direct, "written-via").await.as_deref(),
            Some(url.as_str())
        );
    }
}

/// Node 0's proxy has nothing behind it while the node is killed, and reaches it again once it
/// is started.
pub async fn proxy_follows_a_restarted_node(cluster: &mut TestCluster) {
    let url = cluster.urls().remove(0);
    cluster.kill(0).await.unwrap();
    assert!(
        connect(&url, SHORT).await.is_err(),
        "nothing behind the proxy"
    );
    cluster.start_node(0).await.unwrap();
    let mut connection = connect(&url, LONG).await.unwrap();
    assert_eq!(ping(&mut connection).await.unwrap(), "PONG");
}

/// Node 0 runs its clock 10 times fast: a key given to it and then to node 1 with the same TTL
/// expires there first, while node 1 still has most of the TTL left.
pub async fn a_fast_clock_expires_keys_before_a_normal_one(cluster: &TestCluster) {
    let mut fast = cluster.connection(0).await.unwrap();
    let mut normal = cluster.connection(1).await.unwrap();
    set_px(&mut fast, "k", "v", 2000).await;
    set_px(&mut normal, "k", "v", 2000).await;
    // The normal node, which was given the key later, must still report most of its 2 s.
    let fast_ttl = pttl_once_expired(&mut fast, "k").await;
    let normal_ttl = pttl(&mut normal, "k").await;
    assert_eq!(fast_ttl, -2, "the fast node expired the key");
    assert!(
        normal_ttl > 1000,
        "the normal node still holds the key with most of its TTL: {normal_ttl} ms"
    );
}

/// The options for [`a_fast_clock_expires_keys_before_a_normal_one`].
pub fn fast_clock_on_node_0() -> ClusterOptions {
    ClusterOptions::default().nodes(2).clock_rate(0, 10.0)
}

/// While node 0's packets are dropped as `what` says, a PING on a connection made before gets
/// no answer and no new connection can be made; once healed, a new connection answers. With
/// replies dropped, a SET sent meanwhile (and never answered) did land.
pub async fn dropped_packets_time_out_until_healed(cluster: &mut TestCluster, what: PacketDrop) {
    let url = cluster.direct_url(0).unwrap();
    let mut before = connect(&url, SHORT).await.unwrap();
    assert_eq!(ping(&mut before).await.unwrap(), "PONG");
    cluster.drop_packets(0, what).await.unwrap();
    let unanswered: redis::RedisResult<()> = redis::cmd("SET")
        .arg("k")
        .arg("landed")
        .query_async(&mut before)
        .await;
    let err = unanswered.expect_err("no answer while packets are dropped");
    assert!(err.is_timeout(), "{what:?}: timed out, not refused: {err}");
    assert!(
        connect(&url, SHORT).await.is_err(),
        "{what:?}: no new connection while packets are dropped"
    );
    cluster.heal_packets(0).await.unwrap();
    let mut after = connect(&url, LONG).await.unwrap();
    assert_eq!(ping(&mut after).await.unwrap(), "PONG");
    if what == PacketDrop::Replies {
        assert_eq!(get(&mut after, "k").await.as_deref(), Some("landed"));
    }
}

/// Node 0's wall clock jumps an hour ahead and back at once when told, and a key it holds
/// expires with the jump ahead. Needs [`jumping_clock_on_node_0`].
pub async fn a_clock_jumps_ahead_and_back(cluster: &TestCluster) {
    async fn now_s(connection: &mut redis::aio::MultiplexedConnection) -> i64 {
        let (secs, _micros): (i64, i64) = redis::cmd("TIME").query_async(connection).await.unwrap();
        secs
    }
    let mut node = cluster.connection(0).await.unwrap();
    set_px(&mut node, "k", "v", 60_000).await;
    let real = now_s(&mut node).await;
    cluster.set_clock_offset(0, 3_600_000).unwrap();
    let ahead = now_s(&mut node).await;
    assert!(
        (3_599..3_700).contains(&(ahead - real)),
        "an hour ahead: {real} then {ahead}"
    );
    assert_eq!(
        pttl(&mut node, "k").await,
        -2,
        "the key expired with the jump"
    );
    cluster.set_clock_offset(0, 0).unwrap();
    let back = now_s(&mut node).await;
    assert!(
        back < ahead - 3_000,
        "back to real time: {ahead} then {back}"
    );
    assert!(matches!(
        cluster.set_clock_offset(1, 1),
        Err(HarnessError::NoClockJumps(1))
    ));
}

/// The options for [`a_clock_jumps_ahead_and_back`].
pub fn jumping_clock_on_node_0() -> ClusterOptions {
    ClusterOptions::default().nodes(2).clock_jumps(0)
}

/// Polls (bounded, about 5 s) until `key` is gone from the node; returns its last PTTL (-2: gone).
pub async fn pttl_once_expired(
    connection: &mut redis::aio::MultiplexedConnection,
    key: &str,
) -> i64 {
    let mut ttl = pttl(connection, key).await;
    quorumlock_harness::eventually(Duration::from_secs(5), async || {
        ttl = pttl(connection, key).await;
        ttl == -2
    })
    .await;
    ttl
}

/// Dropping a messy cluster (node 0 paused, the last node killed) cleans up: `record` notes what
/// must go before the drop, `is_gone` checks it is gone after; node 0's proxy stops listening.
/// Needs proxies and two nodes or more.
pub async fn dropping_the_cluster_cleans_up_even_when_messy<T>(
    mut cluster: TestCluster,
    record: impl AsyncFnOnce(&mut TestCluster) -> T,
    is_gone: impl AsyncFnOnce(T),
) {
    let recorded = record(&mut cluster).await;
    let proxy_addr = cluster.proxy(0).expect("proxies are on").addr();
    // Leave the cluster in a messy state: one node paused, one killed.
    cluster.pause(0).unwrap();
    let last = cluster.len() - 1;
    cluster.kill(last).await.unwrap();

    drop(cluster);
    is_gone(recorded).await;
    // Let the aborted proxy tasks be dropped, then nothing listens.
    tokio::task::yield_now().await;
    let err = tokio::net::TcpStream::connect(proxy_addr)
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::ConnectionRefused);
}

/// A test that panics while its cluster (started from `options`, two nodes or more) has node 1
/// paused leaves nothing behind: `record` notes what must go, `is_gone` checks it is gone.
pub async fn a_panicking_test_leaves_nothing_behind<T: Send + 'static>(
    options: ClusterOptions,
    record: fn(&mut TestCluster) -> T,
    is_gone: impl AsyncFnOnce(T),
) {
    let (recorded_tx, recorded_rx) = tokio::sync::oneshot::channel();
    let failing_test = tokio::spawn(async move {
        let mut cluster = TestCluster::start(options).await.unwrap();
        cluster.pause(1).unwrap();
        if recorded_tx.send(record(&mut cluster)).is_err() {
            panic!("the test stopped listening");
        }
        panic!("simulated test failure");
    });
    assert!(failing_test.await.unwrap_err().is_panic());
    is_gone(recorded_rx.await.unwrap()).await;
}

/// Starting from `options` with an argument the server rejects fails with `Exited` for node 0,
/// quoting the server's complaint.
pub async fn a_bad_server_argument_reports_the_exit_and_its_output(options: ClusterOptions) {
    let options = options
        .nodes(1)
        .extra_args(vec!["--no-such-directive".into(), "yes".into()]);
    let err = TestCluster::start(options).await.unwrap_err();
    match err {
        HarnessError::Exited { node, output, .. } => {
            assert_eq!(node, 0);
            assert!(output.contains("no-such-directive"), "{output}");
        }
        other => panic!("expected Exited, got {other}"),
    }
}
