//! A cluster node as a container: the `redis-server` arguments and environment from the
//! [`ClusterOptions`], a free host port for a new node, and starting it again on its own port,
//! each trying again while the port is taken.

use std::path::Path;

use testcontainers::bollard::Docker;
use testcontainers::core::{AccessMode, Mount};
use tracing::debug;

use crate::docker::container::{CONTAINER_PORT_NUMBER, ContainerSpec, DockerServer};
use crate::docker::engine::{LIBFAKETIME_IN_IMAGE, is_port_conflict_error};
use crate::error::HarnessError;
use crate::faketime::CLOCK_FILE_NAME;
use crate::options::{ClusterOptions, Persistence};
use crate::port::{OwnPortRetry, on_a_free_port};
use crate::transport::Transport;

/// Where a TLS cluster's certificate directory is mounted (read-only) in each container.
const TLS_DIR_IN_CONTAINER: &str = "/tls";
/// Where a jumpable clock's directory (its libfaketime file) is mounted in the container.
const CLOCK_DIR_IN_CONTAINER: &str = "/faketime";
/// The server's working directory in each container (its append-only file, with AOF).
const DATA_DIR_IN_CONTAINER: &str = "/data";

impl DockerServer {
    /// Creates and starts node `index`'s container on a free host port (a few tries, as the
    /// port can be taken between finding it and the engine binding it).
    pub(crate) async fn start_new(
        options: &ClusterOptions,
        transport: &Transport,
        docker: &Docker,
        image: &str,
        clock_dir: Option<&Path>,
        index: usize,
    ) -> Result<(DockerServer, u16), HarnessError> {
        let mut args =
            transport.listen_args(CONTAINER_PORT_NUMBER, Some(Path::new(TLS_DIR_IN_CONTAINER)));
        args.extend(
            [
                "--protected-mode",
                "no",
                "--daemonize",
                "no",
                // Connections arrive from the bridge gateway, never from loopback.
                "--enable-debug-command",
                "yes",
                "--dir",
                DATA_DIR_IN_CONTAINER,
            ]
            .map(String::from),
        );
        args.extend(options.persistence_args());
        args.extend(options.extra_args.iter().cloned());
        let clock_file = clock_dir.map(|_| Path::new(CLOCK_DIR_IN_CONTAINER).join(CLOCK_FILE_NAME));
        let env = options.clock_env(
            index,
            Path::new(LIBFAKETIME_IN_IMAGE),
            clock_file.as_deref(),
        );
        let read_only = |host: &Path, container: &str| {
            Mount::bind_mount(host.display().to_string(), container)
                .with_access_mode(AccessMode::ReadOnly)
        };
        let mut mounts: Vec<Mount> = transport
            .host_dir()
            .map(|dir| read_only(dir, TLS_DIR_IN_CONTAINER))
            .into_iter()
            .collect();
        if let Some(dir) = clock_dir {
            mounts.push(read_only(dir, CLOCK_DIR_IN_CONTAINER));
        }
        // With AOF, /data is a host directory (on tmpfs by default): it survives the container
        // being stopped and started, and fsync there is cheap. A tmpfs mount would be emptied
        // by every stop, taking the append-only file with it.
        let data = match options.persistence_mode() {
            Persistence::AofAlways => {
                let dir = options.node_data_dir(index)?;
                mounts.push(Mount::bind_mount(
                    dir.path().display().to_string(),
                    DATA_DIR_IN_CONTAINER,
                ));
                Some(dir)
            }
            _ => None,
        };
        let spec = ContainerSpec {
            image,
            args,
            env,
            mounts,
            transport,
            ready_timeout: options.ready_timeout,
        };
        let (mut server, port) = on_a_free_port(index, |port| {
            DockerServer::create(docker, index, port, &spec)
        })
        .await?;
        if let Some(dir) = data {
            server.keep_data_dir(dir);
        }
        Ok((server, port))
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
        let mut retry = OwnPortRetry::new(index, port);
        loop {
            match self.start(index, options.ready_timeout).await {
                Err(err) if is_port_conflict_error(&err) => {
                    debug!(node = index, port, %err, "port taken");
                    retry.port_taken().await?;
                }
                other => return other,
            }
        }
    }
}
