//! Self-tests of the test harness (`quorumlock_harness`) against real
//! `redis-server` processes: every fault the harness offers is shown to have
//! the effect a test relying on it expects. The checks that hold on every backend live in
//! `common::backend_checks`; `tests/docker.rs` runs them against containers.
//!
//! Past 500 lines because it is a list: one short test per harness operation and fault, each
//! independent of the others, so splitting it would only scatter the list.

mod common;

use common::{LONG, SHORT, backend_checks, bounded, connect, get, ping, pttl, set, set_px};

use std::io::ErrorKind;
use std::path::PathBuf;
use std::time::Duration;

use nix::errno::Errno;
use nix::sys::signal;
use nix::unistd::Pid;
use quorumlock_harness::{
    Backend, ClusterOptions, HarnessError, PacketDrop, Persistence, RawFloor, TestCluster,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Whether a process with this id still exists (a zombie counts as existing).
fn process_exists(pid: u32) -> bool {
    match signal::kill(Pid::from_raw(i32::try_from(pid).unwrap()), None) {
        Ok(()) => true,
        Err(Errno::ESRCH) => false,
        Err(err) => panic!("checking pid {pid}: {err}"),
    }
}

fn pids(cluster: &mut TestCluster) -> Vec<u32> {
    (0..cluster.len())
        .map(|index| cluster.pid(index).unwrap().expect("node is running"))
        .collect()
}

#[tokio::test]
async fn started_cluster_answers_ping_on_every_node() {
    bounded(async {
        let mut cluster = TestCluster::with_nodes(5).await.unwrap();
        assert_eq!(cluster.len(), 5);
        backend_checks::every_node_answers_on_its_own_loopback_port(
            &mut cluster,
            async |_, _, _| {},
        )
        .await;
    })
    .await;
}

#[tokio::test]
async fn nodes_are_independent_masters() {
    bounded(async {
        let cluster = TestCluster::with_nodes(2).await.unwrap();
        backend_checks::nodes_are_independent_masters(&cluster).await;
    })
    .await;
}

// promise: harness-faults
#[tokio::test]
async fn killed_node_is_reaped_and_comes_back_empty_on_the_same_port() {
    bounded(async {
        let mut cluster = TestCluster::with_nodes(3).await.unwrap();
        let old_pid = cluster.pid(1).unwrap().unwrap();
        backend_checks::killed_node_comes_back_empty_on_the_same_port(
            &mut cluster,
            1,
            async |cluster| {
                assert!(!process_exists(old_pid), "killed process is reaped");
                let refused = connect(&cluster.direct_url(1).unwrap(), LONG)
                    .await
                    .unwrap_err();
                assert!(refused.is_connection_refusal(), "{refused}");
            },
        )
        .await;
        assert_ne!(cluster.pid(1).unwrap(), Some(old_pid));
    })
    .await;
}

#[tokio::test]
async fn starting_a_running_node_is_an_error() {
    bounded(async {
        let mut cluster = TestCluster::with_nodes(1).await.unwrap();
        let err = cluster.start_node(0).await.unwrap_err();
        assert!(matches!(err, HarnessError::AlreadyRunning(0)), "{err}");
    })
    .await;
}

#[tokio::test]
async fn stop_shuts_down_and_restart_brings_the_node_back_empty() {
    bounded(async {
        let mut cluster = TestCluster::with_nodes(2).await.unwrap();
        let old_pid = cluster.pid(0).unwrap().unwrap();
        let err = backend_checks::restart_empties_the_node_and_stop_shuts_it_down(
            &mut cluster,
            async |_| assert!(!process_exists(old_pid)),
        )
        .await;
        assert!(err.is_connection_dropped() || err.is_io_error(), "{err}");
    })
    .await;
}

// promise: harness-faults
#[tokio::test]
async fn pause_makes_commands_time_out_and_resume_completes_queued_ones() {
    bounded(async {
        let mut cluster = TestCluster::with_nodes(2).await.unwrap();
        backend_checks::pause_makes_commands_time_out_and_resume_completes_queued_ones(
            &mut cluster,
        )
        .await;
    })
    .await;
}

#[tokio::test]
async fn paused_node_can_be_stopped_and_killed() {
    bounded(async {
        let mut cluster = TestCluster::with_nodes(1).await.unwrap();
        let pid = cluster.pid(0).unwrap().unwrap();
        backend_checks::paused_node_can_be_stopped_and_killed(&mut cluster, async |_| {
            assert!(!process_exists(pid));
        })
        .await;
    })
    .await;
}

#[tokio::test]
async fn process_faults_on_a_killed_node_are_errors() {
    bounded(async {
        let mut cluster = TestCluster::with_nodes(1).await.unwrap();
        backend_checks::faults_on_a_killed_node_are_errors(&mut cluster).await;
    })
    .await;
}

#[tokio::test]
async fn out_of_range_nodes_are_errors() {
    bounded(async {
        let mut cluster = TestCluster::with_nodes(2).await.unwrap();
        assert!(matches!(
            cluster.kill(2).await,
            Err(HarnessError::NoSuchNode(2))
        ));
        assert!(matches!(
            cluster.start_node(7).await,
            Err(HarnessError::NoSuchNode(7))
        ));
        assert!(matches!(cluster.pause(2), Err(HarnessError::NoSuchNode(2))));
        assert!(matches!(cluster.port(3), Err(HarnessError::NoSuchNode(3))));
        assert!(matches!(
            cluster.direct_url(3),
            Err(HarnessError::NoSuchNode(3))
        ));
        assert!(matches!(
            cluster.connection(9).await,
            Err(HarnessError::NoSuchNode(9))
        ));
        assert!(cluster.proxy(2).is_none());
    })
    .await;
}

#[tokio::test]
async fn flush_empties_only_that_node() {
    bounded(async {
        let mut cluster = TestCluster::with_nodes(2).await.unwrap();
        backend_checks::flush_empties_only_that_node(&mut cluster).await;
    })
    .await;
}

#[tokio::test]
async fn proxy_forwards_to_its_node() {
    bounded(async {
        let cluster = TestCluster::start(ClusterOptions::default().nodes(3).proxies(true))
            .await
            .unwrap();
        backend_checks::proxy_forwards_to_its_node(&cluster).await;
    })
    .await;
}

#[tokio::test]
async fn proxy_follows_a_restarted_node() {
    bounded(async {
        let mut cluster = TestCluster::start(ClusterOptions::default().nodes(1).proxies(true))
            .await
            .unwrap();
        backend_checks::proxy_follows_a_restarted_node(&mut cluster).await;
    })
    .await;
}

// promise: harness-faults
#[tokio::test]
async fn blackhole_swallows_traffic_while_the_node_itself_answers() {
    bounded(async {
        let cluster = TestCluster::start(ClusterOptions::default().nodes(1).proxies(true))
            .await
            .unwrap();
        let proxy = cluster.proxy(0).unwrap();
        let mut through_proxy = connect(&proxy.url(), SHORT).await.unwrap();

        proxy.blackhole();
        let err = ping(&mut through_proxy).await.unwrap_err();
        assert!(err.is_timeout(), "{err}");
        // A new connection is accepted but its handshake is never answered.
        let stream = tokio::net::TcpStream::connect(proxy.addr()).await;
        assert!(stream.is_ok(), "a black hole still accepts connections");
        let err = connect(&proxy.url(), SHORT).await.unwrap_err();
        assert!(err.is_timeout(), "{err}");
        // The server itself is fine.
        let mut direct = cluster.connection(0).await.unwrap();
        assert_eq!(ping(&mut direct).await.unwrap(), "PONG");

        proxy.heal().await.unwrap();
        let mut fresh = connect(&proxy.url(), LONG).await.unwrap();
        assert_eq!(ping(&mut fresh).await.unwrap(), "PONG");
    })
    .await;
}

#[tokio::test]
async fn refuse_rejects_new_connections_until_heal() {
    bounded(async {
        let cluster = TestCluster::start(ClusterOptions::default().nodes(1).proxies(true))
            .await
            .unwrap();
        let proxy = cluster.proxy(0).unwrap();
        let mut open = connect(&proxy.url(), LONG).await.unwrap();

        proxy.refuse().await;
        let err = tokio::net::TcpStream::connect(proxy.addr())
            .await
            .unwrap_err();
        assert_eq!(err.kind(), ErrorKind::ConnectionRefused);
        let err = connect(&proxy.url(), LONG).await.unwrap_err();
        assert!(err.is_connection_refusal(), "{err}");
        // Connections opened before are untouched.
        assert_eq!(ping(&mut open).await.unwrap(), "PONG");

        proxy.heal().await.unwrap();
        let mut fresh = connect(&proxy.url(), LONG).await.unwrap();
        assert_eq!(ping(&mut fresh).await.unwrap(), "PONG");
        assert_eq!(proxy.url(), cluster.urls()[0], "same address after heal");
    })
    .await;
}

#[tokio::test]
async fn cut_breaks_open_connections_but_accepts_new_ones() {
    bounded(async {
        let cluster = TestCluster::start(ClusterOptions::default().nodes(1).proxies(true))
            .await
            .unwrap();
        let proxy = cluster.proxy(0).unwrap();
        let mut first = connect(&proxy.url(), LONG).await.unwrap();
        let mut second = connect(&proxy.url(), LONG).await.unwrap();
        assert_eq!(ping(&mut first).await.unwrap(), "PONG");

        proxy.cut().await;
        for connection in [&mut first, &mut second] {
            let err = ping(connection).await.unwrap_err();
            assert!(
                !err.is_timeout(),
                "a cut connection fails, it does not hang: {err}"
            );
        }
        let mut fresh = connect(&proxy.url(), LONG).await.unwrap();
        assert_eq!(ping(&mut fresh).await.unwrap(), "PONG");
    })
    .await;
}

#[tokio::test]
async fn a_switched_upstream_serves_new_connections_while_open_ones_keep_theirs() {
    bounded(async {
        let cluster = TestCluster::start(ClusterOptions::default().nodes(2).proxies(true))
            .await
            .unwrap();
        let proxy = cluster.proxy(0).unwrap();
        let mut before = connect(&proxy.url(), LONG).await.unwrap();
        set(&mut before, "where", "node 0").await;
        let other = cluster.proxy(1).unwrap().upstream();
        proxy.switch_upstream(other);
        assert_eq!(proxy.upstream(), other);

        let mut after = connect(&proxy.url(), LONG).await.unwrap();
        assert_eq!(get(&mut after, "where").await, None, "node 1 answers");
        assert_eq!(
            get(&mut before, "where").await.as_deref(),
            Some("node 0"),
            "an open connection keeps its server until it is cut"
        );
    })
    .await;
}

// promise: harness-faults
#[tokio::test]
async fn latency_delays_but_delivers_pipelined_and_large_replies_intact() {
    bounded(async {
        let cluster = TestCluster::start(ClusterOptions::default().nodes(1).proxies(true))
            .await
            .unwrap();
        let proxy = cluster.proxy(0).unwrap();
        proxy.set_latency(Duration::from_millis(20));
        let connection = connect(&proxy.url(), LONG).await.unwrap();

        // Many requests in flight at once on one connection.
        let increments = (0..50).map(|_| {
            let mut connection = connection.clone();
            async move {
                redis::cmd("INCR")
                    .arg("counter")
                    .query_async::<i64>(&mut connection)
                    .await
            }
        });
        let mut results: Vec<i64> = futures::future::try_join_all(increments).await.unwrap();
        results.sort_unstable();
        assert_eq!(results, (1..=50).collect::<Vec<i64>>());

        // A value spanning many chunks arrives byte for byte.
        let large: String = (0..1_000_000)
            .map(|i: u32| char::from(b'a' + u8::try_from(i % 26).unwrap()))
            .collect();
        let mut connection = connection;
        set(&mut connection, "large", &large).await;
        assert_eq!(
            get(&mut connection, "large").await.as_deref(),
            Some(large.as_str())
        );

        proxy.set_latency(Duration::ZERO);
        assert_eq!(ping(&mut connection).await.unwrap(), "PONG");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jitter_spreads_round_trips_but_keeps_bytes_in_order() {
    bounded(async {
        let cluster = TestCluster::start(ClusterOptions::default().nodes(1).proxies(true))
            .await
            .unwrap();
        let proxy = cluster.proxy(0).unwrap();
        proxy.set_latency(Duration::from_millis(1));
        proxy.set_jitter(Duration::from_millis(20));

        // Up to 8 INCRs in flight on one raw connection, the next sent as each reply arrives, so
        // the requests travel as separate chunks that draw different delays. Had any chunk
        // overtaken another in either direction, the replies would not read 1, 2, 3, … in order.
        const REQUESTS: usize = 200;
        const WINDOW: usize = 8;
        let stream = tokio::net::TcpStream::connect(proxy.addr()).await.unwrap();
        stream.set_nodelay(true).unwrap();
        let (mut from_server, mut to_server) = stream.into_split();
        let window = std::sync::Arc::new(tokio::sync::Semaphore::new(WINDOW));
        let writer = tokio::spawn({
            let window = std::sync::Arc::clone(&window);
            async move {
                for _ in 0..REQUESTS {
                    window.acquire().await.unwrap().forget();
                    to_server
                        .write_all(b"*2\r\n$4\r\nINCR\r\n$5\r\norder\r\n")
                        .await
                        .unwrap();
                }
                to_server
            }
        });
        let mut received = Vec::new();
        let mut lines = 0;
        let mut buf = [0u8; 4096];
        while lines < REQUESTS {
            let n = from_server.read(&mut buf).await.unwrap();
            assert!(
                n > 0,
                "the proxy closed the connection after {lines} replies"
            );
            received.extend_from_slice(&buf[..n]);
            let complete = received.windows(2).filter(|w| w == b"\r\n").count();
            window.add_permits(complete - lines);
            lines = complete;
        }
        drop(writer.await.unwrap());
        let expected: String = (1..=REQUESTS).map(|i| format!(":{i}\r\n")).collect();
        assert_eq!(String::from_utf8(received).unwrap(), expected);

        // Round trips spread: with no latency and up to 20 ms of jitter each way, a round trip
        // under 2 ms needs both draws under 2 ms (probability 1 in 200); twenty in a row cannot
        // happen. (Only a lower bound is asserted: a busy machine can only make it longer.)
        proxy.set_latency(Duration::ZERO);
        let mut connection = connect(&proxy.url(), LONG).await.unwrap();
        let mut longest = Duration::ZERO;
        for _ in 0..20 {
            let started = std::time::Instant::now();
            assert_eq!(ping(&mut connection).await.unwrap(), "PONG");
            longest = longest.max(started.elapsed());
        }
        assert!(
            longest >= Duration::from_millis(2),
            "20 round trips through up to 20 ms of jitter each way, the longest only {longest:?}"
        );

        proxy.heal().await.unwrap();
        assert_eq!(ping(&mut connection).await.unwrap(), "PONG");
    })
    .await;
}

#[tokio::test]
async fn dropping_the_cluster_kills_every_process_and_deletes_its_directories() {
    bounded(async {
        let cluster = TestCluster::start(ClusterOptions::default().nodes(3).proxies(true))
            .await
            .unwrap();
        backend_checks::dropping_the_cluster_cleans_up_even_when_messy(
            cluster,
            async |cluster| {
                let mut dirs = Vec::new();
                for index in 0..cluster.len() {
                    let dir: Vec<String> = redis::cmd("CONFIG")
                        .arg("GET")
                        .arg("dir")
                        .query_async(&mut cluster.connection(index).await.unwrap())
                        .await
                        .unwrap();
                    dirs.push(PathBuf::from(&dir[1]));
                }
                (pids(cluster), dirs)
            },
            async |(pids, dirs)| {
                for pid in pids {
                    assert!(!process_exists(pid), "pid {pid} still exists");
                }
                for dir in dirs {
                    assert!(!dir.exists(), "{} still exists", dir.display());
                }
            },
        )
        .await;
    })
    .await;
}

// promise: harness-faults
#[tokio::test]
async fn a_panicking_test_leaves_no_process_behind() {
    bounded(async {
        backend_checks::a_panicking_test_leaves_nothing_behind(
            ClusterOptions::default().nodes(2),
            pids,
            async |pids| {
                for pid in pids {
                    assert!(!process_exists(pid), "pid {pid} survived the panic");
                }
            },
        )
        .await;
    })
    .await;
}

#[tokio::test]
async fn a_bad_server_argument_reports_the_exit_and_its_output() {
    bounded(async {
        backend_checks::a_bad_server_argument_reports_the_exit_and_its_output(
            ClusterOptions::default(),
        )
        .await;
    })
    .await;
}

#[tokio::test]
async fn a_missing_server_binary_is_a_spawn_error() {
    bounded(async {
        let options = ClusterOptions::default()
            .nodes(1)
            .redis_server("/nonexistent/redis-server");
        let err = TestCluster::start(options).await.unwrap_err();
        assert!(matches!(err, HarnessError::Spawn { node: 0, .. }), "{err}");
    })
    .await;
}

#[tokio::test]
async fn a_server_that_never_answers_is_not_ready() {
    bounded(async {
        // A real redis-server that listens on a unix socket only: it runs, but
        // nothing ever answers on its TCP port.
        let sockets = tempfile::tempdir().unwrap();
        let socket = sockets.path().join("redis.sock");
        let options = ClusterOptions::default()
            .nodes(1)
            .extra_args(vec![
                "--port".into(),
                "0".into(),
                "--unixsocket".into(),
                socket.display().to_string(),
            ])
            .ready_timeout(Duration::from_millis(300));
        let err = TestCluster::start(options).await.unwrap_err();
        match err {
            HarnessError::NotReady { node, output, .. } => {
                assert_eq!(node, 0);
                assert!(output.contains("redis.log"), "the log is quoted: {output}");
            }
            other => panic!("expected NotReady, got {other}"),
        }
    })
    .await;
}

#[tokio::test]
async fn aof_always_keeps_the_data_across_restart_and_kill() {
    bounded(async {
        let mut cluster = TestCluster::start(backend_checks::aof_always(2))
            .await
            .unwrap();
        backend_checks::aof_always_keeps_the_data_across_restart_and_kill(&mut cluster).await;
    })
    .await;
}

#[tokio::test]
async fn a_restarted_node_is_handed_back_with_its_data_loaded() {
    bounded(async {
        let mut cluster = TestCluster::start(backend_checks::aof_always(1))
            .await
            .unwrap();
        backend_checks::a_restarted_node_is_handed_back_with_its_data_loaded(&mut cluster).await;
    })
    .await;
}

/// The raw floor does a lock's acquire+release: it leaves no key behind, and fails while
/// another holder's key is there.
#[tokio::test]
async fn the_raw_floor_takes_and_frees_a_majority_and_fails_on_a_held_key() {
    bounded(async {
        let cluster = TestCluster::start(ClusterOptions::default().nodes(3))
            .await
            .unwrap();
        let floor = RawFloor::connect(&cluster.urls(), Some(true))
            .await
            .unwrap();
        assert!(floor.cycle("free").await);
        for node in 0..cluster.len() {
            let mut connection = cluster.connection(node).await.unwrap();
            assert_eq!(get(&mut connection, "free").await, None);
        }
        for node in 0..2 {
            let mut connection = cluster.connection(node).await.unwrap();
            set(&mut connection, "held", "someone else").await;
        }
        assert!(!floor.cycle("held").await);
        let mut connection = cluster.connection(0).await.unwrap();
        assert_eq!(
            get(&mut connection, "held").await.as_deref(),
            Some("someone else")
        );
    })
    .await;
}

#[tokio::test]
async fn without_persistence_a_restart_loses_the_data() {
    bounded(async {
        let mut cluster = TestCluster::start(backend_checks::without_persistence())
            .await
            .unwrap();
        backend_checks::without_persistence_restart_and_kill_lose_the_data(&mut cluster).await;
    })
    .await;
}

#[tokio::test]
async fn a_fast_clock_expires_keys_before_a_normal_one() {
    bounded(async {
        let cluster = TestCluster::start(backend_checks::fast_clock_on_node_0())
            .await
            .unwrap();
        backend_checks::a_fast_clock_expires_keys_before_a_normal_one(&cluster).await;
    })
    .await;
}

#[tokio::test]
async fn a_slow_clock_keeps_keys_longer_than_a_normal_one() {
    bounded(async {
        let options = ClusterOptions::default().nodes(2).clock_rate(1, 0.25);
        let cluster = TestCluster::start(options).await.unwrap();
        let mut normal = cluster.connection(0).await.unwrap();
        let mut slow = cluster.connection(1).await.unwrap();
        // The slow node gets the key first, so on equal clocks it would expire first.
        set_px(&mut slow, "k", "v", 400).await;
        set_px(&mut normal, "k", "v", 400).await;
        let normal_ttl = backend_checks::pttl_once_expired(&mut normal, "k").await;
        let slow_ttl = pttl(&mut slow, "k").await;
        assert_eq!(normal_ttl, -2, "the normal node expired the key");
        assert!(
            slow_ttl > 200,
            "the slow node still holds the key with most of its TTL: {slow_ttl} ms"
        );
    })
    .await;
}

#[tokio::test]
async fn clock_rates_are_checked_at_start() {
    bounded(async {
        for rate in [0.0, -1.0, f64::NAN, f64::INFINITY] {
            let options = ClusterOptions::default().nodes(1).clock_rate(0, rate);
            let err = TestCluster::start(options).await.unwrap_err();
            assert!(
                matches!(err, HarnessError::InvalidClockRate { node: 0, .. }),
                "{rate}: {err}"
            );
        }
        let options = ClusterOptions::default().nodes(2).clock_rate(2, 2.0);
        let err = TestCluster::start(options).await.unwrap_err();
        assert!(matches!(err, HarnessError::NoSuchNode(2)), "{err}");
    })
    .await;
}

#[test]
fn backend_names_parse() {
    for (name, backend) in [
        ("process", Backend::Process),
        ("", Backend::Process),
        (" Docker\n", Backend::Docker),
        ("DOCKER", Backend::Docker),
    ] {
        assert_eq!(name.parse::<Backend>().unwrap(), backend, "{name:?}");
    }
    let err = "kubernetes".parse::<Backend>().unwrap_err();
    assert!(
        matches!(&err, HarnessError::UnknownBackend { value } if value == "kubernetes"),
        "{err}"
    );
    assert_eq!(Backend::default(), Backend::Process);
    assert_eq!(Persistence::default(), Persistence::None);
}

#[cfg(not(feature = "docker"))]
#[tokio::test]
async fn the_docker_backend_needs_the_docker_feature() {
    let options = ClusterOptions::default().nodes(1).backend(Backend::Docker);
    let err = TestCluster::start(options).await.unwrap_err();
    assert!(
        matches!(err, HarnessError::BackendNotCompiled(Backend::Docker)),
        "{err}"
    );
}

/// Where the node data goes: `/dev/shm` with AOF when it exists (the fsync costs nothing
/// there), the system's temporary directory without, and wherever `data_dir` says if set;
/// deleted with the cluster.
#[tokio::test]
async fn aof_nodes_keep_their_data_on_tmpfs_unless_told_otherwise() {
    bounded(async {
        async fn dir_of(options: ClusterOptions) -> (PathBuf, TestCluster) {
            let cluster = TestCluster::start(options.nodes(1)).await.unwrap();
            let mut connection = cluster.connection(0).await.unwrap();
            let reply: Vec<String> = redis::cmd("CONFIG")
                .arg("GET")
                .arg("dir")
                .query_async(&mut connection)
                .await
                .unwrap();
            (PathBuf::from(&reply[1]), cluster)
        }
        let shm = PathBuf::from("/dev/shm");
        let (dir, cluster) =
            dir_of(ClusterOptions::default().persistence(Persistence::AofAlways)).await;
        if shm.is_dir() {
            assert!(dir.starts_with(&shm), "{}", dir.display());
        }
        drop(cluster);
        assert!(!dir.exists(), "{} outlived its cluster", dir.display());

        let (dir, _cluster) = dir_of(ClusterOptions::default()).await;
        assert!(!dir.starts_with(&shm), "{}", dir.display());

        let parent = tempfile::tempdir().unwrap();
        let (dir, _cluster) = dir_of(
            ClusterOptions::default()
                .persistence(Persistence::AofAlways)
                .data_dir(parent.path()),
        )
        .await;
        assert!(dir.starts_with(parent.path()), "{}", dir.display());
    })
    .await;
}

#[tokio::test]
async fn dropped_packets_time_out_until_healed() {
    bounded(async {
        for what in [PacketDrop::Both, PacketDrop::Requests, PacketDrop::Replies] {
            let mut cluster = TestCluster::with_nodes(1).await.unwrap();
            backend_checks::dropped_packets_time_out_until_healed(&mut cluster, what).await;
        }
    })
    .await;
}

#[tokio::test]
async fn a_clock_jumps_ahead_and_back() {
    bounded(async {
        let cluster = TestCluster::start(backend_checks::jumping_clock_on_node_0())
            .await
            .unwrap();
        backend_checks::a_clock_jumps_ahead_and_back(&cluster).await;
    })
    .await;
}
