//! The nemesis of [`Scenario::Random`](crate::Scenario::Random): a pure, seeded fault schedule.
//! From a seed, the run's duration, the TTL and the node count, [`Schedule::generate`] draws a
//! bounded list of timed [`FaultEvent`]s (start, end, [`FaultKind`], nodes); the runner applies
//! it to the cluster (`run/nemesis.rs`). The same inputs always give the same schedule, so a
//! seed replays a run's faults.
//!
//! # Only faults Redlock's assumptions allow
//!
//! A random run is expected safe for every seed, so the nemesis composes only faults under which
//! a correct lock keeps mutual exclusion, on any subset of nodes, majorities included, overlapping
//! in time:
//!
//! - **kill, then restart**, later (a kill) or at once (a restart): a node that comes back
//!   without the keys it granted could let a contender in while the holder still counts on it
//!   (`restart-no-persistence`; a restart at once is that hazard at its sharpest, most of all on
//!   a majority, whose holders all lose their keys there while their validity runs). So the runner
//!   keeps the clients' restart guard on (a restarted node that does not fsync every write sits
//!   out acquisitions until it has been up for the TTL plus the drift, by which time every key
//!   it forgot has expired), or, if the caller turns the guard off, runs every node with AOF
//!   `appendfsync always`, so that nothing granted is forgotten.
//! - **freeze** (SIGSTOP … SIGCONT): a frozen node costs timeouts; requests it executes late only
//!   set keys that live longer than their requester assumed, never shorter.
//! - **latency** on the node's proxy, under and over the per-node timeout: the lock subtracts the
//!   elapsed time from the validity, and a key set late lives longer, not shorter.
//! - **black hole** (bytes swallowed) and **refused connections**: a node that cannot be reached
//!   is a set of timeouts or errors.
//! - **packets dropped** (nftables on the node's server socket): both ways, requests only, or
//!   replies only. A request that is lost sets nothing; one whose reply is lost sets a key its
//!   sender counts as not won, which only makes the key outlive nothing the sender relies on, and
//!   the sender releases on every node after a lost round; requests retransmitted after the heal
//!   land late, which (as with a freeze) only makes keys live longer than assumed.
//!
//! Left out on purpose, because they break the assumptions and a correct lock may then fail:
//! restarts without persistence while the guard is off; data loss without a restart
//! (`FLUSHALL`: the guard cannot see it, the node's `run_id` stays the same); node clocks that
//! run faster or jump further than the drift allowance (`clock-fast`); client pauses past the
//! validity (`client-stall`, a hazard of every lease that only fencing fixes).
//!
//! On one node, two faults of one [`Layer`] never overlap (a node cannot be killed while
//! frozen, nor restarted while its packets are dropped; its proxy has one mode at a time), so lifting a fault always restores what applying
//! it changed. Faults of different layers on one node may overlap (frozen and black-holed).
//!
//! # Adding a fault kind
//!
//! A new [`FaultKind`] variant needs one arm in `FaultKind::draw` (how often, with which
//! parameters), [`FaultKind::layer`], [`FaultKind::label`], and in the runner's apply and lift;
//! its safety argument goes above.

use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};
use serde::Serialize;

/// Most events in one schedule, whatever the duration and TTL.
pub const MAX_EVENTS: usize = 10_000;

/// What one nemesis event does to its nodes, from its start until its end.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum FaultKind {
    /// SIGKILL at the start, restarted at the end (empty, or from its append-only file when the
    /// nodes persist every write).
    Kill,
    /// SIGKILL and restarted at once at the start (empty, or from its append-only file when
    /// the nodes persist every write); the node's process is left alone until the end. With the
    /// restart guard the node sits out acquisitions meanwhile; a lock that ignores the guard
    /// lets a contender win the restarted nodes while their holders' validity still runs.
    Restart,
    /// SIGSTOP at the start, SIGCONT at the end.
    Freeze,
    /// The node's proxy delays every chunk by this much in each direction.
    Latency {
        /// The delay each way, in microseconds.
        each_way_us: u64,
    },
    /// The node's proxy swallows every byte (connections accepted, nothing answered); at the
    /// end it heals and cuts the connections left out of step.
    BlackHole,
    /// The node's proxy cuts open connections and refuses new ones; heals at the end.
    Refuse,
    /// Every packet to and from the node's server is dropped (nftables): a real partition, TCP
    /// retransmits into the void until the end.
    DropPackets,
    /// The packets to the node's server are dropped: it never hears its clients.
    DropRequests,
    /// The packets from the node's server are dropped: requests land and are executed, and
    /// their senders never learn the outcome.
    DropReplies,
}

/// What part of a node a fault acts on. Two faults of one layer never overlap on one node.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Layer {
    /// The `redis-server` process (or container), and the packets of its server socket
    /// (nftables rules behind the proxy).
    Process,
    /// The node's fault proxy: the network path to it.
    Network,
}

