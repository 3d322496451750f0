//! The test harness's docker backend (`Backend::Docker`, cargo feature `docker`) against a real
//! Docker engine: every node operation, persistence across restarts, per-node clock rates and
//! cleanup.
//!
//! Needs the image from `scripts/redis-image.sh` (or `QUORUMLOCK_REDIS_IMAGE`). When the engine
//! is unreachable or the image is missing, each test prints why and passes without running,
//! unless `QUORUMLOCK_REQUIRE_DOCKER` is set (to anything but empty or `0`): then it fails.

mod common;

use common::{LONG, SHORT, bounded, connect, dbsize, get, ping, pttl, set};

use std::io::ErrorKind;
use std::time::Duration;

use quorumlock::testing::{
    Backend, ClusterOptions, HarnessError, Persistence, TestCluster, docker,
};

/// Set (not empty, not `0`) to turn "docker unavailable" from a skip into a failure.
const REQUIRE_DOCKER_ENV: &str = "QUORUMLOCK_REQUIRE_DOCKER";

fn docker_required() -> bool {
    std::env::var(REQUIRE_DOCKER_ENV).is_ok_and(|value| !value.is_empty() && value != "0")
}

/// Starts a docker-backed cluster, or returns `None` (after saying why) when docker cannot be
/// used here and it is not required.
async fn docker_cluster(options: ClusterOptions) -> Option<TestCluster> {
    let image = docker::image();
    match docker::check_available(&image).await {
        Ok(()) => {}
        Err(err @ (HarnessError::DockerUnavailable { .. } | HarnessError::ImageMissing { .. })) => {
            assert!(
                !docker_required(),
                "{REQUIRE_DOCKER_ENV} is set, but docker cannot be used: {err}"
            );
            eprintln!(
                "SKIPPED: docker backend unavailable ({err}); run scripts/redis-image.sh, \
                 or set {REQUIRE_DOCKER_ENV}=1 to make this a failure"
            );
            return None;
        }
        Err(other) => panic!("checking docker: {other}"),
    }
    let cluster = TestCluster::start(options.backend(Backend::Docker))
        .await
        .unwrap();
    assert_eq!(cluster.backend(), Backend::Docker);
    Some(cluster)
}

/// Whether nothing accepts connections on `127.0.0.1:port` any more. A published port can
/// keep accepting for a moment after its container stopped, so this polls (bounded).
async fn refuses(port: u16) -> bool {
    for _ in 0..100 {
        match tokio::net::TcpStream::connect(("127.0.0.1", port)).await {
            Err(err) if err.kind() == ErrorKind::ConnectionRefused => return true,
            _ => tokio::time::sleep(Duration::from_millis(20)).await,
        }
    }
    false
}

/// What the docker CLI shows as the published ports of the container whose name contains
/// `fragment`; `None` if the CLI is not installed.
fn published_ports(fragment: &str) -> Option<String> {
    let output = std::process::Command::new("docker")
        .args(["ps", "--format", "{{.Ports}}", "--filter"])
        .arg(format!("name={fragment}"))
        .output()
        .ok()?;
    assert!(output.status.success(), "docker ps failed: {output:?}");
    Some(String::from_utf8_lossy(&output.stdout).trim().to_owned())
}

/// Asks the docker CLI whether containers of this cluster's node on `port` still exist; `None`
/// if the CLI is not installed.
fn containers_named(fragment: &str) -> Option<usize> {
    let output = std::process::Command::new("docker")
        .args(["ps", "-aq", "--filter"])
        .arg(format!("name={fragment}"))
        .output()
        .ok()?;
    assert!(output.status.success(), "docker ps failed: {output:?}");
    Some(String::from_utf8_lossy(&output.stdout).lines().count())
}

