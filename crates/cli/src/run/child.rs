//! The command under the lock: spawned in its own process group, so that a signal reaches all
//! of it (a shell and everything it started); the signals `run` gets are forwarded to that
//! group; a lost lock stops it with SIGTERM, then SIGKILL after `--kill-after`.

use std::ffi::OsString;
use std::io;
use std::process::ExitStatus;
use std::time::Duration;

use quorumlock::{Lease, Lost};
use rustix::process::{Pid, Signal, kill_process_group};
use tokio::process::{Child, Command};
use tokio::signal::unix::{SignalKind, signal};

/// The environment variable that names the locked resource to the command.
pub(crate) const RESOURCE_ENV: &str = "QUORUMLOCK_RESOURCE";

/// The environment variable that names the permit's slot to the command (`--permits`).
pub(crate) const SLOT_ENV: &str = "QUORUMLOCK_SLOT";

/// What the command is told of the lock it runs under.
pub(crate) struct Held<'a> {
    /// The subcommand running it (`run`, `elect`), for its messages.
    pub(crate) tool: &'static str,
    /// The resource given to `run`.
    pub(crate) resource: &'a str,
    /// With `--permits`, the slot held.
    pub(crate) slot: Option<&'a str>,
    /// With `--fencing`, the fence.
    pub(crate) fence: Option<u64>,
    /// Under `elect`, the leader's term.
    pub(crate) term: Option<u64>,
}

/// The environment variable that carries the leader's term to the command, under `elect`.
pub(crate) const TERM_ENV: &str = "QUORUMLOCK_TERM";
/// The environment variable that carries the fence to the command, with `--fencing`.
pub(crate) const FENCE_ENV: &str = "QUORUMLOCK_FENCE";

/// The signals `run` catches: while it waits for the lock they end the wait, and while the
/// command runs they are forwarded to its process group.
pub(crate) struct Signals {
    terminate: tokio::signal::unix::Signal,
    interrupt: tokio::signal::unix::Signal,
    hangup: tokio::signal::unix::Signal,
}

impl Signals {
    /// Installs the handlers (from now on these signals no longer end the process by
    /// themselves); if that fails, says so on stderr as `quorumlock <command>` and gives the
    /// exit status for it.
    pub(crate) fn install(command: &str) -> Result<Signals, u8> {
        let install = || -> io::Result<Signals> {
            Ok(Signals {
                terminate: signal(SignalKind::terminate())?,
                interrupt: signal(SignalKind::interrupt())?,
                hangup: signal(SignalKind::hangup())?,
            })
        };
        install().map_err(|error| {
            eprintln!("quorumlock {command}: installing signal handlers: {error}");
            super::exit::OS_ERROR
        })
    }

    /// The next signal received.
    pub(crate) async fn next(&mut self) -> Signal {
        tokio::select! {
            Some(()) = self.terminate.recv() => Signal::TERM,
            Some(()) = self.interrupt.recv() => Signal::INT,
            Some(()) = self.hangup.recv() => Signal::HUP,
            // Every stream ended (the runtime is going away): no more signals will come.
            else => std::future::pending().await,
        }
    }
}

/// The command and its process group.
pub(crate) struct RunningCommand {
    child: Child,
    group: Option<Pid>,
    tool: &'static str,
}

/// How the command ended.
pub(crate) struct Ended {
    /// Its status.
    pub(crate) status: ExitStatus,
    /// Why the lock was lost while it ran, if it was.
    pub(crate) lost: Option<Lost>,
}