impl FaultKind {
    /// How many kinds [`draw`](FaultKind::draw) chooses from (latency counts twice: under and
    /// over the per-node timeout; a restart at once three times, so that a 10 s run at the
    /// default TTL almost always has one on a majority).
    const CHOICES: u32 = 12;

    /// A kind drawn uniformly, with its parameters scaled to `ttl`.
    fn draw(rng: &mut StdRng, ttl: Duration) -> FaultKind {
        let us = |duration: Duration| u64::try_from(duration.as_micros()).unwrap_or(u64::MAX);
        match rng.random_range(0..FaultKind::CHOICES) {
            0 => FaultKind::Kill,
            1 => FaultKind::Freeze,
            // The default per-node timeout is TTL / 10: a round trip of 2 × TTL / 50 stays under
            // it, one of 2 × TTL / 12 goes over. Two levels, not a continuum, so that the
            // timeline's legend stays short.
            2 => FaultKind::Latency {
                each_way_us: us(ttl / 50),
            },
            3 => FaultKind::Latency {
                each_way_us: us(ttl / 12),
            },
            4 => FaultKind::BlackHole,
            5 => FaultKind::Refuse,
            6 => FaultKind::DropPackets,
            7 => FaultKind::DropRequests,
            8 => FaultKind::DropReplies,
            _ => FaultKind::Restart,
        }
    }

    /// The part of the node it acts on.
    pub fn layer(self) -> Layer {
        match self {
            // Packet drops share the process's layer: a restarted node is ready once it answers
            // on its server socket, which dropped packets would hide.
            FaultKind::Kill
            | FaultKind::Restart
            | FaultKind::Freeze
            | FaultKind::DropPackets
            | FaultKind::DropRequests
            | FaultKind::DropReplies => Layer::Process,
            FaultKind::Latency { .. } | FaultKind::BlackHole | FaultKind::Refuse => Layer::Network,
        }
    }

    /// How the history and the timeline name it (the labels of the named scenarios' faults).
    pub fn label(self) -> String {
        match self {
            FaultKind::Kill => "killed, restarted".to_owned(),
            FaultKind::Restart => "restarted at once".to_owned(),
            FaultKind::Freeze => "SIGSTOP".to_owned(),
            FaultKind::Latency { each_way_us } => {
                format!("+{}ms each way", each_way_us / 1000)
            }
            FaultKind::BlackHole => "black hole".to_owned(),
            FaultKind::Refuse => "cut + refused".to_owned(),
            FaultKind::DropPackets => "packets dropped".to_owned(),
            FaultKind::DropRequests => "requests dropped".to_owned(),
            FaultKind::DropReplies => "replies dropped".to_owned(),
        }
    }
}

/// One fault of the schedule: `kind` on `nodes` from `start_us` until `end_us` (µs since the
/// run started, as in the [`History`](crate::History)).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct FaultEvent {
    /// When it is applied.
    pub start_us: u64,
    /// When it is lifted.
    pub end_us: u64,
    /// What it does.
    pub kind: FaultKind,
    /// The nodes it hits, ascending, at least one.
    pub nodes: Vec<usize>,
}

impl fmt::Display for FaultEvent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let nodes: Vec<String> = self.nodes.iter().map(usize::to_string).collect();
        write!(
            f,
            "{:.2}–{:.2} s: {} on node(s) {}",
            self.start_us as f64 / 1e6,
            self.end_us as f64 / 1e6,
            self.kind.label(),
            nodes.join(",")
        )
    }
}

/// A nemesis run's faults, drawn from its seed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct Schedule {
    /// The seed it was drawn from.
    pub seed: u64,
    /// The nodes it may hit (`0..nodes`).
    pub nodes: usize,
    /// Its events, by start.
    pub events: Vec<FaultEvent>,
}

