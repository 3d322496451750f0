//! Removing containers: from async code, or from synchronous code (`Drop`, also while a test
//! unwinds) on a helper thread; and the label that finds the harness's leftovers.

use bollard::Docker;
use bollard::query_parameters::RemoveContainerOptionsBuilder;
use tracing::{debug, warn};

use crate::docker::engine::API_TIMEOUT;

/// Label put on every container the harness creates (value `1`).
pub const LABEL: &str = "org.quorumlock.harness";

/// Removes containers (`docker rm -f -v`) from synchronous code, in any context (inside or
/// outside a runtime, while unwinding): on a helper thread with its own runtime, all at once,
/// waiting at most [`API_TIMEOUT`].
pub(crate) fn remove_all_blocking(containers: Vec<(Docker, String)>) {
    if containers.is_empty() {
        return;
    }
    let ids: Vec<String> = containers.iter().map(|(_, id)| id.clone()).collect();
    let (done_tx, done_rx) = std::sync::mpsc::channel();
    let spawned = std::thread::Builder::new()
        .name("quorumlock-docker-cleanup".into())
        .spawn(move || {
            match tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            {
                Ok(runtime) => runtime.block_on(futures::future::join_all(
                    containers.iter().map(|(docker, id)| remove(docker, id)),
                )),
                Err(err) => {
                    warn!(%err, "no runtime for container cleanup");
                    Vec::new()
                }
            };
            let _ = done_tx.send(());
        });
    match spawned {
        Ok(_) => {
            if done_rx.recv_timeout(API_TIMEOUT).is_err() {
                warn!(
                    ?ids,
                    "containers not removed in time; remove them with: docker rm -f <id>"
                );
            }
        }
        Err(err) => warn!(%err, ?ids, "could not start the cleanup thread; containers left behind"),
    }
}

pub(super) async fn remove(docker: &Docker, id: &str) {
    let options = RemoveContainerOptionsBuilder::new()
        .force(true)
        .v(true)
        .build();
    match tokio::time::timeout(API_TIMEOUT, docker.remove_container(id, Some(options))).await {
        Ok(Ok(())) => debug!(container = id, "container removed"),
        Ok(Err(bollard::errors::Error::DockerResponseServerError {
            status_code: 404, ..
        })) => {}
        Ok(Err(err)) => warn!(container = id, %err, "removing container failed"),
        Err(_) => warn!(container = id, "removing container timed out"),
    }
}
