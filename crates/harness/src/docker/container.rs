//! One node's container through its life, as a testcontainers [`ContainerAsync`]: created with
//! its host port published on 127.0.0.1, started and waited for until redis answers, killed,
//! stopped, paused, resumed, its logs read for errors, and removed when dropped. (Starting a
//! cluster node as a container, from the cluster's options and with port retries, is `node.rs`.)

use std::fmt::Write as _;
use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use testcontainers::bollard::Docker;
use testcontainers::bollard::models::HostConfig;
use testcontainers::bollard::query_parameters::{
    InspectContainerOptions, KillContainerOptionsBuilder,
};
use testcontainers::core::{IntoContainerPort as _, Mount};
use testcontainers::runners::AsyncRunner as _;
use testcontainers::{ContainerRequest, GenericImage, ImageExt as _};
use tokio::io::AsyncReadExt as _;
use tokio::time::Instant;
use tracing::{debug, info, warn};

use crate::docker::cleanup::{LABEL, NodeContainer, remove_all_blocking, remove_by_name};
use crate::docker::engine::{API_TIMEOUT, api, blocking, is_port_conflict, status_of};
use crate::error::HarnessError;
use crate::netfilter::ServerSocket;
use crate::probe::{PROBE_TIMEOUT, ProbeBackoff};
use crate::transport::Transport;

/// The port redis listens on inside the container.
pub(crate) const CONTAINER_PORT_NUMBER: u16 = 6379;
/// How long `stop` lets redis shut down after SIGTERM before Docker uses SIGKILL.
const STOP_GRACE_SECONDS: i32 = 5;
/// How long to wait for a killed or stopped container to be reported as not running.
const EXIT_TIMEOUT: Duration = Duration::from_secs(10);
/// Poll interval while waiting for a container's state to change, and a bound on the polls
/// on top of the time bound.
const STATE_POLL: Duration = Duration::from_millis(20);
const MAX_STATE_POLLS: u32 = 1000;
/// How many log lines of each stream an error message quotes.
const LOG_TAIL_LINES: usize = 50;
/// The network the containers join: named, not left to the engine's default, so that the
/// container's `NetworkMode` names the network its bridge address is looked up in.
const NETWORK: &str = "bridge";

/// Distinguishes the containers of one process.
static CONTAINER_SEQ: AtomicU64 = AtomicU64::new(0);

/// What a node's container is created with.
pub(crate) struct ContainerSpec<'a> {
    pub(crate) image: &'a str,
    /// Arguments after `redis-server`.
    pub(crate) args: Vec<String>,
    /// Environment variables, name and value.
    pub(crate) env: Vec<(String, String)>,
    /// Bind mounts of host directories.
    pub(crate) mounts: Vec<Mount>,
    /// How the harness reaches the server (plain or TLS).
    pub(crate) transport: &'a Transport,
    pub(crate) ready_timeout: Duration,
}

impl ContainerSpec<'_> {
    /// The testcontainers request for node `index`'s container, named `name`, publishing
    /// `127.0.0.1:port`.
    fn request(&self, index: usize, name: &str, port: u16) -> ContainerRequest<GenericImage> {
        let (repository, tag) = split_image(self.image);
        let mut cmd = vec!["redis-server".to_owned()];
        cmd.extend(self.args.iter().cloned());
        let mut request = GenericImage::new(repository, tag)
            .with_cmd(cmd)
            .with_container_name(name)
            .with_labels([
                (LABEL.to_owned(), "1".to_owned()),
                (format!("{LABEL}.node"), index.to_string()),
                (format!("{LABEL}.owner-pid"), std::process::id().to_string()),
            ])
            .with_network(NETWORK)
            .with_mapped_port(port, CONTAINER_PORT_NUMBER.tcp())
            // testcontainers publishes a mapped port on every interface; the harness's nodes
            // must be reachable from this host only, so the binding's address is set here.
            .with_host_config_modifier(publish_on_loopback_only)
            .with_startup_timeout(API_TIMEOUT);
        for (name, value) in &self.env {
            request = request.with_env_var(name, value);
        }
        for mount in &self.mounts {
            request = request.with_mount(mount.clone());
        }
        request
    }
}