impl Schedule {
    /// The schedule of seed `seed` for a run of `duration` with lock TTL `ttl` on `nodes` nodes.
    ///
    /// Events start one after another, ½ to 2 TTL apart, each lasting ½ to 2½ TTL, so often
    /// two or more are under way at once, with quiet stretches between (a lock that is never
    /// available proves little); each hits 1 to `nodes` nodes (so majorities too), drawn from those
    /// on which no fault of its layer is under way then. Every event ends within `duration`; at
    /// most [`max_events`](Schedule::max_events) of them.
    pub fn generate(seed: u64, duration: Duration, ttl: Duration, nodes: usize) -> Schedule {
        let mut rng = StdRng::seed_from_u64(seed);
        let run_us = micros(duration);
        let ttl_us = micros(ttl).max(1);
        let mut events = Vec::new();
        // Per layer and node: until when a fault of that layer is under way there.
        let mut busy_until: BTreeMap<Layer, Vec<u64>> = BTreeMap::new();
        let mut start_us = 0u64;
        for _ in 0..Schedule::max_events(duration, ttl) {
            start_us = start_us.saturating_add(rng.random_range(ttl_us / 2..=ttl_us * 2));
            let end_us = start_us.saturating_add(rng.random_range(ttl_us / 2..=ttl_us * 5 / 2));
            let kind = FaultKind::draw(&mut rng, ttl);
            let wanted = rng.random_range(1..=nodes.max(1));
            if start_us >= run_us || nodes == 0 {
                break;
            }
            let busy = busy_until
                .entry(kind.layer())
                .or_insert_with(|| vec![0; nodes]);
            let mut free: Vec<usize> = (0..nodes)
                .filter(|&n| busy.get(n).is_none_or(|&until| until <= start_us))
                .collect();
            // A partial Fisher–Yates shuffle: the first `wanted` are a uniform random subset.
            let take = wanted.min(free.len());
            for i in 0..take {
                let j = rng.random_range(i..free.len());
                free.swap(i, j);
            }
            free.truncate(take);
            free.sort_unstable();
            if free.is_empty() || end_us > run_us {
                continue;
            }
            for &node in &free {
                if let Some(until) = busy.get_mut(node) {
                    *until = end_us;
                }
            }
            events.push(FaultEvent {
                start_us,
                end_us,
                kind,
                nodes: free,
            });
        }
        Schedule {
            seed,
            nodes,
            events,
        }
    }

    /// A schedule drawn from nothing: `turns` (a kind and the nodes it hits, each a subset of
    /// `0..nodes`) one after the other and round again, each lasting one TTL, the first after
    /// ½ TTL and each ½ TTL after the one before it ended, so that no two overlap and the lock is
    /// available between them. Every event ends within `duration`; at most
    /// [`max_events`](Schedule::max_events) of them. Its seed is 0.
    pub fn in_turn(
        turns: &[(FaultKind, &[usize])],
        duration: Duration,
        ttl: Duration,
        nodes: usize,
    ) -> Schedule {
        let (run_us, ttl_us) = (micros(duration), micros(ttl));
        let mut events = Vec::new();
        let mut start_us = ttl_us / 2;
        for &(kind, hit) in turns
            .iter()
            .cycle()
            .take(Schedule::max_events(duration, ttl))
        {
            let mut hit: Vec<usize> = hit.iter().copied().filter(|&node| node < nodes).collect();
            hit.sort_unstable();
            hit.dedup();
            if hit.is_empty() {
                continue;
            }
            let end_us = start_us.saturating_add(ttl_us);
            if end_us > run_us {
                break;
            }
            events.push(FaultEvent {
                start_us,
                end_us,
                kind,
                nodes: hit,
            });
            start_us = end_us.saturating_add(ttl_us / 2);
        }
        Schedule {
            seed: 0,
            nodes,
            events,
        }
    }

    /// The most events a schedule for `duration` and `ttl` has: one per shortest gap between
    /// starts (½ TTL), at most [`MAX_EVENTS`].
    pub fn max_events(duration: Duration, ttl: Duration) -> usize {
        let per_gap = micros(duration) / (micros(ttl) / 2).max(1) + 1;
        usize::try_from(per_gap).map_or(MAX_EVENTS, |n| n.min(MAX_EVENTS))
    }

    /// One line: the seed, how many faults of each kind, and how many hit a majority.
    pub fn summary(&self) -> String {
        format!("nemesis seed {}: {}", self.seed, self.counts())
    }

    /// How many faults of each kind, and how many hit a majority, e.g. `3 faults (1× SIGSTOP,
    /// 2× packets dropped), 1 of them on a majority of nodes`.
    pub fn counts(&self) -> String {
        let mut kinds: Vec<(String, usize)> = Vec::new();
        for event in &self.events {
            let label = event.kind.label();
            match kinds.iter_mut().find(|(kind, _)| *kind == label) {
                Some((_, count)) => *count += 1,
                None => kinds.push((label, 1)),
            }
        }
        let kinds: Vec<String> = kinds
            .iter()
            .map(|(kind, count)| format!("{count}× {kind}"))
            .collect();
        let majority = self
            .events
            .iter()
            .filter(|event| event.nodes.len() > self.nodes / 2)
            .count();
        format!(
            "{} faults ({}), {majority} of them on a majority of nodes",
            self.events.len(),
            kinds.join(", ")
        )
    }
}

