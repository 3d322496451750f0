//! Self-tests of the test harness (`quorumlock::testing`) against real
//! `redis-server` processes: every fault the harness offers is shown to have
//! the effect a test relying on it expects.

mod common;

use common::{LONG, SHORT, bounded, connect, dbsize, get, ping, pttl, set};

use std::io::ErrorKind;
use std::path::PathBuf;
use std::time::Duration;

use nix::errno::Errno;
use nix::sys::signal;
use nix::unistd::Pid;
use quorumlock::testing::{Backend, ClusterOptions, HarnessError, Persistence, TestCluster};

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
        let cluster = TestCluster::with_nodes(5).await.unwrap();
        assert_eq!(cluster.len(), 5);
        let urls = cluster.urls();
        assert_eq!(urls.len(), 5);
        for (index, url) in urls.iter().enumerate() {
            // Without proxies the URLs are the servers themselves.
            assert_eq!(*url, cluster.direct_url(index).unwrap());
            assert_eq!(
                *url,
                format!("redis://127.0.0.1:{}", cluster.port(index).unwrap())
            );
            assert!(cluster.proxy(index).is_none());
            let mut connection = connect(url, LONG).await.unwrap();
            assert_eq!(ping(&mut connection).await.unwrap(), "PONG");
        }
        let mut ports: Vec<u16> = (0..5).map(|index| cluster.port(index).unwrap()).collect();
        ports.sort_unstable();
        ports.dedup();
        assert_eq!(ports.len(), 5, "every node has its own port");
    })
    .await;
}

#[tokio::test]
async fn nodes_are_independent_masters() {
    bounded(async {
        let cluster = TestCluster::with_nodes(2).await.unwrap();
        let mut first = cluster.connection(0).await.unwrap();
        let mut second = cluster.connection(1).await.unwrap();
        set(&mut first, "key", "on-node-0").await;
        assert_eq!(get(&mut second, "key").await, None);
        let role: Vec<redis::Value> = redis::cmd("ROLE").query_async(&mut second).await.unwrap();
        assert_eq!(
            role.first(),
            Some(&redis::Value::BulkString(b"master".to_vec()))
        );
    })
    .await;
}

#[tokio::test]
async fn killed_node_comes_back_empty_on_the_same_port() {
    bounded(async {
        let mut cluster = TestCluster::with_nodes(3).await.unwrap();
        let port = cluster.port(1).unwrap();
        let old_pid = cluster.pid(1).unwrap().unwrap();
        set(&mut cluster.connection(1).await.unwrap(), "key", "value").await;

        cluster.kill(1).await.unwrap();
        assert!(!cluster.is_running(1).unwrap());
        assert_eq!(cluster.pid(1).unwrap(), None);
        assert!(!process_exists(old_pid), "killed process is reaped");
        let refused = connect(&cluster.direct_url(1).unwrap(), LONG)
            .await
            .unwrap_err();
        assert!(refused.is_connection_refusal(), "{refused}");
        // Killing a dead node is a no-op; the other nodes are untouched.
        cluster.kill(1).await.unwrap();
        assert!(cluster.is_running(0).unwrap());
        assert!(cluster.is_running(2).unwrap());

        cluster.start_node(1).await.unwrap();
        assert!(cluster.is_running(1).unwrap());
        assert_eq!(cluster.port(1).unwrap(), port);
        assert_ne!(cluster.pid(1).unwrap(), Some(old_pid));
        let mut connection = cluster.connection(1).await.unwrap();
        assert_eq!(
            dbsize(&mut connection).await,
            0,
            "no persistence: restarted empty"
        );
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
        set(&mut cluster.connection(0).await.unwrap(), "key", "value").await;
        let old_pid = cluster.pid(0).unwrap().unwrap();

        cluster.restart(0).await.unwrap();
        assert!(!process_exists(old_pid));
        let mut connection = cluster.connection(0).await.unwrap();
        assert_eq!(dbsize(&mut connection).await, 0);

        cluster.stop(0).await.unwrap();
        assert!(!cluster.is_running(0).unwrap());
        let err = ping(&mut connection).await.unwrap_err();
        assert!(err.is_connection_dropped() || err.is_io_error(), "{err}");
    })
    .await;
}

#[tokio::test]
async fn pause_makes_commands_time_out_and_resume_completes_queued_ones() {
    bounded(async {
        let mut cluster = TestCluster::with_nodes(2).await.unwrap();
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
    })
    .await;
}

#[tokio::test]
async fn paused_node_can_be_stopped() {
    bounded(async {
        let mut cluster = TestCluster::with_nodes(1).await.unwrap();
        let pid = cluster.pid(0).unwrap().unwrap();
        cluster.pause(0).unwrap();
        cluster.stop(0).await.unwrap();
        assert!(!process_exists(pid));
        cluster.start_node(0).await.unwrap();
        assert_eq!(
            ping(&mut cluster.connection(0).await.unwrap())
                .await
                .unwrap(),
            "PONG"
        );
    })
    .await;
}

#[tokio::test]
async fn process_faults_on_a_killed_node_are_errors() {
    bounded(async {
        let mut cluster = TestCluster::with_nodes(1).await.unwrap();
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
        for index in 0..2 {
            let mut connection = cluster.connection(index).await.unwrap();
            set(&mut connection, "a", "1").await;
            set(&mut connection, "b", "2").await;
        }
        cluster.flush(0).await.unwrap();
        assert_eq!(dbsize(&mut cluster.connection(0).await.unwrap()).await, 0);
        assert_eq!(dbsize(&mut cluster.connection(1).await.unwrap()).await, 2);
    })
    .await;
}

