//! The contended section's other processes: the `quorumlock` binary itself, started with the
//! hidden `bench-waiters` subcommand, each with a `Lock` (or rslock manager) of its own.
//!
//! The protocol on its stdin and stdout, one line each: the child connects and warms up, prints
//! `ready`; the parent writes `go START END` (ns on CLOCK_MONOTONIC, which the processes of one
//! machine share); the child's waiters run from START to END and it prints their records as one
//! JSON line, then exits. Every step is bounded in time on both sides: a child whose stdin
//! closes, or that is not told to go within [`READY_CAP`], or that runs past END by
//! [`REPORT_CAP`], exits by itself; the parent kills, by PID, every child that has not reported
//! by then, and every child it started when it fails or is dropped.

use quorumlock::Patience;
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use quorumlock::{Lock, LockOptions};
use serde::{Deserialize, Serialize};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};

use super::waiter::{Acquirer, Budget, Kind, WaiterRecord, now_ns, until, waiter};
use crate::bench::rslock::Rslock;

/// The longest a child may take to start, connect and warm up, and then to be told to go.
const READY_CAP: Duration = Duration::from_secs(30);
/// The longest after END a child may take to report.
const REPORT_CAP: Duration = Duration::from_secs(15);
/// How far ahead of now the parent sets START, so that every child has read it by then.
const GO_LEAD: Duration = Duration::from_millis(30);

/// `quorumlock bench-waiters`: waiters in a process of their own for `bench`'s contended
/// section (hidden; `bench` starts it and reads its stdout).
#[derive(clap::Args, Debug)]
pub struct WaitersArgs {
    /// The quorum's node URLs.
    #[arg(long, value_delimiter = ',', required = true)]
    nodes: Vec<String>,
    #[arg(long, value_enum)]
    contender: Kind,
    /// The resource all waiters want.
    #[arg(long)]
    key: String,
    /// The key prefix of the parent's locks.
    #[arg(long)]
    prefix: String,
    #[arg(long)]
    ttl_ms: u64,
    /// Waiters in this process.
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=64))]
    waiters: u32,
    /// The id of the first of them (ids are unique across the step's processes).
    #[arg(long)]
    first_id: u32,
    #[arg(long)]
    hold_us: u64,
    /// The most holds this process takes.
    #[arg(long)]
    max_holds: u64,
}

/// What a child prints: its waiters' records, or why it could not run them.
#[derive(Debug, Serialize, Deserialize)]
struct ChildReport {
    #[serde(default)]
    waiters: Vec<WaiterRecord>,
    #[serde(default)]
    error: Option<String>,
}

/// The acquirer a contender uses, over `urls`.
pub(super) fn acquirer(
    kind: Kind,
    urls: &[String],
    ttl: Duration,
    prefix: &str,
) -> Result<Acquirer, String> {
    match kind {
        Kind::Rslock => {
            // rslock as a new user gets it: its own retry loop and redis-rs's default socket.
            let rslock = Rslock::with_its_retry("rslock", urls, ttl, prefix.to_owned(), false)?;
            Ok(Acquirer::Rslock(rslock))
        }
        _ => {
            let options = LockOptions::new()
                .ttl(ttl)
                .patience(Patience::Once)
                .key_prefix(prefix.as_bytes().to_vec());
            let lock = Lock::new(urls.iter().cloned(), options)
                .map_err(|e| format!("{}: {e}", kind.name()))?;
            Ok(Acquirer::Lock(lock, kind))
        }
    }
}

