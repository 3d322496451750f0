//! The window every scenario's faults run in ([`Faults`]: the history they are recorded in, the
//! deadline, the TTL they are scaled to) and what all of them share: sleeping within the window,
//! a partition, the fault proxies, healing, waiting for a fresh hold. Each scenario's schedule
//! is in `inject.rs`, the clock faults in `clocks.rs` and `drift.rs`.

use std::time::{Duration, Instant};

use quorumlock_harness::{FaultProxy, TestCluster};

use super::error::ChaosError;
use crate::history::Recorder;
use crate::nemesis::Schedule;

/// Upper bound on fault cycles per scenario, on top of the time bound.
pub(super) const MAX_CYCLES: u32 = 10_000;
/// How often the restart cycle looks for a hold just taken.
const FRESH_POLL: Duration = Duration::from_millis(2);

/// The fault schedule of a scenario, on a local cluster.
pub(super) struct Faults<'a> {
    pub(super) recorder: &'a Recorder,
    pub(super) deadline: Instant,
    pub(super) ttl: Duration,
    /// The nemesis's faults, for [`Scenario::Random`], [`Scenario::Sets`] and
    /// [`Scenario::Waiters`].
    pub(super) nemesis: Option<&'a Schedule>,
}

impl Faults<'_> {
    /// Sleeps until `until`, or until the deadline if that comes first.
    pub(super) async fn sleep_until(&self, until: Instant) {
        tokio::time::sleep_until(until.min(self.deadline).into()).await;
    }

    pub(super) async fn sleep(&self, duration: Duration) {
        self.sleep_until(Instant::now() + duration).await;
    }

    /// Whether a fault cycle of `span` still ends before the deadline.
    pub(super) fn fits(&self, span: Duration) -> bool {
        Instant::now() + span <= self.deadline
    }

    pub(super) async fn partition(
        &self,
        cluster: &TestCluster,
        nodes: &[usize],
    ) -> Result<(), ChaosError> {
        for &node in nodes {
            let proxy = proxy(cluster, node)?;
            proxy.refuse().await;
            proxy.cut().await;
        }
        Ok(())
    }

    /// Waits until one of the lock's `keys` on `node` was set within the last tenth of a TTL
    /// (a hold just taken, which will outlive a restart that takes under half a TTL), polling
    /// its PTTL; `false` if none was within one TTL (or by the deadline).
    pub(super) async fn fresh_hold(
        &self,
        cluster: &TestCluster,
        node: usize,
        keys: &[Vec<u8>],
    ) -> Result<bool, ChaosError> {
        let mut connection = cluster.connection(node).await?;
        let fresh_ms = i64::try_from((self.ttl * 9 / 10).as_millis()).unwrap_or(i64::MAX);
        let until = (Instant::now() + self.ttl).min(self.deadline);
        let polls = self.ttl.as_millis() / FRESH_POLL.as_millis().max(1) + 1;
        for _ in 0..polls {
            for key in keys {
                let left: i64 = redis::cmd("PTTL")
                    .arg(key.as_slice())
                    .query_async(&mut connection)
                    .await?;
                if left >= fresh_ms {
                    return Ok(true);
                }
            }
            if Instant::now() >= until {
                break;
            }
            tokio::time::sleep(FRESH_POLL).await;
        }
        Ok(false)
    }
}

/// The fault proxy in front of `node`.
pub(super) fn proxy(cluster: &TestCluster, node: usize) -> Result<&FaultProxy, ChaosError> {
    cluster.proxy(node).ok_or(ChaosError::NoProxy(node))
}

/// Back to plain forwarding on the proxies of `nodes`, accepting new connections again.
pub(super) async fn heal(cluster: &TestCluster, nodes: &[usize]) -> Result<(), ChaosError> {
    for &node in nodes {
        proxy(cluster, node)?.heal().await?;
    }
    Ok(())
}
