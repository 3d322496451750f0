//! The scenarios on the five nodes behind fault proxies: acquire and release, each timed alone,
//! with the cluster healthy, 2 of 5 nodes slow and 1 of 5 hung; and acquire+release with every
//! node a little further away, as on a network.

use std::time::Duration;

use quorumlock::{Lock, LockOptions};
use quorumlock_harness::{FaultProxy, TestCluster};

use super::loops::{Batch, acquires, cycles, releases, settle, warm_up};
use super::plan::Plan;
use super::progress::Progress;
use super::scenarios::alternate;
use super::stats::{Row, Tally};

/// One case of the fault scenarios: which lock, and what is wrong with its nodes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Case {
    /// The single-node lock, on node 0 directly (not through its proxy).
    Single,
    /// The quorum lock, all five nodes healthy.
    Healthy,
    /// The quorum lock, 2 of 5 nodes slow.
    Slow,
    /// The quorum lock, 1 of 5 nodes hung.
    Hung,
}

impl Case {
    /// In the order they run and are reported.
    const ALL: [Case; 4] = [Case::Single, Case::Healthy, Case::Slow, Case::Hung];

    /// The row-id suffix, and the stem of the keys.
    fn key(self) -> &'static str {
        match self {
            Case::Single => "single",
            Case::Healthy => "healthy",
            Case::Slow => "slow",
            Case::Hung => "hung",
        }
    }

    /// What the progress bar shows while acquiring.
    fn description(self) -> &'static str {
        match self {
            Case::Single => "single-node",
            Case::Healthy => "5 healthy nodes behind proxies",
            Case::Slow => "2 of 5 nodes slow",
            Case::Hung => "1 of 5 nodes hung",
        }
    }

    /// The `lock` column of its rows.
    fn label(self) -> &'static str {
        match self {
            Case::Single => "single",
            Case::Healthy => "quorum-5 5 healthy nodes (proxied)",
            Case::Slow => "quorum-5 2 of 5 slow (proxied)",
            Case::Hung => "quorum-5 1 of 5 hung (proxied)",
        }
    }

    /// Its row in `stem` (`fault-acq`, `fault-rel`): compared with the single-node lock, and
    /// the quorum cases also with the healthy cluster.
    fn row(self, stem: &str, scenario: &str, measured: &str, tally: Tally) -> Row {
        let row = Row::new(
            &format!("{stem}/{}", self.key()),
            scenario,
            self.label(),
            measured,
            tally,
        )
        .vs_single(&format!("{stem}/single"));
        if self == Case::Single {
            row
        } else {
            row.vs_healthy(&format!("{stem}/healthy"))
        }
    }
}

/// The proxies the faults are injected at.
struct Faults<'a> {
    slow: [&'a FaultProxy; 2],
    hung: &'a FaultProxy,
    /// Added one-way delay on each slow node.
    latency: Duration,
}

impl Faults<'_> {
    fn inject(&self, case: Case) {
        match case {
            Case::Slow => self.slow.iter().for_each(|p| p.set_latency(self.latency)),
            Case::Hung => self.hung.blackhole(),
            Case::Single | Case::Healthy => {}
        }
    }

    async fn lift(&self, case: Case) -> Result<(), String> {
        match case {
            Case::Slow => {
                self.slow.iter().for_each(|p| p.set_latency(Duration::ZERO));
                // Chunks queued while slow keep their delay: let them drain.
                tokio::time::sleep(self.latency * 3).await;
            }
            Case::Hung => heal(self.hung).await?,
            Case::Single | Case::Healthy => {}
        }
        Ok(())
    }
}