/// `repository:tag` split at the tag's colon (`latest` if there is none; a colon before the
/// last `/` belongs to a registry's port).
fn split_image(image: &str) -> (&str, &str) {
    match image.rsplit_once(':') {
        Some((repository, tag)) if !tag.contains('/') => (repository, tag),
        _ => (image, "latest"),
    }
}

fn publish_on_loopback_only(host_config: &mut HostConfig) {
    let bindings = host_config
        .port_bindings
        .iter_mut()
        .flat_map(|map| map.values_mut());
    for binding in bindings.flatten().flatten() {
        binding.host_ip = Some("127.0.0.1".to_owned());
    }
}

/// One node's container. Dropping it removes the container.
#[derive(Debug)]
pub(crate) struct DockerServer {
    /// The engine, for what testcontainers has no call for (SIGKILL, the server's pid).
    docker: Docker,
    /// `None` once taken for removal. Boxed: a testcontainers container holds its whole
    /// request, about a kilobyte, which would size every node of a cluster by it.
    container: Option<Box<NodeContainer>>,
    name: String,
    port: u16,
    transport: Transport,
    running: bool,
    paused: bool,
    pid: Option<u32>,
    /// Whether the engine's process ids name processes here (not so when the engine runs in
    /// a VM or elsewhere); only then can a server that exited by itself be noticed from `pid`.
    pid_visible: bool,
    /// The host directory bind-mounted at `/data`, if any: deleted after the container (the
    /// last field, so it drops after `Drop::drop` has removed the container).
    data_dir: Option<tempfile::TempDir>,
}

impl DockerServer {
    /// Creates node `index`'s container publishing `127.0.0.1:port`, starts it and waits
    /// until redis answers on the port. `None`: the host port was taken, and the container has
    /// been removed again.
    pub(crate) async fn create(
        docker: &Docker,
        index: usize,
        port: u16,
        spec: &ContainerSpec<'_>,
    ) -> Result<Option<DockerServer>, HarnessError> {
        let seq = CONTAINER_SEQ.fetch_add(1, Ordering::Relaxed);
        let name = format!("quorumlock-{}-{seq}-node{index}-{port}", std::process::id());
        let started = api(
            index,
            "start container",
            spec.request(index, &name, port).start(),
        )
        .await;
        let container = match started {
            Ok(container) => container,
            Err(err) => {
                // testcontainers leaves a container that was created but failed to start (a
                // taken port, a bad mount) to its caller, without handing back its id: it is
                // found by its name.
                remove_by_name(docker, &name).await;
                return match err {
                    HarnessError::Docker { source, .. } if is_port_conflict(source.as_ref()) => {
                        debug!(node = index, port, "host port taken, container removed");
                        Ok(None)
                    }
                    other => Err(other),
                };
            }
        };
        // From here on, dropping `server` removes the container.
        let mut server = DockerServer {
            docker: docker.clone(),
            container: Some(Box::new(container)),
            name,
            port,
            transport: spec.transport.clone(),
            running: true,
            paused: false,
            pid: None,
            pid_visible: false,
            data_dir: None,
        };
        server.wait_ready(index, spec.ready_timeout).await?;
        Ok(Some(server))
    }

    /// The server's socket on the container's network (its bridge address, port 6379): where
    /// the host's packets to it go, behind Docker's own proxy for the published port.
    pub(crate) async fn bridge_socket(&self, index: usize) -> Result<ServerSocket, HarnessError> {
        let container = self.container(index)?;
        let ip = api(
            index,
            "inspect container",
            container.get_bridge_ip_address(),
        )
        .await?;
        match ip {
            IpAddr::V4(addr) => Ok(ServerSocket {
                addr,
                port: CONTAINER_PORT_NUMBER,
            }),
            IpAddr::V6(_) => Err(HarnessError::NotRunning(index)),
        }
    }

    fn container(&self, index: usize) -> Result<&NodeContainer, HarnessError> {
        self.container
            .as_deref()
            .ok_or(HarnessError::NotRunning(index))
    }

    /// The server's host process id while running.
    pub(crate) fn pid(&mut self) -> Option<u32> {
        self.refresh_exited();
        if self.running { self.pid } else { None }
    }