#[tokio::test]
async fn containers_answer_on_loopback_ports_as_independent_masters() {
    bounded(async {
        let Some(mut cluster) = docker_cluster(ClusterOptions::default().nodes(3)).await else {
            return;
        };
        assert_eq!(cluster.len(), 3);
        let urls = cluster.urls();
        for (index, url) in urls.iter().enumerate() {
            let port = cluster.port(index).unwrap();
            assert_eq!(*url, format!("redis://127.0.0.1:{port}"));
            assert_eq!(*url, cluster.direct_url(index).unwrap());
            if let Some(ports) = published_ports(&format!("-node{index}-{port}")) {
                assert_eq!(
                    ports,
                    format!("127.0.0.1:{port}->6379/tcp"),
                    "published on loopback only"
                );
            }
            assert!(cluster.is_running(index).unwrap());
            assert!(cluster.pid(index).unwrap().is_some());
            let mut connection = connect(url, LONG).await.unwrap();
            assert_eq!(ping(&mut connection).await.unwrap(), "PONG");
            let role: Vec<redis::Value> = redis::cmd("ROLE")
                .query_async(&mut connection)
                .await
                .unwrap();
            assert_eq!(
                role.first(),
                Some(&redis::Value::BulkString(b"master".to_vec()))
            );
        }
        set(
            &mut cluster.connection(0).await.unwrap(),
            "key",
            "on-node-0",
        )
        .await;
        assert_eq!(
            get(&mut cluster.connection(1).await.unwrap(), "key").await,
            None
        );
        let mut ports: Vec<u16> = (0..3).map(|index| cluster.port(index).unwrap()).collect();
        ports.sort_unstable();
        ports.dedup();
        assert_eq!(ports.len(), 3, "every node has its own port");
    })
    .await;
}

#[tokio::test]
async fn killed_container_refuses_and_comes_back_empty_on_the_same_port() {
    bounded(async {
        let Some(mut cluster) = docker_cluster(ClusterOptions::default().nodes(2)).await else {
            return;
        };
        let port = cluster.port(1).unwrap();
        set(&mut cluster.connection(1).await.unwrap(), "key", "value").await;

        cluster.kill(1).await.unwrap();
        assert!(!cluster.is_running(1).unwrap());
        assert_eq!(cluster.pid(1).unwrap(), None);
        assert!(refuses(port).await, "a killed node's port refuses");
        // Killing a dead node is a no-op; the other node is untouched.
        cluster.kill(1).await.unwrap();
        assert!(cluster.is_running(0).unwrap());

        cluster.start_node(1).await.unwrap();
        assert!(cluster.is_running(1).unwrap());
        assert_eq!(cluster.port(1).unwrap(), port);
        let mut connection = cluster.connection(1).await.unwrap();
        assert_eq!(
            dbsize(&mut connection).await,
            0,
            "no persistence: back empty"
        );
        let err = cluster.start_node(1).await.unwrap_err();
        assert!(matches!(err, HarnessError::AlreadyRunning(1)), "{err}");
    })
    .await;
}

#[tokio::test]
async fn plain_restart_loses_the_data() {
    bounded(async {
        let Some(mut cluster) = docker_cluster(ClusterOptions::default().nodes(1)).await else {
            return;
        };
        let mut connection = cluster.connection(0).await.unwrap();
        set(&mut connection, "key", "value").await;

        cluster.restart(0).await.unwrap();
        let mut connection = cluster.connection(0).await.unwrap();
        assert_eq!(get(&mut connection, "key").await, None);

        cluster.stop(0).await.unwrap();
        assert!(!cluster.is_running(0).unwrap());
        let err = ping(&mut connection).await.unwrap_err();
        assert!(!err.is_timeout(), "a stopped node fails fast: {err}");
    })
    .await;
}

#[tokio::test]
async fn aof_always_keeps_the_data_across_restart_and_kill() {
    bounded(async {
        let options = ClusterOptions::default()
            .nodes(1)
            .persistence(Persistence::AofAlways);
        let Some(mut cluster) = docker_cluster(options).await else {
            return;
        };
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
    })
    .await;
}

#[tokio::test]
async fn pause_makes_commands_time_out_and_resume_completes_queued_ones() {
    bounded(async {
        let Some(mut cluster) = docker_cluster(ClusterOptions::default().nodes(2)).await else {
            return;
        };
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
    })
    .await;
}

