//! The fault schedule of each scenario on a local cluster: which nodes are killed, frozen,
//! slowed, cut off or restarted, when, and for how long, each fault recorded in the history.

use std::time::{Duration, Instant};

use quorumlock_harness::{FaultProxy, TestCluster};

use super::clocks::fast_clocks;
use super::drift::drifting_clocks;
use super::error::ChaosError;
use crate::history::Recorder;
use crate::nemesis::Schedule;
use crate::scenario::Scenario;

/// Upper bound on fault cycles per scenario, on top of the time bound.
const MAX_CYCLES: u32 = 10_000;

/// The fault schedule of a scenario, on a local cluster.
pub(super) struct Faults<'a> {
    pub(super) recorder: &'a Recorder,
    pub(super) deadline: Instant,
    pub(super) ttl: Duration,
    /// The nemesis's faults, for [`Scenario::Random`].
    pub(super) nemesis: Option<&'a Schedule>,
}

impl Faults<'_> {
    /// Sleeps until `until`, or until the deadline if that comes first.
    pub(super) async fn sleep_until(&self, until: Instant) {
        tokio::time::sleep_until(until.min(self.deadline).into()).await;
    }

    async fn sleep(&self, duration: Duration) {
        self.sleep_until(Instant::now() + duration).await;
    }

    /// Whether a fault cycle of `span` still ends before the deadline.
    fn fits(&self, span: Duration) -> bool {
        Instant::now() + span <= self.deadline
    }

    /// Runs `scenario`'s faults on `cluster` until the deadline. `keys` are the lock's keys (for
    /// the clock emulation); remarks on how the faults were done go to `notes`.
    pub(super) async fn inject(
        &self,
        scenario: Scenario,
        cluster: &mut TestCluster,
        keys: Vec<Vec<u8>>,
        notes: &mut Vec<String>,
    ) -> Result<(), ChaosError> {
        let t = self.ttl;
        match scenario {
            Scenario::Baseline | Scenario::ClientStall | Scenario::NoLock => {}
            Scenario::MinorityCrash => {
                for _ in 0..MAX_CYCLES {
                    self.sleep(t).await;
                    if !self.fits(t * 5 / 2) {
                        break;
                    }
                    let fault = self.recorder.fault("killed", &[3, 4]);
                    cluster.kill(3).await?;
                    cluster.kill(4).await?;
                    self.sleep(t * 2).await;
                    cluster.start_node(3).await?;
                    cluster.start_node(4).await?;
                    self.recorder.lift(fault);
                }
            }
            Scenario::MinorityFreeze => {
                for _ in 0..MAX_CYCLES {
                    self.sleep(t).await;
                    if !self.fits(t * 5 / 2) {
                        break;
                    }
                    let fault = self.recorder.fault("SIGSTOP", &[3, 4]);
                    cluster.pause(3)?;
                    cluster.pause(4)?;
                    self.sleep(t * 2).await;
                    cluster.resume(3)?;
                    cluster.resume(4)?;
                    self.recorder.lift(fault);
                }
            }
            Scenario::MinorityLatency => self.latency(cluster, &[3, 4]).await?,
            Scenario::MajorityLatency => self.latency(cluster, &[0, 1, 2]).await?,
            Scenario::PartitionMinority => {
                for _ in 0..MAX_CYCLES {
                    self.sleep(t).await;
                    if !self.fits(t * 5 / 2) {
                        break;
                    }
                    let fault = self.recorder.fault("black hole", &[3, 4]);
                    for node in [3, 4] {
                        proxy(cluster, node)?.blackhole();
                    }
                    self.sleep(t * 2).await;
                    for node in [3, 4] {
                        let proxy = proxy(cluster, node)?;
                        proxy.heal().await?;
                        // Swallowed requests leave the clients' connections out of step.
                        proxy.cut().await;
                    }
                    self.recorder.lift(fault);
                }
            }
            Scenario::PartitionMajority => {
                for _ in 0..MAX_CYCLES {
                    self.sleep(t).await;
                    if !self.fits(t * 5 / 2) {
                        break;
                    }
                    let fault = self.recorder.fault("cut + refused", &[0, 1, 2]);
                    self.partition(cluster, &[0, 1, 2]).await?;
                    self.sleep(t * 2).await;
                    heal(cluster, &[0, 1, 2]).await?;
                    self.recorder.lift(fault);
                }
            }
            Scenario::RestartNoPersistence | Scenario::RestartGuarded | Scenario::RestartAof => {
                self.restarts(cluster, None).await?;
            }
            Scenario::RestartDelayed => self.restarts(cluster, Some(t * 3 / 2)).await?,
            Scenario::ClockFast => {
                fast_clocks(cluster, keys, self.recorder, self.deadline, notes).await?;
            }
            Scenario::Random => {
                if let Some(schedule) = self.nemesis {
                    self.unleash(schedule, cluster).await?;
                }
            }
            Scenario::ClockDrift => {
                drifting_clocks(cluster, self.recorder, self.deadline, notes).await?;
            }
        }
        Ok(())
    }

    async fn partition(&self, cluster: &TestCluster, nodes: &[usize]) -> Result<(), ChaosError> {
        for &node in nodes {
            let proxy = proxy(cluster, node)?;
            proxy.refuse().await;
            proxy.cut().await;
        }
        Ok(())
    }

    /// Latency under the per-node timeout (slow answers), then over it (timeouts), alternating.
    async fn latency(&self, cluster: &TestCluster, nodes: &[usize]) -> Result<(), ChaosError> {
        let t = self.ttl;
        for cycle in 0..MAX_CYCLES {
            self.sleep(t).await;
            if !self.fits(t * 5 / 2) {
                break;
            }
            // The default node timeout is TTL / 10: a round trip of 2 × TTL / 50 stays under
            // it, one of 2 × TTL / 12 goes over.
            let latency = if cycle % 2 == 0 { t / 50 } else { t / 12 };
            let fault = self
                .recorder
                .fault(format!("+{}ms each way", latency.as_millis()), nodes);
            for &node in nodes {
                proxy(cluster, node)?.set_latency(latency);
            }
            self.sleep(t * 2).await;
            for &node in nodes {
                proxy(cluster, node)?.set_latency(Duration::ZERO);
            }
            self.recorder.lift(fault);
        }
        Ok(())
    }

    /// The restart cycle: cut nodes 3,4 off for one TTL, so holds taken meanwhile have their
    /// keys on nodes 0–2 only; bring 3,4 back; kill and restart node 1 and then node 2 at once
    /// (`down` = `None`), or kill both and restart them after `down`.
    async fn restarts(
        &self,
        cluster: &mut TestCluster,
        down: Option<Duration>,
    ) -> Result<(), ChaosError> {
        let t = self.ttl;
        for _ in 0..MAX_CYCLES {
            self.sleep(t).await;
            if !self.fits(t * 2 + down.unwrap_or_default()) {
                break;
            }
            let cut = self.recorder.fault("cut + refused", &[3, 4]);
            self.partition(cluster, &[3, 4]).await?;
            self.sleep(t).await;
            heal(cluster, &[3, 4]).await?;
            self.recorder.lift(cut);
            let label = match down {
                None => "killed, restarted at once",
                Some(_) => "killed, restarted after > TTL",
            };
            match down {
                // One node after the other: a contender can get in as soon as node 1 is back
                // (nodes 1, 3, 4), while the holder still has nodes 0 and 2.
                None => {
                    for node in [1, 2] {
                        let restart = self.recorder.fault(label, &[node]);
                        cluster.kill(node).await?;
                        cluster.start_node(node).await?;
                        self.recorder.lift(restart);
                    }
                }
                Some(down) => {
                    let restart = self.recorder.fault(label, &[1, 2]);
                    cluster.kill(1).await?;
                    cluster.kill(2).await?;
                    self.sleep(down).await;
                    cluster.start_node(1).await?;
                    cluster.start_node(2).await?;
                    self.recorder.lift(restart);
                }
            }
        }
        Ok(())
    }
}

/// The fault proxy in front of `node`.
pub(super) fn proxy(cluster: &TestCluster, node: usize) -> Result<&FaultProxy, ChaosError> {
    cluster.proxy(node).ok_or(ChaosError::NoProxy(node))
}

/// Back to plain forwarding on the proxies of `nodes`, accepting new connections again.
async fn heal(cluster: &TestCluster, nodes: &[usize]) -> Result<(), ChaosError> {
    for &node in nodes {
        proxy(cluster, node)?.heal().await?;
    }
    Ok(())
}
