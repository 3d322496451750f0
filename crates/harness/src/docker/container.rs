//! One node's container through its life: created with its host port published on
//! 127.0.0.1, started and waited for until redis answers, killed, stopped, paused, resumed,
//! its logs read for errors, and removed when dropped. (Starting a cluster node as a container,
//! from the cluster's options and with port retries, is `node.rs`.)

use std::collections::HashMap;
use std::fmt::Write as _;
use std::net::Ipv4Addr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use bollard::Docker;
use bollard::container::LogOutput;
use bollard::models::{ContainerCreateBody, ContainerState, HostConfig, PortBinding};
use bollard::query_parameters::{
    CreateContainerOptionsBuilder, InspectContainerOptions, KillContainerOptionsBuilder,
    LogsOptionsBuilder, StopContainerOptionsBuilder,
};
use futures::StreamExt as _;
use tokio::time::Instant;
use tracing::{debug, info, warn};

use crate::docker::cleanup::{LABEL, remove, remove_all_blocking};
use crate::docker::engine::{api, blocking, is_port_conflict, status_of};
use crate::error::HarnessError;
use crate::netfilter::ServerSocket;
use crate::probe::{PROBE_TIMEOUT, ProbeBackoff};
use crate::transport::Transport;

/// The port redis listens on inside the container, and how Docker names it.
pub(crate) const CONTAINER_PORT_NUMBER: u16 = 6379;
const CONTAINER_PORT: &str = "6379/tcp";
/// How long `stop` lets redis shut down after SIGTERM before Docker uses SIGKILL.
const STOP_GRACE_SECONDS: i32 = 5;
/// How long to wait for a killed or stopped container to be reported as not running.
const EXIT_TIMEOUT: Duration = Duration::from_secs(10);
/// Poll interval while waiting for a container's state to change, and a bound on the polls
/// on top of the time bound.
const STATE_POLL: Duration = Duration::from_millis(20);
const MAX_STATE_POLLS: u32 = 1000;
/// How many log lines an error message quotes.
const LOG_TAIL_LINES: &str = "50";

/// Distinguishes the containers of one process.
static CONTAINER_SEQ: AtomicU64 = AtomicU64::new(0);

/// What a node's container is created with.
pub(crate) struct ContainerSpec<'a> {
    pub(crate) image: &'a str,
    /// Arguments after `redis-server`.
    pub(crate) args: Vec<String>,
    /// `NAME=value` pairs.
    pub(crate) env: Vec<String>,
    /// Bind mounts, `host:container[:ro]`.
    pub(crate) binds: Vec<String>,
    /// How the harness reaches the server (plain or TLS).
    pub(crate) transport: &'a Transport,
    pub(crate) ready_timeout: Duration,
}

