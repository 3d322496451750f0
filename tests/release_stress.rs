//! Releases under load: many tasks acquiring and releasing distinct keys at once, with the
//! library's defaults (timeouts aside, see [`options`]), must leave no key behind on any node
//! once the lock has settled.
//!
//! A request to a node that had not answered when its acquisition was decided goes on in the
//! background; if it reaches the node after the release's compare-and-delete, the key stays
//! until its TTL. Each test runs for a few seconds (and a capped number of cycles), then counts
//! the keys left on every node and says, for each, what the acquisition and the release had
//! reported on that node.
// Test and demo code: an unwrap that fails is a failed run, which is what it should be.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

// The lock tests' helpers; this binary uses a few of them.
#[allow(dead_code)]
#[path = "lock/common.rs"]
mod common;

use common::bounded;

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::{Duration, Instant};

use quorumlock::{Lock, LockOptions, NodeOutcome, NodeReply};
use quorumlock_harness::{ClusterOptions, Persistence, TestCluster};

/// Tasks cycling at once, each on its own keys.
const TASKS: usize = 64;
/// How long the tasks keep cycling.
const RUN_FOR: Duration = Duration::from_secs(3);
/// At most this many cycles per task, whatever the speed of the machine.
const MAX_CYCLES_PER_TASK: u32 = 5_000;
/// Key prefix of the stress keys (the default prefix, so the keys are the library's own).
const PREFIX: &str = "quorumlock:";
/// At most this many leftover keys are listed one by one in a failure message.
const LISTED: usize = 10;

/// What one node said, as a small code, so that a cycle's record stays a few bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Said {
    Ours,
    NotOurs,
    Failed,
    NoReply,
    /// A reply this test does not know by name (`NodeReply` is non-exhaustive).
    Other,
    /// Not known to the test: the release ran inside a failed acquisition.
    Unseen,
}

fn said(reply: &NodeReply) -> Said {
    match reply {
        NodeReply::Ours => Said::Ours,
        NodeReply::NotOurs => Said::NotOurs,
        NodeReply::Failed(_) => Said::Failed,
        NodeReply::NoReply => Said::NoReply,
        _ => Said::Other,
    }
}

/// The most nodes a stress run uses.
const MAX_NODES: usize = 8;

/// The defaults, but with timeouts that a loaded machine cannot trip: a release that timed out
/// before it was sent leaves its key honestly (it says so), which is not what this test looks for.
fn options() -> LockOptions {
    let timeout = Duration::from_secs(2);
    LockOptions::default()
        .node_timeout(timeout)
        .connect_timeout(timeout)
}

/// One acquire + release cycle: what each node said to each.
#[derive(Debug, Clone, Copy)]
struct Cycle {
    acquired: bool,
    acquire: [Said; MAX_NODES],
    release: [Said; MAX_NODES],
}

fn codes(outcomes: &[NodeOutcome]) -> [Said; MAX_NODES] {
    let mut codes = [Said::Unseen; MAX_NODES];
    for outcome in outcomes {
        if let Some(slot) = codes.get_mut(outcome.node) {
            *slot = said(&outcome.reply);
        }
    }
    codes
}

fn resource(task: usize, cycle: u32) -> String {
    format!("stress:{task}:{cycle}")
}

/// Parses a stored key back into (task, cycle).
fn parse(key: &str) -> Option<(usize, u32)> {
    let rest = key.strip_prefix(PREFIX)?.strip_prefix("stress:")?;
    let (task, cycle) = rest.split_once(':')?;
    Some((task.parse().ok()?, cycle.parse().ok()?))
}

/// One task: acquire, release, until the time or the cycle cap is up.
async fn cycle_until(lock: Lock, task: usize, deadline: Instant) -> Vec<Cycle> {
    let mut cycles = Vec::new();
    for cycle in 0..MAX_CYCLES_PER_TASK {
        if Instant::now() >= deadline {
            break;
        }
        let record = match lock.try_acquire(resource(task, cycle)).await {
            Ok(guard) => {
                let acquire = codes(guard.outcomes());
                let report = guard.release().await;
                Cycle {
                    acquired: true,
                    acquire,
                    release: codes(&report.outcomes),
                }
            }
            Err(error) => Cycle {
                acquired: false,
                acquire: codes(error.outcomes()),
                release: [Said::Unseen; MAX_NODES],
            },
        };
        cycles.push(record);
    }
    cycles
}

