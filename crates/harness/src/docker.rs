//! The container backend of [`TestCluster`](crate::TestCluster): each node is a Docker
//! container running `redis-server`, published on `127.0.0.1` only.
//!
//! Select it with [`ClusterOptions::backend`](crate::ClusterOptions::backend)`(`[`Backend::Docker`](crate::Backend::Docker)`)`
//! (or `QUORUMLOCK_BACKEND=docker` and [`Backend::from_env`](crate::Backend::from_env)); it needs the `docker` cargo feature
//! and a reachable Docker engine. Everything else about the cluster stays the same: the same
//! [`TestCluster`](crate::TestCluster) methods, the same URLs (`redis://127.0.0.1:<port>`), the
//! same [`FaultProxy`](crate::FaultProxy)s when proxies are on.
//!
//! # The image
//!
//! Nodes run the image named by `QUORUMLOCK_REDIS_IMAGE` ([`IMAGE_ENV`]), by default
//! `quorumlock-redis:local` ([`DEFAULT_IMAGE`]). Nothing is ever pulled: build the default image
//! from the installed `redis-server` with `scripts/redis-image.sh` (a `FROM scratch` image of
//! the binary, its shared libraries and libfaketime, about 18 MB, built in about a second). Any
//! image with `redis-server` on its `PATH` works (the official `redis:7` images do), except
//! that [`ClusterOptions::clock_rate`](crate::ClusterOptions::clock_rate) needs libfaketime at
//! [`LIBFAKETIME_IN_IMAGE`]. [`check_available`] tells whether the engine answers and the
//! image is there, so a test can skip with a reason instead of failing.
//!
//! # How node faults map to Docker
//!
//! | harness | Docker |
//! | --- | --- |
//! | [`kill`](crate::TestCluster::kill) | `docker kill` (SIGKILL), then waits until the container has stopped |
//! | [`stop`](crate::TestCluster::stop) | `docker stop -t 5` (SIGTERM, SIGKILL after 5 s) |
//! | [`start_node`](crate::TestCluster::start_node) | `docker start` of the same container, same published port |
//! | [`pause`](crate::TestCluster::pause) / [`resume`](crate::TestCluster::resume) | `docker pause` / `docker unpause` (cgroup freezer) |
//! | [`pid`](crate::TestCluster::pid) | the server's host process id, as the engine reports it |
//!
//! A node's container lives as long as the cluster: a restart stops and starts the same
//! container, so with [`Persistence::AofAlways`](crate::Persistence::AofAlways) its data (kept in
//! the container's `/data`) survives, and with [`Persistence::None`](crate::Persistence::None) it
//! does not. Each node's host port is chosen by the harness (a free loopback port) and mapped
//! explicitly, `127.0.0.1:<port> -> 6379/tcp`, so it stays the same across restarts; the
//! container's bridge address is never used.
//!
//! # Cleanup
//!
//! Containers are created with the label `org.quorumlock.harness=1` ([`LABEL`]) and removed
//! (`docker rm -f`, with their anonymous volumes) when the cluster is dropped, also while a
//! failing test unwinds and outside any runtime: removal runs on a helper thread with its own
//! runtime, bounded by a timeout. A process that is killed outright cannot clean up; remove
//! such leftovers with `docker rm -f $(docker ps -aq --filter label=org.quorumlock.harness=1)`.
//!
//! # Engine API version
//!
//! The client negotiates the API version with the engine, so old engines work (Docker 20.10
//! speaks API 1.41 at most). This is why the backend talks to the engine with `bollard`
//! directly rather than through `testcontainers`, whose client always asks for API 1.53 and is
//! refused by such engines.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use bollard::Docker;
use bollard::container::LogOutput;
use bollard::models::{ContainerCreateBody, ContainerState, HostConfig, PortBinding};
use bollard::query_parameters::{
    CreateContainerOptionsBuilder, InspectContainerOptions, KillContainerOptionsBuilder,
    LogsOptionsBuilder, RemoveContainerOptionsBuilder, StopContainerOptionsBuilder,
};
use futures::StreamExt as _;
use tokio::time::Instant;
use tracing::{debug, info, warn};

use crate::error::HarnessError;
use crate::probe::{PROBE_TIMEOUT, ProbeBackoff};

