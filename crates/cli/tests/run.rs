//! `quorumlock run` as a shell runs it: the built binary, real commands (`sh`, `bash`) under it,
//! and three real Redis masters that persist every write (local processes; the exclusion and
//! `--wait 0` tests also on containers when docker is available).
//!
//! Each test is bounded as a whole; polling for a file a command writes is bounded in count.
//! On failure, every `run` process is killed (kill-on-drop), and so is the process group of
//! each command that wrote its group id to the scratch directory.
//!
//! Over 500 lines as one file on purpose: it is the one file the task names for these tests,
//! and the scenarios share the process and key helpers at its top (the cluster, the bound and
//! the scratch directory are in `common/`, shared with `elect.rs`).

use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

mod common;

use common::{BACKENDS, Scratch, bounded, cluster_on, finish, wait_for_file};
use quorumlock_harness::{Backend, TestCluster};
use redis::AsyncCommands;
use rustix::process::{Pid, Signal, kill_process};
use tokio::process::{Child, Command};

/// `run`'s status for a lost lock.
const LOCK_LOST: i32 = 69;
/// `run`'s status for a lock not acquired.
const NOT_ACQUIRED: i32 = 75;
/// `run`'s status for bad usage.
const USAGE: i32 = 64;

/// Starts `quorumlock run --nodes <the cluster's> <flags> -- <command>`, with its output piped
/// and no `QUORUMLOCK_*` variable of the test's own environment.
fn start_run(cluster: &TestCluster, flags: &[&str], command: &[&str]) -> Child {
    Command::new(env!("CARGO_BIN_EXE_quorumlock"))
        .arg("run")
        .arg("--nodes")
        .arg(cluster.urls().join(","))
        .args(flags)
        .arg("--")
        .args(command)
        .env_remove("QUORUMLOCK_NODES")
        .env_remove("QUORUMLOCK_FENCE")
        .env("LC_ALL", "C")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap()
}

/// The nodes that hold the lock key of `resource`.
async fn holders(cluster: &TestCluster, resource: &str) -> Vec<usize> {
    let mut holders = Vec::new();
    for node in 0..cluster.len() {
        if key_exists(cluster, node, resource).await {
            holders.push(node);
        }
    }
    holders
}

/// Whether the lock key of `resource` is on node `node`.
async fn key_exists(cluster: &TestCluster, node: usize, resource: &str) -> bool {
    let mut connection = cluster.connection(node).await.unwrap();
    connection
        .exists(format!("quorumlock:{resource}"))
        .await
        .unwrap()
}

async fn assert_no_key(cluster: &TestCluster, resource: &str) {
    for node in 0..cluster.len() {
        assert!(
            !key_exists(cluster, node, resource).await,
            "node {node} still has the key of {resource:?}"
        );
    }
}

/// One line of the contention test's log: `start|end <pid> <ns since the epoch>`.
#[derive(Debug, PartialEq)]
struct Stamp {
    kind: String,
    pid: u32,
    nanos: u128,
}

fn stamps(log: &Path) -> Vec<Stamp> {
    std::fs::read_to_string(log)
        .unwrap()
        .lines()
        .map(|line| {
            let fields: Vec<&str> = line.split(' ').collect();
            let [kind, pid, nanos] = fields[..] else {
                panic!("bad log line {line:?}");
            };
            Stamp {
                kind: kind.to_owned(),
                pid: pid.parse().unwrap(),
                nanos: nanos.parse().unwrap(),
            }
        })
        .collect()
}

