//! `quorumlock elect` and `quorumlock status` as a shell runs them: the built binary, `sh`
//! commands under it, three real Redis masters that persist every write (local processes).
//! Each test is bounded; every process is killed on drop, and a failed test kills the process
//! group each command wrote to the scratch directory.

mod common;

use std::process::Stdio;

use common::{Scratch, bounded, cluster_on, finish, wait_for_file};
use quorumlock_harness::{Backend, ClusterOptions, Persistence, TestCluster};
use redis::AsyncCommands;
use rustix::process::{Pid, Signal, kill_process};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

/// `elect`'s status for a lost leadership.
const LOST: i32 = 69;
/// Its status for bad usage.
const USAGE: i32 = 64;
/// Its status for a campaign that ended unelected.
const NOT_ELECTED: i32 = 75;
/// 128 + SIGTERM.
const TERMINATED: i32 = 143;

/// Settings under which neither an expiry nor a re-read on the retry period happens within a
/// test's bound: a hand-over seen is a wake-up's.
const SLOW: [&str; 6] = [
    "--lease-duration",
    "120s",
    "--renew-deadline",
    "80s",
    "--retry-period",
    "40s",
];

/// `quorumlock <args>` over the cluster's nodes, output piped, no `QUORUMLOCK_*` variable of the
/// test's own environment.
fn start(cluster: &TestCluster, args: &[&str]) -> Child {
    Command::new(env!("CARGO_BIN_EXE_quorumlock"))
        .args(args)
        .env("QUORUMLOCK_NODES", cluster.urls().join(","))
        .env_remove("QUORUMLOCK_TERM")
        .env_remove("QUORUMLOCK_FENCE")
        .env("LC_ALL", "C")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap()
}

/// A candidate whose command writes its group id and term, then waits (at most 20 s) for
/// `stop` to exist, and exits 0.
fn candidate(cluster: &TestCluster, scratch: &Scratch, name: &str) -> Child {
    let [pgid, term, stop] = ["pgid", "term", "stop"].map(|what| {
        let path = scratch.path(&format!("{name}.{what}"));
        path.to_str().unwrap().to_owned()
    });
    let script = r#"echo $$ > "$1"; echo "$QUORUMLOCK_TERM" > "$2"
for _ in $(seq 400); do [ -e "$3" ] && exit 0; sleep 0.05; done; exit 1"#;
    let mut args = vec!["elect", "sched", "--value", name];
    args.extend(SLOW);
    args.extend(["--", "sh", "-c", script, "sh", &pgid, &term, &stop]);
    start(cluster, &args)
}

/// The term a candidate's command wrote.
fn term(scratch: &Scratch, name: &str) -> u64 {
    let text = std::fs::read_to_string(scratch.path(&format!("{name}.term"))).unwrap();
    text.trim().parse().unwrap()
}

/// A leads; B waits; an observer prints A; A's command ends, A resigns and B is elected at once
/// (not by the 120 s lease) with a larger term, which the observer prints; SIGTERM ends it.
// promise: elect-cli
#[tokio::test]
async fn a_leader_resigns_when_its_command_ends_and_the_next_is_elected_at_once() {
    bounded(async {
        let cluster = cluster_on(Backend::Process).await.unwrap();
        let scratch = Scratch::new();
        let mut observer = start(&cluster, &["elect", "sched", "--observe"]);
        let mut lines = BufReader::new(observer.stdout.take().unwrap()).lines();
        assert_eq!(
            lines.next_line().await.unwrap().as_deref(),
            Some("no leader")
        );

        let a = candidate(&cluster, &scratch, "a");
        wait_for_file(&scratch.path("a.term")).await;
        let a_term = term(&scratch, "a");
        assert_eq!(
            lines.next_line().await.unwrap(),
            Some(format!("term {a_term} leader a"))
        );
        let b = candidate(&cluster, &scratch, "b");
        std::fs::write(scratch.path("a.stop"), "").unwrap();
        let (code, stderr) = finish(a).await;
        assert_eq!(code, Some(0), "{stderr}");

        wait_for_file(&scratch.path("b.term")).await;
        let b_term = term(&scratch, "b");
        assert!(b_term > a_term, "terms grow: {a_term} then {b_term}");
        // B may be heard first with the fence a quorum of its grants took, below its term
        // until its write-back lands; never with A's or an earlier term.
        let expected = format!("term {b_term} leader b");
        loop {
            let line = lines.next_line().await.unwrap().unwrap();
            if line == expected {
                break;
            }
            let early = line
                .strip_prefix("term ")
                .and_then(|rest| rest.strip_suffix(" leader b"))
                .and_then(|term| term.parse::<u64>().ok());
            assert!(
                line == "no leader" || early.is_some_and(|term| a_term < term && term < b_term),
                "heard {line:?} before {expected:?}"
            );
        }
        std::fs::write(scratch.path("b.stop"), "").unwrap();
        let (code, stderr) = finish(b).await;
        assert_eq!(code, Some(0), "{stderr}");

        let pid = Pid::from_raw(i32::try_from(observer.id().unwrap()).unwrap()).unwrap();
        kill_process(pid, Signal::TERM).unwrap();
        assert_eq!(observer.wait().await.unwrap().code(), Some(TERMINATED));
    })
    .await;
}