/// Environment variable naming the image the docker backend runs.
pub const IMAGE_ENV: &str = "QUORUMLOCK_REDIS_IMAGE";
/// The image used when [`IMAGE_ENV`] is unset: what `scripts/redis-image.sh` builds.
pub const DEFAULT_IMAGE: &str = "quorumlock-redis:local";
/// Where images built by `scripts/redis-image.sh` keep libfaketime.
pub const LIBFAKETIME_IN_IMAGE: &str = "/usr/lib/faketime/libfaketime.so.1";
/// Label put on every container the harness creates (value `1`).
pub const LABEL: &str = "org.quorumlock.harness";

/// The port redis listens on inside the container.
const CONTAINER_PORT: &str = "6379/tcp";
/// Bound on one Engine API call made by the harness.
const API_TIMEOUT: Duration = Duration::from_secs(30);
/// Bound on connecting to the engine and negotiating the API version.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
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

/// The image to run: `QUORUMLOCK_REDIS_IMAGE` if set and not empty, else [`DEFAULT_IMAGE`].
#[must_use]
pub fn image() -> String {
    std::env::var(IMAGE_ENV)
        .ok()
        .filter(|image| !image.trim().is_empty())
        .unwrap_or_else(|| DEFAULT_IMAGE.to_owned())
}

/// Checks that the Docker engine answers and that `image` exists locally.
///
/// # Errors
///
/// [`HarnessError::DockerUnavailable`] if the engine cannot be reached (no socket, daemon
/// down, permission denied), [`HarnessError::ImageMissing`] if it has no image called
/// `image` (build it with `scripts/redis-image.sh`).
pub async fn check_available(image: &str) -> Result<(), HarnessError> {
    let docker = connect().await?;
    ensure_image(&docker, image).await
}

/// A client for the engine named by `DOCKER_HOST` (default: the local socket), speaking the
/// newest API version both sides know.
pub(crate) async fn connect() -> Result<Docker, HarnessError> {
    let unavailable = |reason: String| HarnessError::DockerUnavailable { reason };
    let docker = Docker::connect_with_defaults().map_err(|err| unavailable(err.to_string()))?;
    match tokio::time::timeout(CONNECT_TIMEOUT, docker.negotiate_version()).await {
        Ok(Ok(docker)) => Ok(docker),
        Ok(Err(err)) => Err(unavailable(err.to_string())),
        Err(_) => Err(unavailable(format!(
            "no answer from the engine within {CONNECT_TIMEOUT:?}"
        ))),
    }
}

async fn ensure_image(docker: &Docker, image: &str) -> Result<(), HarnessError> {
    match tokio::time::timeout(API_TIMEOUT, docker.inspect_image(image)).await {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(bollard::errors::Error::DockerResponseServerError {
            status_code: 404, ..
        })) => Err(HarnessError::ImageMissing {
            image: image.to_owned(),
        }),
        Ok(Err(err)) => Err(HarnessError::DockerUnavailable {
            reason: err.to_string(),
        }),
        Err(_) => Err(HarnessError::DockerUnavailable {
            reason: format!("inspecting image {image} took longer than {API_TIMEOUT:?}"),
        }),
    }
}

/// What a node's container is created with.
pub(crate) struct ContainerSpec<'a> {
    pub(crate) image: &'a str,
    /// Arguments after `redis-server`.
    pub(crate) args: Vec<String>,
    /// `NAME=value` pairs.
    pub(crate) env: Vec<String>,
    pub(crate) ready_timeout: Duration,
}

/// How creating and starting a container on a given host port ended, short of an error.
pub(crate) enum Created {
    Ready(DockerServer),
    /// The host port was taken; the container has been removed again.
    PortTaken,
}

/// One node's container. Dropping it removes the container.
#[derive(Debug)]
pub(crate) struct DockerServer {
    docker: Docker,
    /// Container id; `None` once removed.
    id: Option<String>,
    name: String,
    port: u16,
    running: bool,
    paused: bool,
    pid: Option<u32>,
    /// Whether the engine's process ids name processes here (not so when the engine runs in
    /// a VM or elsewhere); only then can a server that exited by itself be noticed from `pid`.
    pid_visible: bool,
}

