//! Removing containers: from synchronous code (`Drop`, also while a test unwinds, inside or
//! outside a runtime) on a helper thread, and by name after a failed start; and the label that
//! finds the harness's leftovers.

use testcontainers::bollard::Docker;
use testcontainers::bollard::errors::Error as EngineError;
use testcontainers::bollard::query_parameters::RemoveContainerOptionsBuilder;
use testcontainers::{ContainerAsync, GenericImage};
use tracing::{debug, warn};

use crate::docker::engine::API_TIMEOUT;

/// A node's container, as testcontainers runs it.
pub(crate) type NodeContainer = ContainerAsync<GenericImage>;

/// Label put on every container the harness creates (value `1`). Each container also carries
/// `org.quorumlock.harness.owner-pid`, the id of the process that created it, so that one
/// run's leftovers can be told from another's.
pub const LABEL: &str = "org.quorumlock.harness";

/// Removes containers (`docker rm -f -v`) from synchronous code, in any context (inside or
/// outside a runtime, while unwinding): on a helper thread with its own runtime, all at once,
/// waiting at most [`API_TIMEOUT`].
///
/// Each is removed with testcontainers' `rm`, so that its own `Drop` (which needs a runtime
/// on the dropping thread and removes one container at a time) has nothing left to do.
pub(crate) fn remove_all_blocking(containers: Vec<NodeContainer>) {
    if containers.is_empty() {
        return;
    }
    let ids: Vec<String> = containers.iter().map(|c| c.id().to_owned()).collect();
    let (done_tx, done_rx) = std::sync::mpsc::channel();
    let spawned = std::thread::Builder::new()
        .name("quorumlock-docker-cleanup".into())
        .spawn(move || {
            match tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            {
                Ok(runtime) => {
                    runtime.block_on(futures::future::join_all(
                        containers.into_iter().map(remove),
                    ));
                }
                Err(err) => warn!(%err, "no runtime for container cleanup"),
            }
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

async fn remove(container: NodeContainer) {
    let id = container.id().to_owned();
    match tokio::time::timeout(API_TIMEOUT, container.rm()).await {
        Ok(Ok(())) => debug!(container = id, "container removed"),
        Ok(Err(err)) => warn!(container = id, %err, "removing container failed"),
        Err(_) => warn!(container = id, "removing container timed out"),
    }
}

/// Removes the container called `name`, if there is one (`docker rm -f -v`).
pub(super) async fn remove_by_name(docker: &Docker, name: &str) {
    let options = RemoveContainerOptionsBuilder::new()
        .force(true)
        .v(true)
        .build();
    match tokio::time::timeout(API_TIMEOUT, docker.remove_container(name, Some(options))).await {
        Ok(Ok(())) => debug!(container = name, "container removed"),
        Ok(Err(EngineError::DockerResponseServerError {
            status_code: 404, ..
        })) => {}
        Ok(Err(err)) => warn!(container = name, %err, "removing container failed"),
        Err(_) => warn!(container = name, "removing container timed out"),
    }
}
