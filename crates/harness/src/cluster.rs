//! N independent `redis-server` masters on loopback ports, as processes or (feature `docker`)
//! containers, with node-level fault injection (kill, stop, restart, pause, resume, flush) and
//! per-node persistence and clock rate.

use std::fmt::Write as _;
use std::fs::OpenOptions;
use std::io::{Read, Seek, SeekFrom};
use std::net::{Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use nix::errno::Errno;
use nix::sys::signal::{self, Signal};
use nix::unistd::Pid;
use redis::aio::MultiplexedConnection;
use tempfile::TempDir;
use tokio::process::{Child, Command};
use tokio::time::Instant;
use tracing::{debug, info, warn};

use crate::backend::Backend;
use crate::error::HarnessError;
use crate::faketime::find_libfaketime;
use crate::options::ClusterOptions;
use crate::port::{
    FRESH_PORT_ATTEMPTS, SAME_PORT_ATTEMPTS, SAME_PORT_RETRY_DELAY, free_port, redis_url,
};
use crate::probe::{PROBE_TIMEOUT, ProbeBackoff, connect};
use crate::proxy::FaultProxy;

/// Server log, inside the node's directory.
const LOG_FILE: &str = "redis.log";
/// Server stdout and stderr (config errors are printed there, not logged).
const CONSOLE_FILE: &str = "redis.console";
/// How much of the log and console output an error message carries.
const OUTPUT_TAIL_BYTES: u64 = 4096;

/// How long `stop` lets redis shut down after SIGTERM before using SIGKILL.
const STOP_GRACE: Duration = Duration::from_secs(5);
/// How long to wait for a process killed with SIGKILL to be reaped.
const REAP_TIMEOUT: Duration = Duration::from_secs(2);
/// Poll interval, and poll count bound, for reaping in `Drop` (which cannot await).
const REAP_POLL_INTERVAL: Duration = Duration::from_millis(2);
const REAP_POLLS: u32 = 1000;

/// Connect and response timeout of [`TestCluster::connection`].
const INSPECTION_TIMEOUT: Duration = Duration::from_secs(1);

/// N independent `redis-server` masters on 127.0.0.1, for tests.
///
/// Each node is a `redis-server` process in its own temporary directory (the
/// default, [`Backend::Process`]) or a Docker container ([`Backend::Docker`],
/// cargo feature `docker`), reached on `127.0.0.1:<port>` either way. Every
/// method works the same on both backends. Nodes keep nothing across restarts
/// unless [`ClusterOptions::persistence`] says otherwise. Nodes are addressed
/// by their 0-based index; an index out of range gives
/// [`HarnessError::NoSuchNode`].
///
/// Dropping the cluster resumes paused nodes, SIGKILLs every process it
/// started, reaps them, removes its containers, stops the proxies and deletes
/// the directories. This also happens while a failing test unwinds, and the
/// waits involved are bounded (a few seconds at worst).
///
/// The cluster must be started and used on a Tokio runtime with I/O and time
/// enabled.
#[derive(Debug)]
pub struct TestCluster {
    nodes: Vec<Node>,
    options: ClusterOptions,
}

impl TestCluster {
    /// Starts the nodes (and proxies) described by `options`, and returns once
    /// every node answers.
    ///
    /// # Errors
    ///
    /// [`HarnessError::Spawn`] if `redis-server` cannot be run,
    /// [`HarnessError::Exited`] if it exits during startup (e.g. a bad extra
    /// argument), [`HarnessError::NotReady`] if it does not answer within the
    /// ready timeout. [`HarnessError::InvalidClockRate`] or
    /// [`HarnessError::NoSuchNode`] for a bad [`ClusterOptions::clock_rate`],
    /// [`HarnessError::LibfaketimeNotFound`] if a clock rate is set and
    /// libfaketime is missing. On the docker backend also
    /// [`HarnessError::DockerUnavailable`], [`HarnessError::ImageMissing`] and
    /// [`HarnessError::Docker`]; [`HarnessError::BackendNotCompiled`] if the
    /// `docker` feature is off. Nodes already started are killed (containers
    /// removed) before returning.
    pub async fn start(options: ClusterOptions) -> Result<TestCluster, HarnessError> {
        tokio::runtime::Handle::try_current().map_err(|_| HarnessError::NoRuntime)?;
        options.validate()?;
        let backend = BackendContext::prepare(&options).await?;
        let starts = (0..options.nodes).map(|index| start_new_node(&options, &backend, index));
        // On failure the nodes that did start are dropped, which kills them.
        let nodes = futures::future::try_join_all(starts).await?;
        info!(
            backend = ?options.backend,
            ports = ?nodes.iter().map(|node| node.port).collect::<Vec<_>>(),
            proxies = options.proxies,
            "test cluster started"
        );
        Ok(TestCluster { nodes, options })
    }

    /// Starts `nodes` nodes with otherwise default options.
    pub async fn with_nodes(nodes: usize) -> Result<TestCluster, HarnessError> {
        TestCluster::start(ClusterOptions::default().nodes(nodes)).await
    }

    /// Number of nodes.
    #[must_use]
    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    /// Whether the cluster has no nodes.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    /// The backend the nodes run on.
    #[must_use]
    pub fn backend(&self) -> Backend {
        self.options.backend
    }

    /// The URL of every node, in index order, for the code under test: the
    /// proxy's when proxies are on, otherwise the server's.
    #[must_use]
    pub fn urls(&self) -> Vec<String> {
        self.nodes
            .iter()
            .map(|node| match &node.proxy {
                Some(proxy) => proxy.url(),
                None => redis_url(node.port),
            })
            .collect()
    }

    /// The URL of node `index`'s `redis-server` itself, bypassing any proxy.
    pub fn direct_url(&self, index: usize) -> Result<String, HarnessError> {
        Ok(redis_url(self.node(index)?.port))
    }

    /// The port node `index`'s `redis-server` listens on (it keeps it across
    /// restarts). On the docker backend: the port published on 127.0.0.1.
    pub fn port(&self, index: usize) -> Result<u16, HarnessError> {
        Ok(self.node(index)?.port)
    }

    /// The proxy in front of node `index`; `None` if proxies are off or the
    /// index is out of range.
    #[must_use]
    pub fn proxy(&self, index: usize) -> Option<&FaultProxy> {
        self.nodes.get(index)?.proxy.as_ref()
    }

    /// The process id of node `index`'s `redis-server`, or `None` if it is not
    /// running (killed, stopped, or exited by itself). On the docker backend:
    /// the server's host process id as the engine reports it.
    pub fn pid(&mut self, index: usize) -> Result<Option<u32>, HarnessError> {
        match &mut self.node_mut(index)?.server {
            Server::Process(server) => {
                server.reap_if_exited()?;
                Ok(server.process.as_ref().map(|process| process.pid))
            }
            #[cfg(feature = "docker")]
            Server::Docker(server) => Ok(server.pid()),
        }
    }

    /// Whether node `index`'s server is alive; a paused node counts as running.
    pub fn is_running(&mut self, index: usize) -> Result<bool, HarnessError> {
        match &mut self.node_mut(index)?.server {
            Server::Process(server) => {
                server.reap_if_exited()?;
                Ok(server.process.is_some())
            }
            #[cfg(feature = "docker")]
            Server::Docker(server) => Ok(server.is_running()),
        }
    }

    /// Kills node `index` with SIGKILL (no shutdown, no goodbye to clients) and
    /// reaps it (docker: `docker kill`). Its data is lost unless persisted
    /// ([`Persistence::AofAlways`](crate::Persistence::AofAlways)). Does nothing if the node is
    /// not running.
    pub async fn kill(&mut self, index: usize) -> Result<(), HarnessError> {
        match &mut self.node_mut(index)?.server {
            Server::Process(server) => {
                if let Some(mut process) = server.process.take() {
                    info!(node = index, pid = process.pid, "killing node");
                    process.kill(index).await?;
                }
                Ok(())
            }
            #[cfg(feature = "docker")]
            Server::Docker(server) => server.kill(index).await,
        }
    }

    /// Stops node `index` gracefully with SIGTERM (redis closes its clients),
    /// falling back to SIGKILL if it has not exited after a few seconds
    /// (docker: `docker stop`). Does nothing if the node is not running.
    pub async fn stop(&mut self, index: usize) -> Result<(), HarnessError> {
        match &mut self.node_mut(index)?.server {
            Server::Process(server) => {
                if let Some(mut process) = server.process.take() {
                    info!(node = index, pid = process.pid, "stopping node");
                    process.terminate(index).await?;
                }
                Ok(())
            }
            #[cfg(feature = "docker")]
            Server::Docker(server) => server.stop(index).await,
        }
    }

    /// Starts node `index` again, on the same port and in the same directory
    /// (docker: the same container), and waits until it answers. It comes back
    /// empty with [`Persistence::None`](crate::Persistence::None), with its data with
    /// [`Persistence::AofAlways`](crate::Persistence::AofAlways).
    ///
    /// Fails with [`HarnessError::AlreadyRunning`] if it is running, and with
    /// [`HarnessError::PortUnavailable`] if another socket holds its port for
    /// longer than a couple of seconds.
    ///
    /// (Named `start_node` because [`TestCluster::start`] starts the cluster.)
    pub async fn start_node(&mut self, index: usize) -> Result<(), HarnessError> {
        let options = &self.options;
        let node = self
            .nodes
            .get_mut(index)
            .ok_or(HarnessError::NoSuchNode(index))?;
        let port = node.port;
        match &mut node.server {
            Server::Process(server) => {
                server.reap_if_exited()?;
                if server.process.is_some() {
                    return Err(HarnessError::AlreadyRunning(index));
                }
                for attempt in 1..=SAME_PORT_ATTEMPTS {
                    match launch(options, index, port, server.dir.path(), &server.env).await? {
                        Launch::Ready(process) => {
                            info!(node = index, pid = process.pid, port, "node started");
                            server.process = Some(process);
                            return Ok(());
                        }
                        Launch::PortTaken => {
                            debug!(node = index, port, attempt, "port busy, retrying");
                            tokio::time::sleep(SAME_PORT_RETRY_DELAY).await;
                        }
                    }
                }
                Err(HarnessError::PortUnavailable {
                    node: index,
                    port,
                    attempts: SAME_PORT_ATTEMPTS,
                })
            }
            #[cfg(feature = "docker")]
            Server::Docker(server) => {
                if server.is_running() {
                    return Err(HarnessError::AlreadyRunning(index));
                }
                for attempt in 1..=SAME_PORT_ATTEMPTS {
                    match server.start(index, options.ready_timeout).await {
                        Err(err) if crate::docker::is_port_conflict_error(&err) => {
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
    }

    /// [`stop`](Self::stop) then [`start_node`](Self::start_node).
    pub async fn restart(&mut self, index: usize) -> Result<(), HarnessError> {
        self.stop(index).await?;
        self.start_node(index).await
    }

    /// Freezes node `index` with SIGSTOP (docker: `docker pause`): its sockets
    /// stay open and the kernel keeps accepting and queueing requests, but
    /// nothing is answered until [`resume`](Self::resume). On the docker
    /// backend this waits for the engine's answer (milliseconds; at most 30 s).
    pub fn pause(&mut self, index: usize) -> Result<(), HarnessError> {
        match &mut self.node_mut(index)?.server {
            Server::Process(server) => {
                let process = server.running_mut(index)?;
                process.signal(index, Signal::SIGSTOP)?;
                process.paused = true;
                info!(node = index, pid = process.pid, "node paused");
                Ok(())
            }
            #[cfg(feature = "docker")]
            Server::Docker(server) => server.pause(index),
        }
    }

    /// Lets a paused node `index` run again (SIGCONT; docker: `docker
    /// unpause`); it then answers the requests queued meanwhile.
    pub fn resume(&mut self, index: usize) -> Result<(), HarnessError> {
        match &mut self.node_mut(index)?.server {
            Server::Process(server) => {
                let process = server.running_mut(index)?;
                process.signal(index, Signal::SIGCONT)?;
                process.paused = false;
                info!(node = index, pid = process.pid, "node resumed");
                Ok(())
            }
            #[cfg(feature = "docker")]
            Server::Docker(server) => server.resume(index),
        }
    }

    /// Deletes every key on node `index` (FLUSHALL over a direct connection).
    pub async fn flush(&mut self, index: usize) -> Result<(), HarnessError> {
        if !self.is_running(index)? {
            return Err(HarnessError::NotRunning(index));
        }
        let mut connection = self.connection(index).await?;
        let () = redis::cmd("FLUSHALL").query_async(&mut connection).await?;
        Ok(())
    }

    /// A new connection straight to node `index`'s server (bypassing any
    /// proxy), for inspecting it from a test (GET, DBSIZE, ...). Connecting and
    /// each response time out after one second; change the latter with
    /// [`MultiplexedConnection::set_response_timeout`].
    pub async fn connection(&self, index: usize) -> Result<MultiplexedConnection, HarnessError> {
        let node = self.node(index)?;
        Ok(connect(node.port, INSPECTION_TIMEOUT).await?)
    }

    fn node(&self, index: usize) -> Result<&Node, HarnessError> {
        self.nodes.get(index).ok_or(HarnessError::NoSuchNode(index))
    }

    fn node_mut(&mut self, index: usize) -> Result<&mut Node, HarnessError> {
        self.nodes
            .get_mut(index)
            .ok_or(HarnessError::NoSuchNode(index))
    }
}

impl Drop for TestCluster {
    fn drop(&mut self) {
        // Containers are removed all at once rather than one after another as the
        // nodes drop; processes are killed by their own `Drop`.
        #[cfg(feature = "docker")]
        crate::docker::remove_all_blocking(
            self.nodes
                .iter_mut()
                .filter_map(|node| match &mut node.server {
                    Server::Docker(server) => server.take_for_removal(),
                    Server::Process(_) => None,
                })
                .collect(),
        );
    }
}

/// What starting a node needs beyond the options, prepared once per cluster.
enum BackendContext {
    /// libfaketime's path, if any node has a clock rate.
    Process { libfaketime: Option<PathBuf> },
    #[cfg(feature = "docker")]
    Docker {
        docker: bollard::Docker,
        image: String,
    },
}

impl BackendContext {
    async fn prepare(options: &ClusterOptions) -> Result<BackendContext, HarnessError> {
        match options.backend {
            Backend::Process => Ok(BackendContext::Process {
                libfaketime: if options.clock_rates.is_empty() {
                    None
                } else {
                    Some(find_libfaketime()?)
                },
            }),
            #[cfg(feature = "docker")]
            Backend::Docker => {
                let image = crate::docker::image();
                let docker = crate::docker::connect().await?;
                crate::docker::check_available(&image).await?;
                Ok(BackendContext::Docker { docker, image })
            }
            #[cfg(not(feature = "docker"))]
            Backend::Docker => Err(HarnessError::BackendNotCompiled(Backend::Docker)),
        }
    }
}

/// One node: its fixed port, its server and its proxy.
#[derive(Debug)]
struct Node {
    port: u16,
    // Field order matters for drop: the server goes before the proxy in front of it.
    server: Server,
    proxy: Option<FaultProxy>,
}

/// A node's server, by backend.
#[derive(Debug)]
enum Server {
    Process(ProcessServer),
    #[cfg(feature = "docker")]
    Docker(crate::docker::DockerServer),
}

/// A `redis-server` process node: its directory and environment, and its process while
/// running.
#[derive(Debug)]
struct ProcessServer {
    // Field order matters for drop: the process is killed and reaped before
    // its working directory is deleted.
    process: Option<RedisProcess>,
    /// Extra environment (libfaketime), the same at every start.
    env: Vec<(String, String)>,
    dir: TempDir,
}

impl ProcessServer {
    /// Forgets the process if it exited on its own (after reaping it).
    fn reap_if_exited(&mut self) -> Result<(), HarnessError> {
        if let Some(process) = &mut self.process
            && let Some(status) = process.child.try_wait()?
        {
            warn!(pid = process.pid, %status, "redis-server exited by itself");
            self.process = None;
        }
        Ok(())
    }

    fn running_mut(&mut self, index: usize) -> Result<&mut RedisProcess, HarnessError> {
        self.reap_if_exited()?;
        self.process.as_mut().ok_or(HarnessError::NotRunning(index))
    }
}

/// Starts node `index` for a new cluster: a free port (a few tries, as the port can be taken
/// between finding it and the server binding it), the server, and the proxy if asked for.
async fn start_new_node(
    options: &ClusterOptions,
    backend: &BackendContext,
    index: usize,
) -> Result<Node, HarnessError> {
    let (server, port) = match backend {
        BackendContext::Process { libfaketime } => {
            start_new_process(options, libfaketime.as_deref(), index).await?
        }
        #[cfg(feature = "docker")]
        BackendContext::Docker { docker, image } => {
            start_new_container(options, docker, image, index).await?
        }
    };
    let proxy = if options.proxies {
        let upstream = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
        Some(FaultProxy::start(upstream).await?)
    } else {
        None
    };
    Ok(Node {
        port,
        server,
        proxy,
    })
}

async fn start_new_process(
    options: &ClusterOptions,
    libfaketime: Option<&Path>,
    index: usize,
) -> Result<(Server, u16), HarnessError> {
    let dir = tempfile::Builder::new()
        .prefix(&format!("quorumlock-node{index}-"))
        .tempdir()?;
    let env: Vec<(String, String)> = libfaketime
        .and_then(|path| options.clock_env(index, path))
        .map(Vec::from)
        .unwrap_or_default();
    let mut port = 0;
    for attempt in 1..=FRESH_PORT_ATTEMPTS {
        port = free_port()?;
        match launch(options, index, port, dir.path(), &env).await? {
            Launch::Ready(process) => {
                debug!(node = index, pid = process.pid, port, "node started");
                let server = ProcessServer {
                    process: Some(process),
                    env,
                    dir,
                };
                return Ok((Server::Process(server), port));
            }
            Launch::PortTaken => debug!(node = index, port, attempt, "port taken, trying another"),
        }
    }
    Err(HarnessError::PortUnavailable {
        node: index,
        port,
        attempts: FRESH_PORT_ATTEMPTS,
    })
}

#[cfg(feature = "docker")]
async fn start_new_container(
    options: &ClusterOptions,
    docker: &bollard::Docker,
    image: &str,
    index: usize,
) -> Result<(Server, u16), HarnessError> {
    use crate::docker::{ContainerSpec, Created, DockerServer, LIBFAKETIME_IN_IMAGE};

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
            Created::Ready(server) => return Ok((Server::Docker(server), port)),
            Created::PortTaken => debug!(node = index, port, attempt, "port taken, trying another"),
        }
    }
    Err(HarnessError::PortUnavailable {
        node: index,
        port,
        attempts: FRESH_PORT_ATTEMPTS,
    })
}

/// How one attempt to start a server ended, short of an error.
enum Launch {
    Ready(RedisProcess),
    /// Something else holds the port; the attempt's process is gone.
    PortTaken,
}

/// Starts one `redis-server` on `port` in `dir` and waits until it answers.
async fn launch(
    options: &ClusterOptions,
    index: usize,
    port: u16,
    dir: &Path,
    env: &[(String, String)],
) -> Result<Launch, HarnessError> {
    // The log files are appended to across restarts; only this attempt's part
    // is relevant to its errors.
    let output_start = OutputStart::of(dir);
    let mut process = spawn_server(options, index, port, dir, env)?;
    let started = Instant::now();
    let mut backoff = ProbeBackoff::until(started + options.ready_timeout);
    loop {
        if let Some(status) = process.child.try_wait()? {
            let output = output_start.read_since(dir);
            if output.contains("Address already in use") {
                return Ok(Launch::PortTaken);
            }
            return Err(HarnessError::Exited {
                node: index,
                status: status.to_string(),
                output,
            });
        }
        match tokio::time::timeout(2 * PROBE_TIMEOUT, probe_server_pid(port)).await {
            Ok(Ok(Some(pid))) if pid == process.pid => return Ok(Launch::Ready(process)),
            Ok(Ok(other)) => {
                // Another server answered on the port: ours cannot have bound
                // it. Dropping `process` kills it.
                debug!(
                    node = index,
                    port,
                    ?other,
                    "port answered by another server"
                );
                return Ok(Launch::PortTaken);
            }
            Ok(Err(err)) => debug!(node = index, port, %err, "not ready yet"),
            Err(_) => debug!(node = index, port, "readiness probe timed out"),
        }
        if !backoff.wait().await {
            break;
        }
    }
    Err(HarnessError::NotReady {
        node: index,
        waited: started.elapsed(),
        output: output_start.read_since(dir),
    })
}

/// Asks the server on `port` for its process id (`INFO server`), which tells
/// our server apart from anything else that might answer on the port.
async fn probe_server_pid(port: u16) -> redis::RedisResult<Option<u32>> {
    let mut connection = connect(port, PROBE_TIMEOUT).await?;
    let info: String = redis::cmd("INFO")
        .arg("server")
        .query_async(&mut connection)
        .await?;
    Ok(info.lines().find_map(|line| {
        line.strip_prefix("process_id:")
            .and_then(|pid| pid.trim().parse().ok())
    }))
}

fn spawn_server(
    options: &ClusterOptions,
    index: usize,
    port: u16,
    dir: &Path,
    env: &[(String, String)],
) -> Result<RedisProcess, HarnessError> {
    let spawn_error = |source| HarnessError::Spawn {
        node: index,
        program: options.redis_server.clone(),
        source,
    };
    let console = OpenOptions::new()
        .create(true)
        .append(true)
        .open(dir.join(CONSOLE_FILE))?;
    let console_err = console.try_clone()?;
    let mut command = Command::new(&options.redis_server);
    command
        .arg("--port")
        .arg(port.to_string())
        .args(["--bind", "127.0.0.1"])
        .args(options.persistence_args())
        .args(["--protected-mode", "no"])
        .args(["--daemonize", "no"])
        .args(["--enable-debug-command", "local"])
        .arg("--dir")
        .arg(dir)
        .arg("--logfile")
        .arg(dir.join(LOG_FILE))
        .args(&options.extra_args)
        .envs(env.iter().map(|(name, value)| (name, value)))
        .current_dir(dir)
        .stdin(Stdio::null())
        .stdout(console)
        .stderr(console_err)
        // A backstop only: the harness kills and reaps explicitly.
        .kill_on_drop(true);
    let child = command.spawn().map_err(spawn_error)?;
    let pid = child.id().ok_or_else(|| {
        spawn_error(std::io::Error::other(
            "process exited before its id was read",
        ))
    })?;
    debug!(node = index, pid, port, dir = %dir.display(), "spawned redis-server");
    Ok(RedisProcess {
        child,
        pid,
        paused: false,
    })
}

/// Where a node's log and console files ended before an attempt started.
struct OutputStart {
    log: u64,
    console: u64,
}

impl OutputStart {
    fn of(dir: &Path) -> OutputStart {
        let len = |name| std::fs::metadata(dir.join(name)).map_or(0, |meta| meta.len());
        OutputStart {
            log: len(LOG_FILE),
            console: len(CONSOLE_FILE),
        }
    }

    /// The end of what was written to the log and console since, for errors.
    fn read_since(&self, dir: &Path) -> String {
        let mut output = String::new();
        for (name, start) in [(CONSOLE_FILE, self.console), (LOG_FILE, self.log)] {
            match read_tail(&dir.join(name), start) {
                Ok(text) if !text.trim().is_empty() => {
                    let _ = write!(output, "--- {name} ---\n{text}");
                    if !text.ends_with('\n') {
                        output.push('\n');
                    }
                }
                Ok(_) => {}
                Err(err) => {
                    let _ = writeln!(output, "--- {name}: unreadable: {err}");
                }
            }
        }
        output
    }
}

/// At most the last [`OUTPUT_TAIL_BYTES`] of `path` after offset `start`.
fn read_tail(path: &Path, start: u64) -> std::io::Result<String> {
    let mut file = std::fs::File::open(path)?;
    let len = file.metadata()?.len();
    let from = start.max(len.saturating_sub(OUTPUT_TAIL_BYTES)).min(len);
    file.seek(SeekFrom::Start(from))?;
    let mut bytes = Vec::new();
    file.take(OUTPUT_TAIL_BYTES).read_to_end(&mut bytes)?;
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

/// A running (possibly paused) `redis-server`. Dropping it kills and reaps it.
#[derive(Debug)]
struct RedisProcess {
    child: Child,
    pid: u32,
    paused: bool,
}

impl RedisProcess {
    fn send(&self, signal: Signal) -> nix::Result<()> {
        // A pid that does not fit in pid_t cannot name a process.
        let pid = i32::try_from(self.pid).map_err(|_| Errno::ESRCH)?;
        signal::kill(Pid::from_raw(pid), signal)
    }

    fn signal(&self, index: usize, signal: Signal) -> Result<(), HarnessError> {
        self.send(signal).map_err(|source| HarnessError::Signal {
            node: index,
            signal: signal.as_str(),
            source,
        })
    }

    /// SIGKILL, then wait (bounded) for the exit so no zombie is left.
    async fn kill(&mut self, index: usize) -> Result<(), HarnessError> {
        self.child.start_kill()?;
        match tokio::time::timeout(REAP_TIMEOUT, self.child.wait()).await {
            Ok(status) => {
                debug!(node = index, pid = self.pid, status = %status?, "node killed");
                self.paused = false;
                Ok(())
            }
            Err(_) => Err(HarnessError::NotExited {
                node: index,
                waited: REAP_TIMEOUT,
            }),
        }
    }

    /// SIGTERM and wait for a clean exit; SIGKILL if that takes too long.
    async fn terminate(&mut self, index: usize) -> Result<(), HarnessError> {
        self.signal(index, Signal::SIGTERM)?;
        if self.paused {
            // A stopped process only acts on the pending SIGTERM once continued.
            self.signal(index, Signal::SIGCONT)?;
            self.paused = false;
        }
        if let Ok(status) = tokio::time::timeout(STOP_GRACE, self.child.wait()).await {
            debug!(node = index, pid = self.pid, status = %status?, "node stopped");
            Ok(())
        } else {
            warn!(
                node = index,
                pid = self.pid,
                "no exit after SIGTERM, sending SIGKILL"
            );
            self.kill(index).await
        }
    }
}

impl Drop for RedisProcess {
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(Some(_))) {
            return;
        }
        if self.paused {
            // Not needed for SIGKILL itself, but leaves no stopped process
            // behind should the kill fail.
            if let Err(err) = self.send(Signal::SIGCONT) {
                debug!(pid = self.pid, %err, "SIGCONT on drop failed");
            }
        }
        if let Err(err) = self.child.start_kill() {
            warn!(pid = self.pid, %err, "SIGKILL on drop failed");
            return;
        }
        // Drop cannot await the exit, so poll for it, briefly: SIGKILL takes
        // effect within milliseconds.
        let deadline = std::time::Instant::now() + REAP_TIMEOUT;
        for _ in 0..REAP_POLLS {
            match self.child.try_wait() {
                Ok(Some(_)) => return,
                Ok(None) if std::time::Instant::now() < deadline => {
                    std::thread::sleep(REAP_POLL_INTERVAL);
                }
                Ok(None) => break,
                Err(err) => {
                    warn!(pid = self.pid, %err, "reaping redis-server failed");
                    return;
                }
            }
        }
        warn!(pid = self.pid, "redis-server not reaped after SIGKILL");
    }
}