impl DockerServer {
    /// Creates node `index`'s container publishing `127.0.0.1:port`, starts it and waits
    /// until redis answers on the port.
    pub(crate) async fn create(
        docker: &Docker,
        index: usize,
        port: u16,
        spec: &ContainerSpec<'_>,
    ) -> Result<Created, HarnessError> {
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
            running: false,
            paused: false,
            pid: None,
            pid_visible: false,
        };
        match server.start(index, spec.ready_timeout).await {
            Ok(()) => Ok(Created::Ready(server)),
            Err(HarnessError::Docker { source, .. }) if is_port_conflict(source.as_ref()) => {
                debug!(node = index, port, "host port taken, removing container");
                server.remove_now().await;
                Ok(Created::PortTaken)
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
            match tokio::time::timeout(2 * PROBE_TIMEOUT, probe(self.port)).await {
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
    /// thread and the caller waits for it, at most [`API_TIMEOUT`].
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

async fn remove(docker: &Docker, id: &str) {
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

/// Runs one Engine API call to completion from synchronous code: on a helper thread with its
/// own runtime (so it works inside a current-thread runtime too), waiting at most
/// [`API_TIMEOUT`].
fn blocking<F, Fut>(
    index: usize,
    action: &'static str,
    docker: Docker,
    call: F,
) -> Result<(), HarnessError>
where
    F: FnOnce(Docker) -> Fut + Send + 'static,
    Fut: Future<Output = Result<(), bollard::errors::Error>>,
{
    let (result_tx, result_rx) = std::sync::mpsc::channel();
    std::thread::Builder::new()
        .name("quorumlock-docker-call".into())
        .spawn(move || {
            let result = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .map_err(|err| Box::new(err) as BoxError)
                .and_then(|runtime| {
                    runtime
                        .block_on(async { tokio::time::timeout(API_TIMEOUT, call(docker)).await })
                        .map_err(|elapsed| Box::new(elapsed) as BoxError)
                        .and_then(|result| result.map_err(|err| Box::new(err) as BoxError))
                });
            let _ = result_tx.send(result);
        })?;
    match result_rx.recv_timeout(API_TIMEOUT + Duration::from_secs(1)) {
        Ok(Ok(())) => Ok(()),
        Ok(Err(source)) => Err(HarnessError::Docker {
            node: index,
            action,
            source,
        }),
        Err(_) => Err(HarnessError::Docker {
            node: index,
            action,
            source: format!("no result within {API_TIMEOUT:?}").into(),
        }),
    }
}

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// One Engine API call for node `index`, bounded by [`API_TIMEOUT`].
async fn api<T>(
    index: usize,
    action: &'static str,
    call: impl Future<Output = Result<T, bollard::errors::Error>>,
) -> Result<T, HarnessError> {
    match tokio::time::timeout(API_TIMEOUT, call).await {
        Ok(Ok(value)) => Ok(value),
        Ok(Err(source)) => Err(HarnessError::Docker {
            node: index,
            action,
            source: Box::new(source),
        }),
        Err(elapsed) => Err(HarnessError::Docker {
            node: index,
            action,
            source: Box::new(elapsed),
        }),
    }
}

fn status_of(error: &(dyn std::error::Error + Send + Sync + 'static)) -> Option<u16> {
    match error.downcast_ref::<bollard::errors::Error>() {
        Some(bollard::errors::Error::DockerResponseServerError { status_code, .. }) => {
            Some(*status_code)
        }
        _ => None,
    }
}

/// Whether a harness error is Docker refusing to start a container because its host port is
/// taken.
pub(crate) fn is_port_conflict_error(error: &HarnessError) -> bool {
    matches!(error, HarnessError::Docker { source, .. } if is_port_conflict(source.as_ref()))
}

/// Whether starting a container failed because its host port is taken.
fn is_port_conflict(error: &(dyn std::error::Error + Send + Sync + 'static)) -> bool {
    let message = error.to_string();
    message.contains("port is already allocated") || message.contains("address already in use")
}

/// PING on `127.0.0.1:port`.
async fn probe(port: u16) -> redis::RedisResult<()> {
    let mut connection = crate::probe::connect(port, PROBE_TIMEOUT).await?;
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
