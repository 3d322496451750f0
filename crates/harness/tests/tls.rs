//! The TLS option (`ClusterOptions::tls`, cargo feature `tls`): nodes that speak TLS only, with a
//! CA of the cluster's own, reached by the harness itself and by an independent client
//! (`redis-cli --tls`), on processes and, when docker can be used, on containers; and nodes that
//! require a client certificate (`ClusterOptions::tls_auth_clients`).

mod common;

use common::{SHORT, bounded, connect, ping};

use std::path::Path;
use std::process::Output;
use std::time::Duration;

use quorumlock_harness::{Backend, ClusterOptions, TestCluster};

async fn tls_cluster(nodes: usize) -> TestCluster {
    TestCluster::start(ClusterOptions::default().nodes(nodes).tls(true))
        .await
        .unwrap()
}

/// `redis-cli --tls --cacert <ca> -p <port> <args>`, bounded in time; `None` (after saying so)
/// if `redis-cli` is not installed.
async fn redis_cli_tls(ca: &Path, port: u16, args: &[&str]) -> Option<Output> {
    let mut command = tokio::process::Command::new("redis-cli");
    command
        .args(["--tls", "--cacert"])
        .arg(ca)
        .args(["-h", "127.0.0.1", "-p", &port.to_string()])
        .args(args)
        .kill_on_drop(true);
    let output = tokio::time::timeout(Duration::from_secs(10), command.output())
        .await
        .expect("redis-cli did not finish within 10 s");
    match output {
        Ok(output) => Some(output),
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => {
            eprintln!("SKIPPED the redis-cli part: redis-cli is not installed");
            None
        }
        Err(err) => panic!("running redis-cli: {err}"),
    }
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).trim().to_owned()
}

/// Every node of a TLS cluster: a `rediss://` URL on its own port, PONG over the harness's own
/// TLS connection and over `redis-cli --tls` trusting the cluster's CA file, and no plain port.
async fn every_tls_node_answers_ping_over_tls(cluster: &TestCluster) {
    let files = cluster.tls().expect("a TLS cluster has TLS files");
    assert_eq!(cluster.tls_ca_pem(), Some(files.ca_pem()));
    for (index, url) in cluster.urls().iter().enumerate() {
        let port = cluster.port(index).unwrap();
        assert_eq!(*url, format!("rediss://127.0.0.1:{port}"));
        assert_eq!(*url, cluster.direct_url(index).unwrap());

        let mut connection = cluster.connection(index).await.unwrap();
        assert_eq!(ping(&mut connection).await.unwrap(), "PONG");
        let port_config: Vec<String> = redis::cmd("CONFIG")
            .arg("GET")
            .arg("port")
            .query_async(&mut connection)
            .await
            .unwrap();
        assert_eq!(port_config, ["port", "0"], "no plain TCP port");

        if let Some(output) = redis_cli_tls(&files.ca_cert_path(), port, &["PING"]).await {
            assert_eq!(stdout(&output), "PONG", "{output:?}");
        }
    }
}

#[tokio::test]
async fn a_tls_node_answers_ping_over_tls() {
    bounded(async {
        let cluster = tls_cluster(2).await;
        assert_eq!(cluster.backend(), Backend::Process);
        every_tls_node_answers_ping_over_tls(&cluster).await;
    })
    .await;
}

#[tokio::test]
async fn the_ca_and_certificate_files_are_pem_and_go_with_the_cluster() {
    bounded(async {
        let cluster = tls_cluster(1).await;
        let files = cluster.tls().unwrap();
        let dir = files.dir().to_path_buf();
        assert!(files.ca_pem().starts_with("-----BEGIN CERTIFICATE-----"));
        assert_eq!(
            std::fs::read_to_string(files.ca_cert_path()).unwrap(),
            files.ca_pem()
        );
        assert!(
            std::fs::read_to_string(files.cert_path())
                .unwrap()
                .starts_with("-----BEGIN CERTIFICATE-----")
        );
        assert!(
            std::fs::read_to_string(files.key_path())
                .unwrap()
                .starts_with("-----BEGIN PRIVATE KEY-----")
        );
        drop(cluster);
        assert!(!dir.exists(), "{} outlived its cluster", dir.display());
    })
    .await;
}

#[tokio::test]
async fn a_cluster_without_the_option_has_no_tls() {
    bounded(async {
        let cluster = TestCluster::with_nodes(1).await.unwrap();
        assert!(cluster.tls().is_none());
        assert_eq!(cluster.tls_ca_pem(), None);
        assert!(cluster.urls()[0].starts_with("redis://"));
    })
    .await;
}

#[tokio::test]
async fn a_tls_node_answers_no_plain_client() {
    bounded(async {
        let cluster = tls_cluster(1).await;
        let port = cluster.port(0).unwrap();
        // The server reads the plain request as a broken TLS record and never answers it.
        let plain = format!("redis://127.0.0.1:{port}");
        match connect(&plain, SHORT).await {
            Err(_) => {}
            Ok(mut connection) => assert!(ping(&mut connection).await.is_err()),
        }
    })
    .await;
}