impl RunningCommand {
    /// Starts `program` with `args` in a process group of its own, with stdin, stdout and
    /// stderr inherited, and what it holds (resource, slot, fence) in its environment.
    pub(crate) fn spawn(
        program: &OsString,
        args: &[OsString],
        held: &Held<'_>,
    ) -> io::Result<RunningCommand> {
        let mut command = Command::new(program);
        command
            .args(args)
            .process_group(0)
            .env(RESOURCE_ENV, held.resource);
        // Not one inherited from an outer `run`: it would be another lock's.
        match held.fence {
            Some(fence) => command.env(FENCE_ENV, fence.to_string()),
            None => command.env_remove(FENCE_ENV),
        };
        match held.term {
            Some(term) => command.env(TERM_ENV, term.to_string()),
            None => command.env_remove(TERM_ENV),
        };
        match held.slot {
            Some(slot) => command.env(SLOT_ENV, slot),
            None => command.env_remove(SLOT_ENV),
        };
        let child = command.spawn()?;
        // The group's id is the leader's pid. Never 0 or 1: kill(-1) would reach every process.
        let group = child
            .id()
            .and_then(|pid| i32::try_from(pid).ok())
            .filter(|&pid| pid > 1)
            .and_then(Pid::from_raw);
        Ok(RunningCommand {
            child,
            group,
            tool: held.tool,
        })
    }

    /// Waits for the command to exit, forwarding the signals `run` gets to its group, and,
    /// should `lease` be lost first, sending the group SIGTERM, then SIGKILL once `kill_after`
    /// has passed.
    pub(crate) async fn supervise(
        mut self,
        lease: &Lease,
        kill_after: Duration,
        signals: &mut Signals,
    ) -> io::Result<Ended> {
        let mut lost = None;
        let mut kill_at = None;
        loop {
            tokio::select! {
                // The command's end first: once it has exited there is nothing left to stop.
                biased;
                status = self.child.wait() => match status {
                    Ok(status) => return Ok(Ended { status, lost }),
                    Err(error) => {
                        // Its end can no longer be seen: stop it rather than leave it running
                        // unsupervised once the lock is released.
                        self.signal(Signal::KILL);
                        return Err(error);
                    }
                },
                reason = lease.lost(), if lost.is_none() => {
                    eprintln!(
                        "quorumlock {}: lock lost: {reason}; sending SIGTERM to the command",
                        self.tool
                    );
                    self.signal(Signal::TERM);
                    lost = Some(reason);
                    // None (a --kill-after past the clock's range): never SIGKILL.
                    kill_at = tokio::time::Instant::now().checked_add(kill_after);
                }
                () = sleep_until(kill_at), if kill_at.is_some() => {
                    eprintln!(
                        "quorumlock {}: the command is still running {} after SIGTERM; \
                         sending SIGKILL",
                        self.tool,
                        humantime::format_duration(kill_after)
                    );
                    self.signal(Signal::KILL);
                    kill_at = None;
                }
                signal = signals.next() => self.signal(signal),
            }
        }
    }

    /// Sends `signal` to the command's process group. A group that is gone already is fine.
    fn signal(&self, signal: Signal) {
        let Some(group) = self.group else {
            return;
        };
        match kill_process_group(group, signal) {
            Ok(()) | Err(rustix::io::Errno::SRCH) => {}
            Err(error) => eprintln!(
                "quorumlock {}: signalling the command's process group {}: {error}",
                self.tool,
                group.as_raw_pid()
            ),
        }
    }
}

/// Runs `program` under `lease` as `run` and `elect` do: spawned with what it holds in its
/// environment, supervised until it exits; its status, [`LOCK_LOST`](super::exit::LOCK_LOST)
/// if the lease was lost meanwhile, or the status of what kept it from running (said on stderr).
pub(crate) async fn run_under(
    program: &OsString,
    args: &[OsString],
    held: &Held<'_>,
    lease: &Lease,
    kill_after: Duration,
    signals: &mut Signals,
) -> u8 {
    use super::exit;
    match RunningCommand::spawn(program, args, held) {
        Err(error) => {
            eprintln!("quorumlock {}: cannot run {program:?}: {error}", held.tool);
            if error.kind() == io::ErrorKind::NotFound {
                exit::NOT_FOUND
            } else {
                exit::CANNOT_EXECUTE
            }
        }
        Ok(running) => match running.supervise(lease, kill_after, signals).await {
            Ok(ended) if ended.lost.is_some() => exit::LOCK_LOST,
            Ok(ended) => exit::of_command(ended.status),
            Err(error) => {
                eprintln!("quorumlock {}: waiting for the command: {error}", held.tool);
                exit::OS_ERROR
            }
        },
    }
}

/// Completes at `at`; never without one.
async fn sleep_until(at: Option<tokio::time::Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}
