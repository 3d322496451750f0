//! The nemesis's executor: applies a [`Schedule`] to a local cluster at its instants, with the
//! cluster's and the proxies' primitives, and records every fault in the history.

use std::time::Duration;

use quorumlock_harness::{PacketDrop, TestCluster};

use super::error::ChaosError;
use super::faults::{Faults, proxy};
use crate::nemesis::{FaultEvent, FaultKind, Schedule};

/// Whether a step applies its event or lifts it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Step {
    // Lifts sort first: at one instant a node is freed before the next fault of its layer.
    Lift,
    Apply,
}

impl Faults<'_> {
    /// Applies and lifts the events of `schedule` on `cluster` at their instants (µs after the
    /// recorder's epoch, the start of the run), one step after the other.
    pub(super) async fn unleash(
        &self,
        schedule: &Schedule,
        cluster: &mut TestCluster,
    ) -> Result<(), ChaosError> {
        let epoch = self.recorder.clock().epoch();
        let mut steps: Vec<(u64, Step, &FaultEvent)> = schedule
            .events
            .iter()
            .flat_map(|event| {
                [
                    (event.start_us, Step::Apply, event),
                    (event.end_us, Step::Lift, event),
                ]
            })
            .collect();
        // Stable: events that start together are applied in schedule order.
        steps.sort_by_key(|&(at, step, _)| (at, step));
        // The history's record of each event under way.
        let mut open = Vec::new();
        for (at_us, step, event) in steps {
            self.sleep_until(epoch + Duration::from_micros(at_us)).await;
            match step {
                Step::Apply => {
                    let fault = self.recorder.fault(event.kind.label(), &event.nodes);
                    for &node in &event.nodes {
                        apply(cluster, event.kind, node).await?;
                    }
                    open.push((event, fault));
                }
                Step::Lift => {
                    for &node in &event.nodes {
                        lift(cluster, event.kind, node).await?;
                    }
                    if let Some(index) = open.iter().position(|(e, _)| std::ptr::eq(*e, event)) {
                        let (_, fault) = open.swap_remove(index);
                        self.recorder.lift(fault);
                    }
                }
            }
        }
        Ok(())
    }
}

/// Starts fault `kind` on `node`.
async fn apply(cluster: &mut TestCluster, kind: FaultKind, node: usize) -> Result<(), ChaosError> {
    match kind {
        FaultKind::Kill => cluster.kill(node).await?,
        FaultKind::Restart => {
            cluster.kill(node).await?;
            cluster.start_node(node).await?;
        }
        FaultKind::Freeze => cluster.pause(node)?,
        FaultKind::Latency { each_way_us } => {
            proxy(cluster, node)?.set_latency(Duration::from_micros(each_way_us));
        }
        FaultKind::BlackHole => proxy(cluster, node)?.blackhole(),
        FaultKind::Refuse => {
            let proxy = proxy(cluster, node)?;
            proxy.refuse().await;
            proxy.cut().await;
        }
        FaultKind::DropPackets => cluster.drop_packets(node, PacketDrop::Both).await?,
        FaultKind::DropRequests => cluster.drop_packets(node, PacketDrop::Requests).await?,
        FaultKind::DropReplies => cluster.drop_packets(node, PacketDrop::Replies).await?,
    }
    Ok(())
}

/// Ends fault `kind` on `node`, restoring what [`apply`] changed.
async fn lift(cluster: &mut TestCluster, kind: FaultKind, node: usize) -> Result<(), ChaosError> {
    match kind {
        FaultKind::Kill => cluster.start_node(node).await?,
        // Restarted when applied: nothing left to undo.
        FaultKind::Restart => {}
        FaultKind::Freeze => cluster.resume(node)?,
        FaultKind::Latency { .. } => proxy(cluster, node)?.set_latency(Duration::ZERO),
        FaultKind::BlackHole => {
            let proxy = proxy(cluster, node)?;
            proxy.heal().await?;
            // Swallowed requests leave the clients' connections out of step.
            proxy.cut().await;
        }
        FaultKind::Refuse => proxy(cluster, node)?.heal().await?,
        FaultKind::DropPackets | FaultKind::DropRequests | FaultKind::DropReplies => {
            cluster.heal_packets(node).await?;
        }
    }
    Ok(())
}