// promise: run-stops-when-lost
#[tokio::test]
async fn three_runs_on_one_resource_take_turns() {
    bounded(async {
        for backend in BACKENDS {
            let Some(cluster) = cluster_on(backend).await else {
                continue;
            };
            let scratch = Scratch::new();
            let log = scratch.path("log");
            let log = log.to_str().unwrap();
            let script = r#"echo "start $$ $(date +%s%N)" >> "$1"; sleep 0.3; echo "end $$ $(date +%s%N)" >> "$1""#;
            let runs: Vec<Child> = (0..3)
                .map(|_| {
                    start_run(
                        &cluster,
                        &["--resource", "turns", "--wait", "30s"],
                        &["sh", "-c", script, "sh", log],
                    )
                })
                .collect();
            for run in runs {
                let (code, stderr) = finish(run).await;
                assert_eq!(code, Some(0), "{backend:?}: {stderr}");
            }
            let stamps = stamps(Path::new(log));
            assert_eq!(stamps.len(), 6, "{backend:?}: {stamps:?}");
            // Each command's start is directly followed by its own end: no two intervals
            // overlap. And the clock agrees with the order of the lines.
            for pair in stamps.chunks(2) {
                assert_eq!(
                    (pair[0].kind.as_str(), pair[1].kind.as_str()),
                    ("start", "end"),
                    "{backend:?}: {stamps:?}"
                );
                assert_eq!(pair[0].pid, pair[1].pid, "{backend:?}: {stamps:?}");
            }
            assert!(
                stamps.windows(2).all(|w| w[0].nanos <= w[1].nanos),
                "{backend:?}: {stamps:?}"
            );
            let mut pids: Vec<u32> = stamps.iter().map(|stamp| stamp.pid).collect();
            pids.dedup();
            assert_eq!(pids.len(), 3, "{backend:?}: three commands ran: {stamps:?}");
            assert_no_key(&cluster, "turns").await;
        }
    })
    .await;
}

/// The wall clock now, in microseconds since the epoch.
fn now_micros() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_micros()
}

// promise: run-stops-when-lost
#[tokio::test]
async fn a_lost_lock_stops_the_command_before_its_keys_expire() {
    bounded(async {
        let mut cluster = cluster_on(Backend::Process).await.unwrap();
        let scratch = Scratch::new();
        let (group, stopped) = (scratch.path("command.pgid"), scratch.path("stopped"));
        // bash for $EPOCHREALTIME: the trap reads the clock without starting a process.
        let script =
            r#"trap 'echo "$EPOCHREALTIME" > "$2"; exit 0' TERM; echo $$ > "$1"; sleep 60 & wait"#;
        // With a 5 s TTL the lost signal fires 50 ms before the validity ends, which ends
        // 52 ms (the drift allowance) before the keys expire: the command has ~100 ms to write
        // its marker in time.
        let run = start_run(
            &cluster,
            &["--resource", "lost", "--ttl", "5s", "--kill-after", "20s"],
            &[
                "bash",
                "-c",
                script,
                "bash",
                group.to_str().unwrap(),
                stopped.to_str().unwrap(),
            ],
        );
        wait_for_file(&group).await;
        // A node that holds the key survives (the acquisition was decided by the first two
        // answers, so the third may never have stored it); the two others are killed.
        let survivor = holders(&cluster, "lost").await[0];
        for node in (0..3).filter(|&node| node != survivor) {
            cluster.kill(node).await.unwrap();
        }
        // Every extension that reached a quorum before the kills also reached the survivor
        // (it is up and holds our key), so its key expires no earlier than the keys of the last
        // successful extension: at or after the end of the lock's validity plus the drift
        // allowance.
        let mut survivor = cluster.connection(survivor).await.unwrap();
        let pttl: i64 = survivor.pttl("quorumlock:lost").await.unwrap();
        assert!(pttl > 0, "the surviving holder has no live key: {pttl}");
        let keys_expire = now_micros() + u128::try_from(pttl).unwrap() * 1000;

        let (code, stderr) = finish(run).await;
        assert_eq!(code, Some(LOCK_LOST), "{stderr}");
        assert!(stderr.contains("lock lost"), "{stderr}");
        assert!(stderr.contains("SIGTERM"), "{stderr}");
        assert!(!stderr.contains("SIGKILL"), "{stderr}");
        // The command was stopped (it wrote the marker, run exited after it) before the last
        // keys expired, i.e. before anyone else could have taken the lock.
        let stopped_at = std::fs::read_to_string(&stopped).unwrap();
        let stopped_at: f64 = stopped_at.trim().parse().unwrap();
        let stopped_at = (stopped_at * 1e6) as u128;
        assert!(
            stopped_at < keys_expire,
            "the command got SIGTERM {} µs after the keys expired",
            stopped_at - keys_expire
        );
    })
    .await;
}