/// A leader whose key is deleted on every node finds it taken at its next renewal: the command
/// gets SIGTERM and `elect` exits 69.
// promise: elect-cli
#[tokio::test]
async fn a_lost_leadership_stops_the_command_and_exits_69() {
    bounded(async {
        let cluster = cluster_on(Backend::Process).await.unwrap();
        let scratch = Scratch::new();
        let (group, stopped) = (scratch.path("lost.pgid"), scratch.path("stopped"));
        let script = r#"trap 'echo stopped > "$2"; exit 0' TERM; echo $$ > "$1"; sleep 60 & wait"#;
        let elect = start(
            &cluster,
            &[
                "elect",
                "lost",
                "--lease-duration",
                "3s",
                "--renew-deadline",
                "2s",
                "--retry-period",
                "200ms",
                "--",
                "sh",
                "-c",
                script,
                "sh",
                group.to_str().unwrap(),
                stopped.to_str().unwrap(),
            ],
        );
        wait_for_file(&group).await;
        for node in 0..cluster.len() {
            let mut connection = cluster.connection(node).await.unwrap();
            let _: i64 = connection.del("quorumlock:lost").await.unwrap();
        }
        let (code, stderr) = finish(elect).await;
        assert_eq!(code, Some(LOST), "{stderr}");
        assert!(stderr.contains("quorumlock elect: lock lost"), "{stderr}");
        assert!(stopped.exists(), "the command did not get SIGTERM");
    })
    .await;
}

/// Nodes that do not persist every write cannot vote for a term: `elect` exits 75 at once and
/// says why, and never runs the command (before, it campaigned for ever).
// promise: wait-ends-on-permanent
#[tokio::test]
async fn nodes_that_cannot_vote_for_a_term_end_the_campaign_with_75() {
    bounded(async {
        let options = ClusterOptions::default()
            .nodes(3)
            .persistence(Persistence::None);
        let cluster = TestCluster::start(options).await.unwrap();
        let scratch = Scratch::new();
        let ran = scratch.path("ran");
        let ran_arg = ran.to_str().unwrap();
        let elect = start(&cluster, &["elect", "e", "--", "touch", ran_arg]);
        let (code, stderr) = finish(elect).await;
        assert_eq!(code, Some(NOT_ELECTED), "{stderr}");
        assert!(stderr.contains("persist every write"), "{stderr}");
        assert!(stderr.contains("--volatile-nodes"), "{stderr}");
        assert!(!ran.exists(), "the command ran");
    })
    .await;
}

/// No nodes, no command, settings out of order: 64, nothing run.
#[tokio::test]
async fn bad_usage_exits_64() {
    bounded(async {
        let cluster = cluster_on(Backend::Process).await.unwrap();
        let usage = async |args: &[&str], nodes: bool| {
            let mut command = start(&cluster, args);
            if !nodes {
                command.kill().await.unwrap();
                let mut without = Command::new(env!("CARGO_BIN_EXE_quorumlock"));
                without
                    .args(args)
                    .env_remove("QUORUMLOCK_NODES")
                    .stdout(Stdio::null())
                    .stderr(Stdio::piped())
                    .kill_on_drop(true);
                command = without.spawn().unwrap();
            }
            finish(command).await
        };
        let (code, stderr) = usage(&["elect", "e", "--", "true"], false).await;
        assert_eq!(code, Some(USAGE), "{stderr}");
        assert!(stderr.contains("no nodes"), "{stderr}");
        let (code, stderr) = usage(&["elect", "e"], true).await;
        assert_eq!(code, Some(USAGE), "{stderr}");
        let (code, stderr) =
            usage(&["elect", "e", "--retry-period", "10s", "--", "true"], true).await;
        assert_eq!(code, Some(USAGE), "{stderr}");
        assert!(stderr.contains("retry period"), "{stderr}");
    })
    .await;
}

