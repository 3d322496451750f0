//! One `redis-server` child process: spawning it, signalling it, and killing and reaping it,
//! also from `Drop`.

use std::fs::OpenOptions;
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use nix::errno::Errno;
use nix::sys::signal::{self, Signal};
use nix::unistd::Pid;
use tokio::process::{Child, Command};
use tracing::{debug, warn};

use super::output::{CONSOLE_FILE, LOG_FILE};
use crate::error::HarnessError;
use crate::options::ClusterOptions;

/// How long `stop` lets redis shut down after SIGTERM before using SIGKILL.
const STOP_GRACE: Duration = Duration::from_secs(5);
/// How long to wait for a process killed with SIGKILL to be reaped.
const REAP_TIMEOUT: Duration = Duration::from_secs(2);
/// Poll interval, and poll count bound, for reaping in `Drop` (which cannot await).
const REAP_POLL_INTERVAL: Duration = Duration::from_millis(2);
const REAP_POLLS: u32 = 1000;

/// Spawns node `index`'s `redis-server` on `port` in `dir`, listening as `listen` says (plain
/// `--port`, or TLS), with the harness's arguments, then the options' extra ones; its stdout
/// and stderr go to the console file.
pub(super) fn spawn_server(
    options: &ClusterOptions,
    listen: &[String],
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
        .args(listen)
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

/// A running (possibly paused) `redis-server`. Dropping it kills and reaps it.
#[derive(Debug)]
pub(super) struct RedisProcess {
    pub(super) child: Child,
    pub(super) pid: u32,
    pub(super) paused: bool,
}

impl RedisProcess {
    fn send(&self, signal: Signal) -> nix::Result<()> {
        // A pid that does not fit in pid_t cannot name a process.
        let pid = i32::try_from(self.pid).map_err(|_| Errno::ESRCH)?;
        signal::kill(Pid::from_raw(pid), signal)
    }

    pub(super) fn signal(&self, index: usize, signal: Signal) -> Result<(), HarnessError> {
        self.send(signal).map_err(|source| HarnessError::Signal {
            node: index,
            signal: signal.as_str(),
            source,
        })
    }

    /// SIGKILL, then wait (bounded) for the exit so no zombie is left.
    pub(super) async fn kill(&mut self, index: usize) -> Result<(), HarnessError> {
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
    pub(super) async fn terminate(&mut self, index: usize) -> Result<(), HarnessError> {
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
