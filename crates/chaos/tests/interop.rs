//! Locks shared with another language's Redlock client: pottery (Python, from PyPI) and a
//! quorumlock `Lock` with `KeyFormat::Pottery` contend for one resource on the same five local
//! masters, taking turns. Never two holders at once: each holder reads its token on a majority
//! of the nodes while it holds, and the chaos checker reads both sides' holds as one history.
//! Each side's waiter gets the lock soon after the other side's release: pottery by its poll,
//! this lock by its re-check, since neither side's release wakes the other.
//!
//! Needs a Python with pottery: `QUORUMLOCK_PYTHON` (default `python3`). Without it the test
//! says so and passes, unless `QUORUMLOCK_REQUIRE_INTEROP=1` (CI) makes that a failure.

use std::process::Stdio;
use std::time::{Duration, Instant};

use quorumlock::{KeyFormat, Lock, LockOptions, Patience, Request};
use quorumlock_chaos::check;
use quorumlock_chaos::history::{History, Hold};
use quorumlock_harness::{ClusterOptions, Persistence, TestCluster};
use serde::Deserialize;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::Command;

const NODES: usize = 5;
const RESOURCE: &str = "printer";
/// Turns each side takes.
const ROUNDS: usize = 8;
/// Long enough that the other side, back from its pause, finds the lock held and waits.
const HOLD: Duration = Duration::from_millis(300);
/// Between a side's release and its next attempt: longer than pottery's poll (up to 200 ms),
/// so the other side, waiting, takes its turn.
const PAUSE: Duration = Duration::from_millis(300);
const TTL: Duration = Duration::from_secs(10);
/// Each acquisition's wait; a side that waited for the holder's keys to expire would miss it.
const WAIT: Duration = Duration::from_secs(8);
/// From one side's release to the other side's grant, when it was waiting: pottery's poll
/// (200 ms) or this lock's re-check (100 ms) plus an attempt, with room for a loaded machine,
/// and far below the TTL the waiter would otherwise sleep out.
const HAND_OFF_BOUND: Duration = Duration::from_millis(2_500);
/// Everything the test runs, Python included.
const TEST_BOUND: Duration = Duration::from_secs(120);

/// One line of the Python side's output.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum PotteryLine {
    Ready {
        #[allow(dead_code)]
        ready: u64,
    },
    TimedOut {
        timed_out: u64,
    },
    Held {
        token: String,
        started: u64,
        acquired: u64,
        released: u64,
        holding: usize,
        ttl_ms: u64,
    },
}

/// CLOCK_MONOTONIC in nanoseconds: what Python's `time.monotonic_ns()` reads.
fn monotonic_ns() -> u64 {
    let now = rustix::time::clock_gettime(rustix::time::ClockId::Monotonic);
    u64::try_from(now.tv_sec)
        .unwrap()
        .saturating_mul(1_000_000_000)
        .saturating_add(u64::try_from(now.tv_nsec).unwrap())
}

/// Maps `Instant`s (CLOCK_MONOTONIC on Linux) to the nanoseconds Python reports.
struct Clock {
    instant: Instant,
    ns: u64,
}

impl Clock {
    fn ns(&self, at: Instant) -> u64 {
        let nanos = |d: Duration| u64::try_from(d.as_nanos()).unwrap();
        match at.checked_duration_since(self.instant) {
            Some(after) => self.ns + nanos(after),
            None => self.ns - nanos(self.instant - at),
        }
    }
}

/// A hold of either side, in nanoseconds on CLOCK_MONOTONIC.
#[derive(Debug, Clone)]
struct Turn {
    side: &'static str,
    token: String,
    started: u64,
    acquired: u64,
    valid_until: u64,
    released: u64,
}

