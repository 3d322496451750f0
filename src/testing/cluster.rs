//! N independent `redis-server` processes on loopback ports, with process-level
//! fault injection (kill, stop, restart, pause, resume, flush).

use std::fmt::Write as _;
use std::fs::OpenOptions;
use std::io::{Read, Seek, SeekFrom};
use std::net::{Ipv4Addr, SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use nix::errno::Errno;
use nix::sys::signal::{self, Signal};
use nix::unistd::Pid;
use redis::AsyncConnectionConfig;
use redis::aio::MultiplexedConnection;
use tempfile::TempDir;
use tokio::process::{Child, Command};
use tokio::time::Instant;
use tracing::{debug, info, warn};

use super::{FaultProxy, HarnessError};

/// Environment variable naming the `redis-server` binary to run.
pub const REDIS_SERVER_ENV: &str = "QUORUMLOCK_REDIS_SERVER";

/// Server log, inside the node's directory.
const LOG_FILE: &str = "redis.log";
/// Server stdout and stderr (config errors are printed there, not logged).
const CONSOLE_FILE: &str = "redis.console";
/// How much of the log and console output an error message carries.
const OUTPUT_TAIL_BYTES: u64 = 4096;

/// Connect and response timeout of one readiness probe.
const PROBE_TIMEOUT: Duration = Duration::from_millis(500);
/// First and longest pause between readiness probes.
const PROBE_BACKOFF_MIN: Duration = Duration::from_millis(10);
const PROBE_BACKOFF_MAX: Duration = Duration::from_millis(200);
/// Upper bound on probes per start, on top of the time bound.
const MAX_PROBES: u32 = 10_000;

/// Fresh ports tried when a new node's port is taken before redis binds it.
const FRESH_PORT_ATTEMPTS: u32 = 10;
/// Attempts to restart a node on its own port, and the pause between them.
const SAME_PORT_ATTEMPTS: u32 = 20;
const SAME_PORT_RETRY_DELAY: Duration = Duration::from_millis(100);

/// How long `stop` lets redis shut down after SIGTERM before using SIGKILL.
const STOP_GRACE: Duration = Duration::from_secs(5);
/// How long to wait for a process killed with SIGKILL to be reaped.
const REAP_TIMEOUT: Duration = Duration::from_secs(2);
/// Poll interval, and poll count bound, for reaping in `Drop` (which cannot await).
const REAP_POLL_INTERVAL: Duration = Duration::from_millis(2);
const REAP_POLLS: u32 = 1000;

/// Connect and response timeout of [`TestCluster::connection`].
const INSPECTION_TIMEOUT: Duration = Duration::from_secs(1);

/// How to start a [`TestCluster`]; build it from `ClusterOptions::default()`.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct ClusterOptions {
    nodes: usize,
    proxies: bool,
    redis_server: PathBuf,
    extra_args: Vec<String>,
    ready_timeout: Duration,
}

impl Default for ClusterOptions {
    /// Five nodes, no proxies, the `redis-server` named by
    /// `QUORUMLOCK_REDIS_SERVER` (or found on `PATH`), no extra arguments,
    /// ten seconds to become ready.
    fn default() -> Self {
        let redis_server = std::env::var_os(REDIS_SERVER_ENV)
            .filter(|path| !path.is_empty())
            .map_or_else(|| PathBuf::from("redis-server"), PathBuf::from);
        ClusterOptions {
            nodes: 5,
            proxies: false,
            redis_server,
            extra_args: Vec::new(),
            ready_timeout: Duration::from_secs(10),
        }
    }
}

impl ClusterOptions {
    /// Number of `redis-server` processes (default 5).
    #[must_use]
    pub fn nodes(mut self, nodes: usize) -> Self {
        self.nodes = nodes;
        self
    }

    /// Puts a [`FaultProxy`] in front of every node and makes
    /// [`TestCluster::urls`] point at the proxies (default `false`).
    #[must_use]
    pub fn proxies(mut self, proxies: bool) -> Self {
        self.proxies = proxies;
        self
    }

    /// The `redis-server` binary to run. A wrapper script must `exec` the
    /// server: the harness recognises its server by the process id it reports.
    #[must_use]
    pub fn redis_server(mut self, path: impl Into<PathBuf>) -> Self {
        self.redis_server = path.into();
        self
    }