/// With `tls_auth_clients` the nodes require a client certificate: the harness's own connection
/// (which presents the cluster's client certificate) gets PONG, the server says
/// `tls-auth-clients yes`, and `redis-cli` trusting the CA but with no certificate is refused.
#[tokio::test]
async fn nodes_that_require_a_client_certificate_answer_only_clients_with_one() {
    bounded(async {
        let cluster = TestCluster::start(ClusterOptions::default().nodes(1).tls_auth_clients(true))
            .await
            .unwrap();
        let files = cluster.tls().expect("tls_auth_clients implies TLS");
        assert!(files.auth_clients());
        assert!(
            files
                .client_cert_pem()
                .starts_with("-----BEGIN CERTIFICATE-----")
        );
        assert!(
            files
                .client_key_pem()
                .starts_with("-----BEGIN PRIVATE KEY-----")
        );
        let mut connection = cluster.connection(0).await.unwrap();
        assert_eq!(ping(&mut connection).await.unwrap(), "PONG");
        let auth: Vec<String> = redis::cmd("CONFIG")
            .arg("GET")
            .arg("tls-auth-clients")
            .query_async(&mut connection)
            .await
            .unwrap();
        assert_eq!(auth, ["tls-auth-clients", "yes"]);

        let port = cluster.port(0).unwrap();
        if let Some(output) = redis_cli_tls(&files.ca_cert_path(), port, &["PING"]).await {
            assert_ne!(stdout(&output), "PONG", "{output:?}");
        }
        // Without the option the nodes ask for no certificate.
        let plain_tls = tls_cluster(1).await;
        assert!(!plain_tls.tls().unwrap().auth_clients());
    })
    .await;
}

#[tokio::test]
async fn each_cluster_has_its_own_ca() {
    bounded(async {
        let first = tls_cluster(1).await;
        let second = tls_cluster(1).await;
        assert_ne!(first.tls_ca_pem(), second.tls_ca_pem());
        // A client that trusts the other cluster's CA is refused at the handshake.
        let other_ca = second.tls().unwrap().ca_cert_path();
        if let Some(output) = redis_cli_tls(&other_ca, first.port(0).unwrap(), &["PING"]).await {
            assert_ne!(stdout(&output), "PONG", "{output:?}");
            let stderr = String::from_utf8_lossy(&output.stderr);
            assert!(stderr.contains("certificate verify failed"), "{stderr}");
        }
    })
    .await;
}

#[tokio::test]
async fn a_restarted_tls_node_comes_back_on_tls_on_the_same_port() {
    bounded(async {
        let mut cluster = tls_cluster(2).await;
        let urls = cluster.urls();
        cluster.kill(1).await.unwrap();
        cluster.start_node(1).await.unwrap();
        cluster.restart(0).await.unwrap();
        assert_eq!(cluster.urls(), urls);
        for index in 0..2 {
            let mut connection = cluster.connection(index).await.unwrap();
            assert_eq!(ping(&mut connection).await.unwrap(), "PONG");
        }
        cluster.flush(0).await.unwrap();
    })
    .await;
}

#[tokio::test]
async fn proxies_pass_tls_through() {
    bounded(async {
        let cluster =
            TestCluster::start(ClusterOptions::default().nodes(1).tls(true).proxies(true))
                .await
                .unwrap();
        let proxy = cluster.proxy(0).unwrap();
        assert_eq!(cluster.urls(), [format!("rediss://{}", proxy.addr())]);
        let ca = cluster.tls().unwrap().ca_cert_path();
        if let Some(output) = redis_cli_tls(&ca, proxy.addr().port(), &["PING"]).await {
            assert_eq!(stdout(&output), "PONG", "{output:?}");
        }
        proxy.blackhole();
        if let Some(output) = redis_cli_tls(&ca, proxy.addr().port(), &["-t", "1", "PING"]).await {
            assert_ne!(stdout(&output), "PONG", "{output:?}");
        }
    })
    .await;
}

/// The same checks on containers: the certificate directory is mounted into each one.
#[cfg(feature = "docker")]
#[tokio::test]
async fn a_tls_container_answers_ping_over_tls() {
    bounded(async {
        let Some(mut cluster) = TestCluster::start_if_usable(
            ClusterOptions::default()
                .nodes(2)
                .tls(true)
                .backend(Backend::Docker),
        )
        .await
        .unwrap() else {
            return;
        };
        every_tls_node_answers_ping_over_tls(&cluster).await;
        cluster.restart(1).await.unwrap();
        let mut connection = cluster.connection(1).await.unwrap();
        connection.set_response_timeout(common::LONG);
        assert_eq!(ping(&mut connection).await.unwrap(), "PONG");
    })
    .await;
}
