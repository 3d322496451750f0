//! `quorumlock elect`: a command run while this process leads an election, as `run` runs one
//! under a lock. Campaign (waiting, woken, for as long as it takes), run the command with the
//! term in its environment, stop it if leadership is lost, resign when it has exited, and exit
//! with its status. With `--observe`, print each change of leader instead.

use std::ffi::OsString;
use std::process::ExitCode;
use std::time::Duration;

use quorumlock::{Election, ElectionOptions, Leader, LockOptions, NodeError, NodeReply};

use crate::flags::{self, NODES_ENV, Prefixes};
use crate::run::child::{Held, Signals, run_under};
use crate::run::exit;

/// How long a campaign goes on before `elect` says it is still campaigning, and why it may be.
const NOTICE_AFTER: Duration = Duration::from_secs(10);

/// Arguments of `quorumlock elect`.
#[derive(clap::Args, Debug)]
#[command(after_help = after_help())]
pub struct ElectArgs {
    /// The election's name: every `elect` of the same name over the same nodes competes.
    name: String,
    /// Comma-separated node URLs (redis://[user:password@]host:port[/db]); the nodes must
    /// persist every write (AOF, appendfsync always): terms are fences.
    #[arg(long, value_delimiter = ',', env = NODES_ENV)]
    nodes: Vec<String>,
    /// Let nodes that do not persist every write vote (fence_volatile_nodes): terms grow while
    /// at most a minority of them loses its data at once; a node that (re)started sits out for
    /// the lease duration and the drift first.
    #[arg(long)]
    volatile_nodes: bool,
    /// What this candidate publishes as the leader's value (an address, say).
    #[arg(long, default_value = "")]
    value: String,
    /// The prefixes every candidate and observer of the election uses.
    #[command(flatten)]
    prefixes: Prefixes,
    /// How long the others wait for a leader that vanished without resigning.
    #[arg(long, default_value = "15s", value_parser = flags::duration)]
    lease_duration: Duration,
    /// How long after its last renewal a leader that cannot renew keeps leading.
    #[arg(long, default_value = "10s", value_parser = flags::duration)]
    renew_deadline: Duration,
    /// How often the leader renews (and an observer reads again without a message).
    #[arg(long, default_value = "2s", value_parser = flags::duration)]
    retry_period: Duration,
    /// After leadership is lost and the command got SIGTERM, how long before SIGKILL.
    #[arg(long, default_value = "10s", value_parser = flags::duration)]
    kill_after: Duration,
    /// Print each change of leader (`term N leader VALUE`, or `no leader`) instead of
    /// campaigning; until SIGINT, SIGTERM or SIGHUP.
    #[arg(long, conflicts_with = "command")]
    observe: bool,
    /// The command and its arguments, after `--`.
    #[arg(
        last = true,
        required_unless_present = "observe",
        value_name = "COMMAND"
    )]
    command: Vec<OsString>,
}

/// What `--help` says after the flags.
fn after_help() -> String {
    format!(
        "\
The command runs as under `run` (its own process group, signals forwarded), with
QUORUMLOCK_RESOURCE (the name), QUORUMLOCK_TERM and QUORUMLOCK_FENCE (both the term, larger than
every earlier leader's) in its environment. If leadership is lost, the group gets SIGTERM, then
SIGKILL after --kill-after; when the command exits, elect resigns, and the next candidate is
elected at once.

{}

Examples:
  quorumlock elect scheduler --value 10.0.0.7:8080 -- ./scheduler
  quorumlock elect scheduler --observe",
        exit::HELP
    )
}

/// Runs `quorumlock elect` and returns its exit status; messages are on stderr, an
/// observer's changes on stdout.
pub async fn run(args: ElectArgs) -> ExitCode {
    ExitCode::from(elect(args).await)
}

async fn elect(args: ElectArgs) -> u8 {
    let fail = |code: u8, message: &str| {
        eprintln!("quorumlock elect: {message}");
        code
    };
    let options = ElectionOptions::new()
        .lease_duration(args.lease_duration)
        .renew_deadline(args.renew_deadline)
        .retry_period(args.retry_period);
    let lock_options = args.prefixes.apply(
        LockOptions::new()
            .ttl(args.lease_duration)
            .fencing(true)
            .fence_volatile_nodes(args.volatile_nodes),
    );
    let election = match flags::lock_over(args.nodes, lock_options).and_then(|lock| {
        Election::new(&lock, &args.name, options).map_err(|error| error.to_string())
    }) {
        Ok(election) => election,
        Err(message) => return fail(exit::USAGE, &message),
    };
    let mut signals = match Signals::install("elect") {
        Ok(signals) => signals,
        Err(code) => return code,
    };
    if args.observe {
        return observe(&election, &mut signals).await;
    }
    let Some((program, program_args)) = args.command.split_first() else {
        return fail(exit::USAGE, "no command given after --");
    };
    let campaign = election.campaign(args.value);
    let mut campaign = std::pin::pin!(campaign);
    let mut notice = std::pin::pin!(tokio::time::sleep(NOTICE_AFTER));
    let mut noticed = false;
    let campaign = loop {
        tokio::select! {
            biased;
            signal = signals.next() => break Err(signal),
            result = &mut campaign => break Ok(result),
            () = &mut notice, if !noticed => {
                noticed = true;
                eprintln!(
                    "quorumlock elect: still campaigning after {}: another process leads, or \
                     too few nodes vote (terms are fences: the nodes must persist every write, \
                     or give --volatile-nodes)",
                    humantime::format_duration(NOTICE_AFTER)
                );
            }
        }
    };
    let leadership = match campaign {
        Ok(Ok(leadership)) => leadership,
        Ok(Err(error)) => {
            // The flag, where the library's message names the option.
            let volatile = error
                .outcomes()
                .iter()
                .any(|outcome| outcome.reply == NodeReply::Failed(NodeError::NotDurable));
            let hint = if volatile {
                " (run the nodes with AOF and appendfsync always, or give --volatile-nodes)"
            } else {
                ""
            };
            return fail(exit::NOT_ACQUIRED, &format!("not elected: {error}{hint}"));
        }
        Err(signal) => {
            return fail(
                exit::of_signal(signal.as_raw()),
                &format!("signal {} before being elected", signal.as_raw()),
            );
        }
    };
    let held = Held {
        tool: "elect",
        resource: &args.name,
        slot: None,
        fence: Some(leadership.term()),
        term: Some(leadership.term()),
    };
    let code = run_under(
        program,
        program_args,
        &held,
        &leadership.lease(),
        args.kill_after,
        &mut signals,
    )
    .await;
    leadership.resign().await;
    code
}

/// Prints each change of leader until a signal; a read that fails is reported and tried
/// again a retry period later.
async fn observe(election: &Election, signals: &mut Signals) -> u8 {
    let mut observer = election.observe().await;
    loop {
        let change = tokio::select! {
            biased;
            signal = signals.next() => return exit::of_signal(signal.as_raw()),
            change = observer.changed() => change,
        };
        match change {
            Ok(leader) => println!("{}", line(leader.as_ref())),
            Err(error) => eprintln!("quorumlock elect: the leader could not be read: {error}"),
        }
    }
}

/// One line of `--observe`'s output.
fn line(leader: Option<&Leader>) -> String {
    match leader {
        Some(leader) => format!(
            "term {} leader {}",
            leader.term,
            String::from_utf8_lossy(&leader.value)
        ),
        None => "no leader".to_owned(),
    }
}
