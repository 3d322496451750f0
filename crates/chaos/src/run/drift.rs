//! The clock-drift fault of [`Scenario::ClockDrift`](crate::Scenario::ClockDrift): nodes 0–2
//! count time [`DRIFT_RATE`] times too fast for the whole run (libfaketime, through the cluster
//! options), the largest rate the lock's default drift allowance covers, and their rate is
//! measured over the run.

use std::time::{Duration, Instant};

use quorumlock_harness::{ClusterOptions, TestCluster};

use super::clocks::{best_reading, node_connections, rate_between};
use super::error::ChaosError;
use super::options::RunOptions;
use crate::history::Recorder;

/// How fast the drifting clocks run. The default drift allowance is 1 % of the TTL + 2 ms (the
/// 2 ms for Redis' expiry resolution): a key set at T1 lives TTL / rate, which stays above the
/// validity's TTL − drift while rate ≤ 1 / 0.99 ≈ 1.0101. Just inside that: a correct lock is
/// safe, one that ignores the drift is not.
const DRIFT_RATE: f64 = 1.009;
/// The nodes whose clocks drift: a majority, so that a contender can win on them alone.
const DRIFTING_NODES: [usize; 3] = [0, 1, 2];

/// The least TTL `clock-drift` runs with. The drift it shows is 0.9 % of the TTL: 3.6 ms at the
/// default 400 ms, less than a loaded 2-core machine's scheduling noise, so a lock that ignores
/// the drift was caught once in 13 runs of 10 s; at 2 s it is 18 ms.
const DRIFT_TTL: Duration = Duration::from_secs(2);

/// `options` with a TTL of at least [`DRIFT_TTL`], and a note if it was raised.
pub(super) fn ttl_for_drift(options: &RunOptions, notes: &mut Vec<String>) -> RunOptions {
    if options.ttl >= DRIFT_TTL {
        return options.clone();
    }
    notes.push(format!(
        "ttl raised to {} s: the drift shown, 0.9 % of the TTL, would be {:.1} ms at {} ms",
        DRIFT_TTL.as_secs(),
        options.ttl.as_secs_f64() * 1e3 * (DRIFT_RATE - 1.0),
        options.ttl.as_millis()
    ));
    options.clone().ttl(DRIFT_TTL)
}

/// `cluster` with the clocks of nodes 0–2 running [`DRIFT_RATE`] times too fast.
pub(super) fn with_drifting_clocks(mut cluster: ClusterOptions) -> ClusterOptions {
    for node in DRIFTING_NODES {
        cluster = cluster.clock_rate(node, DRIFT_RATE);
    }
    cluster
}

/// Records the drift as a fault until `deadline` and measures each drifting node's clock rate
/// over that time (`TIME` at the start and at the end, against our `Instant`), into `notes`.
pub(super) async fn drifting_clocks(
    cluster: &TestCluster,
    recorder: &Recorder,
    deadline: Instant,
    notes: &mut Vec<String>,
) -> Result<(), ChaosError> {
    let mut connections = node_connections(cluster, &DRIFTING_NODES).await?;
    let fault = recorder.fault(format!("clock ×{DRIFT_RATE}"), &DRIFTING_NODES);
    let mut starts = Vec::new();
    for connection in &mut connections {
        starts.push(best_reading(connection).await?);
    }
    tokio::time::sleep_until(deadline.into()).await;
    let mut rates = Vec::new();
    for (connection, start) in connections.iter_mut().zip(&starts) {
        let end = best_reading(connection).await?;
        rates.extend(rate_between(start, &end));
    }
    recorder.lift(fault);
    notes.push(format!(
        "clocks of nodes 0,1,2 run ×{DRIFT_RATE} (libfaketime); measured over the run: {}",
        rates
            .iter()
            .map(|rate| format!("×{rate:.4}"))
            .collect::<Vec<_>>()
            .join(", ")
    ));
    Ok(())
}
