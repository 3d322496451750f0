//! The `quorumlock` command-line tool: try the lock against your own Redis masters, or against
//! five local ones it starts itself; run a command under the lock; benchmark it; run chaos
//! scenarios.
//!
//! This file is the clap wiring only: each subcommand lives in its own module ([`demo`],
//! [`run`], [`elect`], [`status`], [`bench`], [`chaos`]), over what they share: the [`flags`] conventions, [`json`] output,
//! [`svg`] plot helpers and [`text_table`]s.

mod bench;
mod chaos;
mod demo;
mod elect;
mod flags;
mod json;
mod run;
mod status;
mod svg;
mod text_table;
mod units;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(
    version,
    about = "Redlock distributed locks over independent Redis masters"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Take a lock, show what each node did, show a second client being refused, release.
    ///
    /// Without --nodes it starts five local redis-server processes (redis-server must be on
    /// PATH, or named by QUORUMLOCK_REDIS_SERVER) and stops them when done.
    Demo(demo::DemoArgs),
    /// Run a command under the lock, like flock(1) across hosts: acquire, keep the lock alive
    /// while the command runs, stop the command if the lock is lost, release when it exits.
    ///
    /// Exits with the command's status; 75 when the lock was not acquired, 69 when it was lost
    /// (see the exit statuses below). Needs --nodes or QUORUMLOCK_NODES.
    Run(run::RunArgs),
    /// Run a command while this process leads an election: campaign (woken, never polling),
    /// run the command with the term in QUORUMLOCK_TERM, stop it if leadership is lost,
    /// resign when it exits. With --observe, print each change of leader.
    ///
    /// Exit statuses as `run`'s (69: leadership lost). Needs --nodes or QUORUMLOCK_NODES.
    Elect(elect::ElectArgs),
    /// Show who holds a resource (or leads an election), node by node: the holder's token
    /// prefix, the time its key has left, the fence counter, a leader's value.
    ///
    /// Exits 1 when fewer than a quorum of nodes could be read. Needs --nodes or
    /// QUORUMLOCK_NODES.
    Status(status::StatusArgs),
    /// Benchmark the quorum lock against the single-node lock, side by side in one run.
    ///
    /// Without --nodes it starts local redis-server processes on 127.0.0.1 (some behind fault
    /// proxies) and stops them when done.
    Bench(bench::BenchArgs),
    /// Chaos scenarios: faults against a local five-node cluster while clients contend, and a
    /// check of the history for two holders at once (mutual-exclusion violations).
    ///
    /// Exits non-zero when a scenario expected to be safe shows a violation, or (with
    /// --defect, the mutation score) when a defect that can break mutual exclusion survives
    /// every scenario.
    Chaos(chaos::ChaosArgs),
    /// Waiters in a process of their own, for `bench`'s contended section (started by `bench`,
    /// which reads their records on stdout).
    #[command(hide = true)]
    BenchWaiters(bench::WaitersArgs),
}

#[tokio::main]
async fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_writer(std::io::stderr)
        .init();
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(error) => return parse_failure(&error),
    };
    let result = match cli.command {
        Command::Demo(args) => demo::run(args).await,
        Command::Run(args) => return run::run(args).await,
        Command::Elect(args) => return elect::run(args).await,
        Command::Status(args) => status::run(args).await,
        Command::Bench(args) => bench::run(args).await,
        Command::Chaos(args) => chaos::run_chaos(args).await,
        Command::BenchWaiters(args) => bench::run_waiters(args).await,
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("error: {message}");
            ExitCode::FAILURE
        }
    }
}

/// Prints clap's message (or the help) and picks the status: clap's own, except that `run`
/// and `elect` report bad usage as EX_USAGE (64), as flock(1) does, so that its usage errors are not 2,
/// which the command under it may return.
fn parse_failure(error: &clap::Error) -> ExitCode {
    let _ = error.print();
    let run_invoked = std::env::args_os()
        .nth(1)
        .is_some_and(|arg| arg == "run" || arg == "elect");
    if error.use_stderr() && run_invoked {
        ExitCode::from(run::exit::USAGE)
    } else {
        ExitCode::from(u8::try_from(error.exit_code()).unwrap_or(1))
    }
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    use super::*;

    #[test]
    fn the_wiring_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn every_duration_flag_takes_a_unit() {
        for args in [
            &["quorumlock", "demo", "--ttl", "500ms"][..],
            &["quorumlock", "bench", "--ttl", "2s"],
            &["quorumlock", "chaos", "--ttl", "400ms", "--duration", "1m"],
            &[
                "quorumlock",
                "run",
                "--resource",
                "r",
                "--ttl",
                "1m",
                "--wait",
                "0s",
                "--kill-after",
                "500ms",
                "--",
                "true",
            ],
        ] {
            assert!(Cli::try_parse_from(args).is_ok(), "{args:?}");
        }
        for args in [
            &["quorumlock", "demo", "--ttl-ms", "500"][..],
            &["quorumlock", "bench", "--ttl", "2000"],
            &["quorumlock", "chaos", "--duration", "10"],
            &[
                "quorumlock",
                "run",
                "--resource",
                "r",
                "--wait",
                "10",
                "--",
                "true",
            ],
        ] {
            assert!(Cli::try_parse_from(args).is_err(), "{args:?}");
        }
    }
}
