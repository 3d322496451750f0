//! The test harness's docker backend (`Backend::Docker`, cargo feature `docker`) against a real
//! Docker engine: every node operation, persistence across restarts, per-node clock rates and
//! cleanup. The checks that hold on every backend live in `common::backend_checks` and run
//! against processes in `tests/harness.rs` too; this file adds what only containers show.
//!
//! Needs the image from `scripts/redis-image.sh` (or `QUORUMLOCK_REDIS_IMAGE`). When the engine
//! is unreachable or the image is missing, each test prints why and passes without running,
//! unless `QUORUMLOCK_REQUIRE_DOCKER` is set (to anything but empty or `0`): then it fails.

mod common;

use common::{backend_checks, bounded, ping};

use std::io::ErrorKind;
use std::time::Duration;

use quorumlock_harness::{Backend, ClusterOptions, PacketDrop, TestCluster};

/// Starts a docker-backed cluster, or returns `None` (after saying why) when docker cannot be
/// used here and it is not required.
async fn docker_cluster(options: ClusterOptions) -> Option<TestCluster> {
    let cluster = TestCluster::start_if_usable(options.backend(Backend::Docker))
        .await
        .unwrap()?;
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

fn node_ports(cluster: &mut TestCluster) -> Vec<u16> {
    (0..cluster.len())
        .map(|index| cluster.port(index).unwrap())
        .collect()
}

/// Nothing answers on the nodes' `ports` any more and their containers are gone.
async fn assert_containers_gone(ports: Vec<u16>, what: &str) {
    for (index, port) in ports.into_iter().enumerate() {
        assert!(refuses(port).await, "port {port} {what}");
        if let Some(count) = containers_named(&format!("-node{index}-{port}")) {
            assert_eq!(count, 0, "container of node {index} {what}");
        }
    }
}

#[tokio::test]
async fn containers_answer_on_loopback_ports_as_independent_masters() {
    bounded(async {
        let Some(mut cluster) = docker_cluster(ClusterOptions::default().nodes(3)).await else {
            return;
        };
        assert_eq!(cluster.len(), 3);
        backend_checks::every_node_answers_on_its_own_loopback_port(
            &mut cluster,
            async |_, index, port| {
                if let Some(ports) = published_ports(&format!("-node{index}-{port}")) {
                    assert_eq!(
                        ports,
                        format!("127.0.0.1:{port}->6379/tcp"),
                        "published on loopback only"
                    );
                }
            },
        )
        .await;
        backend_checks::nodes_are_independent_masters(&cluster).await;
    })
    .await;
}

#[tokio::test]
async fn killed_container_refuses_and_comes_back_empty_on_the_same_port() {
    bounded(async {
        let Some(mut cluster) = docker_cluster(ClusterOptions::default().nodes(2)).await else {
            return;
        };
        backend_checks::killed_node_comes_back_empty_on_the_same_port(
            &mut cluster,
            1,
            async |cluster| {
                let port = cluster.port(1).unwrap();
                assert!(refuses(port).await, "a killed node's port refuses");
            },
        )
        .await;
    })
    .await;
}

#[tokio::test]
async fn plain_restart_loses_the_data_and_stop_shuts_the_container_down() {
    bounded(async {
        let Some(mut cluster) = docker_cluster(ClusterOptions::default().nodes(1)).await else {
            return;
        };
        backend_checks::restart_empties_the_node_and_stop_shuts_it_down(&mut cluster, async |_| {})
            .await;
    })
    .await;
}

#[tokio::test]
async fn without_persistence_a_restart_loses_the_data() {
    bounded(async {
        let Some(mut cluster) = docker_cluster(backend_checks::without_persistence()).await else {
            return;
        };
        backend_checks::without_persistence_restart_and_kill_lose_the_data(&mut cluster).await;
    })
    .await;
}

#[tokio::test]
async fn aof_always_keeps_the_data_across_restart_and_kill() {
    bounded(async {
        let Some(mut cluster) = docker_cluster(backend_checks::aof_always(1)).await else {
            return;
        };
        backend_checks::aof_always_keeps_the_data_across_restart_and_kill(&mut cluster).await;
    })
    .await;
}

#[tokio::test]
async fn a_restarted_node_is_handed_back_with_its_data_loaded() {
    bounded(async {
        let Some(mut cluster) = docker_cluster(backend_checks::aof_always(1)).await else {
            return;
        };
        backend_checks::a_restarted_node_is_handed_back_with_its_data_loaded(&mut cluster).await;
    })
    .await;
}

#[tokio::test]
async fn pause_makes_commands_time_out_and_resume_completes_queued_ones() {
    bounded(async {
        let Some(mut cluster) = docker_cluster(ClusterOptions::default().nodes(2)).await else {
            return;
        };
        backend_checks::pause_makes_commands_time_out_and_resume_completes_queued_ones(
            &mut cluster,
        )
        .await;
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
        backend_checks::paused_node_can_be_stopped_and_killed(&mut cluster, async |_| {
            assert!(refuses(port).await);
        })
        .await;
    })
    .await;
}

#[tokio::test]
async fn node_faults_on_a_killed_container_are_errors() {
    bounded(async {
        let Some(mut cluster) = docker_cluster(ClusterOptions::default().nodes(1)).await else {
            return;
        };
        backend_checks::faults_on_a_killed_node_are_errors(&mut cluster).await;
    })
    .await;
}

#[tokio::test]
async fn flush_empties_only_that_container() {
    bounded(async {
        let Some(mut cluster) = docker_cluster(ClusterOptions::default().nodes(2)).await else {
            return;
        };
        backend_checks::flush_empties_only_that_node(&mut cluster).await;
    })
    .await;
}

#[tokio::test]
async fn proxy_forwards_to_its_container() {
    bounded(async {
        let options = ClusterOptions::default().nodes(2).proxies(true);
        let Some(cluster) = docker_cluster(options).await else {
            return;
        };
        backend_checks::proxy_forwards_to_its_node(&cluster).await;
    })
    .await;
}

#[tokio::test]
async fn proxy_follows_a_restarted_container() {
    bounded(async {
        let options = ClusterOptions::default().nodes(1).proxies(true);
        let Some(mut cluster) = docker_cluster(options).await else {
            return;
        };
        backend_checks::proxy_follows_a_restarted_node(&mut cluster).await;
    })
    .await;
}

#[tokio::test]
async fn a_fast_clock_expires_keys_before_a_normal_one() {
    bounded(async {
        let Some(cluster) = docker_cluster(backend_checks::fast_clock_on_node_0()).await else {
            return;
        };
        backend_checks::a_fast_clock_expires_keys_before_a_normal_one(&cluster).await;
    })
    .await;
}

#[tokio::test]
async fn dropping_the_cluster_removes_its_containers() {
    bounded(async {
        let options = ClusterOptions::default().nodes(2).proxies(true);
        let Some(cluster) = docker_cluster(options).await else {
            return;
        };
        backend_checks::dropping_the_cluster_cleans_up_even_when_messy(
            cluster,
            async |cluster| node_ports(cluster),
            async |ports| assert_containers_gone(ports, "left behind").await,
        )
        .await;
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
        backend_checks::a_panicking_test_leaves_nothing_behind(
            ClusterOptions::default().nodes(2).backend(Backend::Docker),
            node_ports,
            async |ports| assert_containers_gone(ports, "survived the panic").await,
        )
        .await;
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
        backend_checks::a_bad_server_argument_reports_the_exit_and_its_output(
            ClusterOptions::default().backend(Backend::Docker),
        )
        .await;
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

#[tokio::test]
async fn dropped_packets_time_out_until_healed() {
    bounded(async {
        for what in [PacketDrop::Both, PacketDrop::Requests, PacketDrop::Replies] {
            let Some(mut cluster) = docker_cluster(ClusterOptions::default().nodes(1)).await else {
                return;
            };
            backend_checks::dropped_packets_time_out_until_healed(&mut cluster, what).await;
        }
    })
    .await;
}

#[tokio::test]
async fn a_clock_jumps_ahead_and_back() {
    bounded(async {
        let Some(cluster) = docker_cluster(backend_checks::jumping_clock_on_node_0()).await else {
            return;
        };
        backend_checks::a_clock_jumps_ahead_and_back(&cluster).await;
    })
    .await;
}
