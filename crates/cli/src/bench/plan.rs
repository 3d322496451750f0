//! How much `quorumlock bench` measures: the quick and full [`Plan`]s and the fixed limits
//! every loop shares.

use std::time::Duration;

use serde::Serialize;

/// How much of everything to measure. Every loop stops at its count or its time, whichever
/// comes first.
#[derive(Debug, Clone, Serialize)]
pub(super) struct Plan {
    /// Sequential acquire+release cycles per lock, spread over `rounds` rounds.
    pub(super) cycle_ops: u64,
    /// Time cap per lock for those cycles.
    pub(super) cycle_cap_ms: u64,
    /// Rounds the sequential scenarios are interleaved in.
    pub(super) rounds: u64,
    /// Concurrent task counts for the throughput scenario.
    pub(super) tasks: Vec<usize>,
    /// Duration of each throughput step.
    pub(super) throughput_ms: u64,
    /// Duration of each hand-off step.
    pub(super) handoff_ms: u64,
    /// Cap on hand-offs per step.
    pub(super) handoff_max: u64,
    /// How long a holder keeps the lock, and rests after releasing, in the hand-off scenario.
    pub(super) handoff_hold_us: u64,
    /// Acquisitions per fault scenario (slow minority, hung node, their healthy baseline).
    pub(super) fault_ops: u64,
    /// Time cap per fault scenario.
    pub(super) fault_cap_ms: u64,
    /// Timed releases per fault scenario.
    pub(super) release_ops: u64,
    /// Cycles of the allocation count.
    pub(super) alloc_cycles: u64,
    /// Added one-way delay on each slow node (a round trip gains twice this).
    pub(super) slow_one_way_ms: u64,
    /// Added one-way delay on every node in the simulated-network scenario.
    pub(super) net_one_way_ms: u64,
    /// Acquire+release cycles per lock in the simulated-network scenario.
    pub(super) net_ops: u64,
    /// Iterations of the network-limit scenario: each times one acquire, extend and release
    /// per lock, each beside a fresh sample of its limit.
    pub(super) net_limit_ops: u64,
    /// Time cap on those iterations.
    pub(super) net_limit_cap_ms: u64,
    /// Guards kept alive at once in the keep-alive cost scenario.
    pub(super) kept_guards: usize,
    /// Their TTL: extended every third of it.
    pub(super) kept_ttl_ms: u64,
    /// How long they are held.
    pub(super) kept_hold_ms: u64,
    /// The contended section: each row's time per round, …
    pub(super) contended_slice_ms: u64,
    /// … its rounds (contenders alternate in each), …
    pub(super) contended_rounds: u64,
    /// … and a cap on its holds per round.
    pub(super) contended_max_holds: u64,
    /// Samples of the quorum's round trip per row, taken between its rounds.
    pub(super) contended_rtt_samples: u64,
    /// Waiters on one lock for the memory and connection count, …
    pub(super) many_waiters: usize,
    /// … over this many held resources, …
    pub(super) many_resources: usize,
    /// … bounded in all by this; …
    pub(super) many_cap_ms: u64,
    /// … and whether they are then served, one by one (else they are dropped, which takes them
    /// out of the queues).
    pub(super) many_serve: bool,
}

impl Plan {
    pub(super) fn new(quick: bool) -> Plan {
        if quick {
            Plan {
                cycle_ops: 2_000,
                cycle_cap_ms: 4_000,
                rounds: 4,
                tasks: vec![1, 16, 64],
                throughput_ms: 1_500,
                handoff_ms: 2_000,
                handoff_max: 20_000,
                handoff_hold_us: 1_000,
                fault_ops: 1_500,
                fault_cap_ms: 4_000,
                release_ops: 20,
                alloc_cycles: 200,
                slow_one_way_ms: 10,
                net_one_way_ms: 1,
                net_ops: 300,
                net_limit_ops: 200,
                net_limit_cap_ms: 14_000,
                kept_guards: 1_000,
                kept_ttl_ms: 3_000,
                kept_hold_ms: 3_000,
                contended_slice_ms: 500,
                contended_rounds: 2,
                contended_max_holds: 20_000,
                contended_rtt_samples: 20,
                many_waiters: 10_000,
                many_resources: 100,
                many_cap_ms: 20_000,
                many_serve: false,
            }
        } else {
            Plan {
                cycle_ops: 10_000,
                cycle_cap_ms: 15_000,
                rounds: 5,
                tasks: vec![1, 16, 64],
                throughput_ms: 5_000,
                handoff_ms: 5_000,
                handoff_max: 100_000,
                handoff_hold_us: 1_000,
                fault_ops: 6_000,
                fault_cap_ms: 15_000,
                release_ops: 60,
                alloc_cycles: 1_000,
                slow_one_way_ms: 10,
                net_one_way_ms: 1,
                net_ops: 1_000,
                net_limit_ops: 1_000,
                net_limit_cap_ms: 70_000,
                kept_guards: 10_000,
                // The watchdog default of the field (30 s, extended every 10 s), held for two
                // rounds of extensions.
                kept_ttl_ms: 30_000,
                kept_hold_ms: 25_000,
                contended_slice_ms: 2_000,
                contended_rounds: 3,
                contended_max_holds: 100_000,
                contended_rtt_samples: 60,
                many_waiters: 10_000,
                many_resources: 100,
                many_cap_ms: 30_000,
                many_serve: true,
            }
        }
    }
}

/// Cycles run untimed before a measurement, so connections exist and caches are warm.
pub(super) const WARMUP: u64 = 50;
/// The most background releases left outstanding in the acquire-only scenarios before the
/// loop waits for them (untimed).
pub(super) const SETTLE_EVERY: u64 = 32;
/// The longest a wait for background releases may take.
pub(super) const SETTLE_CAP: Duration = Duration::from_secs(5);
/// Hard cap on the cycles of any throughput step, whatever its duration.
pub(super) const THROUGHPUT_MAX_OPS: u64 = 5_000_000;
/// The five-node cluster the targets refer to.
pub(super) const TARGET_NODES: usize = 5;

/// The delay every proxy adds each way in the rows "1 ms each way" of the election and
/// read-write lock sections: a network, on loopback, that sets the pace instead of the CPUs.
pub(super) const NET_ONE_WAY: Duration = Duration::from_millis(1);