/// Every key left on each node, read directly.
async fn leftovers(cluster: &TestCluster) -> Vec<Vec<String>> {
    let mut all = Vec::new();
    for node in 0..cluster.len() {
        let mut connection = cluster.connection(node).await.unwrap();
        let keys: Vec<String> = redis::cmd("KEYS")
            .arg("*")
            .query_async(&mut connection)
            .await
            .unwrap();
        all.push(keys);
    }
    all
}

/// Runs `TASKS` tasks over `nodes` fresh nodes with the default options, settles, and fails with
/// a per-node account of every key left behind.
async fn stress(nodes: usize) {
    assert!(nodes <= MAX_NODES);
    // AOF always (on tmpfs): the restart guard lets fresh nodes vote at once.
    let cluster = TestCluster::start(
        ClusterOptions::default()
            .nodes(nodes)
            .persistence(Persistence::AofAlways),
    )
    .await
    .expect("start redis-server processes");
    let lock = match cluster.urls().as_slice() {
        [single] => Lock::new([single.clone()], options()),
        urls => Lock::new(urls.to_vec(), options()),
    }
    .unwrap();
    let started = Instant::now();
    let deadline = started + RUN_FOR;
    let tasks: Vec<_> = (0..TASKS)
        .map(|task| tokio::spawn(cycle_until(lock.clone(), task, deadline)))
        .collect();
    let mut records = Vec::with_capacity(TASKS);
    for task in tasks {
        records.push(task.await.unwrap());
    }
    let elapsed = started.elapsed();
    lock.settle().await;

    let total: usize = records.iter().map(Vec::len).sum();
    let failed = records.iter().flatten().filter(|c| !c.acquired).count();
    let left = leftovers(&cluster).await;
    let leaked: usize = left.iter().map(Vec::len).sum();
    println!(
        "{nodes} node(s), {TASKS} tasks: {total} cycles in {elapsed:.1?}, {failed} acquisitions \
         failed, {leaked} keys left"
    );
    if leaked == 0 {
        return;
    }

    let mut message = format!(
        "{leaked} keys left after {total} cycles ({TASKS} tasks, {nodes} node(s), \
         {failed} failed acquisitions) and settle():\n"
    );
    let mut listed = 0;
    for (node, keys) in left.iter().enumerate() {
        if keys.is_empty() {
            continue;
        }
        // (acquired, what the acquisition said there, what the release said there) → keys.
        let mut kinds: BTreeMap<(bool, Said, Said), usize> = BTreeMap::new();
        for key in keys {
            let record = parse(key)
                .and_then(|(task, cycle)| records.get(task)?.get(usize::try_from(cycle).ok()?));
            let kind = match record {
                Some(c) => (c.acquired, c.acquire[node], c.release[node]),
                None => (false, Said::Unseen, Said::Unseen),
            };
            *kinds.entry(kind).or_default() += 1;
            if listed < LISTED {
                listed += 1;
                let _ = writeln!(message, "  node {node}: {key}: {record:?}");
            }
        }
        let _ = writeln!(message, "node {node}: {} keys left", keys.len());
        for ((acquired, acquire, release), count) in kinds {
            let _ = writeln!(
                message,
                "  {count} × acquisition {}: node said {acquire:?} at the decision, \
                 release said {release:?}",
                if acquired { "won" } else { "failed" },
            );
        }
    }
    panic!("{message}");
}

// promise: nothing-left-behind
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_tasks_over_five_nodes_leave_no_key_behind() {
    bounded(stress(5)).await;
}

// promise: release-after-requests
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_tasks_on_one_node_leave_no_key_behind() {
    bounded(stress(1)).await;
}