/// `status` shows the leader's token prefix, the time its key has left, the fence (the term)
/// and its value on the nodes, and one holder on a quorum; once it resigned, free.
// promise: status-cli
#[tokio::test]
async fn status_shows_the_holder_node_by_node() {
    bounded(async {
        let cluster = cluster_on(Backend::Process).await.unwrap();
        let scratch = Scratch::new();
        let a = candidate(&cluster, &scratch, "a");
        wait_for_file(&scratch.path("a.term")).await;
        let a_term = term(&scratch, "a");

        let output = start(&cluster, &["status", "sched"])
            .wait_with_output()
            .await
            .unwrap();
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert_eq!(output.status.code(), Some(0), "{stdout}");
        // node, addr, holder, leader value, ttl, fence
        let term = a_term.to_string();
        let rows: Vec<Vec<&str>> = stdout
            .lines()
            .map(|line| line.split_whitespace().collect::<Vec<_>>())
            .filter(|row| row.len() == 6 && row[2].len() == 8 && row[3] == "a" && row[5] == term)
            .collect();
        assert!(rows.len() >= 2, "the leader on a quorum:\n{stdout}");
        assert!(stdout.contains("held by "), "{stdout}");
        assert!(stdout.contains("(quorum 2)"), "{stdout}");

        std::fs::write(scratch.path("a.stop"), "").unwrap();
        let (code, stderr) = finish(a).await;
        assert_eq!(code, Some(0), "{stderr}");
        let output = start(&cluster, &["status", "sched"])
            .wait_with_output()
            .await
            .unwrap();
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert!(stdout.ends_with("free\n"), "{stdout}");
    })
    .await;
}

/// `elect --key-prefix --fence-prefix` keeps its key and term counter under the prefixes given:
/// its term is the counter under `app-fence:`, and nothing is left under the defaults.
#[tokio::test]
async fn elect_keeps_its_keys_under_the_prefixes_given() {
    bounded(async {
        let cluster = cluster_on(Backend::Process).await.unwrap();
        let child = start(
            &cluster,
            &[
                "elect",
                "sched",
                "--key-prefix",
                "app:",
                "--fence-prefix",
                "app-fence:",
                "--",
                "sh",
                "-c",
                "echo \"$QUORUMLOCK_TERM\"",
            ],
        );
        let output = child.wait_with_output().await.unwrap();
        let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
        assert_eq!(output.status.code(), Some(0), "{stdout}");
        let term: i64 = stdout.trim().parse().unwrap();
        let mut counters = 0;
        for node in 0..cluster.len() {
            let mut connection = cluster.connection(node).await.unwrap();
            let counter: Option<i64> = connection.get("app-fence:sched").await.unwrap();
            counters += usize::from(counter == Some(term));
            let defaults: usize = connection
                .exists(&["quorumlock:sched", "quorumlock-fence:sched"])
                .await
                .unwrap();
            assert_eq!(defaults, 0, "node {node}");
        }
        assert!(counters >= 2, "the term on a quorum's counters");
    })
    .await;
}

/// `status --key-prefix --fence-prefix` finds a lock and its fence made with prefixes of their
/// own, which the default prefixes do not see.
// promise: status-cli
#[tokio::test]
async fn status_reads_a_lock_under_its_own_key_prefix() {
    bounded(async {
        let cluster = cluster_on(Backend::Process).await.unwrap();
        let lock = quorumlock::Lock::new(
            cluster.urls(),
            quorumlock::LockOptions::new()
                .key_prefix("app:")
                .fence_prefix("app-fence:")
                .fencing(true),
        )
        .unwrap();
        let guard = lock.try_acquire("job").await.unwrap();
        let status = |args: &'static [&'static str]| {
            let child = start(&cluster, args);
            async move {
                let output = child.wait_with_output().await.unwrap();
                (
                    output.status.code(),
                    String::from_utf8_lossy(&output.stdout).into_owned(),
                )
            }
        };
        let (code, stdout) = status(&[
            "status",
            "job",
            "--key-prefix",
            "app:",
            "--fence-prefix",
            "app-fence:",
        ])
        .await;
        assert_eq!(code, Some(0), "{stdout}");
        assert!(stdout.contains("held by "), "{stdout}");
        // node, addr, holder, leader value, ttl, fence: the fence read under its own prefix.
        let fence = guard.fence().unwrap().to_string();
        let fenced = stdout
            .lines()
            .filter(|line| line.split_whitespace().nth(5) == Some(fence.as_str()))
            .count();
        assert!(fenced >= 2, "the fence on a quorum:\n{stdout}");
        let (code, stdout) = status(&["status", "job"]).await;
        assert_eq!(code, Some(0), "{stdout}");
        assert!(stdout.ends_with("free\n"), "{stdout}");
        guard.release().await;
    })
    .await;
}