/// Runs `quorumlock bench-waiters` (see the module's protocol).
pub async fn run_waiters(args: WaitersArgs) -> Result<(), String> {
    let report = match tokio::time::timeout(READY_CAP * 2, child(&args)).await {
        Ok(Ok(waiters)) => ChildReport {
            waiters,
            error: None,
        },
        Ok(Err(error)) => ChildReport {
            waiters: Vec::new(),
            error: Some(error),
        },
        Err(_) => ChildReport {
            waiters: Vec::new(),
            error: Some("timed out".to_owned()),
        },
    };
    let line = serde_json::to_string(&report).map_err(|e| format!("report: {e}"))?;
    let mut stdout = tokio::io::stdout();
    stdout
        .write_all(format!("{line}\n").as_bytes())
        .await
        .map_err(|e| format!("stdout: {e}"))?;
    stdout.flush().await.map_err(|e| format!("stdout: {e}"))
}

async fn child(args: &WaitersArgs) -> Result<Vec<WaiterRecord>, String> {
    let ttl = Duration::from_millis(args.ttl_ms);
    let acquirer = Arc::new(acquirer(args.contender, &args.nodes, ttl, &args.prefix)?);
    acquirer
        .warm_up(&format!("{}:warm:{}", args.key, args.first_id))
        .await;
    let mut stdout = tokio::io::stdout();
    stdout
        .write_all(b"ready\n")
        .await
        .and(stdout.flush().await)
        .map_err(|e| format!("stdout: {e}"))?;
    let mut lines = BufReader::new(tokio::io::stdin()).lines();
    let go = tokio::time::timeout(READY_CAP, lines.next_line())
        .await
        .map_err(|_| "never told to go".to_owned())?
        .map_err(|e| format!("stdin: {e}"))?
        .ok_or_else(|| "stdin closed before go".to_owned())?;
    let (start, end) = parse_go(&go).ok_or_else(|| format!("bad go line {go:?}"))?;
    // Stdin closing from now on means the parent is gone: stop at once.
    let parent_gone = async move {
        let _ = lines.next_line().await;
    };
    tokio::time::sleep(until(start)).await;
    let budget = Arc::new(Budget::new(args.max_holds));
    let hold = Duration::from_micros(args.hold_us);
    let tasks: Vec<_> = (0..args.waiters)
        .map(|i| {
            let (acquirer, budget) = (Arc::clone(&acquirer), Arc::clone(&budget));
            let key = args.key.clone();
            let id = args.first_id + i;
            tokio::spawn(async move { waiter(&acquirer, &key, id, hold, end, &budget).await })
        })
        .collect();
    let joined = async {
        let mut records = Vec::new();
        for task in tasks {
            if let Ok(record) = task.await {
                records.push(record);
            }
        }
        records
    };
    tokio::select! {
        records = tokio::time::timeout(until(end) + REPORT_CAP, joined) => {
            records.map_err(|_| "waiters ran past the step".to_owned())
        }
        () = parent_gone => Err("stdin closed: the parent is gone".to_owned()),
    }
}

fn parse_go(line: &str) -> Option<(u64, u64)> {
    let mut words = line.split_whitespace();
    if words.next()? != "go" {
        return None;
    }
    let start = words.next()?.parse().ok()?;
    let end = words.next()?.parse().ok()?;
    Some((start, end))
}

/// One step's worth of child processes.
pub(super) struct Step<'a> {
    pub(super) urls: &'a [String],
    pub(super) kind: Kind,
    pub(super) key: &'a str,
    pub(super) prefix: &'a str,
    pub(super) ttl: Duration,
    pub(super) processes: u32,
    pub(super) per_process: u32,
    pub(super) hold: Duration,
    pub(super) slice: Duration,
    pub(super) max_holds: u64,
}

/// A started child with its pipes.
struct Running {
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: Lines<BufReader<ChildStdout>>,
}

/// The children of one step: each one not reaped yet is killed, by its PID, when this is
/// dropped (success, failure, or the bench itself being stopped).
struct Children(Vec<Running>);

impl Drop for Children {
    fn drop(&mut self) {
        for running in &mut self.0 {
            // SIGKILL to this child's PID; a no-op once it has been reaped.
            let _ = running.child.start_kill();
        }
    }
}