fn micros(duration: Duration) -> u64 {
    u64::try_from(duration.as_micros()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const TTL: Duration = Duration::from_millis(400);
    const MINUTE: Duration = Duration::from_secs(60);

    #[test]
    fn the_same_seed_gives_the_same_schedule() {
        let first = Schedule::generate(7, MINUTE, TTL, 5);
        assert_eq!(first, Schedule::generate(7, MINUTE, TTL, 5));
        assert!(!first.events.is_empty());
    }

    #[test]
    fn different_seeds_give_different_schedules() {
        let schedules: Vec<Vec<FaultEvent>> = (0..20)
            .map(|seed| Schedule::generate(seed, MINUTE, TTL, 5).events)
            .collect();
        for (i, a) in schedules.iter().enumerate() {
            for b in &schedules[i + 1..] {
                assert_ne!(a, b);
            }
        }
    }

    /// Every kind and every subset size occurs, majorities included, and faults overlap.
    #[test]
    fn a_long_schedule_composes_every_kind_on_minorities_and_majorities() {
        let schedule = Schedule::generate(1, MINUTE, TTL, 5);
        let events = &schedule.events;
        for kind in [
            FaultKind::Kill,
            FaultKind::Restart,
            FaultKind::Freeze,
            FaultKind::BlackHole,
            FaultKind::DropPackets,
            FaultKind::DropRequests,
            FaultKind::DropReplies,
        ] {
            assert!(events.iter().any(|e| e.kind == kind), "{kind:?}");
        }
        assert!(events.iter().any(|e| e.kind == FaultKind::Refuse));
        assert!(
            events
                .iter()
                .any(|e| matches!(e.kind, FaultKind::Latency { .. }))
        );
        for size in 1..=5 {
            assert!(events.iter().any(|e| e.nodes.len() == size), "{size}");
        }
        let overlapping = events
            .windows(2)
            .filter(|pair| pair[1].start_us < pair[0].end_us)
            .count();
        assert!(overlapping > events.len() / 4, "{overlapping}");
    }

    #[test]
    fn faults_in_turn_come_round_again_one_at_a_time_inside_the_run() {
        let turns: [(FaultKind, &[usize]); 3] = [
            (FaultKind::Kill, &[4]),
            (FaultKind::DropPackets, &[2, 1, 9]),
            (FaultKind::Freeze, &[7]),
        ];
        let schedule = Schedule::in_turn(&turns, Duration::from_millis(2_900), TTL, 5);
        let got: Vec<(u64, u64, FaultKind, Vec<usize>)> = schedule
            .events
            .iter()
            .map(|e| (e.start_us, e.end_us, e.kind, e.nodes.clone()))
            .collect();
        // Node 7 does not exist: that turn is skipped; the next event would end after 2.9 s.
        assert_eq!(
            got,
            [
                (200_000, 600_000, FaultKind::Kill, vec![4]),
                (800_000, 1_200_000, FaultKind::DropPackets, vec![1, 2]),
                (1_400_000, 1_800_000, FaultKind::Kill, vec![4]),
                (2_000_000, 2_400_000, FaultKind::DropPackets, vec![1, 2]),
            ]
        );
        assert!(Schedule::in_turn(&turns, TTL, TTL, 5).events.is_empty());
    }

    #[test]
    fn a_run_shorter_than_any_fault_gets_none() {
        let schedule = Schedule::generate(3, TTL / 4, TTL, 5);
        assert!(schedule.events.is_empty());
        assert!(Schedule::generate(3, MINUTE, TTL, 0).events.is_empty());
        assert!(schedule.summary().starts_with("nemesis seed 3: 0 faults"));
    }

    proptest! {
        #[test]
        fn every_schedule_stays_inside_the_run(
            seed in any::<u64>(),
            duration_ms in 0u64..120_000,
            ttl_ms in 20u64..5_000,
            nodes in 1usize..9,
        ) {
            let duration = Duration::from_millis(duration_ms);
            let ttl = Duration::from_millis(ttl_ms);
            let schedule = Schedule::generate(seed, duration, ttl, nodes);
            let events = &schedule.events;
            prop_assert!(events.len() <= Schedule::max_events(duration, ttl));
            prop_assert!(events.len() <= MAX_EVENTS);
            for event in events {
                prop_assert!(event.start_us < event.end_us);
                prop_assert!(event.end_us <= duration_ms * 1000);
                prop_assert!(!event.nodes.is_empty());
                prop_assert!(event.nodes.windows(2).all(|pair| pair[0] < pair[1]));
                prop_assert!(event.nodes.iter().all(|&node| node < nodes));
            }
            prop_assert!(events.windows(2).all(|pair| pair[0].start_us <= pair[1].start_us));
            // Lifting restores what applying changed: one fault per layer and node at a time.
            for (i, a) in events.iter().enumerate() {
                // By start: once one starts after `a` ends, so do all that follow.
                for b in events[i + 1..].iter().take_while(|b| b.start_us < a.end_us) {
                    let shared = a.nodes.iter().any(|node| b.nodes.contains(node));
                    prop_assert!(
                        !(shared && a.kind.layer() == b.kind.layer()),
                        "{a} and {b}"
                    );
                }
            }
        }
    }
}
