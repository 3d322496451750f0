//! The process backend: each node is a `redis-server` process in its own temporary directory,
//! on a loopback port it keeps across restarts. Starting it (on a fresh port, or again on its
//! own), telling when it answers, and the node operations
//! [`TestCluster`](crate::TestCluster) hands to it.

mod child;
mod output;

use std::path::Path;

use nix::sys::signal::Signal;
use tempfile::TempDir;
use tokio::time::Instant;
use tracing::{debug, info, warn};

use self::child::{RedisProcess, spawn_server};
use self::output::OutputStart;
use crate::error::HarnessError;
use crate::faketime::CLOCK_FILE_NAME;
use crate::options::ClusterOptions;
use crate::port::{OwnPortRetry, on_a_free_port};
use crate::probe::{PROBE_TIMEOUT, ProbeBackoff};
use crate::transport::Transport;

/// A `redis-server` process node: its directory and environment, and its process while
/// running.
#[derive(Debug)]
pub(crate) struct ProcessServer {
    // Field order matters for drop: the process is killed and reaped before
    // its working directory is deleted.
    process: Option<RedisProcess>,
    /// Extra environment (libfaketime), the same at every start.
    env: Vec<(String, String)>,
    /// Plain TCP or TLS, the same at every start.
    transport: Transport,
    dir: TempDir,
}

impl ProcessServer {
    /// Starts node `index` for a new cluster: a new directory, then the server on a free port
    /// (a few tries, as the port can be taken between finding it and the server binding it).
    pub(crate) async fn start_new(
        options: &ClusterOptions,
        transport: &Transport,
        libfaketime: Option<&Path>,
        clock_dir: Option<&Path>,
        index: usize,
    ) -> Result<(ProcessServer, u16), HarnessError> {
        let dir = options.node_data_dir(index)?;
        let clock_file = clock_dir.map(|dir| dir.join(CLOCK_FILE_NAME));
        let env = libfaketime
            .map(|path| options.clock_env(index, path, clock_file.as_deref()))
            .unwrap_or_default();
        let (process, port) = on_a_free_port(index, |port| {
            launch(options, transport, index, port, dir.path(), &env)
        })
        .await?;
        debug!(node = index, pid = process.pid, port, "node started");
        let server = ProcessServer {
            process: Some(process),
            env,
            transport: transport.clone(),
            dir,
        };
        Ok((server, port))
    }

    /// The server's process id, or `None` if it is not running.
    pub(crate) fn pid(&mut self) -> Result<Option<u32>, HarnessError> {
        self.reap_if_exited()?;
        Ok(self.process.as_ref().map(|process| process.pid))
    }

    /// Whether the server is alive; a paused one counts as running.
    pub(crate) fn is_running(&mut self) -> Result<bool, HarnessError> {
        self.reap_if_exited()?;
        Ok(self.process.is_some())
    }

    /// SIGKILL, and reap. Nothing if it is not running.
    pub(crate) async fn kill(&mut self, index: usize) -> Result<(), HarnessError> {
        if let Some(mut process) = self.process.take() {
            info!(node = index, pid = process.pid, "killing node");
            process.kill(index).await?;
        }
        Ok(())
    }

    /// SIGTERM, and SIGKILL if it has not exited after a grace period. Nothing if it is not
    /// running.
    pub(crate) async fn stop(&mut self, index: usize) -> Result<(), HarnessError> {
        if let Some(mut process) = self.process.take() {
            info!(node = index, pid = process.pid, "stopping node");
            process.terminate(index).await?;
        }
        Ok(())
    }

    /// Starts the server again on its own `port`, in the same directory, trying again for a
    /// while if another socket holds the port.
    pub(crate) async fn start_again(
        &mut self,
        options: &ClusterOptions,
        index: usize,
        port: u16,
    ) -> Result<(), HarnessError> {
        self.reap_if_exited()?;
        if self.process.is_some() {
            return Err(HarnessError::AlreadyRunning(index));
        }
        let mut retry = OwnPortRetry::new(index, port);
        let process = loop {
            let launched = launch(
                options,
                &self.transport,
                index,
                port,
                self.dir.path(),
                &self.env,
            );
            match launched.await? {
                Some(process) => break process,
                None => retry.port_taken().await?,
            }
        };
        info!(node = index, pid = process.pid, port, "node started");
        self.process = Some(process);
        Ok(())
    }

    /// Freezes the server with SIGSTOP.
    pub(crate) fn pause(&mut self, index: usize) -> Result<(), HarnessError> {
        let process = self.running_mut(index)?;
        process.signal(index, Signal::SIGSTOP)?;
        process.paused = true;
        info!(node = index, pid = process.pid, "node paused");
        Ok(())
    }

    /// Lets a paused server run again with SIGCONT.
    pub(crate) fn resume(&mut self, index: usize) -> Result<(), HarnessError> {
        let process = self.running_mut(index)?;
        process.signal(index, Signal::SIGCONT)?;
        process.paused = false;
        info!(node = index, pid = process.pid, "node resumed");
        Ok(())
    }

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

/// Starts one `redis-server` on `port` in `dir` and waits until it answers. `None`: something
/// else holds the port, and the attempt's process is gone.
async fn launch(
    options: &ClusterOptions,
    transport: &Transport,
    index: usize,
    port: u16,
    dir: &Path,
    env: &[(String, String)],
) -> Result<Option<RedisProcess>, HarnessError> {
    // The log files are appended to across restarts; only this attempt's part
    // is relevant to its errors.
    let output_start = OutputStart::of(dir);
    let listen = transport.listen_args(port, None);
    let mut process = spawn_server(options, &listen, index, port, dir, env)?;
    let started = Instant::now();
    let mut backoff = ProbeBackoff::until(started + options.ready_timeout);
    loop {
        if let Some(status) = process.child.try_wait()? {
            let output = output_start.read_since(dir);
            if output.contains("Address already in use") {
                return Ok(None);
            }
            return Err(HarnessError::Exited {
                node: index,
                status: status.to_string(),
                output,
            });
        }
        match tokio::time::timeout(2 * PROBE_TIMEOUT, probe_server_pid(transport, port)).await {
            Ok(Ok(Some(pid))) if pid == process.pid => return Ok(Some(process)),
            Ok(Ok(other)) => {
                // Another server answered on the port: ours cannot have bound
                // it. Dropping `process` kills it.
                debug!(
                    node = index,
                    port,
                    ?other,
                    "port answered by another server"
                );
                return Ok(None);
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
/// our server apart from anything else that might answer on the port. While it
/// is still loading its data (`INFO persistence`: `loading:1`) the answer is a
/// `BusyLoading` error, as from any other command then: a node is ready only
/// once it takes commands (as the docker backend's `PING` probe requires). A
/// chaos run once read a key right after a restart and got `LOADING`.
async fn probe_server_pid(transport: &Transport, port: u16) -> redis::RedisResult<Option<u32>> {
    let mut connection = transport.connect(port, PROBE_TIMEOUT).await?;
    let (server, persistence): (String, String) = redis::pipe()
        .cmd("INFO")
        .arg("server")
        .cmd("INFO")
        .arg("persistence")
        .query_async(&mut connection)
        .await?;
    if persistence.lines().any(|line| line.trim() == "loading:1") {
        return Err(redis::RedisError::from((
            redis::ErrorKind::Server(redis::ServerErrorKind::BusyLoading),
            "still loading its data",
        )));
    }
    Ok(server.lines().find_map(|line| {
        line.strip_prefix("process_id:")
            .and_then(|pid| pid.trim().parse().ok())
    }))
}
