//! A cluster node as a container: the `redis-server` arguments and environment from the
//! [`ClusterOptions`], a free host port for a new node, and starting it again on its own port,
//! each trying again while the port is taken.

use std::path::Path;

use bollard::Docker;
use tracing::debug;

use crate::docker::container::{ContainerSpec, Created, DockerServer};
use crate::docker::engine::{LIBFAKETIME_IN_IMAGE, is_port_conflict_error};
use crate::error::HarnessError;
use crate::options::ClusterOptions;
use crate::port::{FRESH_PORT_ATTEMPTS, SAME_PORT_ATTEMPTS, SAME_PORT_RETRY_DELAY, free_port};

impl DockerServer {
    /// Creates and starts node `index`'s container on a free host port (a few tries, as the
    /// port can be taken between finding it and the engine binding it).
    pub(crate) async fn start_new(
        options: &ClusterOptions,
        docker: &Docker,
        image: &str,
        index: usize,
    ) -> Result<(DockerServer, u16), HarnessError> {
        let mut args: Vec<String> = vec![
            "--port".into(),
            "6379".into(),
            "--protected-mode".into(),
            "no".into(),
            "--daemonize".into(),
            "no".into(),
            // Connections arrive from the bridge gateway, never from loopback.
            "--enable-debug-command".into(),
            "yes".into(),
            "--dir".into(),
            "/data".into(),
        ];
        args.extend(options.persistence_args());
        args.extend(options.extra_args.iter().cloned());
        let env = options
            .clock_env(index, Path::new(LIBFAKETIME_IN_IMAGE))
            .map(|pairs| {
                pairs
                    .into_iter()
                    .map(|(name, value)| format!("{name}={value}"))
                    .collect()
            })
            .unwrap_or_default();
        let spec = ContainerSpec {
            image,
            args,
            env,
            ready_timeout: options.ready_timeout,
        };
        let mut port = 0;
        for attempt in 1..=FRESH_PORT_ATTEMPTS {
            port = free_port()?;
            match DockerServer::create(docker, index, port, &spec).await? {
                Created::Ready(server) => return Ok((server, port)),
                Created::PortTaken => {
                    debug!(node = index, port, attempt, "port taken, trying another")
                }
            }
        }
        Err(HarnessError::PortUnavailable {
            node: index,
            port,
            attempts: FRESH_PORT_ATTEMPTS,
        })
    }

    /// Starts the container again, on its own `port`, trying again for a while if another
    /// socket holds the port.
    pub(crate) async fn start_again(
        &mut self,
        options: &ClusterOptions,
        index: usize,
        port: u16,
    ) -> Result<(), HarnessError> {
        if self.is_running() {
            return Err(HarnessError::AlreadyRunning(index));
        }
        for attempt in 1..=SAME_PORT_ATTEMPTS {
            match self.start(index, options.ready_timeout).await {
                Err(err) if is_port_conflict_error(&err) => {
                    debug!(node = index, port, attempt, %err, "port busy, retrying");
                    tokio::time::sleep(SAME_PORT_RETRY_DELAY).await;
                }
                other => return other,
            }
        }
        Err(HarnessError::PortUnavailable {
            node: index,
            port,
            attempts: SAME_PORT_ATTEMPTS,
        })
    }
}