#[tokio::test]
async fn a_command_that_ignores_sigterm_gets_sigkill_after_kill_after() {
    bounded(async {
        let mut cluster = cluster_on(Backend::Process).await.unwrap();
        let scratch = Scratch::new();
        let group = scratch.path("command.pgid");
        // The ignored TERM is inherited by `sleep`: only SIGKILL ends the group.
        let script = r#"trap '' TERM; echo $$ > "$1"; sleep 60"#;
        let run = start_run(
            &cluster,
            &[
                "--resource",
                "stubborn",
                "--ttl",
                "1s",
                "--kill-after",
                "300ms",
            ],
            &["sh", "-c", script, "sh", group.to_str().unwrap()],
        );
        wait_for_file(&group).await;
        cluster.kill(0).await.unwrap();
        cluster.kill(1).await.unwrap();

        let (code, stderr) = finish(run).await;
        assert_eq!(code, Some(LOCK_LOST), "{stderr}");
        assert!(stderr.contains("sending SIGTERM"), "{stderr}");
        assert!(stderr.contains("sending SIGKILL"), "{stderr}");
    })
    .await;
}

#[tokio::test]
async fn wait_0_on_a_held_lock_exits_75_without_running_the_command() {
    bounded(async {
        for backend in BACKENDS {
            let Some(cluster) = cluster_on(backend).await else {
                continue;
            };
            let scratch = Scratch::new();
            let (group, release, ran) = (
                scratch.path("holder.pgid"),
                scratch.path("release"),
                scratch.path("ran"),
            );
            // The holder's command runs until the test says so (30 s at most).
            let hold = r#"echo $$ > "$1"; i=0; while [ ! -e "$2" ] && [ $i -lt 600 ]; do sleep 0.05; i=$((i+1)); done"#;
            let holder = start_run(
                &cluster,
                &["--resource", "busy"],
                &[
                    "sh",
                    "-c",
                    hold,
                    "sh",
                    group.to_str().unwrap(),
                    release.to_str().unwrap(),
                ],
            );
            wait_for_file(&group).await;

            let touch = ["sh", "-c", r#"touch "$1""#, "sh", ran.to_str().unwrap()];
            let (code, stderr) =
                finish(start_run(&cluster, &["--resource", "busy", "--wait", "0"], &touch)).await;
            assert_eq!(code, Some(NOT_ACQUIRED), "{backend:?}: {stderr}");
            assert!(stderr.contains("held elsewhere"), "{backend:?}: {stderr}");
            let (code, stderr) = finish(start_run(
                &cluster,
                &["--resource", "busy", "--wait", "300ms"],
                &touch,
            ))
            .await;
            assert_eq!(code, Some(NOT_ACQUIRED), "{backend:?}: {stderr}");
            assert!(stderr.contains("the wait ran out"), "{backend:?}: {stderr}");
            assert!(!ran.exists(), "{backend:?}: a command ran without the lock");

            std::fs::write(&release, "").unwrap();
            let (code, stderr) = finish(holder).await;
            assert_eq!(code, Some(0), "{backend:?}: {stderr}");
            assert_no_key(&cluster, "busy").await;
        }
    })
    .await;
}

/// `--permits 2`: two runs hold at once, each told its slot; a third with `--wait 0` is refused
/// without running its command.
// promise: semaphore-permits
#[tokio::test]
async fn permits_let_that_many_runs_hold_at_once_each_in_its_slot() {
    bounded(async {
        let cluster = cluster_on(Backend::Process).await.unwrap();
        let scratch = Scratch::new();
        let release = scratch.path("release");
        // Each holder writes its slot, then runs until the test says so (30 s at most).
        let hold = r#"printf %s "$QUORUMLOCK_SLOT" > "$1"; i=0; while [ ! -e "$2" ] && [ $i -lt 600 ]; do sleep 0.05; i=$((i+1)); done"#;
        let flags = ["--resource", "pool", "--permits", "2"];
        let mut holders = Vec::new();
        let mut slots = Vec::new();
        for name in ["first", "second"] {
            let slot = scratch.path(name);
            let args = ["sh", "-c", hold, "sh", slot.to_str().unwrap(), release.to_str().unwrap()];
            holders.push(start_run(&cluster, &flags, &args));
            // Written by printf in one go; an empty read is a file caught half made.
            let written = quorumlock_harness::eventually(Duration::from_secs(20), async || {
                std::fs::read_to_string(&slot).is_ok_and(|text| !text.is_empty())
            })
            .await;
            assert!(written, "{name}: no slot written");
            slots.push(std::fs::read_to_string(&slot).unwrap());
        }
        slots.sort();
        assert_eq!(slots, ["pool:0", "pool:1"]);

        let ran = scratch.path("ran");
        let touch = ["sh", "-c", r#"touch "$1""#, "sh", ran.to_str().unwrap()];
        let third = [&flags[..], &["--wait", "0"]].concat();
        let (code, stderr) = finish(start_run(&cluster, &third, &touch)).await;
        assert_eq!(code, Some(NOT_ACQUIRED), "{stderr}");
        assert!(!ran.exists(), "a third command ran with two permits held");

        std::fs::write(&release, "").unwrap();
        for holder in holders {
            let (code, stderr) = finish(holder).await;
            assert_eq!(code, Some(0), "{stderr}");
        }
        assert_no_key(&cluster, "pool:0").await;
        assert_no_key(&cluster, "pool:1").await;
    })
    .await;
}

#[tokio::test]
async fn too_few_nodes_exit_75_and_no_nodes_or_bad_flags_exit_64() {
    bounded(async {
        let mut cluster = cluster_on(Backend::Process).await.unwrap();
        cluster.kill(0).await.unwrap();
        cluster.kill(1).await.unwrap();
        let (code, stderr) = finish(start_run(
            &cluster,
            &["--resource", "r", "--wait", "0"],
            &["true"],
        ))
        .await;
        assert_eq!(code, Some(NOT_ACQUIRED), "{stderr}");
        assert!(stderr.contains("lock unavailable"), "{stderr}");

        for (args, says) in [
            (&["run", "--resource", "r", "--", "true"][..], "no nodes"),
            (
                &["run", "--resource", "r", "--wait", "10", "--", "true"],
                "10s",
            ),
            (&["run", "--resource", "r"], "required"),
        ] {
            let output = Command::new(env!("CARGO_BIN_EXE_quorumlock"))
                .args(args)
                .env_remove("QUORUMLOCK_NODES")
                .stdin(Stdio::null())
                .output()
                .await
                .unwrap();
            let stderr = String::from_utf8_lossy(&output.stderr);
            assert_eq!(output.status.code(), Some(USAGE), "{args:?}: {stderr}");
            assert!(stderr.contains(says), "{args:?}: {stderr}");
        }
    })
    .await;
}

#[tokio::test]
async fn the_command_s_status_and_environment_pass_through() {
    bounded(async {
        let cluster = cluster_on(Backend::Process).await.unwrap();
        let scratch = Scratch::new();
        let status_of =
            |command: &[&str]| finish(start_run(&cluster, &["--resource", "status"], command));
        assert_eq!(status_of(&["sh", "-c", "exit 3"]).await.0, Some(3));
        assert_eq!(
            status_of(&["sh", "-c", "kill -KILL $$"]).await.0,
            Some(128 + 9)
        );
        assert_eq!(status_of(&["/nonexistent/command"]).await.0, Some(127));
        assert_no_key(&cluster, "status").await;

        let seen = scratch.path("env");
        let print_env = [
            "sh",
            "-c",
            r#"printf '%s %s' "$QUORUMLOCK_RESOURCE" "${QUORUMLOCK_FENCE-unset}" > "$1""#,
            "sh",
            seen.to_str().unwrap(),
        ];
        let (code, stderr) = finish(start_run(
            &cluster,
            &["--resource", "env", "--fencing"],
            &print_env,
        ))
        .await;
        assert_eq!(code, Some(0), "{stderr}");
        let env = std::fs::read_to_string(&seen).unwrap();
        let fence = env.strip_prefix("env ").unwrap();
        assert!(fence.parse::<u64>().unwrap() >= 1, "{env}");

        // Without --fencing the command sees no fence, not even one `run` inherited.
        let output = Command::new(env!("CARGO_BIN_EXE_quorumlock"))
            .args([
                "run",
                "--nodes",
                &cluster.urls().join(","),
                "--resource",
                "env",
            ])
            .arg("--")
            .args(print_env)
            .env("QUORUMLOCK_FENCE", "99")
            .stdin(Stdio::null())
            .output()
            .await
            .unwrap();
        assert_eq!(output.status.code(), Some(0));
        assert_eq!(std::fs::read_to_string(&seen).unwrap(), "env unset");
    })
    .await;
}

// promise: run-stops-when-lost
#[tokio::test]
async fn sigterm_to_run_reaches_the_command_and_the_lock_is_released_after_it() {
    bounded(async {
        let cluster = cluster_on(Backend::Process).await.unwrap();
        let scratch = Scratch::new();
        let (group, marker) = (scratch.path("command.pgid"), scratch.path("term"));
        let script = r#"trap 'echo term > "$2"; exit 7' TERM; echo $$ > "$1"; sleep 60 & wait"#;
        let run = start_run(
            &cluster,
            &["--resource", "forwarded"],
            &[
                "bash",
                "-c",
                script,
                "bash",
                group.to_str().unwrap(),
                marker.to_str().unwrap(),
            ],
        );
        wait_for_file(&group).await;
        let held_by = holders(&cluster, "forwarded").await;
        assert!(held_by.len() >= 2, "a quorum holds the key: {held_by:?}");
        let pid = Pid::from_raw(i32::try_from(run.id().unwrap()).unwrap()).unwrap();
        kill_process(pid, Signal::TERM).unwrap();

        let (code, stderr) = finish(run).await;
        assert_eq!(code, Some(7), "the command's status: {stderr}");
        assert_eq!(std::fs::read_to_string(&marker).unwrap(), "term\n");
        assert_no_key(&cluster, "forwarded").await;
    })
    .await;
}

/// `--key-prefix` names the lock `run` takes: a lock held under `app:` keeps out a `run` given
/// that prefix, not one without it (whose key is another).
#[tokio::test]
async fn key_prefix_names_the_lock_run_takes() {
    bounded(async {
        let cluster = cluster_on(Backend::Process).await.unwrap();
        let lock = quorumlock::Lock::new(
            cluster.urls(),
            quorumlock::LockOptions::new().key_prefix("app:"),
        )
        .unwrap();
        let guard = lock.try_acquire("job").await.unwrap();
        let flags = ["--resource", "job", "--wait", "0"];
        let prefixed = [&flags[..], &["--key-prefix", "app:"]].concat();
        let (code, stderr) = finish(start_run(&cluster, &prefixed, &["true"])).await;
        assert_eq!(code, Some(NOT_ACQUIRED), "{stderr}");
        let (code, stderr) = finish(start_run(&cluster, &flags, &["true"])).await;
        assert_eq!(code, Some(0), "{stderr}");
        guard.release().await;
        let (code, stderr) = finish(start_run(&cluster, &prefixed, &["true"])).await;
        assert_eq!(code, Some(0), "{stderr}");
    })
    .await;
}