#[tokio::test]
async fn proxy_forwards_to_its_node() {
    bounded(async {
        let cluster = TestCluster::start(ClusterOptions::default().nodes(3).proxies(true))
            .await
            .unwrap();
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
    })
    .await;
}

#[tokio::test]
async fn proxy_follows_a_restarted_node() {
    bounded(async {
        let mut cluster = TestCluster::start(ClusterOptions::default().nodes(1).proxies(true))
            .await
            .unwrap();
        let url = cluster.urls().remove(0);
        cluster.kill(0).await.unwrap();
        assert!(
            connect(&url, SHORT).await.is_err(),
            "nothing behind the proxy"
        );
        cluster.start_node(0).await.unwrap();
        let mut connection = connect(&url, LONG).await.unwrap();
        assert_eq!(ping(&mut connection).await.unwrap(), "PONG");
    })
    .await;
}

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

#[tokio::test]
async fn dropping_the_cluster_kills_every_process_and_deletes_its_directories() {
    bounded(async {
        let mut cluster = TestCluster::start(ClusterOptions::default().nodes(3).proxies(true))
            .await
            .unwrap();
        let pids = pids(&mut cluster);
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
        let proxy_addr = cluster.proxy(0).unwrap().addr();
        // Leave the cluster in a messy state: one node paused, one killed.
        cluster.pause(0).unwrap();
        cluster.kill(2).await.unwrap();

        drop(cluster);
        for pid in pids {
            assert!(!process_exists(pid), "pid {pid} still exists");
        }
        for dir in dirs {
            assert!(!dir.exists(), "{} still exists", dir.display());
        }
        // Let the aborted proxy tasks be dropped, then nothing listens.
        tokio::task::yield_now().await;
        let err = tokio::net::TcpStream::connect(proxy_addr)
            .await
            .unwrap_err();
        assert_eq!(err.kind(), ErrorKind::ConnectionRefused);
    })
    .await;
}

#[tokio::test]
async fn a_panicking_test_leaves_no_process_behind() {
    bounded(async {
        let (pids_tx, pids_rx) = tokio::sync::oneshot::channel();
        let failing_test = tokio::spawn(async move {
            let mut cluster = TestCluster::with_nodes(2).await.unwrap();
            cluster.pause(1).unwrap();
            pids_tx.send(pids(&mut cluster)).unwrap();
            panic!("simulated test failure");
        });
        let outcome = failing_test.await;
        assert!(outcome.unwrap_err().is_panic());
        for pid in pids_rx.await.unwrap() {
            assert!(!process_exists(pid), "pid {pid} survived the panic");
        }
    })
    .await;
}

#[tokio::test]
async fn a_bad_server_argument_reports_the_exit_and_its_output() {
    bounded(async {
        let options = ClusterOptions::default()
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
        let options = ClusterOptions::default()
            .nodes(2)
            .persistence(Persistence::AofAlways);
        let mut cluster = TestCluster::start(options).await.unwrap();
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
        // The other node has its own data.
        assert_eq!(dbsize(&mut cluster.connection(1).await.unwrap()).await, 0);
    })
    .await;
}

#[tokio::test]
async fn without_persistence_a_restart_loses_the_data() {
    bounded(async {
        let options = ClusterOptions::default()
            .nodes(1)
            .persistence(Persistence::None);
        let mut cluster = TestCluster::start(options).await.unwrap();
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
    })
    .await;
}

#[tokio::test]
async fn a_fast_clock_expires_keys_before_a_normal_one() {
    bounded(async {
        let options = ClusterOptions::default().nodes(2).clock_rate(0, 10.0);
        let cluster = TestCluster::start(options).await.unwrap();
        let mut fast = cluster.connection(0).await.unwrap();
        let mut normal = cluster.connection(1).await.unwrap();
        for connection in [&mut fast, &mut normal] {
            let () = redis::cmd("SET")
                .arg("k")
                .arg("v")
                .arg("PX")
                .arg(2000)
                .query_async(connection)
                .await
                .unwrap();
        }
        // Poll (bounded) until the fast node has expired the key; the normal node, which was
        // given the key later, must still report most of its 2 s.
        let mut fast_ttl = pttl(&mut fast, "k").await;
        for _ in 0..500 {
            if fast_ttl == -2 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
            fast_ttl = pttl(&mut fast, "k").await;
        }
        let normal_ttl = pttl(&mut normal, "k").await;
        assert_eq!(fast_ttl, -2, "the fast node expired the key");
        assert!(
            normal_ttl > 1000,
            "the normal node still holds the key with most of its TTL: {normal_ttl} ms"
        );
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
        for connection in [&mut slow, &mut normal] {
            let () = redis::cmd("SET")
                .arg("k")
                .arg("v")
                .arg("PX")
                .arg(400)
                .query_async(connection)
                .await
                .unwrap();
        }
        let mut normal_ttl = pttl(&mut normal, "k").await;
        for _ in 0..500 {
            if normal_ttl == -2 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
            normal_ttl = pttl(&mut normal, "k").await;
        }
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