    /// Whether the container runs (a paused one does).
    pub(crate) fn is_running(&mut self) -> bool {
        self.refresh_exited();
        self.running
    }

    /// Notices a server that exited by itself: its process is gone.
    fn refresh_exited(&mut self) {
        if !self.running {
            return;
        }
        if let Some(pid) = self.pid
            && self.pid_visible
            && !process_exists(pid)
        {
            warn!(container = %self.name, pid, "redis-server exited by itself");
            self.running = false;
            self.paused = false;
        }
    }

    /// `docker start` and wait until redis answers on the published port.
    pub(crate) async fn start(
        &mut self,
        index: usize,
        ready_timeout: Duration,
    ) -> Result<(), HarnessError> {
        let container = self.container(index)?;
        api(index, "start container", container.start()).await?;
        self.running = true;
        self.paused = false;
        self.wait_ready(index, ready_timeout).await
    }

    /// Waits until redis answers on the published port (or the container has stopped), then
    /// notes the server's process id.
    async fn wait_ready(
        &mut self,
        index: usize,
        ready_timeout: Duration,
    ) -> Result<(), HarnessError> {
        self.pid = None;
        let started = Instant::now();
        let mut backoff = ProbeBackoff::until(started + ready_timeout);
        loop {
            let container = self.container(index)?;
            if !api(index, "inspect container", container.is_running()).await? {
                let code = api(index, "inspect container", container.exit_code()).await?;
                self.running = false;
                return Err(HarnessError::Exited {
                    node: index,
                    status: format!(
                        "container {} stopped, exit code {}",
                        self.name,
                        code.unwrap_or_default()
                    ),
                    output: self.logs().await,
                });
            }
            let probed = probe(&self.transport, self.port);
            match tokio::time::timeout(2 * PROBE_TIMEOUT, probed).await {
                Ok(Ok(())) => {
                    self.pid = self.server_pid(index).await?;
                    self.pid_visible = self.pid.is_some_and(process_exists);
                    info!(node = index, container = %self.name, port = self.port, pid = ?self.pid, "container ready");
                    return Ok(());
                }
                Ok(Err(err)) => debug!(node = index, port = self.port, %err, "not ready yet"),
                Err(_) => debug!(node = index, port = self.port, "readiness probe timed out"),
            }
            if !backoff.wait().await {
                break;
            }
        }
        Err(HarnessError::NotReady {
            node: index,
            waited: started.elapsed(),
            output: self.logs().await,
        })
    }

    /// The server's host process id, as the engine reports it (testcontainers does not).
    async fn server_pid(&self, index: usize) -> Result<Option<u32>, HarnessError> {
        let id = self.container(index)?.id();
        let inspected = api(
            index,
            "inspect container",
            self.docker
                .inspect_container(id, None::<InspectContainerOptions>),
        )
        .await?;
        Ok(inspected
            .state
            .and_then(|state| state.pid)
            .and_then(|pid| u32::try_from(pid).ok())
            .filter(|&pid| pid != 0))
    }

    /// `docker kill` (SIGKILL) and wait until the container has stopped. Nothing if it is
    /// not running. Through the engine's own API: testcontainers can only stop a container,
    /// which lets redis see SIGTERM first and shut down cleanly, not the crash a kill is.
    pub(crate) async fn kill(&mut self, index: usize) -> Result<(), HarnessError> {
        if !self.is_running() {
            return Ok(());
        }
        let id = self.container(index)?.id().to_owned();
        info!(node = index, container = %self.name, "killing container");
        let options = KillContainerOptionsBuilder::new().signal("SIGKILL").build();
        match api(
            index,
            "kill container",
            self.docker.kill_container(&id, Some(options)),
        )
        .await
        {
            Ok(()) => {}
            // 409: not running (it exited meanwhile).
            Err(HarnessError::Docker { source, .. }) if status_of(source.as_ref()) == Some(409) => {
            }
            Err(err) => return Err(err),
        }
        self.wait_stopped(index).await
    }

    /// `docker stop` (SIGTERM, then SIGKILL after a grace period). Nothing if it is not
    /// running.
    pub(crate) async fn stop(&mut self, index: usize) -> Result<(), HarnessError> {
        if !self.is_running() {
            return Ok(());
        }
        info!(node = index, container = %self.name, "stopping container");
        let container = self.container(index)?;
        api(
            index,
            "stop container",
            container.stop_with_timeout(Some(STOP_GRACE_SECONDS)),
        )
        .await?;
        self.wait_stopped(index).await
    }

