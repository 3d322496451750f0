//! Each scenario's fault schedule on a local cluster ([`Faults::inject`]): which nodes are
//! killed, frozen, slowed, partitioned, restarted or have their clocks moved, when, and for how
//! long, each fault recorded in the history and proved to have taken effect (`checks.rs`), with
//! what was measured in the notes. The clock faults are in `clocks.rs` and `drift.rs`, the
//! window they all run in (`Faults`) in `faults.rs`.

use std::time::{Duration, Instant};

use quorumlock_harness::{PacketDrop, TestCluster};

use super::checks::{
    frozen, latency_in_effect, mark_before_restart, median_ms, process_gone, proxied_connection,
    restarted_as_expected, round_trip, server_pid, silent,
};
use super::clocks::{Aim, fast_clocks, jumping_nodes};
use super::drift::drifting_clocks;
use super::error::ChaosError;
use super::faults::{Faults, MAX_CYCLES, heal, proxy};
use crate::nemesis::{FaultKind, Schedule};
use crate::scenario::Scenario;

/// When a scenario drops packets, and for how long.
#[derive(Debug, Clone, Copy)]
struct Cadence {
    /// The pause before the first drop.
    first: Duration,
    /// The pause after each heal.
    pause: Duration,
    /// How long each drop lasts.
    length: Duration,
    /// How much of the run must be left after a heal for a drop to start.
    after: Duration,
}

impl Cadence {
    /// The partitions: T, then 2T of drops, T apart; half a TTL must be left after a heal.
    fn partition(t: Duration) -> Cadence {
        Cadence {
            first: t,
            pause: t,
            length: t * 2,
            after: t / 2,
        }
    }

    /// [`Scenario::KeepAliveLoss`]: the first drop after ½T, when the first holds have been
    /// extended once (every ⅓T); 1½T of drops, longer than the validity any extension gives, so
    /// that every hold kept alive across the start loses its lock before the heal; 3T between
    /// drops, so that later holders get the lock, are extended several times and some finish
    /// their holds (3–6T) before the next drop; at least ½T left after the last heal for a later
    /// holder to get the lock (one gets it within milliseconds). So a 2 s run at the default
    /// 400 ms TTL has one drop, a 10 s run five.
    fn keep_alive_loss(t: Duration) -> Cadence {
        Cadence {
            first: t / 2,
            pause: t * 3,
            length: t * 3 / 2,
            after: t / 2,
        }
    }
}

/// The faults of [`Scenario::Waiters`], one after the other and round again: a kill (the node
/// restarts empty a TTL later), a freeze, a partition of a minority, a restart at once, a
/// partition of a majority (nobody can win; attempts run into their timeouts), a freeze of two,
/// connections cut and refused, a kill of two. Every node is hit, and every node carries one
/// subscription connection per lock, so each fault also cuts or stalls the wake-ups through it.
const WAITERS_IN_TURN: [(FaultKind, &[usize]); 8] = [
    (FaultKind::Kill, &[4]),
    (FaultKind::Freeze, &[0]),
    (FaultKind::DropPackets, &[1, 2]),
    (FaultKind::Restart, &[3]),
    (FaultKind::DropPackets, &[0, 1, 2]),
    (FaultKind::Freeze, &[2, 3]),
    (FaultKind::Refuse, &[0, 4]),
    (FaultKind::Kill, &[1, 2]),
];

/// The schedule of [`Scenario::Waiters`] for a run of `duration` with lock TTL `ttl` on `nodes`
/// nodes ([`WAITERS_IN_TURN`]): at the default TTL, three faults in 2 s, sixteen in 10 s.
pub(super) fn waiters_in_turn(duration: Duration, ttl: Duration, nodes: usize) -> Schedule {
    Schedule::in_turn(&WAITERS_IN_TURN, duration, ttl, nodes)
}