#[tokio::test]
async fn paused_container_can_be_stopped_and_killed() {
    bounded(async {
        let Some(mut cluster) = docker_cluster(ClusterOptions::default().nodes(1)).await else {
            return;
        };
        let port = cluster.port(0).unwrap();
        cluster.pause(0).unwrap();
        cluster.stop(0).await.unwrap();
        assert!(!cluster.is_running(0).unwrap());
        assert!(refuses(port).await);
        cluster.start_node(0).await.unwrap();

        cluster.pause(0).unwrap();
        cluster.kill(0).await.unwrap();
        assert!(!cluster.is_running(0).unwrap());
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
async fn node_faults_on_a_killed_container_are_errors() {
    bounded(async {
        let Some(mut cluster) = docker_cluster(ClusterOptions::default().nodes(1)).await else {
            return;
        };
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
        assert!(matches!(
            cluster.kill(1).await,
            Err(HarnessError::NoSuchNode(1))
        ));
    })
    .await;
}

#[tokio::test]
async fn flush_empties_only_that_container() {
    bounded(async {
        let Some(mut cluster) = docker_cluster(ClusterOptions::default().nodes(2)).await else {
            return;
        };
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
async fn proxies_work_in_front_of_containers() {
    bounded(async {
        let options = ClusterOptions::default().nodes(1).proxies(true);
        let Some(mut cluster) = docker_cluster(options).await else {
            return;
        };
        let url = cluster.urls().remove(0);
        let proxy = cluster.proxy(0).unwrap();
        assert_eq!(url, proxy.url());
        assert_eq!(proxy.upstream().port(), cluster.port(0).unwrap());
        let mut through_proxy = connect(&url, LONG).await.unwrap();
        set(&mut through_proxy, "via", "proxy").await;
        assert_eq!(
            get(&mut cluster.connection(0).await.unwrap(), "via")
                .await
                .as_deref(),
            Some("proxy")
        );
        cluster.kill(0).await.unwrap();
        cluster.start_node(0).await.unwrap();
        let mut fresh = connect(&url, LONG).await.unwrap();
        assert_eq!(ping(&mut fresh).await.unwrap(), "PONG");
    })
    .await;
}

#[tokio::test]
async fn a_fast_clock_expires_keys_before_a_normal_one() {
    bounded(async {
        let options = ClusterOptions::default().nodes(2).clock_rate(0, 10.0);
        let Some(cluster) = docker_cluster(options).await else {
            return;
        };
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
async fn dropping_the_cluster_removes_its_containers() {
    bounded(async {
        let options = ClusterOptions::default().nodes(2).proxies(true);
        let Some(mut cluster) = docker_cluster(options).await else {
            return;
        };
        let ports: Vec<u16> = (0..2).map(|index| cluster.port(index).unwrap()).collect();
        // Leave it messy: one container paused, one killed.
        cluster.pause(0).unwrap();
        cluster.kill(1).await.unwrap();
        drop(cluster);
        for (index, port) in ports.into_iter().enumerate() {
            assert!(refuses(port).await, "port {port} still answers");
            if let Some(count) = containers_named(&format!("-node{index}-{port}")) {
                assert_eq!(count, 0, "container of node {index} left behind");
            }
        }
    })
    .await;
}

#[tokio::test]
async fn a_panicking_test_leaves_no_container_behind() {
    bounded(async {
        let Some(probe) = docker_cluster(ClusterOptions::default().nodes(0)).await else {
            return;
        };
        drop(probe);
        let (ports_tx, ports_rx) = tokio::sync::oneshot::channel();
        let failing_test = tokio::spawn(async move {
            let mut cluster =
                TestCluster::start(ClusterOptions::default().nodes(2).backend(Backend::Docker))
                    .await
                    .unwrap();
            cluster.pause(1).unwrap();
            let ports: Vec<u16> = (0..2).map(|index| cluster.port(index).unwrap()).collect();
            ports_tx.send(ports).unwrap();
            panic!("simulated test failure");
        });
        assert!(failing_test.await.unwrap_err().is_panic());
        for (index, port) in ports_rx.await.unwrap().into_iter().enumerate() {
            assert!(refuses(port).await, "port {port} survived the panic");
            if let Some(count) = containers_named(&format!("-node{index}-{port}")) {
                assert_eq!(count, 0, "container of node {index} survived the panic");
            }
        }
    })
    .await;
}

#[tokio::test]
async fn a_bad_server_argument_reports_the_exit_and_the_container_logs() {
    bounded(async {
        let Some(probe) = docker_cluster(ClusterOptions::default().nodes(0)).await else {
            return;
        };
        drop(probe);
        let options = ClusterOptions::default()
            .nodes(1)
            .backend(Backend::Docker)
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
async fn a_restart_waits_for_its_port_to_be_free_again() {
    bounded(async {
        let Some(mut cluster) = docker_cluster(ClusterOptions::default().nodes(1)).await else {
            return;
        };
        let port = cluster.port(0).unwrap();
        cluster.kill(0).await.unwrap();
        assert!(refuses(port).await);
        // Something else holds the port for a moment.
        let squatter = std::net::TcpListener::bind(("127.0.0.1", port)).unwrap();
        let release = tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(500)).await;
            drop(squatter);
        });
        cluster.start_node(0).await.unwrap();
        release.await.unwrap();
        assert_eq!(cluster.port(0).unwrap(), port);
        assert_eq!(
            ping(&mut cluster.connection(0).await.unwrap())
                .await
                .unwrap(),
            "PONG"
        );
    })
    .await;
}