/// One node's container. Dropping it removes the container.
#[derive(Debug)]
pub(crate) struct DockerServer {
    docker: Docker,
    /// Container id; `None` once removed.
    id: Option<String>,
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
        let mut cmd = vec!["redis-server".to_owned()];
        cmd.extend(spec.args.iter().cloned());
        let port_bindings = HashMap::from([(
            CONTAINER_PORT.to_owned(),
            Some(vec![PortBinding {
                host_ip: Some("127.0.0.1".to_owned()),
                host_port: Some(port.to_string()),
            }]),
        )]);
        let body = ContainerCreateBody {
            image: Some(spec.image.to_owned()),
            cmd: Some(cmd),
            env: Some(spec.env.clone()),
            exposed_ports: Some(vec![CONTAINER_PORT.to_owned()]),
            labels: Some(HashMap::from([
                (LABEL.to_owned(), "1".to_owned()),
                (format!("{LABEL}.node"), index.to_string()),
                (format!("{LABEL}.owner-pid"), std::process::id().to_string()),
            ])),
            host_config: Some(HostConfig {
                port_bindings: Some(port_bindings),
                binds: (!spec.binds.is_empty()).then(|| spec.binds.clone()),
                ..HostConfig::default()
            }),
            ..ContainerCreateBody::default()
        };
        let options = CreateContainerOptionsBuilder::new().name(&name).build();
        let created = api(
            index,
            "create container",
            docker.create_container(Some(options), body),
        )
        .await?;
        for warning in &created.warnings {
            warn!(node = index, %warning, "docker create");
        }
        // From here on, dropping `server` removes the container.
        let mut server = DockerServer {
            docker: docker.clone(),
            id: Some(created.id),
            name,
            port,
            transport: spec.transport.clone(),
            running: false,
            paused: false,
            pid: None,
            pid_visible: false,
            data_dir: None,
        };
        match server.start(index, spec.ready_timeout).await {
            Ok(()) => Ok(Some(server)),
            Err(HarnessError::Docker { source, .. }) if is_port_conflict(source.as_ref()) => {
                debug!(node = index, port, "host port taken, removing container");
                server.remove_now().await;
                Ok(None)
            }
            Err(err) => Err(err),
        }
    }

    /// The container's current state, as the engine reports it.
    async fn state(&self, index: usize, id: &str) -> Result<ContainerState, HarnessError> {
        Ok(api(
            index,
            "inspect container",
            self.docker
                .inspect_container(id, None::<InspectContainerOptions>),
        )
        .await?
        .state
        .unwrap_or_default())
    }

    /// The server's socket on the container's network (its bridge address, port 6379): where
    /// the host's packets to it go, behind Docker's own proxy for the published port.
    pub(crate) async fn bridge_socket(&self, index: usize) -> Result<ServerSocket, HarnessError> {
        let id = self.id(index)?;
        let inspected = api(
            index,
            "inspect container",
            self.docker
                .inspect_container(id, None::<InspectContainerOptions>),
        )
        .await?;
        let addr = inspected
            .network_settings
            .and_then(|settings| settings.networks)
            .into_iter()
            .flat_map(HashMap::into_values)
            .filter_map(|endpoint| endpoint.ip_address)
            .find_map(|ip| ip.parse::<Ipv4Addr>().ok())
            .ok_or(HarnessError::NotRunning(index))?;
        Ok(ServerSocket {
            addr,
            port: CONTAINER_PORT_NUMBER,
        })
    }

    fn id(&self, index: usize) -> Result<&str, HarnessError> {
        self.id.as_deref().ok_or(HarnessError::NotRunning(index))
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
        let id = self.id(index)?.to_owned();
        api(
            index,
            "start container",
            self.docker.start_container(&id, None),
        )
        .await?;
        self.running = true;
        self.paused = false;
        self.pid = None;
        let started = Instant::now();
        let mut backoff = ProbeBackoff::until(started + ready_timeout);
        loop {
            let state = self.state(index, &id).await?;
            if state.running != Some(true) {
                self.running = false;
                return Err(HarnessError::Exited {
                    node: index,
                    status: format!(
                        "container {} {}, exit code {}",
                        self.name,
                        state
                            .status
                            .map_or_else(|| "stopped".to_owned(), |s| s.to_string()),
                        state.exit_code.unwrap_or_default()
                    ),
                    output: self.logs().await,
                });
            }
            self.pid = state.pid.and_then(|pid| u32::try_from(pid).ok());
            let probed = probe(&self.transport, self.port);
            match tokio::time::timeout(2 * PROBE_TIMEOUT, probed).await {
                Ok(Ok(())) => {
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

    /// `docker kill` (SIGKILL) and wait until the container has stopped. Nothing if it is
    /// not running.
    pub(crate) async fn kill(&mut self, index: usize) -> Result<(), HarnessError> {
        if !self.is_running() {
            return Ok(());
        }
        let id = self.id(index)?.to_owned();
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
        let id = self.id(index)?.to_owned();
        info!(node = index, container = %self.name, "stopping container");
        let options = StopContainerOptionsBuilder::new()
            .t(STOP_GRACE_SECONDS)
            .build();
        api(
            index,
            "stop container",
            self.docker.stop_container(&id, Some(options)),
        )
        .await?;
        self.wait_stopped(index).await
    }

    async fn wait_stopped(&mut self, index: usize) -> Result<(), HarnessError> {
        let id = self.id(index)?.to_owned();
        let started = Instant::now();
        for _ in 0..MAX_STATE_POLLS {
            let state = self.state(index, &id).await?;
            if state.running != Some(true) {
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
    /// thread and the caller waits for it, at most
    /// [`API_TIMEOUT`](crate::docker::engine::API_TIMEOUT).
    pub(crate) fn pause(&mut self, index: usize) -> Result<(), HarnessError> {
        if !self.is_running() {
            return Err(HarnessError::NotRunning(index));
        }
        let id = self.id(index)?.to_owned();
        blocking(
            index,
            "pause container",
            self.docker.clone(),
            move |docker| async move { docker.pause_container(&id).await },
        )?;
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
        let id = self.id(index)?.to_owned();
        blocking(
            index,
            "unpause container",
            self.docker.clone(),
            move |docker| async move { docker.unpause_container(&id).await },
        )?;
        self.paused = false;
        info!(node = index, container = %self.name, "container resumed");
        Ok(())
    }

    /// The last lines of the container's output, for error messages.
    async fn logs(&self) -> String {
        let Some(id) = self.id.as_deref() else {
            return String::new();
        };
        let options = LogsOptionsBuilder::new()
            .stdout(true)
            .stderr(true)
            .tail(LOG_TAIL_LINES)
            .build();
        let mut stream = self.docker.logs(id, Some(options));
        let mut output = format!("--- docker logs {} ---\n", self.name);
        let collect = async {
            while let Some(chunk) = stream.next().await {
                match chunk {
                    Ok(
                        LogOutput::StdOut { message }
                        | LogOutput::StdErr { message }
                        | LogOutput::Console { message },
                    ) => output.push_str(&String::from_utf8_lossy(&message)),
                    Ok(LogOutput::StdIn { .. }) => {}
                    Err(err) => {
                        let _ = writeln!(output, "(reading logs failed: {err})");
                        break;
                    }
                }
            }
        };
        if tokio::time::timeout(Duration::from_secs(2), collect)
            .await
            .is_err()
        {
            output.push_str("(reading logs timed out)\n");
        }
        output
    }

    /// Removes the container now (async), instead of on drop.
    async fn remove_now(&mut self) {
        if let Some(id) = self.id.take() {
            remove(&self.docker, &id).await;
        }
    }

    /// Keeps `dir` (bind-mounted at `/data`) until the container is gone.
    pub(crate) fn keep_data_dir(&mut self, dir: tempfile::TempDir) {
        self.data_dir = Some(dir);
    }

    /// Takes the container id for removal elsewhere; the server forgets the container.
    pub(crate) fn take_for_removal(&mut self) -> Option<(Docker, String)> {
        self.running = false;
        self.id.take().map(|id| (self.docker.clone(), id))
    }
}

impl Drop for DockerServer {
    fn drop(&mut self) {
        if let Some(removal) = self.take_for_removal() {
            remove_all_blocking(vec![removal]);
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