impl Faults<'_> {
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
            Scenario::Baseline
            | Scenario::ClientStall
            | Scenario::ClientStallFenced
            | Scenario::NoLock => {}
            // Runs on Redis Cluster members, with faults of its own (`cluster_members.rs`).
            Scenario::ClusterMembers => {}
            Scenario::MinorityCrash => {
                let mut proved = 0;
                for _ in 0..MAX_CYCLES {
                    self.sleep(t).await;
                    if !self.fits(t * 5 / 2) {
                        break;
                    }
                    let pids = [server_pid(cluster, 3)?, server_pid(cluster, 4)?];
                    let fault = self.recorder.fault("killed", &[3, 4]);
                    cluster.kill(3).await?;
                    cluster.kill(4).await?;
                    process_gone(pids[0], 3)?;
                    process_gone(pids[1], 4)?;
                    proved += 2;
                    self.sleep(t * 2).await;
                    cluster.start_node(3).await?;
                    cluster.start_node(4).await?;
                    self.recorder.lift(fault);
                }
                notes.push(format!(
                    "self-check: {proved} kills, each server process gone right after"
                ));
            }
            Scenario::MinorityFreeze => {
                let mut proved = 0;
                for _ in 0..MAX_CYCLES {
                    self.sleep(t).await;
                    if !self.fits(t * 5 / 2) {
                        break;
                    }
                    let fault = self.recorder.fault("SIGSTOP", &[3, 4]);
                    let frozen_at = Instant::now();
                    cluster.pause(3)?;
                    cluster.pause(4)?;
                    frozen(cluster, 3).await?;
                    frozen(cluster, 4).await?;
                    proved += 2;
                    self.sleep_until(frozen_at + t * 2).await;
                    cluster.resume(3)?;
                    cluster.resume(4)?;
                    self.recorder.lift(fault);
                }
                notes.push(format!(
                    "self-check: {proved} freezes, each node stopped (process state T on the \
                     process backend) and silent to a PING probe"
                ));
            }
            Scenario::MinorityLatency => self.latency(cluster, &[3, 4], notes).await?,
            Scenario::MajorityLatency => self.latency(cluster, &[0, 1, 2], notes).await?,
            Scenario::PartitionMinority => {
                let drop = (PacketDrop::Both, "packets dropped");
                let cadence = Cadence::partition(t);
                self.packet_drops(cluster, &[3, 4], drop, cadence, notes)
                    .await?;
            }
            Scenario::PartitionMajority => {
                let drop = (PacketDrop::Both, "packets dropped");
                let cadence = Cadence::partition(t);
                self.packet_drops(cluster, &[0, 1, 2], drop, cadence, notes)
                    .await?;
            }
            Scenario::PartitionOneWay => {
                let drop = (PacketDrop::Requests, "requests dropped");
                let cadence = Cadence::partition(t);
                self.packet_drops(cluster, &[0, 1, 2], drop, cadence, notes)
                    .await?;
            }
            Scenario::PartitionAsymmetric => {
                let drop = (PacketDrop::Replies, "replies dropped");
                let cadence = Cadence::partition(t);
                self.packet_drops(cluster, &[0, 1, 2], drop, cadence, notes)
                    .await?;
            }
            Scenario::KeepAliveLoss => {
                let drop = (PacketDrop::Both, "packets dropped");
                let cadence = Cadence::keep_alive_loss(t);
                self.packet_drops(cluster, &[0, 1, 2], drop, cadence, notes)
                    .await?;
            }
            Scenario::RestartNoPersistence | Scenario::RestartGuarded => {
                self.restarts(cluster, None, false, &keys, notes).await?;
            }
            Scenario::RestartAof => self.restarts(cluster, None, true, &keys, notes).await?,
            Scenario::Failover => self.failovers(cluster, &keys, notes).await?,
            Scenario::RestartDelayed => {
                self.restarts(cluster, Some(t * 3 / 2), false, &keys, notes)
                    .await?;
            }
            Scenario::ClockFast => {
                fast_clocks(cluster, keys, self.recorder, self.deadline, notes).await?;
            }
            Scenario::Random
            | Scenario::Sets
            | Scenario::Semaphore
            | Scenario::ReadWrite
            | Scenario::Election
            | Scenario::ManyLeases
            | Scenario::Waiters => {
                if let Some(schedule) = self.nemesis {
                    self.unleash(schedule, cluster).await?;
                }
            }
            Scenario::ClockDrift => {
                drifting_clocks(cluster, self.recorder, self.deadline, notes).await?;
            }
            Scenario::ClockJumpMinority => {
                let aim = Aim {
                    cut: &[0, 1],
                    fresh_on: 3,
                    keys: &keys,
                };
                self.clock_jumps(cluster, jumping_nodes(scenario), Some(aim), notes)
                    .await?;
            }
            Scenario::ClockJumpMajority => {
                self.clock_jumps(cluster, jumping_nodes(scenario), None, notes)
                    .await?;
            }
        }
        Ok(())
    }

    /// Latency under the per-node timeout (slow answers), then over it (timeouts), alternating.
    /// Proved by a PING through each slowed node's proxy inside every window (and one outside,
    /// before it); the medians go to `notes`.
    async fn latency(
        &self,
        cluster: &TestCluster,
        nodes: &[usize],
        notes: &mut Vec<String>,
    ) -> Result<(), ChaosError> {
        let t = self.ttl;
        let urls = cluster.urls();
        let mut probes = Vec::new();
        for &node in nodes {
            let url = urls.get(node).ok_or(ChaosError::NoProxy(node))?;
            probes.push(proxied_connection(url).await?);
        }
        // Round trips outside the windows, inside the short ones, inside the long ones.
        let mut outside = Vec::new();
        let mut inside: [Vec<Duration>; 2] = [Vec::new(), Vec::new()];
        for cycle in 0..MAX_CYCLES {
            self.sleep(t).await;
            if !self.fits(t * 5 / 2) {
                break;
            }
            for probe in &mut probes {
                outside.push(round_trip(probe).await?);
            }
            // The default node timeout is TTL / 10: a round trip of 2 × TTL / 50 stays under
            // it, one of 2 × TTL / 12 goes over.
            let latency = if cycle % 2 == 0 { t / 50 } else { t / 12 };
            let fault = self
                .recorder
                .fault(format!("+{}ms each way", latency.as_millis()), nodes);
            let slowed_at = Instant::now();
            for &node in nodes {
                proxy(cluster, node)?.set_latency(latency);
            }
            for (&node, probe) in nodes.iter().zip(&mut probes) {
                let measured = round_trip(probe).await?;
                latency_in_effect(node, latency, measured)?;
                inside[cycle as usize % 2].push(measured);
            }
            self.sleep_until(slowed_at + t * 2).await;
            for &node in nodes {
                proxy(cluster, node)?.set_latency(Duration::ZERO);
            }
            self.recorder.lift(fault);
        }
        let [short, long] = &mut inside;
        notes.push(format!(
            "self-check: a PING through the proxies took {:.1} ms inside the +{} ms windows, \
             {:.1} ms inside the +{} ms windows, {:.1} ms outside (medians of {}, {}, {})",
            median_ms(short),
            (t / 50).as_millis(),
            median_ms(long),
            (t / 12).as_millis(),
            median_ms(&mut outside),
            short.len(),
            long.len(),
            outside.len(),
        ));
        Ok(())
    }

    /// Drops packets of `nodes` (`drop`: which, and its label) in cycles as `cadence` says,
    /// healing after each; each time proved by a probe PING to every node that gets no answer.
    async fn packet_drops(
        &self,
        cluster: &mut TestCluster,
        nodes: &[usize],
        (what, label): (PacketDrop, &str),
        cadence: Cadence,
        notes: &mut Vec<String>,
    ) -> Result<(), ChaosError> {
        let mut partitions = 0;
        let mut pause = cadence.first;
        for _ in 0..MAX_CYCLES {
            self.sleep(pause).await;
            pause = cadence.pause;
            if !self.fits(cadence.length + cadence.after) {
                break;
            }
            let fault = self.recorder.fault(label, nodes);
            let dropped_at = Instant::now();
            for &node in nodes {
                cluster.drop_packets(node, what).await?;
            }
            for &node in nodes {
                silent(cluster, node, label).await?;
            }
            partitions += 1;
            self.sleep_until(dropped_at + cadence.length).await;
            for &node in nodes {
                cluster.heal_packets(node).await?;
            }
            self.recorder.lift(fault);
        }
        notes.push(format!(
            "self-check: in each of {partitions} partitions ({label}, nftables) a PING probe to \
             every node of {nodes:?} got no answer"
        ));
        Ok(())
    }

    /// The restart cycle: cut nodes 3,4 off for one TTL, so holds taken meanwhile have their
    /// keys on nodes 0–2 only, and until a hold has just been taken (its key on node 1 is
    /// fresh; at most one TTL more); bring 3,4 back; kill and restart node 1 and then node 2 at
    /// once (`down` = `None`), or kill both and restart them after `down`. Each restart is
    /// proved: the process is gone after the kill, and a key set before it is gone after the
    /// start (or, if the nodes `keep_data`, still there). `keys` are the lock's keys.
    async fn restarts(
        &self,
        cluster: &mut TestCluster,
        down: Option<Duration>,
        keeps_data: bool,
        keys: &[Vec<u8>],
        notes: &mut Vec<String>,
    ) -> Result<(), ChaosError> {
        let t = self.ttl;
        let (mut proved, mut cycles, mut timed) = (0, 0, 0);
        for _ in 0..MAX_CYCLES {
            // Half a TTL apart (not one, as the other faults): where a restart takes a second,
            // the TTL is scaled to two of them and a 10 s run still has two cycles.
            self.sleep(t / 2).await;
            if !self.fits(t * 2 + down.unwrap_or_default()) {
                break;
            }
            let cut = self.recorder.fault("cut + refused", &[3, 4]);
            self.partition(cluster, &[3, 4]).await?;
            self.sleep(t).await;
            cycles += 1;
            if self.fresh_hold(cluster, 1, keys).await? {
                timed += 1;
            }
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
                        mark_before_restart(cluster, node).await?;
                        let pid = server_pid(cluster, node)?;
                        let restart = self.recorder.fault(label, &[node]);
                        cluster.kill(node).await?;
                        process_gone(pid, node)?;
                        cluster.start_node(node).await?;
                        self.recorder.lift(restart);
                        restarted_as_expected(cluster, node, keeps_data).await?;
                        proved += 1;
                    }
                }
                Some(down) => {
                    let mut pids = Vec::new();
                    for node in [1, 2] {
                        mark_before_restart(cluster, node).await?;
                        pids.push((node, server_pid(cluster, node)?));
                    }
                    let restart = self.recorder.fault(label, &[1, 2]);
                    cluster.kill(1).await?;
                    cluster.kill(2).await?;
                    for &(node, pid) in &pids {
                        process_gone(pid, node)?;
                    }
                    self.sleep(down).await;
                    cluster.start_node(1).await?;
                    cluster.start_node(2).await?;
                    self.recorder.lift(restart);
                    for node in [1, 2] {
                        restarted_as_expected(cluster, node, keeps_data).await?;
                        proved += 1;
                    }
                }
            }
        }
        notes.push(format!(
            "self-check: {proved} restarts, each server process gone after the kill and a key \
             set before it {} right after the start; {timed} of {cycles} cycles restarted right \
             after a hold was taken",
            if keeps_data { "still there" } else { "gone" }
        ));
        Ok(())
    }
}