/// A Python that can import pottery, or `None` (the test is then skipped, unless required).
async fn pottery_python() -> Option<String> {
    let python = std::env::var("QUORUMLOCK_PYTHON").unwrap_or_else(|_| "python3".to_owned());
    let found = Command::new(&python)
        .args(["-c", "import pottery"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .await
        .is_ok_and(|status| status.success());
    if found {
        return Some(python);
    }
    let required = std::env::var("QUORUMLOCK_REQUIRE_INTEROP").is_ok_and(|value| value == "1");
    assert!(
        !required,
        "{python} cannot import pottery (QUORUMLOCK_REQUIRE_INTEROP=1)"
    );
    eprintln!("skipped: {python} cannot import pottery (set QUORUMLOCK_PYTHON)");
    None
}

/// This lock's turns, each checked on the nodes while held.
async fn quorumlock_side(cluster: &TestCluster, clock: &Clock) -> Vec<Turn> {
    let options = LockOptions::new()
        .key_format(KeyFormat::Pottery)
        .ttl(TTL)
        .node_timeout(Duration::from_secs(1))
        .connect_timeout(Duration::from_secs(1));
    let lock = Lock::new(cluster.urls(), options).unwrap();
    let mut turns = Vec::new();
    for _ in 0..ROUNDS {
        let started = Instant::now();
        let guard = lock
            .acquire(Request::from(RESOURCE).patience(Patience::Wait(WAIT)))
            .await
            .expect("this side's turn, within its wait");
        let token = guard.token().as_str().to_owned();
        let mut holding = 0;
        for node in 0..NODES {
            let mut connection = cluster.connection(node).await.unwrap();
            let value: Option<String> = redis::cmd("GET")
                .arg(format!("redlock:{RESOURCE}"))
                .query_async(&mut connection)
                .await
                .unwrap();
            holding += usize::from(value.as_deref() == Some(token.as_str()));
        }
        assert!(holding > NODES / 2, "our token on {holding} nodes only");
        tokio::time::sleep(HOLD).await;
        let released = Instant::now();
        turns.push(Turn {
            side: "quorumlock",
            token,
            started: clock.ns(started),
            acquired: clock.ns(guard.decided_at()),
            valid_until: clock.ns(guard.valid_until()),
            released: clock.ns(released),
        });
        guard.release().await;
        tokio::time::sleep(PAUSE).await;
    }
    turns
}

/// Pottery's turns, read from its output.
async fn pottery_side(python: &str, ports: &str) -> Vec<Turn> {
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/interop/pottery_contender.py"
    );
    let secs = |d: Duration| d.as_secs_f64().to_string();
    let millis = |d: Duration| d.as_millis().to_string();
    let mut child = Command::new(python)
        .arg(script)
        .args([ports, RESOURCE, &ROUNDS.to_string()])
        .args([millis(HOLD), millis(PAUSE), secs(TTL), secs(WAIT)])
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut turns = Vec::new();
    while let Some(line) = lines.next_line().await.unwrap() {
        match serde_json::from_str(&line).unwrap() {
            PotteryLine::Ready { .. } => {}
            PotteryLine::TimedOut { timed_out } => {
                panic!("pottery waited {WAIT:?} in vain from {timed_out} ns")
            }
            PotteryLine::Held {
                token,
                started,
                acquired,
                released,
                holding,
                ttl_ms,
            } => {
                assert!(
                    holding > NODES / 2,
                    "pottery's token on {holding} nodes only"
                );
                // Pottery's own validity: the TTL less its drift allowance (1 % + 2 ms), from
                // the acquire call's start.
                let ttl_ns = ttl_ms * 1_000_000;
                let drift_ns = ttl_ns / 100 + 2_000_000;
                turns.push(Turn {
                    side: "pottery",
                    token,
                    started,
                    acquired,
                    valid_until: started + ttl_ns - drift_ns,
                    released,
                });
            }
        }
    }
    let status = child.wait().await.unwrap();
    assert!(status.success(), "pottery's side: {status}");
    turns
}

/// Hand-offs to each side: from the other side's release to this side's grant, where this side
/// was already waiting (its acquire call started before the release).
fn hand_offs(turns: &[Turn], to: &str) -> Vec<Duration> {
    turns
        .windows(2)
        .filter(|pair| pair[1].side == to && pair[0].side != to)
        .filter(|pair| pair[1].started < pair[0].released)
        .map(|pair| Duration::from_nanos(pair[1].acquired.saturating_sub(pair[0].released)))
        .collect()
}

// promise: interop-exclusion, interop-recheck
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pottery_and_quorumlock_never_hold_one_resource_at_once() {
    let Some(python) = pottery_python().await else {
        return;
    };
    tokio::time::timeout(TEST_BOUND, async {
        let cluster = TestCluster::start(
            ClusterOptions::default()
                .nodes(NODES)
                .persistence(Persistence::AofAlways),
        )
        .await
        .unwrap();
        let ports: Vec<String> = (0..NODES)
            .map(|node| cluster.port(node).unwrap().to_string())
            .collect();
        let ports = ports.join(",");
        let clock = Clock {
            instant: Instant::now(),
            ns: monotonic_ns(),
        };
        let (mut turns, pottery) = tokio::join!(
            quorumlock_side(&cluster, &clock),
            pottery_side(&python, &ports)
        );
        turns.extend(pottery);
        turns.sort_by_key(|turn| turn.acquired);

        // The chaos checker, over both sides' holds as one history (µs from the first start).
        let origin = turns.iter().map(|turn| turn.started).min().unwrap();
        let us = |ns: u64| (ns - origin) / 1_000;
        let mut history = History::new();
        history.holds = turns
            .iter()
            .map(|turn| {
                let holder = usize::from(turn.side == "pottery");
                Hold::new(
                    RESOURCE,
                    holder,
                    turn.token.clone(),
                    us(turn.acquired),
                    us(turn.valid_until),
                )
                .started(us(turn.started))
                .released(us(turn.released))
            })
            .collect();
        let report = check(&history);
        assert!(report.is_safe(), "{report:#?}");
        assert_eq!(report.holds, 2 * ROUNDS);

        for to in ["quorumlock", "pottery"] {
            let waits = hand_offs(&turns, to);
            assert!(
                !waits.is_empty(),
                "no hand-off to {to}: the test ran no contention"
            );
            let longest = waits.iter().max().unwrap();
            assert!(
                *longest <= HAND_OFF_BOUND,
                "a hand-off to {to} took {longest:?}: {waits:?}"
            );
            let mut sorted = waits.clone();
            sorted.sort();
            eprintln!(
                "hand-offs to {to}: {} of them, p50 {:.1} ms, max {:.1} ms",
                sorted.len(),
                sorted[sorted.len() / 2].as_secs_f64() * 1e3,
                longest.as_secs_f64() * 1e3
            );
        }
    })
    .await
    .expect("the test finished within its bound");
}
