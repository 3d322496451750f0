//! `quorumlock run`: a lock around a command, like flock(1) across hosts. Acquire (waiting up to
//! `--wait`), keep the lock alive while the command runs in its own process group, stop the
//! command if the lock is lost, release when it has exited, and exit with its status.
//!
//! [`exit`] holds the exit statuses, [`child`] the command's process group and its signals.

pub(crate) mod child;
pub(crate) mod exit;

use quorumlock::{Patience, Request};
use std::ffi::OsString;
use std::process::ExitCode;
use std::time::Duration;

use quorumlock::{KeepAlive, LockOptions};

use crate::flags::{self, NODES_ENV, Prefixes};
use child::{Held, Signals, run_under};

/// Arguments of `quorumlock run`.
#[derive(clap::Args, Debug)]
#[command(after_help = after_help())]
pub struct RunArgs {
    /// Comma-separated node URLs (redis://[user:password@]host:port[/db]): one node is the
    /// single-node lock, several the quorum lock. Required (no local nodes are started).
    #[arg(long, value_delimiter = ',', env = NODES_ENV)]
    nodes: Vec<String>,
    /// The resource to lock: every `run` with the same resource and nodes excludes the others.
    #[arg(long)]
    resource: String,
    /// Lock TTL: how long the lock outlives a `run` that dies without releasing it. It is
    /// extended every third of it while the command runs.
    #[arg(long, default_value = "30s", value_parser = flags::duration)]
    ttl: Duration,
    /// How long to keep trying to acquire; 0 tries once.
    #[arg(long, default_value = "10s", value_parser = flags::duration)]
    wait: Duration,
    /// After the lock is lost and the command got SIGTERM, how long before SIGKILL.
    #[arg(long, default_value = "10s", value_parser = flags::duration)]
    kill_after: Duration,
    /// Fencing tokens: the command gets QUORUMLOCK_FENCE, a number that grows from one holder
    /// to the next (the nodes must run AOF with appendfsync always).
    #[arg(long)]
    fencing: bool,
    /// Run while holding one of N permits of the resource (a semaphore: up to N runs at once,
    /// each in a slot RESOURCE:0 … RESOURCE:N-1, named to the command in QUORUMLOCK_SLOT).
    /// Every run of the resource must give the same N.
    #[arg(long, value_name = "N")]
    permits: Option<u32>,
    /// The prefixes every `run` of the resource (and any other client of the lock) uses.
    #[command(flatten)]
    prefixes: Prefixes,
    /// The command and its arguments, after `--`.
    #[arg(last = true, required = true, value_name = "COMMAND")]
    command: Vec<OsString>,
}

/// What `--help` says after the flags: how the command runs, the exit statuses, examples.
fn after_help() -> String {
    format!(
        "\
The command runs in its own process group with stdin, stdout and stderr inherited, and
QUORUMLOCK_RESOURCE (QUORUMLOCK_FENCE with --fencing, QUORUMLOCK_SLOT with --permits) in its
environment. SIGINT, SIGTERM
and SIGHUP sent to run are forwarded to that group; run waits for the command to exit, then
releases the lock. If the lock is lost, the group gets SIGTERM, then SIGKILL after --kill-after.
The group is not the terminal's foreground group: give an interactive command its stdin from
elsewhere.

{}

Examples:
  quorumlock run --nodes redis://10.0.0.1:6379,redis://10.0.0.2:6379,redis://10.0.0.3:6379 \\
      --resource nightly-report -- ./nightly-report.sh
  QUORUMLOCK_NODES=redis://10.0.0.1:6379,redis://10.0.0.2:6379,redis://10.0.0.3:6379 \\
      quorumlock run --resource nightly-report --wait 0 --ttl 1m -- make report
  quorumlock run --resource partner-api --permits 4 -- ./call-partner.sh",
        exit::HELP
    )
}

/// Runs `quorumlock run` and returns its exit status; every message is on stderr.
pub async fn run(args: RunArgs) -> ExitCode {
    ExitCode::from(run_locked(args).await)
}

async fn run_locked(args: RunArgs) -> u8 {
    let RunArgs {
        nodes,
        resource,
        ttl,
        wait,
        kill_after,
        fencing,
        permits,
        prefixes,
        command,
    } = args;
    let fail = |code: u8, message: &str| {
        eprintln!("quorumlock run: {message}");
        code
    };
    let Some((program, program_args)) = command.split_first() else {
        return fail(exit::USAGE, "no command given after --");
    };
    let lock = match flags::lock_over(
        nodes,
        prefixes.apply(LockOptions::new().ttl(ttl).fencing(fencing)),
    ) {
        Ok(lock) => lock,
        Err(message) => return fail(exit::USAGE, &message),
    };
    // Before acquiring: a signal from now on is ours to handle, so none can end `run` between
    // taking the lock and starting the command.
    let mut signals = match Signals::install("run") {
        Ok(signals) => signals,
        Err(code) => return code,
    };

    // Woken when the holder releases or its keys expire, not by polling; `--wait 0` tries once.
    let acquired = tokio::select! {
        biased;
        signal = signals.next() => Err(signal),
        result = lock.acquire(request(&resource, wait, permits)) => Ok(result),
    };
    let guard = match acquired {
        Ok(Ok(guard)) => guard,
        Ok(Err(error)) => {
            let (code, message) = exit::not_acquired(&error, wait);
            lock.settle().await;
            return fail(code, &message);
        }
        Err(signal) => {
            // The acquisition's future was dropped: what it may have set is being released.
            lock.settle().await;
            return fail(
                exit::of_signal(signal.as_raw()),
                &format!("signal {} before the lock was acquired", signal.as_raw()),
            );
        }
    };
    let kept = match guard.keep_alive(KeepAlive::new()) {
        Ok(kept) => kept,
        Err(error) => {
            lock.settle().await;
            return fail(exit::USAGE, &error.to_string());
        }
    };

    let slot = permits.map(|_| String::from_utf8_lossy(kept.lease().resource()).into_owned());
    let held = Held {
        tool: "run",
        resource: &resource,
        slot: slot.as_deref(),
        fence: kept.fence(),
        term: None,
    };
    let code = run_under(
        program,
        program_args,
        &held,
        &kept.lease(),
        kill_after,
        &mut signals,
    )
    .await;
    kept.release().await;
    lock.settle().await;
    code
}

/// The acquisition `run` makes: the resource, or one of its `permits`, waited for up to `wait`.
fn request(resource: &str, wait: Duration, permits: Option<u32>) -> Request<'_> {
    let request = Request::from(resource).patience(Patience::Wait(wait));
    match permits {
        Some(permits) => request.permits(permits),
        None => request,
    }
}