/// Runs one step in `step.processes` children; returns every waiter's record, the step's wall
/// time, and how many children did not report.
pub(super) async fn across_processes(
    step: &Step<'_>,
) -> Result<(Vec<WaiterRecord>, Duration, u64), String> {
    let exe = std::env::current_exe().map_err(|e| format!("the quorumlock binary: {e}"))?;
    let mut children = Children(Vec::new());
    for p in 0..step.processes {
        let mut child = Command::new(&exe)
            .arg("bench-waiters")
            .arg("--nodes")
            .arg(step.urls.join(","))
            .args(["--contender", step.kind.name(), "--key", step.key])
            .args(["--prefix", step.prefix])
            .arg(format!("--ttl-ms={}", step.ttl.as_millis()))
            .arg(format!("--waiters={}", step.per_process))
            .arg(format!("--first-id={}", p * step.per_process))
            .arg(format!("--hold-us={}", step.hold.as_micros()))
            .arg(format!(
                "--max-holds={}",
                step.max_holds / u64::from(step.processes)
            ))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| format!("starting {}: {e}", exe.display()))?;
        let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
            return Err("a child without pipes".to_owned());
        };
        children.0.push(Running {
            child,
            stdin: Some(stdin),
            stdout: BufReader::new(stdout).lines(),
        });
    }
    for running in &mut children.0 {
        let line = read_line(&mut running.stdout, READY_CAP).await?;
        if line != "ready" {
            return Err(child_error(&line));
        }
    }
    let start = now_ns() + u64::try_from(GO_LEAD.as_nanos()).unwrap_or(0);
    let end = start + u64::try_from(step.slice.as_nanos()).unwrap_or(0);
    for running in &mut children.0 {
        if let Some(stdin) = running.stdin.as_mut() {
            stdin
                .write_all(format!("go {start} {end}\n").as_bytes())
                .await
                .and(stdin.flush().await)
                .map_err(|e| format!("telling a child to go: {e}"))?;
        }
    }
    let mut records = Vec::new();
    let mut lost = 0;
    for running in &mut children.0 {
        let cap = until(end) + REPORT_CAP;
        match read_line(&mut running.stdout, cap).await {
            Ok(line) => match serde_json::from_str::<ChildReport>(&line) {
                Ok(ChildReport { waiters, error }) if error.is_none() => records.extend(waiters),
                Ok(_) | Err(_) => lost += 1,
            },
            Err(_) => lost += 1,
        }
        // Closing stdin lets a child that has reported exit; one that has not stops too.
        running.stdin = None;
    }
    let wall = Duration::from_nanos(now_ns().saturating_sub(start)).min(step.slice);
    for running in &mut children.0 {
        if tokio::time::timeout(REPORT_CAP, running.child.wait())
            .await
            .is_err()
        {
            let _ = running.child.start_kill();
            let _ = tokio::time::timeout(REPORT_CAP, running.child.wait()).await;
        }
    }
    Ok((records, wall, lost))
}

async fn read_line(
    lines: &mut Lines<BufReader<ChildStdout>>,
    cap: Duration,
) -> Result<String, String> {
    tokio::time::timeout(cap, lines.next_line())
        .await
        .map_err(|_| "a child did not answer in time".to_owned())?
        .map_err(|e| format!("reading a child: {e}"))?
        .ok_or_else(|| "a child exited without a word".to_owned())
}

/// The reason a child gave on its line, or the line itself.
fn child_error(line: &str) -> String {
    match serde_json::from_str::<ChildReport>(line) {
        Ok(ChildReport {
            error: Some(error), ..
        }) => format!("a waiter process: {error}"),
        _ => format!("a waiter process said {line:?}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_go_line_carries_start_and_end() {
        assert_eq!(parse_go("go 10 20"), Some((10, 20)));
        assert_eq!(parse_go("ready"), None);
        assert_eq!(parse_go("go 10"), None);
    }
}