    /// Extra command-line arguments for every `redis-server`, appended after
    /// the harness's own (so they can override them), e.g.
    /// `["--maxmemory", "10mb"]`.
    #[must_use]
    pub fn extra_args(mut self, args: Vec<String>) -> Self {
        self.extra_args = args;
        self
    }

    /// How long each node may take to answer after being started (default 10 s).
    #[must_use]
    pub fn ready_timeout(mut self, timeout: Duration) -> Self {
        self.ready_timeout = timeout;
        self
    }
}

/// N independent `redis-server` masters on 127.0.0.1, for tests.
///
/// Each node runs in its own temporary directory without persistence. Nodes
/// are addressed by their 0-based index; an index out of range gives
/// [`HarnessError::NoSuchNode`].
///
/// Dropping the cluster resumes paused nodes, SIGKILLs every process it
/// started, reaps them, stops the proxies and deletes the directories. This
/// also happens while a failing test unwinds, and the waits involved are
/// bounded (a few seconds at worst).
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
    /// ready timeout. Nodes already started are killed before returning.
    pub async fn start(options: ClusterOptions) -> Result<TestCluster, HarnessError> {
        tokio::runtime::Handle::try_current().map_err(|_| HarnessError::NoRuntime)?;
        let starts = (0..options.nodes).map(|index| start_new_node(&options, index));
        // On failure the nodes that did start are dropped, which kills them.
        let nodes = futures::future::try_join_all(starts).await?;
        info!(
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
    /// restarts).
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
    /// running (killed, stopped, or exited by itself).
    pub fn pid(&mut self, index: usize) -> Result<Option<u32>, HarnessError> {
        let node = self.node_mut(index)?;
        node.reap_if_exited()?;
        Ok(node.process.as_ref().map(|process| process.pid))
    }

    /// Whether node `index`'s process is alive; a paused node counts as running.
    pub fn is_running(&mut self, index: usize) -> Result<bool, HarnessError> {
        Ok(self.pid(index)?.is_some())
    }

    /// Kills node `index` with SIGKILL (no shutdown, no goodbye to clients) and
    /// reaps it. Its data is lost. Does nothing if the node is not running.
    pub async fn kill(&mut self, index: usize) -> Result<(), HarnessError> {
        let node = self.node_mut(index)?;
        if let Some(mut process) = node.process.take() {
            info!(node = index, pid = process.pid, "killing node");
            process.kill(index).await?;
        }
        Ok(())
    }

    /// Stops node `index` gracefully with SIGTERM (redis closes its clients),
    /// falling back to SIGKILL if it has not exited after a few seconds. Does
    /// nothing if the node is not running.
    pub async fn stop(&mut self, index: usize) -> Result<(), HarnessError> {
        let node = self.node_mut(index)?;
        if let Some(mut process) = node.process.take() {
            info!(node = index, pid = process.pid, "stopping node");
            process.terminate(index).await?;
        }
        Ok(())
    }

    /// Starts node `index` again, on the same port and in the same directory,
    /// and waits until it answers. It comes back empty (no persistence).
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
        node.reap_if_exited()?;
        if node.process.is_some() {
            return Err(HarnessError::AlreadyRunning(index));
        }
        for attempt in 1..=SAME_PORT_ATTEMPTS {
            match launch(options, index, node.port, node.dir.path()).await? {
                Launch::Ready(process) => {
                    info!(
                        node = index,
                        pid = process.pid,
                        port = node.port,
                        "node started"
                    );
                    node.process = Some(process);
                    return Ok(());
                }
                Launch::PortTaken => {
                    debug!(
                        node = index,
                        port = node.port,
                        attempt,
                        "port busy, retrying"
                    );
                    tokio::time::sleep(SAME_PORT_RETRY_DELAY).await;
                }
            }
        }
        Err(HarnessError::PortUnavailable {
            node: index,
            port: node.port,
            attempts: SAME_PORT_ATTEMPTS,
        })
    }

    /// [`stop`](Self::stop) then [`start_node`](Self::start_node).
    pub async fn restart(&mut self, index: usize) -> Result<(), HarnessError> {
        self.stop(index).await?;
        self.start_node(index).await
    }

    /// Freezes node `index` with SIGSTOP: its sockets stay open and the kernel
    /// keeps accepting and queueing requests, but nothing is answered until
    /// [`resume`](Self::resume).
    pub fn pause(&mut self, index: usize) -> Result<(), HarnessError> {
        let process = self.running_mut(index)?;
        process.signal(index, Signal::SIGSTOP)?;
        process.paused = true;
        info!(node = index, pid = process.pid, "node paused");
        Ok(())
    }

    /// Lets a paused node `index` run again (SIGCONT); it then answers the
    /// requests queued meanwhile.
    pub fn resume(&mut self, index: usize) -> Result<(), HarnessError> {
        let process = self.running_mut(index)?;
        process.signal(index, Signal::SIGCONT)?;
        process.paused = false;
        info!(node = index, pid = process.pid, "node resumed");
        Ok(())
    }

    /// Deletes every key on node `index` (FLUSHALL over a direct connection).
    pub async fn flush(&mut self, index: usize) -> Result<(), HarnessError> {
        self.running_mut(index)?;
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

    fn running_mut(&mut self, index: usize) -> Result<&mut RedisProcess, HarnessError> {
        let node = self.node_mut(index)?;
        node.reap_if_exited()?;
        node.process.as_mut().ok_or(HarnessError::NotRunning(index))
    }
}

/// One node: its fixed port and directory, and its process while running.
#[derive(Debug)]
struct Node {
    port: u16,
    // Field order matters for drop: the process is killed and reaped before
    // its working directory is deleted.
    process: Option<RedisProcess>,
    proxy: Option<FaultProxy>,
    dir: TempDir,
}

impl Node {
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
}

/// Starts node `index` for a new cluster: its directory, a free port (a few
/// tries, as the port can be taken between finding it and redis binding it),
/// the server, and the proxy if asked for.
async fn start_new_node(options: &ClusterOptions, index: usize) -> Result<Node, HarnessError> {
    let dir = tempfile::Builder::new()
        .prefix(&format!("quorumlock-node{index}-"))
        .tempdir()?;
    let mut port = 0;
    for attempt in 1..=FRESH_PORT_ATTEMPTS {
        port = free_port()?;
        match launch(options, index, port, dir.path()).await? {
            Launch::Ready(process) => {
                debug!(node = index, pid = process.pid, port, "node started");
                let proxy = if options.proxies {
                    let upstream = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
                    Some(FaultProxy::start(upstream).await?)
                } else {
                    None
                };
                return Ok(Node {
                    port,
                    process: Some(process),
                    proxy,
                    dir,
                });
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

/// A port that was free a moment ago: the kernel picks one for a throwaway
/// listener, which is closed again so redis can bind it.
fn free_port() -> Result<u16, HarnessError> {
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))?;
    Ok(listener.local_addr()?.port())
}

fn redis_url(port: u16) -> String {
    format!("redis://127.0.0.1:{port}")
}

/// Opens a connection to the server on `port` with the given connect and
/// response timeout.
async fn connect(port: u16, timeout: Duration) -> redis::RedisResult<MultiplexedConnection> {
    let client = redis::Client::open(redis_url(port))?;
    let config = AsyncConnectionConfig::new()
        .set_connection_timeout(Some(timeout))
        .set_response_timeout(Some(timeout));
    client
        .get_multiplexed_async_connection_with_config(&config)
        .await
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
) -> Result<Launch, HarnessError> {
    // The log files are appended to across restarts; only this attempt's part
    // is relevant to its errors.
    let output_start = OutputStart::of(dir);
    let mut process = spawn_server(options, index, port, dir)?;
    let started = Instant::now();
    let deadline = started + options.ready_timeout;
    let mut backoff = PROBE_BACKOFF_MIN;
    for _ in 0..MAX_PROBES {
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
        let now = Instant::now();
        if now >= deadline {
            break;
        }
        tokio::time::sleep(backoff.min(deadline - now)).await;
        backoff = (backoff * 2).min(PROBE_BACKOFF_MAX);
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
        .args(["--save", ""])
        .args(["--appendonly", "no"])
        .args(["--protected-mode", "no"])
        .args(["--daemonize", "no"])
        .args(["--enable-debug-command", "local"])
        .arg("--dir")
        .arg(dir)
        .arg("--logfile")
        .arg(dir.join(LOG_FILE))
        .args(&options.extra_args)
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