/// The healthy proxied cluster, 2 of 5 nodes slow, 1 of 5 hung, interleaved in rounds.
pub(super) async fn fault_scenarios(
    cluster: &TestCluster,
    single: &Lock,
    options: &LockOptions,
    plan: &Plan,
    progress: &Progress,
) -> Result<Vec<Row>, String> {
    let lock = Lock::new(cluster.urls(), options.clone())
        .map_err(|e| format!("proxied quorum lock: {e}"))?;
    let proxy = |i: usize| {
        cluster
            .proxy(i)
            .ok_or_else(|| format!("the local cluster has no proxy for node {i}"))
    };
    let faults = Faults {
        slow: [proxy(3)?, proxy(4)?],
        hung: proxy(4)?,
        latency: Duration::from_millis(plan.slow_one_way_ms),
    };
    let subject = |case: Case| if case == Case::Single { single } else { &lock };
    warm_up(&lock, "fault-warm").await;
    warm_up(single, "fault-warm").await;

    // Acquires, timed alone.
    let mut tallies = Case::ALL.map(|_| Tally::new());
    let per_round = (plan.fault_ops / plan.rounds).max(1);
    let cap = Duration::from_millis(plan.fault_cap_ms / plan.rounds);
    for round in 0..plan.rounds {
        let first = round * per_round;
        for (case, tally) in Case::ALL.into_iter().zip(&mut tallies) {
            progress.round("acquire", case.description(), round, plan.rounds);
            faults.inject(case);
            let keys = format!("f-{}", case.key());
            let batch = Batch {
                key_base: &keys,
                first,
                ops: per_round,
                cap,
            };
            acquires(subject(case), batch, tally).await;
            faults.lift(case).await?;
        }
        warm_up(&lock, "fault-warm").await;
    }
    let mut rows: Vec<Row> = Case::ALL
        .into_iter()
        .zip(tallies)
        .map(|(case, tally)| case.row("fault-acq", "acquire only", "acquire", tally))
        .collect();
    progress.done(3);

    // Releases, timed alone: a release waits for every node, up to its timeout.
    let cap = Duration::from_millis(plan.fault_cap_ms);
    let mut released = Vec::new();
    for case in Case::ALL {
        progress.step(format!("release: {}", case.key()));
        faults.inject(case);
        let mut tally = Tally::new();
        let keys = format!("r-{}", case.key());
        let batch = Batch {
            key_base: &keys,
            first: 0,
            ops: plan.release_ops,
            cap,
        };
        releases(subject(case), batch, &mut tally).await;
        faults.lift(case).await?;
        released.push((case, tally));
    }
    for (case, tally) in released {
        rows.push(case.row("fault-rel", "release only", "release", tally));
    }
    progress.done(3);
    settle(&lock).await;
    rows.extend(simulated_network(cluster, &lock, options, plan, progress).await?);
    Ok(rows)
}

/// Acquire+release with every node behind a proxy adding `net_one_way_ms` each way: a crude
/// stand-in for servers on other hosts, where the round trip rather than the CPU dominates.
/// The single-node lock uses node 0 through its proxy, the quorum all five; interleaved.
async fn simulated_network(
    cluster: &TestCluster,
    quorum: &Lock,
    options: &LockOptions,
    plan: &Plan,
    progress: &Progress,
) -> Result<Vec<Row>, String> {
    let urls = cluster.urls();
    let Some(first) = urls.first() else {
        return Ok(Vec::new());
    };
    let single = Lock::new([first.clone()], options.clone())
        .map_err(|e| format!("single-node lock through a proxy: {e}"))?;
    set_latency(cluster, Duration::from_millis(plan.net_one_way_ms));
    let pair = [("single", &single), ("quorum-5", quorum)];
    for (_, lock) in pair {
        for i in 0..5 {
            if let Ok(guard) = lock.try_acquire(format!("net-warm:{i}")).await {
                guard.release().await;
            }
        }
    }
    let per_round = (plan.net_ops / plan.rounds).max(1);
    let cap = Duration::from_millis(plan.fault_cap_ms / plan.rounds);
    let scenario = format!(
        "acquire+release, nodes +{} ms each way",
        plan.net_one_way_ms
    );
    let mut rows = alternate(
        &pair,
        "net",
        &scenario,
        "acquire+release",
        plan,
        progress,
        async |lock, round, tally| {
            let batch = Batch {
                key_base: "net",
                first: round * per_round,
                ops: per_round,
                cap,
            };
            cycles(lock, batch, tally).await;
        },
    )
    .await;
    set_latency(cluster, Duration::ZERO);
    for row in &mut rows {
        row.lock.push_str(" (proxied)");
    }
    progress.done(1);
    Ok(rows)
}

/// Sets the added one-way delay on every node's proxy.
pub(super) fn set_latency(cluster: &TestCluster, latency: Duration) {
    for i in 0..cluster.len() {
        if let Some(proxy) = cluster.proxy(i) {
            proxy.set_latency(latency);
        }
    }
}

/// Lifts a black hole and cuts the connections whose requests it swallowed, so the client
/// reconnects instead of waiting on replies that will never come.
async fn heal(proxy: &FaultProxy) -> Result<(), String> {
    proxy
        .heal()
        .await
        .map_err(|e| format!("healing a fault proxy: {e}"))?;
    proxy.cut().await;
    Ok(())
}