    async fn wait_stopped(&mut self, index: usize) -> Result<(), HarnessError> {
        let started = Instant::now();
        for _ in 0..MAX_STATE_POLLS {
            let container = self.container(index)?;
            if !api(index, "inspect container", container.is_running()).await? {
                self.running = false;
                self.paused = false;
                self.pid = None;
                return Ok(());
            }
            if started.elapsed() >= EXIT_TIMEOUT {
                break;
            }
            tokio::time::sleep(STATE_POLL).await;
        }
        Err(HarnessError::NotExited {
            node: index,
            waited: started.elapsed(),
        })
    }

    /// `docker pause`. Synchronous (the harness's `pause` is): the call runs on a helper
    /// thread and the caller waits for it, at most [`API_TIMEOUT`].
    pub(crate) fn pause(&mut self, index: usize) -> Result<(), HarnessError> {
        if !self.is_running() {
            return Err(HarnessError::NotRunning(index));
        }
        let container = self.container(index)?;
        blocking(index, "pause container", || container.pause())?;
        self.paused = true;
        info!(node = index, container = %self.name, "container paused");
        Ok(())
    }

    /// `docker unpause`, synchronous like [`pause`](Self::pause). Nothing if not paused.
    pub(crate) fn resume(&mut self, index: usize) -> Result<(), HarnessError> {
        if !self.is_running() {
            return Err(HarnessError::NotRunning(index));
        }
        if !self.paused {
            return Ok(());
        }
        let container = self.container(index)?;
        blocking(index, "unpause container", || container.unpause())?;
        self.paused = false;
        info!(node = index, container = %self.name, "container resumed");
        Ok(())
    }

    /// The last lines of the container's output (stdout, then stderr), for error messages.
    async fn logs(&self) -> String {
        let Some(container) = self.container.as_deref() else {
            return String::new();
        };
        let mut output = format!("--- docker logs {} ---\n", self.name);
        for (stream, mut reader) in [
            ("stdout", container.stdout(false)),
            ("stderr", container.stderr(false)),
        ] {
            let mut bytes = Vec::new();
            match tokio::time::timeout(Duration::from_secs(2), reader.read_to_end(&mut bytes)).await
            {
                Ok(Ok(_)) => {
                    let text = String::from_utf8_lossy(&bytes);
                    let lines: Vec<&str> = text.lines().collect();
                    for line in &lines[lines.len().saturating_sub(LOG_TAIL_LINES)..] {
                        let _ = writeln!(output, "{line}");
                    }
                }
                Ok(Err(err)) => {
                    let _ = writeln!(output, "(reading {stream} failed: {err})");
                }
                Err(_) => {
                    let _ = writeln!(output, "(reading {stream} timed out)");
                }
            }
        }
        output
    }

    /// Keeps `dir` (bind-mounted at `/data`) until the container is gone.
    pub(crate) fn keep_data_dir(&mut self, dir: tempfile::TempDir) {
        self.data_dir = Some(dir);
    }

    /// Takes the container for removal elsewhere; the server forgets it.
    pub(crate) fn take_for_removal(&mut self) -> Option<NodeContainer> {
        self.running = false;
        self.container.take().map(|container| *container)
    }
}

impl Drop for DockerServer {
    fn drop(&mut self) {
        if let Some(container) = self.take_for_removal() {
            remove_all_blocking(vec![container]);
        }
    }
}

/// PING on `127.0.0.1:port`, over plain TCP or TLS.
async fn probe(transport: &Transport, port: u16) -> redis::RedisResult<()> {
    let mut connection = transport.connect(port, PROBE_TIMEOUT).await?;
    let _: String = redis::cmd("PING").query_async(&mut connection).await?;
    Ok(())
}

/// Whether a process with this id exists (a zombie counts; so does one we may not signal).
fn process_exists(pid: u32) -> bool {
    let Ok(pid) = i32::try_from(pid) else {
        return false;
    };
    !matches!(
        nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), None),
        Err(nix::errno::Errno::ESRCH)
    )
}
